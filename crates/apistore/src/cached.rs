//! The watch cache per resource (the `watch-cache` feature): [`ApiStoreBuilder::watch_cache`]
//! names the resources whose reads and watches kube-apiserver would serve from its
//! cacher, and [`ApiStore::resource_store`] hands out, for any resource, a
//! [`ResourceStore`](crate::ResourceStore): the etcd3 store itself, or a [`Cacher`] over
//! it for the cached resources. Both are a [`Storage`](crate::Storage), so callers do
//! not change when a resource's cache is turned on.
//!
//! One cacher per resource and object type is kept by the [`ApiStore`] (and shared by
//! its clones), so however many callers ask, etcd sees one watch per cached resource.
//!
//! By default the first `resource_store` of a cached resource waits for its cache's
//! first list. A server that starts every store at once and waits for them together,
//! as kube-apiserver does with its `storage-readiness` post-start hook
//! (`WatchCacheInitializationPostStartHook`, on from kube 1.36), turns that off with
//! [`ApiStoreBuilder::watch_cache_background_initialization`] and calls
//! [`ApiStore::wait_for_watch_caches`] before it reports ready; meanwhile the caches
//! answer 429 for what only a ready cache serves, and the rest from etcd.
//!
//! ```no_run
//! use apistore::{ApiStore, DynamicObject, ListOptions, ResourceVersionMatch, Storage};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let api = ApiStore::builder().watch_cache(["pods", "configmaps"]).build().await?;
//! let pods = api.resource_store::<DynamicObject>("pods").await?;
//! assert!(pods.is_cached());
//! let from_memory = pods
//!     .list("pods/default", &ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan))
//!     .await?;
//! # let _ = from_memory; Ok(()) }
//! ```

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics, Readiness, wait_all_ready};
use apistore_etcd3::Etcd3Store;
use apistore_storage::{ApiObject, Codec, Result};

use crate::builder::{ApiStore, ApiStoreBuilder};

/// The cachers made so far, by resource and object type.
type Cachers = Arc<Mutex<HashMap<(String, TypeId), Box<dyn Any + Send + Sync>>>>;

/// Which resources are cached, and the cachers made so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct CacheSettings {
    resources: BTreeSet<String>,
    metrics: Option<CacherMetrics>,
    cachers: Cachers,
    /// The readiness of every cacher made so far, in the order they were made.
    readiness: Arc<Mutex<Vec<Readiness>>>,
    /// Whether `resource_store` returns before the cache's first list lands.
    background_initialization: bool,
}

impl ApiStoreBuilder {
    /// Serves reads and watches of these resources (group-resource strings such as
    /// `pods` or `deployments.apps`) from a watch cache, as kube-apiserver's cacher does:
    /// see [`ApiStore::resource_store`] and `apistore-cacher`. Adds to earlier calls.
    pub fn watch_cache<I, S>(mut self, resources: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.cache
            .resources
            .extend(resources.into_iter().map(Into::into));
        self
    }

    /// Whether [`ApiStore::resource_store`] of a cached resource returns at once, its
    /// cache listing etcd in the background (`true`), or waits for the cache's first
    /// list (`false`, the default). With `true`, wait for every cache before serving
    /// with [`ApiStore::wait_for_watch_caches`], kube's `storage-readiness` post-start
    /// hook; until a cache is ready it answers gets and unfiltered paged lists from
    /// etcd and other lists and watches with 429 "storage is (re)initializing".
    pub fn watch_cache_background_initialization(mut self, on: bool) -> Self {
        self.cache.background_initialization = on;
        self
    }

    /// Registers the watch cache's metrics (`apiserver_watch_cache_*`,
    /// `apiserver_cache_list_*`, ...; from kube 1.37 the caches' lists go to the
    /// storage metrics' `apiserver_storage_list_*` too, when
    /// [`Self::metrics_registry`] is set) into `registry`, with the labels and families of
    /// the kube version chosen so far ([`Self::kube_version`]: call that first; kube
    /// 1.34+ label them `group` and `resource`, earlier kubes `resource`); once per
    /// registry.
    ///
    /// # Errors
    ///
    /// The registry's error if they are registered there already.
    pub fn watch_cache_metrics(
        mut self,
        registry: &prometheus::Registry,
    ) -> Result<Self, prometheus::Error> {
        self.cache.metrics = Some(CacherMetrics::register_for(
            registry,
            self.recipe.kube_version,
        )?);
        Ok(self)
    }
}

