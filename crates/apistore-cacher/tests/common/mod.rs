//! The conformance suite's backends with the watch cache in front: any suite
//! [`Backend`] wrapped so that its store is a [`Cacher`] over the backend's store,
//! everything else (raw access, compaction, the transformer) reaching the backend.

#![allow(dead_code, unreachable_pub)]
// Test support: a failed step must fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod wrapped;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig};
use apistore_testing::suite::{Backend, Pod, PodFactory};
use tokio::task::JoinHandle;

/// A suite backend whose store is cached.
pub struct Cached<B: Backend> {
    pub inner: B,
    pub cacher: Cacher<B::Store>,
    test_name: String,
    consistent_reads_from_cache: bool,
    /// The background writer of [`Backend::create_on_read`], while one runs.
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The create the writer failed on, reported when the hook is turned off.
    writer_failed: Arc<Mutex<Option<String>>>,
}

/// The cache's configuration for the suite's pods: keys as the case spells them, which
/// is `Pod::key` (`/pods/<namespace>/<name>`, with `//` for no namespace) except in the
/// cluster-scoped case (`pods/<name>`; kube's cacher test gives that case a
/// cluster-scoped key function too).
pub fn config(
    test_name: &str,
    consistent_reads_from_cache: bool,
    watch_list: bool,
) -> CacherConfig<Pod> {
    let config = CacherConfig::new("/pods", "pods");
    let mut config = if test_name.contains("cluster_scoped") {
        config.with_key_fn(|pod: &Pod| format!("/pods/{}", pod.metadata.name))
    } else {
        config.with_key_fn(Pod::key)
    };
    config.consistent_reads_from_cache = consistent_reads_from_cache;
    config.watch_list = watch_list;
    config
}

impl<B> Cached<B>
where
    B: Backend,
    B::Store: Clone + 'static,
{
    /// Puts a ready cache in front of `inner`'s store.
    pub async fn new(test_name: &str, inner: B, consistent_reads_from_cache: bool) -> Self {
        let cacher = Cacher::new(
            inner.store().clone(),
            config(test_name, consistent_reads_from_cache, false),
        );
        cacher.wait_until_ready().await.unwrap();
        Self {
            inner,
            cacher,
            test_name: test_name.to_owned(),
            consistent_reads_from_cache,
            writer: Mutex::new(None),
            writer_failed: Arc::new(Mutex::new(None)),
        }
    }
}

impl<B: Backend> Drop for Cached<B> {
    fn drop(&mut self) {
        if let Some(writer) = self
            .writer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            writer.abort();
        }
    }
}

