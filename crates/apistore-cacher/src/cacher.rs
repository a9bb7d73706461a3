//! The cacher: a [`Storage`] over a backend [`Storage`] (kube's `cacher.go`). Writes
//! and counts go to the backend, with the cached object as the backend's suggestion
//! of the current state; reads and watches are served from the cache as `reads.rs`
//! and `watch.rs` decide.

use std::sync::Arc;
use std::time::Duration;

use apistore_storage::{
    DeleteOptions, GetOptions, KeysFn, ListOptions, ObjectList, ResponseMeta, Result, Stats,
    Status, Storage, StorageError, Update, UpdateOptions, Versioner, WatchStream,
};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::config::CacherConfig;
use crate::consistency;
use crate::dispatcher::Dispatcher;
use crate::event::canonical_key;
use crate::metrics::{CacherMetrics, ResourceMetrics};
use crate::readiness::Readiness;
use crate::ready::Ready;
use crate::reflector;
use crate::watch_cache::WatchCache;

/// The settings the running cacher keeps from its [`CacherConfig`].
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) resource_prefix: String,
    pub(crate) group_resource: String,
    pub(crate) consistent_reads_from_cache: bool,
    pub(crate) watch_list: bool,
    pub(crate) list_page_size: i64,
    pub(crate) fill_with_watch_list: bool,
    pub(crate) fill_watch_list_timeout: Duration,
    pub(crate) list_from_cache_snapshot: bool,
    pub(crate) initial_events_end_at_once: bool,
    pub(crate) current_revision_from_storage: bool,
}

/// What the cacher and its reflector task share.
pub(crate) struct Shared<S: Storage> {
    pub(crate) storage: S,
    pub(crate) cache: WatchCache<S::Object>,
    pub(crate) ready: Ready,
    pub(crate) dispatcher: Arc<Dispatcher<S::Object>>,
    pub(crate) settings: Settings,
    pub(crate) metrics: ResourceMetrics,
    /// Tells the reflector to list the backend again (the consistency checker found
    /// the cache wrong).
    pub(crate) relist: Notify,
}

/// Stops the reflector, and with it the cache and its watches, when the last handle on
/// the cacher goes.
struct Task<S: Storage> {
    reflector: JoinHandle<()>,
    checker: Option<JoinHandle<()>>,
    shared: Arc<Shared<S>>,
}

impl<S: Storage> Drop for Task<S> {
    fn drop(&mut self) {
        self.reflector.abort();
        if let Some(checker) = &self.checker {
            checker.abort();
        }
        self.shared.ready.stop();
        self.shared.dispatcher.terminate_all();
    }
}

/// kube-apiserver's watch cache over a backend store: get, list and watch served from
/// memory, one watch of the backend for all watchers, writes passed through.
///
/// Cloning gives another handle on the same cache; the cache stops when the last
/// handle is dropped (its watches then end).
pub struct Cacher<S: Storage> {
    pub(crate) shared: Arc<Shared<S>>,
    task: Arc<Task<S>>,
}

impl<S: Storage> Clone for Cacher<S> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
            task: Arc::clone(&self.task),
        }
    }
}

impl<S: Storage> std::fmt::Debug for Cacher<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cacher")
            .field("settings", &self.shared.settings)
            .field("ready", &self.shared.ready.check())
            .field("resource_version", &self.shared.cache.resource_version())
            .finish_non_exhaustive()
    }
}

impl<S: Storage + 'static> Cacher<S> {
    /// Starts caching `storage`'s objects under `config.resource_prefix`: the first
    /// list starts at once, on the current tokio runtime (which this must be called
    /// within). Until it lands the cache is not ready (see [`Cacher::wait_until_ready`]).
    pub fn new(storage: S, config: CacherConfig<S::Object>) -> Self {
        let metrics = config
            .metrics
            .unwrap_or_else(CacherMetrics::unregistered)
            .for_resource(&config.group_resource, &config.resource_prefix);
        let cache = WatchCache::new(
            config.key_fn,
            &config.indexes,
            config.lower_bound_capacity,
            config.upper_bound_capacity,
            config.list_from_cache_snapshot,
        );
        metrics.capacity.set(cache.capacity() as i64);
        let shared = Arc::new(Shared {
            storage,
            cache,
            ready: Ready::new(),
            dispatcher: Arc::new(Dispatcher::new(config.bookmark_frequency, metrics.clone())),
            settings: Settings {
                resource_prefix: config.resource_prefix,
                group_resource: config.group_resource,
                consistent_reads_from_cache: config.consistent_reads_from_cache,
                watch_list: config.watch_list,
                list_page_size: config.list_page_size.max(1),
                fill_with_watch_list: config.fill_with_watch_list,
                fill_watch_list_timeout: config.fill_watch_list_timeout,
                list_from_cache_snapshot: config.list_from_cache_snapshot,
                initial_events_end_at_once: config.initial_events_end_at_once,
                current_revision_from_storage: config.current_revision_from_storage,
            },
            metrics,
            relist: Notify::new(),
        });
        let reflector = tokio::spawn(reflector::run(Arc::clone(&shared)));
        let checker = config
            .consistency_check_period
            .map(|period| tokio::spawn(consistency::run(Arc::clone(&shared), period)));
        Self {
            task: Arc::new(Task {
                reflector,
                checker,
                shared: Arc::clone(&shared),
            }),
            shared,
        }
    }
}

