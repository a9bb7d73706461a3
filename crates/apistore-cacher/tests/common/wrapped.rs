//! A backend for the cacher's own tests: a working store (the in-memory one by
//! default, or the etcd3 store over a real etcd), recording the lists, gets and
//! watches that reach it (the reference's `dummyStorage`, over a working store), whose
//! watch streams end when told to, whose later watches can be held at a gate, whose
//! watches can be told to lose the events of one object (a cache that is then
//! inconsistent with the store), and which can refuse watches with
//! `sendInitialEvents` (kube's cacher's `listerWatcher` with the `WatchList` gate off)
//! or stall them (a backend that says it serves watch-lists but never ends their
//! initial events).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{
    DeleteOptions, GetOptions, ListOptions, ObjectList, ResponseMeta, Result, Storage,
    StorageError, Update, UpdateOptions, Versioner, WatchEvent, WatchStream,
};
use apistore_testing::suite::Pod;
use futures::StreamExt as _;
use tokio::sync::{Notify, Semaphore};

/// A store of pods (the in-memory one unless said otherwise), watched and recorded.
#[derive(Clone)]
pub struct Wrapped<S = MemoryStore<Pod>> {
    pub store: S,
    pub lists: Arc<Mutex<Vec<(String, ListOptions)>>>,
    pub gets: Arc<Mutex<Vec<String>>>,
    pub watches: Arc<AtomicUsize>,
    /// The options of every watch asked for, refused ones too, in order.
    pub watch_requests: Arc<Mutex<Vec<ListOptions>>>,
    /// When set, a watch with `sendInitialEvents` is refused with an error.
    pub refuse_watch_list: Arc<AtomicBool>,
    /// When set to `Some(n)`, a watch with `sendInitialEvents` passes on the first `n`
    /// events of the store's stream and then nothing, without ending: a watch-list
    /// whose initial events never end.
    pub stall_watch_list: Option<usize>,
    /// How many stalled streams (see `stall_watch_list`) were dropped.
    pub stalled_dropped: Arc<AtomicUsize>,
    /// Ends every watch stream asked for before it is notified (`notify_waiters`).
    pub cut: Arc<Notify>,
    /// When set, every watch after the first waits for a permit.
    pub gate: Option<Arc<Semaphore>>,
    /// The name of the object whose changes watches leave out, if any.
    pub lost: Arc<Mutex<Option<String>>>,
    /// When set, the cache's own lists of the resource (not its one-item lists for the
    /// current revision) wait for a permit: the cache stays initializing until given one.
    pub list_gate: Option<Arc<Semaphore>>,
    /// How often the backend was asked for its current revision
    /// (`get_current_resource_version`).
    pub current_revisions: Arc<AtomicUsize>,
}

impl Wrapped {
    /// Over a fresh key space with this configuration.
    pub fn new(config: KvConfig) -> Self {
        let kv = MemoryKv::new(config);
        Self::over(MemoryStore::new(
            kv,
            MemoryStoreConfig::for_resource("pods"),
        ))
    }
}

/// A list of a key other than the resource prefix: a request's, not the cacher's own.
fn is_request_list(key: &str, _: &ListOptions) -> bool {
    key != "/pods"
}

impl<S> Wrapped<S> {
    /// Over `store`, recording from now on.
    pub fn over(store: S) -> Self {
        Self {
            store,
            lists: Arc::default(),
            gets: Arc::default(),
            watches: Arc::default(),
            watch_requests: Arc::default(),
            refuse_watch_list: Arc::default(),
            stall_watch_list: None,
            stalled_dropped: Arc::default(),
            cut: Arc::new(Notify::new()),
            gate: None,
            lost: Arc::default(),
            list_gate: None,
            current_revisions: Arc::default(),
        }
    }

    /// The lists of keys other than the resource prefix (those are the cacher's own:
    /// its lists of everything and its one-item lists for the current revision).
    pub fn take_request_lists(&self) -> Vec<ListOptions> {
        self.take_lists(is_request_list)
    }

    /// [`Self::take_request_lists`] without taking anything: every list stays recorded.
    pub fn request_lists(&self) -> Vec<ListOptions> {
        let lists = self.lists.lock().unwrap();
        lists
            .iter()
            .filter(|(key, options)| is_request_list(key, options))
            .map(|(_, options)| options.clone())
            .collect()
    }

    /// The cache's own lists of everything (not its one-item lists for the current
    /// revision), taken.
    pub fn take_resource_lists(&self) -> Vec<ListOptions> {
        self.take_lists(|key, options| key == "/pods" && options.predicate.limit != 1)
    }

    /// The cache's one-item lists of everything (how kube 1.31-1.32 learn the current
    /// revision), taken with the rest.
    pub fn take_current_revision_lists(&self) -> Vec<ListOptions> {
        self.take_lists(|key, options| key == "/pods" && options.predicate.limit == 1)
    }

