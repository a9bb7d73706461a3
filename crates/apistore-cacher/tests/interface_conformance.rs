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
