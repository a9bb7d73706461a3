//! A controller-style loop: list, then watch from the list's resourceVersion, resume
//! from the last resourceVersion seen, and re-list when the watch says 410 (the
//! revision was compacted away).
//!
//! Run with `APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore --example controller`.

use std::collections::BTreeMap;
use std::time::Duration;

use apistore::{ApiObject, ApiStore, DynamicObject, ListOptions, Storage, WatchEvent};
use futures::StreamExt;

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
    let jobs = api.dynamic_store("jobs");

    // Something else writes while the controller runs.
    let writer = {
        let jobs = jobs.clone();
        tokio::spawn(async move {
            for i in 0..10 {
                let job =
                    DynamicObject::new("batch/v1", "Job", &format!("job-{i}")).within("default");
                jobs.create(&format!("jobs/default/job-{i}"), job, 0)
                    .await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok::<_, apistore::StorageError>(())
        })
    };

    // The controller's cache: name -> resourceVersion.
    let mut cache: BTreeMap<String, String> = BTreeMap::new();
    let mut resource_version = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    'relist: while cache.len() < 10 && tokio::time::Instant::now() < deadline {
        let list = jobs
            .list(
                "jobs",
                &ListOptions {
                    recursive: true,
                    ..ListOptions::default()
                },
            )
            .await?;
        cache = list
            .items
            .iter()
            .map(|j| (j.name().to_owned(), j.resource_version().to_owned()))
            .collect();
        resource_version = list.metadata.resource_version;
        println!(
            "listed {} jobs at resourceVersion {resource_version}",
            cache.len()
        );

        let options = ListOptions {
            resource_version: resource_version.clone(),
            recursive: true,
            ..ListOptions::default()
        };
        let mut events = jobs.watch("jobs", &options).await?;
        while cache.len() < 10 {
            let Ok(Some(event)) = tokio::time::timeout_at(deadline, events.next()).await else {
                break 'relist;
            };
            match event {
                WatchEvent::Added(j) | WatchEvent::Modified(j) => {
                    resource_version = j.resource_version().to_owned();
                    cache.insert(j.name().to_owned(), resource_version.clone());
                    println!("  saw {} at {resource_version}", j.name());
                }
                WatchEvent::Deleted(j) => {
                    resource_version = j.resource_version().to_owned();
                    cache.remove(j.name());
                }
                WatchEvent::Bookmark(b) => resource_version = b.resource_version().to_owned(),
                WatchEvent::Error(status) if status.code == 410 => {
                    println!("  watch expired ({}): re-listing", status.message);
                    continue 'relist;
                }
                WatchEvent::Error(status) => return Err(status.message.into()),
            }
        }
    }
    writer.await??;
    assert_eq!(cache.len(), 10, "the controller saw every job");
    println!(
        "controller cache holds {} jobs, last resourceVersion {resource_version}",
        cache.len()
    );
    Ok(())
}
