//! Paging through a large list with continue tokens: every page reads the same
//! revision, so the pages add up to one consistent list.
//!
//! Run with `APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore --example paging`.

use apistore::{ApiStore, DynamicObject, ListOptions, Storage};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoints =
        std::env::var("APISTORE_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    let prefix = format!("/examples-{}", std::process::id());
    let api = ApiStore::builder()
        .endpoints(endpoints.split(','))
        .prefix(&prefix)
        .build()
        .await?;
    let events = api.dynamic_store("events")?;
    for i in 0..1200 {
        let event = DynamicObject::new("v1", "Event", &format!("e{i:05}")).within("default");
        events
            .create(&format!("events/default/e{i:05}"), event, 0)
            .await?;
    }

    let mut options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    options.predicate.limit = 500;
    let (mut pages, mut items, mut revision) = (0, 0, String::new());
    loop {
        let page = events.list("events", &options).await?;
        pages += 1;
        items += page.items.len();
        if revision.is_empty() {
            revision = page.metadata.resource_version.clone();
        }
        assert_eq!(
            page.metadata.resource_version, revision,
            "every page reads one revision"
        );
        println!(
            "page {pages}: {} items, remaining {:?}",
            page.items.len(),
            page.metadata.remaining_item_count
        );
        if page.metadata.continue_token.is_empty() {
            break;
        }
        options.predicate.continue_token = page.metadata.continue_token;
    }
    assert_eq!(items, 1200);
    println!("{items} items in {pages} pages at resourceVersion {revision}");
    Ok(())
}
