//! Label and field indexes (kube's `IndexerFuncs`): a list whose selector pins an
//! indexed label or field to one value reads the index, returns exactly what the
//! backend returns for the same list, follows objects whose values change or that
//! go away, and is counted under the index's name in `apiserver_cache_list_*`.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{
    DeleteOptions, KubeVersion, ListOptions, ResourceVersionMatch, Storage, Update, UpdateOptions,
};
use apistore_testing::metrics::counter;
use apistore_testing::suite::Pod;

/// The counter `name` for the series whose `index` label is `index`.
fn indexed_counter(registry: &prometheus::Registry, name: &str, index: &str) -> f64 {
    counter(registry, name, &[("index", index)])
}

fn names(list: &[Pod]) -> Vec<String> {
    list.iter()
        .map(|pod| format!("{}/{}", pod.metadata.namespace, pod.metadata.name))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexed_lists_return_what_the_backend_returns() {
    let backend: MemoryStore<Pod> = MemoryStore::new(
        MemoryKv::new(KvConfig::default()),
        MemoryStoreConfig::for_resource("pods"),
    );
    for pod in [
        Pod::new("ns", "a").with_label("app", "web").on_node("n1"),
        Pod::new("ns", "b").with_label("app", "web").on_node("n2"),
        Pod::new("ns", "c").with_label("app", "db").on_node("n1"),
        Pod::new("other", "d").with_label("app", "web"),
        Pod::new("ns", "e"),
    ] {
        backend.create(&pod.key(), pod, 0).await.unwrap();
    }
    let registry = prometheus::Registry::new();
    let mut config = CacherConfig::new("/pods", "pods")
        .with_key_fn(Pod::key)
        .with_label_index("app")
        .with_field_index("spec.nodeName");
    // kube 1.36's families: their `apiserver_cache_list_*` (hidden from 1.37) are
    // what shows which lists the cache served.
    config.metrics = Some(CacherMetrics::register_for(&registry, KubeVersion::V1_36).unwrap());
    let cacher = Cacher::new(backend.clone(), config);
    cacher.wait_until_ready().await.unwrap();

    // Each list from the cache against the same list from the backend.
    let check = |key: &'static str, labels: &'static str, fields: &'static str| {
        let (cacher, backend) = (&cacher, &backend);
        async move {
            let rv = backend
                .list("/pods", &ListOptions::prefix().limit(1))
                .await
                .unwrap()
                .metadata
                .resource_version;
            let selected = ListOptions::prefix()
                .labels(labels)
                .unwrap()
                .fields(fields)
                .unwrap();
            let from_cache = cacher
                .list(
                    key,
                    &selected
                        .clone()
                        .at(rv.clone(), ResourceVersionMatch::NotOlderThan),
                )
                .await
                .unwrap();
            let from_backend = backend.list(key, &selected).await.unwrap();
            assert_eq!(
                from_cache.items, from_backend.items,
                "{key} {labels:?} {fields:?}"
            );
            names(&from_cache.items)
        }
    };

    assert_eq!(
        check("/pods", "app=web", "").await,
        ["ns/a", "ns/b", "other/d"]
    );
    assert_eq!(check("/pods/ns", "app=web", "").await, ["ns/a", "ns/b"]);
    assert_eq!(check("/pods", "app in (db)", "").await, ["ns/c"]);
    assert_eq!(
        check("/pods", "", "spec.nodeName=n1").await,
        ["ns/a", "ns/c"]
    );
    assert_eq!(
        check("/pods", "app=web", "spec.nodeName=n1").await,
        ["ns/a"]
    );
    assert!(check("/pods", "app=none", "").await.is_empty());
    let indexed = indexed_counter(&registry, "apiserver_cache_list_total", "l:app")
        + indexed_counter(&registry, "apiserver_cache_list_total", "f:spec.nodeName");
    assert_eq!(indexed, 6.0, "every list above read an index");
    // The label lists read 3, 2, 1, 3 (app is the first index configured) and 0
    // objects; the node list 2.
    assert_eq!(
        indexed_counter(
            &registry,
            "apiserver_cache_list_fetched_objects_total",
            "l:app"
        ),
        3.0 + 2.0 + 1.0 + 3.0
    );
    assert_eq!(
        indexed_counter(
            &registry,
            "apiserver_cache_list_fetched_objects_total",
            "f:spec.nodeName"
        ),
        2.0
    );

    // A selector that pins no indexed value reads the whole range.
    let whole_before = indexed_counter(&registry, "apiserver_cache_list_total", "");
    assert_eq!(check("/pods", "app!=web", "").await, ["ns/c", "ns/e"]);
    assert_eq!(
        indexed_counter(&registry, "apiserver_cache_list_total", ""),
        whole_before + 1.0
    );

    // b moves from web to db, a goes away: the index follows.
    let mut b = backend
        .get("/pods/ns/b", &Default::default())
        .await
        .unwrap();
    b.metadata.labels.insert("app".to_owned(), "db".to_owned());
    b.metadata.resource_version.clear();
    backend
        .guaranteed_update("/pods/ns/b", UpdateOptions::default(), |_, _| {
            Ok(Update::new(b.clone()))
        })
        .await
        .unwrap();
    backend
        .delete("/pods/ns/a", DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(check("/pods", "app=web", "").await, ["other/d"]);
    assert_eq!(check("/pods", "app=db", "").await, ["ns/b", "ns/c"]);
    assert_eq!(check("/pods", "", "spec.nodeName=n1").await, ["ns/c"]);
}
