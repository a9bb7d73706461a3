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

/// An `ApiStore` of kube `version` over `etcd` caching configmaps, with the cache's
/// metrics in `registry`.
async fn caching_configmaps(
    etcd: &EtcdServer,
    version: apistore::KubeVersion,
    registry: &apistore::prometheus::Registry,
) -> ApiStore {
    ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .kube_version(version)
        .metrics_registry(registry)
        .unwrap()
        .watch_cache(["configmaps"])
        .watch_cache_metrics(registry)
        .unwrap()
        .build()
        .await
        .unwrap()
}

/// The lists the caches served: the cache's own counter before kube 1.37, the storage
/// list counter's `watchcache` series from 1.37 (which hides the former).
fn lists_from_cache(registry: &apistore::prometheus::Registry) -> f64 {
    apistore_testing::metrics::counter(registry, "apiserver_cache_list_total", &[])
        + apistore_testing::metrics::counter(
            registry,
            "apiserver_storage_list_total",
            &[("storage", "watchcache")],
        )
}

/// The stores of configmaps and secrets.
async fn configmaps_and_secrets(
    api: &ApiStore,
) -> (ResourceStore<DynamicObject>, ResourceStore<DynamicObject>) {
    let configmaps = api.resource_store("configmaps").await.unwrap();
    let secrets = api.resource_store("secrets").await.unwrap();
    (configmaps, secrets)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_cache_serves_the_named_resources_only() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    let registry = apistore::prometheus::Registry::new();
    let api = caching_configmaps(&etcd, apistore::KubeVersion::LATEST, &registry).await;

    let (configmaps, secrets) = configmaps_and_secrets(&api).await;
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
    assert_eq!(
        lists_from_cache(&registry),
        1.0,
        "the list came from the cache"
    );

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

/// The facade's cache follows its kube version: from 1.34 an Exact list at a revision in
/// the cache's window comes from the cache's snapshot (kube's `ListFromCacheSnapshot`),
/// before 1.34 from etcd; both answer what etcd answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_lists_come_from_the_cache_from_kube_1_34() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    for (version, from_cache) in [
        (apistore::KubeVersion::V1_31, 0.0),
        (apistore::KubeVersion::V1_37, 1.0),
    ] {
        let registry = apistore::prometheus::Registry::new();
        let api = caching_configmaps(&etcd, version, &registry).await;
        let configmaps = api
            .resource_store::<DynamicObject>("configmaps")
            .await
            .unwrap();
        // A namespace per version: both share the one etcd.
        let namespace = format!("snapshots-{}", version.minor());
        let list_key = format!("configmaps/{namespace}");
        let key = api.resource_layout("configmaps").key(&namespace, "cm");
        let cm = DynamicObject::new("v1", "ConfigMap", "cm").within(&namespace);
        let created = configmaps.create(&key, cm, 0).await.unwrap();
        let rv = created.metadata.resource_version.clone();
        // The cache reaches the create (this list waits for it, from the cache).
        let fresh = ListOptions::prefix().at(rv.as_str(), ResourceVersionMatch::NotOlderThan);
        configmaps.list(&list_key, &fresh).await.unwrap();
        let served = || lists_from_cache(&registry);
        let before = served();

        let exact = ListOptions::prefix().at(rv.as_str(), ResourceVersionMatch::Exact);
        let list = configmaps.list(&list_key, &exact).await.unwrap();
        let direct = api
            .store::<DynamicObject>("configmaps")
            .unwrap()
            .list(&list_key, &exact)
            .await
            .unwrap();
        assert_eq!(list, direct, "kube {version}: etcd's answer");
        assert_eq!(list.items, std::slice::from_ref(&created), "kube {version}");
        assert_eq!(
            served() - before,
            from_cache,
            "kube {version}: served by the cache"
        );
    }
}

