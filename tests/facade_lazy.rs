//! The facade's stores of `LazyObject`s: `lazy_store` and `lazy_resource_store` give the
//! resource's keys, media type and kube minor as `store` does, read what a
//! `DynamicObject` store wrote (and the other way round) without decoding bodies,
//! splice metadata-only writes into the stored bytes, refuse names the layout does
//! not know, and come out of `lazy_resource_store` as a watch cache of their own when
//! the resource is cached; the in-memory facade's hold the same bytes.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apistore::{
    ApiStore, DynamicObject, GetOptions, LazyObject, ListOptions, ResourceStore,
    ResourceVersionMatch, Storage, StorageError, UpdateOptions, WatchEvent,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use futures::StreamExt as _;
use serde_json::json;

/// A Pod with a spec that has a container, a toleration and a resource limit: enough
/// body for the lazy reads to leave undecoded.
fn pod(namespace: &str, name: &str) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {
            "containers": [{
                "name": "web",
                "image": "nginx:1.27",
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
            }],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}],
            "nodeName": "node-1",
        },
    }))
    .unwrap()
}

/// The body of `pod` as it reads back from kube's protobuf: Go's `Pod` has `status` as
/// a struct, not a pointer, so its JSON always carries one (`{}` when empty).
fn as_stored(pod: DynamicObject) -> serde_json::Map<String, serde_json::Value> {
    let mut body = pod.data;
    body.insert("status".to_owned(), json!({}));
    body
}

/// Creates pod `name` at `key` through `lazy` (a lazy object made from a dynamic one,
/// so written whole) and reads it back through `dynamic`: the same body, as stored, at
/// the resourceVersion the create returned.
async fn create_lazily_read_dynamically(
    lazy: &impl Storage<Object = LazyObject>,
    dynamic: &impl Storage<Object = DynamicObject>,
    key: &str,
    name: &str,
) -> DynamicObject {
    let made = lazy
        .create(key, LazyObject::from(pod("default", name)), 0)
        .await
        .unwrap();
    let read = dynamic.get(key, &GetOptions::default()).await.unwrap();
    assert_eq!(read.data, as_stored(pod("default", name)));
    assert_eq!(
        read.metadata.resource_version,
        made.metadata().resource_version
    );
    read
}