impl<S: Storage> Cacher<S> {
    /// The backend store.
    pub fn storage(&self) -> &S {
        &self.shared.storage
    }

    /// Whether the cache holds a complete list and is following the backend.
    pub fn is_ready(&self) -> bool {
        self.shared.ready.check()
    }

    /// Waits until the cache is ready (kube's `Cacher.Wait`).
    ///
    /// # Errors
    ///
    /// An internal error if the cacher stopped instead.
    pub async fn wait_until_ready(&self) -> Result<()> {
        if self.shared.ready.wait().await {
            Ok(())
        } else {
            Err(StorageError::Internal {
                key: self.shared.settings.resource_prefix.clone(),
                message: "watch cache stopped".to_owned(),
                source: None,
            })
        }
    }

    /// Waits until the cache is ready, for at most `timeout` (one cache's part of
    /// kube's `storage-readiness` post-start hook; see [`Readiness`]).
    ///
    /// # Errors
    ///
    /// A timeout error about the resource when it is not ready by then (the cache
    /// goes on initializing, answering 429 meanwhile); an internal error if the cacher
    /// stopped instead.
    pub async fn wait_ready(&self, timeout: std::time::Duration) -> Result<()> {
        self.readiness().wait(timeout).await
    }

    /// A handle on the cache's readiness that does not keep the cacher alive: what a
    /// server keeps for each cache it made, to wait for all of them before it reports
    /// ready ([`wait_all_ready`](crate::wait_all_ready)).
    pub fn readiness(&self) -> Readiness {
        Readiness::new(
            self.shared.settings.group_resource.clone(),
            self.shared.ready.subscribe(),
        )
    }

    /// The revision the cache reflects.
    pub fn resource_version(&self) -> u64 {
        self.shared.cache.resource_version()
    }

    /// The current capacity of the window of events.
    pub fn capacity(&self) -> usize {
        self.shared.cache.capacity()
    }

    /// Waits until the cache reflects `resource_version` (at most
    /// [`BLOCK_TIMEOUT`](crate::BLOCK_TIMEOUT)).
    ///
    /// # Errors
    ///
    /// A too-large-resourceVersion error if it did not get there in time.
    pub async fn wait_until_fresh(&self, resource_version: u64) -> Result<()> {
        self.shared
            .cache
            .wait_until_fresh(resource_version, &self.shared.settings.resource_prefix)
            .await
    }

    /// Forgets the window's events and snapshots up to `resource_version`: watches
    /// from before it get 410 Gone, Exact and continued lists before it go to the
    /// backend. The window does not learn of the backend's compactions (neither does
    /// kube's; the snapshots do, see [`Self::snapshot_count`]); this is what one
    /// implies, for an application or a test that compacts and wants the cache to agree.
    pub fn forget_events_through(&self, resource_version: u64) {
        self.shared.cache.forget_events_through(resource_version);
    }

    /// How many snapshots of its objects the cache holds: one per revision it applied
    /// a change at, since its list or the oldest event of its window, and not below
    /// the backend's compacted revision (with
    /// [`CacherConfig::list_from_cache_snapshot`]; 0 without).
    pub fn snapshot_count(&self) -> usize {
        self.shared.cache.snapshot_count()
    }

    /// How many watches the cache is serving.
    pub fn watcher_count(&self) -> usize {
        self.shared.dispatcher.len()
    }
}