/// kube's `storage-readiness` post-start hook over the facade: with background
/// initialization, `resource_store` hands out the cache without waiting for its first
/// list, and `wait_for_watch_caches` waits for every cache made so far, naming none
/// once all are ready; the caches then serve from memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_caches_initialize_in_the_background_and_are_waited_for_together() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    let registry = apistore::prometheus::Registry::new();
    let api = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .metrics_registry(&registry)
        .unwrap()
        .watch_cache(["configmaps", "secrets"])
        .watch_cache_metrics(&registry)
        .unwrap()
        .watch_cache_background_initialization(true)
        .build()
        .await
        .unwrap();
    // No cache made yet: nothing to wait for.
    let none = api.wait_for_watch_caches(Duration::ZERO).await;
    assert!(none.is_empty(), "{none:?}");

    let (configmaps, secrets) = configmaps_and_secrets(&api).await;
    assert!(configmaps.is_cached() && secrets.is_cached());
    let not_ready = api
        .wait_for_watch_caches(apistore::DEFAULT_STORAGE_INITIALIZATION_TIMEOUT)
        .await;
    assert!(not_ready.is_empty(), "{not_ready:?}");
    let (ResourceStore::Cached(configmaps), ResourceStore::Cached(secrets)) =
        (&configmaps, &secrets)
    else {
        panic!("both are cached");
    };
    assert!(configmaps.is_ready() && secrets.is_ready());
    let at_zero = ListOptions::prefix().at("0", ResourceVersionMatch::Unset);
    configmaps.list("configmaps", &at_zero).await.unwrap();
    secrets.list("secrets", &at_zero).await.unwrap();
    assert_eq!(
        lists_from_cache(&registry),
        2.0,
        "both lists came from the caches"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_kube_1_37_cached_lists_count_in_the_storage_list_metrics_too() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    let registry = apistore::prometheus::Registry::new();
    let api = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .kube_version(apistore::KubeVersion::V1_37)
        .metrics_registry(&registry)
        .unwrap()
        .watch_cache(["configmaps"])
        .watch_cache_metrics(&registry)
        .unwrap()
        .build()
        .await
        .unwrap();
    let (configmaps, secrets) = configmaps_and_secrets(&api).await;
    let key = api.resource_layout("configmaps").key("default", "cm1");
    let cm = DynamicObject::new("v1", "ConfigMap", "cm1").within("default");
    let created = configmaps.create(&key, cm, 0).await.unwrap();
    let options = ListOptions::prefix().at(
        created.metadata.resource_version.as_str(),
        ResourceVersionMatch::NotOlderThan,
    );
    configmaps
        .list("configmaps/default", &options)
        .await
        .unwrap();
    // An uncached resource's list is etcd's.
    secrets
        .list("secrets/default", &ListOptions::prefix())
        .await
        .unwrap();

    let lists = |resource: &str, storage: &str| {
        apistore_testing::metrics::counter(
            &registry,
            "apiserver_storage_list_total",
            &[("resource", resource), ("storage", storage)],
        )
    };
    assert_eq!(lists("configmaps", "watchcache"), 1.0);
    assert_eq!(
        apistore_testing::metrics::counter(
            &registry,
            "apiserver_storage_list_returned_objects_total",
            &[("resource", "configmaps"), ("storage", "watchcache")],
        ),
        1.0
    );
    assert_eq!(lists("secrets", "etcd"), 1.0);
    assert_eq!(lists("secrets", "watchcache"), 0.0);

    // A live event handed to a watcher of the cache is timed, by stage (1.37).
    let mut watch = configmaps
        .watch(
            "configmaps/default",
            &ListOptions::prefix().at(
                created.metadata.resource_version.as_str(),
                ResourceVersionMatch::Unset,
            ),
        )
        .await
        .unwrap();
    let key2 = api.resource_layout("configmaps").key("default", "cm2");
    let cm2 = DynamicObject::new("v1", "ConfigMap", "cm2").within("default");
    configmaps.create(&key2, cm2, 0).await.unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .unwrap();
    assert!(matches!(event, Some(WatchEvent::Added(_))), "{event:?}");
    let dispatched = |stage: &str| -> u64 {
        registry
            .gather()
            .iter()
            .filter(|f| f.name() == "apiserver_watch_events_dispatch_duration_seconds")
            .flat_map(|f| f.get_metric().iter())
            .filter(|m| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == "stage" && l.value() == stage)
            })
            .map(|m| m.get_histogram().get_sample_count())
            .sum()
    };
    assert_eq!(dispatched("total"), 1);
    assert_eq!(dispatched("cache_to_watcher"), 1);
}

/// kube's `WatchList` gate follows the builder's kube version: on from 1.34 (and in
/// 1.32), off in 1.33 and 1.31. With it on, a watch with `sendInitialEvents` gets the
/// current objects and the initial-events-end bookmark, from the store and from the
/// cache (which at 1.35+ also fills itself that way; it refuses the request where etcd
/// answers no progress requests, as kube's does); with it off, the option is ignored,
/// as kube ignores it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watch_list_gate_follows_the_kube_version() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    for (version, gate) in [
        (apistore::KubeVersion::V1_37, true),
        (apistore::KubeVersion::V1_33, false),
    ] {
        let registry = apistore::prometheus::Registry::new();
        let api = caching_configmaps(&etcd, version, &registry).await;
        let (configmaps, secrets) = configmaps_and_secrets(&api).await;
        let namespace = format!("watch-list-{}", version.minor());
        for (store, resource) in [(&secrets, "secrets"), (&configmaps, "configmaps")] {
            // A cache serves a watch-list only where etcd answers progress requests
            // (3.4.31+, 3.5.13+); elsewhere it refuses it, as kube's cacher does.
            let progress = api
                .store::<DynamicObject>(resource)
                .unwrap()
                .check_request_watch_progress_support()
                .await
                .unwrap_or(false);
            let serves = gate && (progress || !store.is_cached());
            assert_eq!(
                store.supports_watch_list(),
                serves,
                "kube {version} {resource}"
            );
            let layout = api.resource_layout(resource);
            let kind = if resource == "secrets" {
                "Secret"
            } else {
                "ConfigMap"
            };
            let object = DynamicObject::new("v1", kind, "one").within(&namespace);
            store
                .create(&layout.key(&namespace, "one"), object, 0)
                .await
                .unwrap();
            let options = ListOptions {
                resource_version: String::new(),
                resource_version_match: ResourceVersionMatch::NotOlderThan,
                send_initial_events: Some(true),
                ..ListOptions::prefix().bookmarks()
            };
            let list_key = format!("{resource}/{namespace}");
            let mut watch = store.watch(&list_key, &options).await.unwrap();
            if gate && !serves {
                let refused = watch.next().await;
                assert!(
                    matches!(&refused, Some(WatchEvent::Error(status))
                        if status.message.contains("RequestWatchProgress is disabled")),
                    "kube {version} {resource}: {refused:?}"
                );
                continue;
            }
            let first = tokio::time::timeout(Duration::from_secs(10), watch.next())
                .await
                .unwrap();
            assert!(
                matches!(&first, Some(WatchEvent::Added(o)) if o.metadata.name == "one"),
                "kube {version} {resource}: {first:?}"
            );
            if gate {
                let end = tokio::time::timeout(Duration::from_secs(10), watch.next())
                    .await
                    .unwrap();
                assert!(
                    matches!(&end, Some(WatchEvent::Bookmark(b))
                        if b.metadata.annotations.get("k8s.io/initial-events-end").map(String::as_str) == Some("true")),
                    "kube {version} {resource}: {end:?}"
                );
            }
        }
    }
}