/// An etcd facade under a prefix of its own, caching pods when `cached`.
async fn etcd_api(test: &str, cached: bool) -> ApiStore {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    let mut builder = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(unique_prefix(test));
    if cached {
        builder = builder.watch_cache(["pods"]);
    }
    builder.build().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_store_reads_and_writes_what_the_dynamic_store_does() {
    let api = etcd_api("lazy_store_round_trip", false).await;
    let dynamic = api.dynamic_store("pods").unwrap();
    // The same resource by its kubectl short name.
    let lazy = api.lazy_store("po").unwrap();
    let key = api.resource_layout("pods").key("default", "web-1");
    let created = dynamic
        .create(&key, pod("default", "web-1"), 0)
        .await
        .unwrap();

    let read = lazy.get(&key, &GetOptions::default()).await.unwrap();
    assert!(
        !read.is_body_decoded(),
        "a get decodes the metadata only: {read:?}"
    );
    assert_eq!(read.metadata().name, "web-1");
    assert_eq!(
        read.metadata().resource_version,
        created.metadata.resource_version
    );
    // Pods are stored as kube-apiserver stores them: protobuf.
    let stored = read.stored_bytes().expect("a read keeps its stored bytes");
    assert!(stored.starts_with(b"k8s\0"), "{stored:?}");
    assert_eq!(read.to_dynamic().unwrap(), created);
    assert_eq!(
        read.field_str(&["spec", "nodeName"]).unwrap().as_deref(),
        Some("node-1")
    );

    // A metadata-only update through the lazy store: the body is never decoded, and
    // the dynamic store reads the new label beside the unchanged spec.
    let updated = lazy
        .guaranteed_update(&key, UpdateOptions::default(), |mut p: LazyObject, _| {
            p.metadata_mut()
                .labels
                .insert("tier".to_owned(), "gold".to_owned());
            Ok(p.into())
        })
        .await
        .unwrap();
    assert!(!updated.is_body_decoded(), "{updated:?}");
    let after = dynamic.get(&key, &GetOptions::default()).await.unwrap();
    assert_eq!(
        after.metadata.labels.get("tier").map(String::as_str),
        Some("gold")
    );
    assert_eq!(
        after.metadata.labels.get("app").map(String::as_str),
        Some("web")
    );
    assert_eq!(after.data, created.data, "the body went through untouched");
    assert_eq!(
        after.metadata.resource_version,
        updated.metadata().resource_version
    );

    // A lazy object made from a dynamic one is written whole, and read back the same.
    let key2 = api.resource_layout("pods").key("default", "web-2");
    create_lazily_read_dynamically(&lazy, &dynamic, &key2, "web-2").await;

    let listed = lazy
        .list("pods/default", &ListOptions::prefix())
        .await
        .unwrap();
    let names: Vec<&str> = listed
        .items
        .iter()
        .map(|p| p.metadata().name.as_str())
        .collect();
    assert_eq!(names, ["web-1", "web-2"]);
    assert!(listed.items.iter().all(|p| !p.is_body_decoded()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_the_layout_does_not_know_is_refused_naming_the_closest() {
    let api = etcd_api("lazy_store_unknown", false).await;
    let err = api.lazy_store("podz").unwrap_err();
    assert!(matches!(err, StorageError::BadRequest { .. }), "{err}");
    assert!(err.to_string().contains("pods"), "{err}");
    let err = api.lazy_resource_store("podz").await.unwrap_err();
    assert!(err.to_string().contains("pods"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_resource_gives_a_lazy_watch_cache_of_its_own() {
    let api = etcd_api("lazy_resource_store_cached", true).await;
    let dynamic = api.dynamic_store("pods").unwrap();
    let key = api.resource_layout("pods").key("default", "web-1");
    dynamic
        .create(&key, pod("default", "web-1"), 0)
        .await
        .unwrap();

    let lazy = api.lazy_resource_store("pods").await.unwrap();
    // A second handle shares the first one's cache (its watch shows on the first,
    // below); the cache of another object type for the same resource is a different
    // one, and both serve the object.
    let again = api.lazy_resource_store("pods").await.unwrap();
    let dynamic_cached = api.resource_store::<DynamicObject>("pods").await.unwrap();
    let (
        ResourceStore::Cached(first),
        ResourceStore::Cached(_),
        ResourceStore::Cached(dynamic_cache),
    ) = (&lazy, &again, &dynamic_cached)
    else {
        panic!("all three handles are caches");
    };

    let from_cache = ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan);
    let listed = lazy.list("pods/default", &from_cache).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].metadata().name, "web-1");
    let listed = dynamic_cached
        .list("pods/default", &from_cache)
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 1);

    let mut watch = again
        .watch(
            "pods/default",
            &ListOptions::prefix().at(
                &listed.metadata.resource_version,
                ResourceVersionMatch::Unset,
            ),
        )
        .await
        .unwrap();
    assert_eq!(
        first.watcher_count(),
        1,
        "the second handle's watch is the first's"
    );
    assert_eq!(dynamic_cache.watcher_count(), 0, "a cache of its own");
    let key2 = api.resource_layout("pods").key("default", "web-2");
    dynamic
        .create(&key2, pod("default", "web-2"), 0)
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(30), watch.next())
        .await
        .expect("the lazy cache's watch to see the create")
        .expect("the watch to stay open");
    match event {
        WatchEvent::Added(p) => {
            assert_eq!(p.metadata().name, "web-2");
            assert_eq!(
                p.to_dynamic().unwrap().data,
                as_stored(pod("default", "web-2"))
            );
        }
        other => panic!("expected Added, got {other:?}"),
    }
}

#[tokio::test]
async fn the_in_memory_facade_gives_lazy_stores_over_the_same_bytes() {
    let api = ApiStore::in_memory();
    let dynamic = api.dynamic_store("pods").unwrap();
    let lazy = api.lazy_store("pods").unwrap();
    let key = api.resource_layout("pods").key("default", "web-1");
    let read = create_lazily_read_dynamically(&lazy, &dynamic, &key, "web-1").await;
    let back = lazy.get(&key, &GetOptions::default()).await.unwrap();
    assert!(back.stored_bytes().unwrap().starts_with(b"k8s\0"));
    assert_eq!(back.to_dynamic().unwrap(), read);

    let handle = api.lazy_resource_store("po").await.unwrap();
    assert!(!handle.is_cached());
    assert_eq!(
        handle
            .get(&key, &GetOptions::default())
            .await
            .unwrap()
            .metadata()
            .name,
        "web-1"
    );
    assert!(
        api.lazy_store("podz")
            .unwrap_err()
            .to_string()
            .contains("pods")
    );
}
