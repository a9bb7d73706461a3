//! README's tour of the library, against etcd: a typed store per resource, a namespaced
//! view, a guaranteed update, paged lists, a watcher and a reflector, once straight on
//! etcd and once through the watch cache. (README runs the same tour in memory as a
//! doctest.)
//!
//! Run with `APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore --features k8s-openapi --example tour`
//! (`cargo xtask test` runs it against its test etcd).

use apistore::runtime::{reflector, watcher};
use apistore::{ApiStore, ListOptions, ResourceStore, StoreExt, Update};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;

async fn tour(configmaps: ResourceStore<ConfigMap>) -> Result<(), Box<dyn std::error::Error>> {
    let default = configmaps.namespaced("default");
    for i in 0..5 {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(format!("cm{i}"));
        cm.metadata.namespace = Some("default".into());
        default.create(cm).await?;
    }
    let cm = default
        .update("cm0", |mut cm: ConfigMap, _| {
            cm.data
                .get_or_insert_with(Default::default)
                .insert("mode".into(), "fast".into());
            Ok(Update::from(cm))
        })
        .await?;
    println!(
        "cm0 updated at resourceVersion {:?}",
        cm.metadata.resource_version
    );
    let mut options = ListOptions::default().limit(2);
    let mut names = Vec::new();
    loop {
        let page = default.list(&options).await?;
        names.extend(page.items.into_iter().filter_map(|cm| cm.metadata.name));
        if page.metadata.continue_token.is_empty() {
            break;
        }
        options = ListOptions::default()
            .limit(2)
            .continue_from(page.metadata.continue_token);
    }
    println!("listed in pages of 2: {names:?}");
    if names != ["cm0", "cm1", "cm2", "cm3", "cm4"] {
        return Err(format!("unexpected list {names:?}").into());
    }
    let (cache, writer) = reflector::store();
    let events = watcher::watcher(
        configmaps.clone(),
        "configmaps/default",
        watcher::Config::default(),
    );
    let mut events = std::pin::pin!(reflector::reflector(writer, events));
    while let Some(event) = events.next().await {
        if let watcher::Event::InitDone = event? {
            break;
        }
    }
    println!("the reflector holds {} config maps", cache.len());
    if cache.len() != 5 {
        return Err(format!("the reflector holds {} objects, not 5", cache.len()).into());
    }
    default.delete("cm4").await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoints =
        std::env::var("APISTORE_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    for cached in [false, true] {
        let prefix = format!("/examples-tour-{}-{cached}", std::process::id());
        let mut builder = ApiStore::builder()
            .endpoints(endpoints.split(','))
            .prefix(&prefix);
        if cached {
            builder = builder.watch_cache(["configmaps"]);
        }
        let api = builder.build().await?;
        let configmaps = api.typed::<ConfigMap>().await?;
        println!(
            "-- {}",
            if cached {
                "through the watch cache"
            } else {
                "straight on etcd"
            }
        );
        tour(configmaps).await?;
    }
    Ok(())
}
