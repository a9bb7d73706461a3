//! The conformance cases of the interface kube gained after v0.31.1
//! (`interface_conformance!`) against the watch cache, over the in-memory store and
//! over the etcd3 store at kube 1.37 (where it sees compactions made by other
//! servers). The cache passes these to its backend, as kube's `CacheDelegator` does;
//! with size estimation on, the etcd3 store's estimate learns from the cache's own
//! list and watch.

// A conformance case is a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../apistore-etcd3/tests/common/mod.rs"]
mod etcd3;

#[path = "../../apistore-memory/tests/common/mod.rs"]
mod memory;

mod common;

mod over_memory {
    use apistore_testing::suite::Needs;

    use super::common::Cached;
    use super::memory::MemoryBackend;

    async fn backend(test_name: &str, needs: Needs) -> Cached<MemoryBackend> {
        let inner = super::memory::backend(test_name, needs).await;
        Cached::new(test_name, inner, true).await
    }

    apistore_testing::interface_conformance!(backend);
}

mod over_etcd3 {
    use apistore_storage::KubeVersion;
    use apistore_testing::suite::Needs;

    use super::common::Cached;
    use super::etcd3::Etcd3Backend;

    async fn backend(test_name: &str, needs: Needs) -> Cached<Etcd3Backend> {
        let mut inner = super::etcd3::backend(test_name, needs).await;
        inner.store = inner.store.clone().with_kube_version(KubeVersion::V1_37);
        let progress = inner
            .store
            .check_request_watch_progress_support()
            .await
            .unwrap();
        Cached::new(test_name, inner, progress).await
    }

    apistore_testing::interface_conformance!(backend);
}

/// kube 1.35's cacher hands the backend its own keys for the size estimate: the
/// estimate then follows the cache's list and watch, and counts the cache's keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_backends_size_estimate_can_take_the_caches_keys() {
    use apistore_storage::{DeleteOptions, ListOptions, Stats, Storage};
    use apistore_testing::suite::{Backend, Needs, Pod};

    let inner = etcd3::backend("cache_keys_estimate", Needs::Shared).await;
    let progress = inner
        .store
        .check_request_watch_progress_support()
        .await
        .unwrap();
    let cached = common::Cached::new("cache_keys_estimate", inner, progress).await;
    cached
        .cacher
        .enable_size_estimation_with_cache_keys()
        .unwrap();
    assert!(
        cached
            .cacher
            .enable_size_estimation_with_cache_keys()
            .is_err(),
        "enabled twice"
    );
    let store = cached.store();
    let mut last = 0;
    for name in ["a", "b"] {
        let created = store
            .create(&format!("pods/ns/{name}"), Pod::new("ns", name), 0)
            .await
            .unwrap();
        last = created.metadata.resource_version.parse().unwrap();
    }
    // The cache holds both before its keys are asked for: on an etcd whose progress
    // notifications may run ahead of the events (before 3.4.31 and 3.5.13), the keys
    // function's wait for etcd's current revision can end before the creates arrive.
    cached.cacher.wait_until_fresh(last).await.unwrap();
    let mut sizes = 0;
    for name in ["a", "b"] {
        let stored = cached.stored_key(&format!("pods/ns/{name}"));
        sizes += i64::try_from(cached.raw_get(&stored).await.unwrap().len()).unwrap();
    }
    let everything = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    store.list("pods", &everything).await.unwrap();
    assert_eq!(
        store.stats().await.unwrap(),
        Stats {
            object_count: 2,
            estimated_average_object_size_bytes: sizes / 2,
        }
    );
    store
        .delete("pods/ns/a", DeleteOptions::default())
        .await
        .unwrap();
    let stats = store.stats().await.unwrap();
    assert_eq!(stats.object_count, 1, "{stats:?}");
}