impl ApiStore {
    /// The ready watch cache of `resource` (a canonical group-resource) when the
    /// builder named it ([`ApiStoreBuilder::watch_cache`]): made on the first call, over
    /// a store with `codec`, and shared after (one per object type). Consistent reads
    /// come from the cache only when every etcd endpoint answers progress requests
    /// correctly (3.4.31+, 3.5.13+).
    pub(crate) async fn cached_store<T>(
        &self,
        resource: &str,
        codec: Arc<dyn Codec<T>>,
    ) -> Result<Option<Cacher<Etcd3Store<T>>>>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        let settings = &self.cache;
        let cached = settings.resources.iter().any(|named| {
            named == resource
                || self
                    .recipe
                    .known_resource(named)
                    .is_ok_and(|known| known == resource)
        });
        if !cached {
            return Ok(None);
        }
        let id = (resource.to_owned(), TypeId::of::<T>());
        let existing = settings
            .cachers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&id)
            .and_then(|cacher| cacher.downcast_ref::<Cacher<Etcd3Store<T>>>().cloned());
        let cacher = match existing {
            Some(cacher) => cacher,
            None => {
                let store = self.canonical_store_with::<T>(resource, codec);
                let layout = self.resource_layout(resource);
                // The cacher of the recipe's kube: snapshots (Exact and continued lists
                // from memory) from 1.34 on, and kube's one `WatchList` gate at the
                // version's default, the one the etcd3 store is given too (on at 1.32
                // and from 1.34: the cache then fills through a watch-list from 1.35,
                // and serves them, given progress requests).
                let mut config = CacherConfig::new(
                    format!("/{}", layout.key_prefix),
                    layout.group_resource.to_string(),
                )
                .with_kube_version(self.recipe.kube_version);
                config.consistent_reads_from_cache = store
                    .check_request_watch_progress_support()
                    .await
                    .unwrap_or(false);
                // kube 1.37's cacher counts its lists in the storage list families
                // too: the ones this ApiStore's stores record into.
                config.metrics = settings.metrics.clone().map(|cacher| match self.metrics() {
                    Some(storage) => cacher.with_list_observer(Arc::new(storage.clone())),
                    None => cacher,
                });
                let cacher = Cacher::new(store, config);
                // kube 1.35's cacher hands its own keys to the store's size estimate (1.34
                // estimates in the store itself; earlier kubes do not estimate).
                if self.recipe.kube_version >= apistore_storage::KubeVersion::V1_35 {
                    if let Err(err) = cacher.enable_size_estimation_with_cache_keys() {
                        tracing::debug!(resource, error = %err, "size estimation not enabled");
                    }
                }
                let mut cachers = settings
                    .cachers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                // Another caller may have made one meanwhile: keep the first.
                let kept = cachers.entry(id).or_insert_with(|| {
                    settings
                        .readiness
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(cacher.readiness());
                    Box::new(cacher.clone())
                });
                kept.downcast_ref::<Cacher<Etcd3Store<T>>>()
                    .cloned()
                    .unwrap_or(cacher)
            }
        };
        if !settings.background_initialization {
            cacher.wait_until_ready().await?;
        }
        Ok(Some(cacher))
    }

    /// Waits, for at most `timeout`, until every watch cache made so far (by
    /// [`ApiStore::resource_store`] of a cached resource) holds its first list, and
    /// returns the group-resources of those that did not by then, empty when all did.
    /// kube-apiserver's `storage-readiness` post-start hook (on from kube 1.36,
    /// [`DEFAULT_STORAGE_INITIALIZATION_TIMEOUT`](crate::DEFAULT_STORAGE_INITIALIZATION_TIMEOUT) = its one-minute
    /// `StorageInitializationTimeout`): a server calls this after making its stores and
    /// before reporting ready. Like the hook it never fails: a cache that is late goes
    /// on listing and answers 429 meanwhile.
    pub async fn wait_for_watch_caches(&self, timeout: Duration) -> Vec<String> {
        let caches = self
            .cache
            .readiness
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        wait_all_ready(&caches, timeout).await
    }
}