impl<S: Storage> Shared<S> {
    /// Drops the snapshots below the backend's compacted revision and returns that
    /// revision. kube's cacher polls for it every 15 s; `compact_revision` is a cheap
    /// read of what the backend already knows, so the cacher asks before every read
    /// from a snapshot and on each tick of its reflector.
    pub(crate) fn sync_compaction(&self) -> i64 {
        let compacted = self.storage.compact_revision();
        if self.settings.list_from_cache_snapshot {
            if let Ok(revision) = u64::try_from(compacted) {
                self.cache.compact(revision);
            }
        }
        compacted
    }

    /// The cached state of `key`, the suggestion writes pass to the backend (kube's
    /// cacher ignores the caller's suggestion and passes its own).
    fn cached(&self, key: &str) -> Option<S::Object> {
        if !self.ready.check() {
            return None;
        }
        let key = canonical_key(key)?;
        self.cache.get(&key).0.map(|object| (*object).clone())
    }
}

/// kube's `TooManyRequests` answer while the cache (re)initializes
/// (`ResilientWatchCacheInitialization`, on by default in v0.31.1).
pub(crate) fn initializing(key: &str) -> StorageError {
    let mut status = Status::failure(
        429,
        apistore_storage::StatusReason::ServiceUnavailable,
        "storage is (re)initializing",
    );
    status.reason = "TooManyRequests".to_owned();
    status.details = Some(apistore_storage::StatusDetails {
        retry_after_seconds: Some(1),
        ..Default::default()
    });
    StorageError::Api {
        key: key.to_owned(),
        status: Box::new(status),
    }
}

impl<S: Storage + 'static> Storage for Cacher<S> {
    type Object = S::Object;

    fn versioner(&self) -> &dyn Versioner {
        self.shared.storage.versioner()
    }

    async fn create(&self, key: &str, object: S::Object, ttl: u64) -> Result<S::Object> {
        self.shared.storage.create(key, object, ttl).await
    }

    async fn get(&self, key: &str, options: &GetOptions) -> Result<S::Object> {
        self.shared.get(key, options).await
    }

    async fn delete(&self, key: &str, mut options: DeleteOptions<S::Object>) -> Result<S::Object> {
        if let Some(current) = self.shared.cached(key) {
            options.cached_existing_object = Some(current);
        }
        self.shared.storage.delete(key, options).await
    }

    async fn guaranteed_update<F>(
        &self,
        key: &str,
        mut options: UpdateOptions<S::Object>,
        try_update: F,
    ) -> Result<S::Object>
    where
        F: FnMut(S::Object, &ResponseMeta) -> Result<Update<S::Object>> + Send,
    {
        if let Some(current) = self.shared.cached(key) {
            options.cached_existing_object = Some(current);
        }
        self.shared
            .storage
            .guaranteed_update(key, options, try_update)
            .await
    }

    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<S::Object>> {
        self.shared.list(key, options).await
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<S::Object>> {
        self.shared.watch(key, options).await
    }

    async fn count(&self, key: &str) -> Result<i64> {
        self.shared.storage.count(key).await
    }

    async fn readiness_check(&self) -> Result<()> {
        if self.is_ready() {
            Ok(())
        } else {
            Err(StorageError::Internal {
                key: self.shared.settings.resource_prefix.clone(),
                message: "storage not ready".to_owned(),
                source: None,
            })
        }
    }

    async fn request_watch_progress(&self) -> Result<()> {
        self.shared.storage.request_watch_progress().await
    }

    // kube's CacheDelegator passes these to the backend: the revision and the counts
    // are the storage's, not the cache's.
    async fn get_current_resource_version(&self) -> Result<u64> {
        self.shared.storage.get_current_resource_version().await
    }

    async fn stats(&self) -> Result<Stats> {
        self.shared.storage.stats().await
    }

    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()> {
        self.shared.storage.enable_resource_size_estimation(keys)
    }

    /// With snapshots, the revision the cache's snapshots were compacted to (kube's
    /// cacher `compactor`), brought up to the backend's first: the cache answers
    /// nothing below what it reports. Without, the backend's.
    fn compact_revision(&self) -> i64 {
        self.shared.sync_compaction()
    }

    /// With [`CacherConfig::watch_list`](crate::CacherConfig::watch_list) on, the
    /// cache's watchers get their initial events and the end bookmark, where consistent
    /// reads may come from the cache (otherwise it refuses every watch-list, as kube's
    /// cacher does without progress requests).
    fn supports_watch_list(&self) -> bool {
        self.shared.settings.watch_list && self.shared.settings.consistent_reads_from_cache
    }
}
