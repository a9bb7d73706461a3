//! The facade's watch cache option: the resources named by `watch_cache` come out of
//! `resource_store` as a ready cache over the etcd3 store (one per resource, shared),
//! the others as the store itself; both serve the same objects.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apistore::{
    ApiStore, DynamicObject, ListOptions, ResourceStore, ResourceVersionMatch, Storage, WatchEvent,
};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use futures::StreamExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_cache_serves_the_named_resources_only() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    let registry = apistore::prometheus::Registry::new();
    let api = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .watch_cache(["configmaps"])
        .watch_cache_metrics(&registry)
        .unwrap()
        .build()
        .await
        .unwrap();

    let configmaps = api
        .resource_store::<DynamicObject>("configmaps")
        .await
        .unwrap();
    let secrets = api
        .resource_store::<DynamicObject>("secrets")
        .await
        .unwrap();
    assert!(configmaps.is_cached());
    assert!(!secrets.is_cached());

    let key = api.resource_layout("configmaps").key("default", "cm1");
    let cm = DynamicObject::new("v1", "ConfigMap", "cm1").within("default");
    let created = configmaps.create(&key, cm, 0).await.unwrap();
    let rv = created.metadata.resource_version.clone();

    // A list at the create's resourceVersion waits for the cache and is served by it.
    let options = ListOptions::prefix().at(rv.as_str(), ResourceVersionMatch::NotOlderThan);
    let list = configmaps
        .list("configmaps/default", &options)
        .await
        .unwrap();
    assert_eq!(list.items, std::slice::from_ref(&created));
    let served = apistore_testing::metrics::counter(&registry, "apiserver_cache_list_total", &[]);
    assert_eq!(served, 1.0, "the list came from the cache");

    // A second call hands out the same cache: its watcher shows on the first.
    let again = api
        .resource_store::<DynamicObject>("configmaps")
        .await
        .unwrap();
    let mut watch = again
        .watch(
            "configmaps/default",
            &ListOptions::prefix().at("0", ResourceVersionMatch::Unset),
        )
        .await
        .unwrap();
    let (ResourceStore::Cached(first), ResourceStore::Cached(_)) = (&configmaps, &again) else {
        panic!("both are cached");
    };
    assert_eq!(first.watcher_count(), 1);
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(event, WatchEvent::Added(created));
}