    /// The recorded lists `keep` accepts; all are taken.
    fn take_lists(&self, keep: impl Fn(&str, &ListOptions) -> bool) -> Vec<ListOptions> {
        let mut lists = self.lists.lock().unwrap();
        lists
            .drain(..)
            .filter(|(key, options)| keep(key, options))
            .map(|(_, options)| options)
            .collect()
    }

    /// Waits until the store has been asked for a watch: a cache turns ready when its
    /// list lands and opens its own watch of the backend just after, which on a busy
    /// machine is still to come.
    pub async fn wait_for_a_watch(&self) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
        while self.watches.load(Ordering::SeqCst) == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the cache opened no watch of the backend"
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }

    /// The options of the watches asked for so far, taken.
    pub fn take_watch_requests(&self) -> Vec<ListOptions> {
        std::mem::take(&mut *self.watch_requests.lock().unwrap())
    }
}

/// Adds one to its count when dropped.
struct DropCounter(Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

impl<S: Storage<Object = Pod>> Storage for Wrapped<S> {
    type Object = Pod;

    fn versioner(&self) -> &dyn Versioner {
        self.store.versioner()
    }
    async fn create(&self, key: &str, object: Pod, ttl: u64) -> Result<Pod> {
        self.store.create(key, object, ttl).await
    }
    async fn get(&self, key: &str, options: &GetOptions) -> Result<Pod> {
        self.gets.lock().unwrap().push(key.to_owned());
        self.store.get(key, options).await
    }
    async fn delete(&self, key: &str, options: DeleteOptions<Pod>) -> Result<Pod> {
        self.store.delete(key, options).await
    }
    async fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<Pod>,
        try_update: F,
    ) -> Result<Pod>
    where
        F: FnMut(Pod, &ResponseMeta) -> Result<Update<Pod>> + Send,
    {
        self.store.guaranteed_update(key, options, try_update).await
    }
    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<Pod>> {
        self.lists
            .lock()
            .unwrap()
            .push((key.to_owned(), options.clone()));
        if let (Some(gate), "/pods", false) = (&self.list_gate, key, options.predicate.limit == 1) {
            gate.acquire().await.unwrap().forget();
        }
        self.store.list(key, options).await
    }
    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<Pod>> {
        // Made first, before the watch counts as asked for: a cut from then on ends
        // this stream, even one made before the stream is first polled.
        let cut = Arc::clone(&self.cut).notified_owned();
        self.watch_requests.lock().unwrap().push(options.clone());
        if options.send_initial_events.is_some() && self.refuse_watch_list.load(Ordering::SeqCst) {
            return Err(StorageError::BadRequest {
                key: key.to_owned(),
                message: "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled".to_owned(),
            });
        }
        let earlier = self.watches.fetch_add(1, Ordering::SeqCst);
        if let (Some(gate), true) = (&self.gate, earlier > 0) {
            gate.acquire().await.unwrap().forget();
        }
        let stream = self.store.watch(key, options).await?;
        if let (Some(passed), Some(true)) = (self.stall_watch_list, options.send_initial_events) {
            // Held by the stream: counts the stream's drop.
            let dropped = DropCounter(Arc::clone(&self.stalled_dropped));
            return Ok(Box::pin(
                stream
                    .take(passed)
                    .chain(futures::stream::pending())
                    .inspect(move |_| {
                        let _held = &dropped;
                    }),
            ));
        }
        let lost = Arc::clone(&self.lost);
        let kept = move |event: &WatchEvent<Pod>| {
            let name = match event {
                WatchEvent::Added(pod) | WatchEvent::Modified(pod) | WatchEvent::Deleted(pod) => {
                    &pod.metadata.name
                }
                WatchEvent::Bookmark(_) | WatchEvent::Error(_) => return true,
            };
            lost.lock().unwrap().as_deref() != Some(name.as_str())
        };
        Ok(Box::pin(
            stream
                .filter(move |event| std::future::ready(kept(event)))
                .take_until(cut),
        ))
    }
    async fn count(&self, key: &str) -> Result<i64> {
        self.store.count(key).await
    }
    async fn readiness_check(&self) -> Result<()> {
        self.store.readiness_check().await
    }
    async fn request_watch_progress(&self) -> Result<()> {
        self.store.request_watch_progress().await
    }
    async fn get_current_resource_version(&self) -> Result<u64> {
        self.current_revisions.fetch_add(1, Ordering::SeqCst);
        self.store.get_current_resource_version().await
    }
    async fn stats(&self) -> Result<apistore_storage::Stats> {
        self.store.stats().await
    }
    fn enable_resource_size_estimation(&self, keys: apistore_storage::KeysFn) -> Result<()> {
        self.store.enable_resource_size_estimation(keys)
    }
    fn compact_revision(&self) -> i64 {
        self.store.compact_revision()
    }
    fn supports_watch_list(&self) -> bool {
        self.store.supports_watch_list()
    }
}