impl<B> Backend for Cached<B>
where
    B: Backend,
    B::Store: Clone + 'static,
{
    type Store = Cacher<B::Store>;

    fn store(&self) -> &Self::Store {
        &self.cacher
    }

    fn stored_key(&self, key: &str) -> String {
        self.inner.stored_key(key)
    }

    async fn raw_get(&self, stored_key: &str) -> Option<Vec<u8>> {
        self.inner.raw_get(stored_key).await
    }

    async fn raw_put(&self, stored_key: &str, value: Vec<u8>) {
        self.inner.raw_put(stored_key, value).await;
    }

    fn transformer_prefix(&self) -> &[u8] {
        self.inner.transformer_prefix()
    }

    fn set_transformer_stale(&self, stale: bool) {
        self.inner.set_transformer_stale(stale);
    }

    fn take_transformer_reads(&self) -> u64 {
        self.inner.take_transformer_reads()
    }

    fn take_storage_reads(&self) -> u64 {
        self.inner.take_storage_reads()
    }

    /// kube's cacher tests' `compactStorage`, in its order: the cache first reaches
    /// the revision and forgets the events up to it, and only then is the backend
    /// compacted.
    ///
    /// The other order races the cache's own watch of the backend. A change the watch
    /// has not read yet when the compaction lands loses its previous value to it, and
    /// a modification or deletion without one is an error event (kube's `PrevKv=nil`),
    /// on which the cache lists again; until it has, it answers 429 "storage is
    /// (re)initializing". On a busy machine the watch is often that far behind.
    async fn compact(&self, resource_version: &str) {
        self.caught_up(resource_version).await;
        let rv: u64 = resource_version.parse().unwrap();
        self.cacher.forget_events_through(rv);
        self.inner.compact(resource_version).await;
    }

    /// The cache's watch has read every change up to `resource_version`.
    async fn caught_up(&self, resource_version: &str) {
        let rv: u64 = resource_version.parse().unwrap();
        self.cacher
            .wait_until_fresh(rv)
            .await
            .unwrap_or_else(|err| panic!("the cache did not reach {rv}: {err}"));
    }

    /// The reads made on the test's own thread create, as on the backend: those of a
    /// list the cache hands to the backend (pages this small are read on the caller's
    /// thread). The cache's own reads (its watch decoding each event, on a runtime
    /// worker) do not: each pod they created would create the next for as long as the
    /// test runs, from a worker blocked in the create, and a create still in flight
    /// when the test's runtime shuts down can leave the runtime waiting for that
    /// worker (the likeliest cause of the case hanging once in CI). A list the cache
    /// answers itself reads nothing, so the concurrent writes the case is about come
    /// from a writer task instead, creating `next()` every few milliseconds until the
    /// hook is turned off. Its first create is made before this returns, so the case's
    /// premise (pods were written after its own) holds however the writer is
    /// scheduled; a create it fails on fails the case when the hook is turned off.
    /// (kube does not run this case on its cacher, #109831.)
    fn create_on_read(&self, next: Option<PodFactory>) -> bool {
        use apistore_storage::Storage;
        let mut writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(running) = writer.take() {
            running.abort();
        }
        let failed = self
            .writer_failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(failed) = failed
            && !std::thread::panicking()
        {
            panic!("the concurrent writer failed: {failed}");
        }
        let next = next.map(|next| {
            let store = self.inner.store().clone();
            let written = Arc::clone(&next);
            let failed = Arc::clone(&self.writer_failed);
            let write = move |store: B::Store, pod: Pod| async move {
                let key = pod.key();
                store
                    .create(&key, pod, 0)
                    .await
                    .map(drop)
                    .map_err(|err| format!("creating {key}: {err}"))
            };
            // The test's thread is not a runtime worker: it may wait here.
            if let Some(pod) = written() {
                let first = tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(write(store.clone(), pod))
                });
                if let Err(err) = first {
                    panic!("the concurrent writer failed: {err}");
                }
            }
            *writer = Some(tokio::spawn(async move {
                while let Some(pod) = written() {
                    if let Err(err) = write(store.clone(), pod).await {
                        *failed.lock().unwrap_or_else(PoisonError::into_inner) = Some(err);
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }));
            let test_thread = std::thread::current().id();
            let on_test_thread: PodFactory = Arc::new(move || {
                (std::thread::current().id() == test_thread)
                    .then(|| next())
                    .flatten()
            });
            on_test_thread
        });
        self.inner.create_on_read(next)
    }

    /// A second cache, with kube's `WatchList` gate on, over the backend's watch-list
    /// store; made ready before it is handed out.
    fn watch_list_store(&self) -> Option<Self::Store> {
        let store = self.inner.watch_list_store()?;
        let cacher = Cacher::new(
            store,
            config(&self.test_name, self.consistent_reads_from_cache, true),
        );
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(cacher.wait_until_ready())
        })
        .unwrap();
        Some(cacher)
    }

    fn set_transformer_failing(&self, failing: bool) -> bool {
        self.inner.set_transformer_failing(failing)
    }

    /// The cache's own watchers: a watch of the cached store never reaches the backend.
    fn active_watches(&self) -> Option<usize> {
        Some(self.cacher.watcher_count())
    }
}
