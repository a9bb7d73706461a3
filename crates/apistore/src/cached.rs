//! The watch cache per resource: [`ApiStoreBuilder::watch_cache`] names the resources
//! whose reads and watches kube-apiserver would serve from its cacher, and
//! [`ApiStore::resource_store`] hands out, for any resource, a [`ResourceStore`]: the
//! etcd3 store itself, or a [`Cacher`] over it for the cached resources. Both are a
//! [`Storage`], so callers do not change when a resource's cache is turned on.
//!
//! One cacher per resource and object type is kept by the [`ApiStore`] (and shared by
//! its clones), so however many callers ask, etcd sees one watch per cached resource.
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

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_etcd3::Etcd3Store;
use apistore_storage::{
    ApiObject, DeleteOptions, GetOptions, KeysFn, ListOptions, ObjectList, ResponseMeta, Result,
    Stats, Storage, Update, UpdateOptions, Versioner, WatchStream,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::builder::{ApiStore, ApiStoreBuilder};

/// The cachers made so far, by resource and object type.
type Cachers = Arc<Mutex<HashMap<(String, TypeId), Box<dyn Any + Send + Sync>>>>;

/// Which resources are cached, and the cachers made so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct CacheSettings {
    resources: BTreeSet<String>,
    metrics: Option<CacherMetrics>,
    cachers: Cachers,
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

    /// Registers the watch cache's metrics (`apiserver_watch_cache_*`,
    /// `apiserver_cache_list_*`, ...) into `registry`; once per registry.
    ///
    /// # Errors
    ///
    /// The registry's error if they are registered there already.
    pub fn watch_cache_metrics(
        mut self,
        registry: &prometheus::Registry,
    ) -> Result<Self, prometheus::Error> {
        self.cache.metrics = Some(CacherMetrics::register(registry)?);
        Ok(self)
    }
}

/// A store of one resource: the etcd3 store, or the watch cache over it.
// The direct variant is the store callers would hold anyway; boxing it would add an
// indirection to every request of the uncached resources for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ResourceStore<T: ApiObject + Clone + Default + Send + Sync + 'static> {
    /// Every request goes to etcd.
    Direct(Etcd3Store<T>),
    /// Reads and watches are served from the watch cache.
    Cached(Cacher<Etcd3Store<T>>),
}

impl<T: ApiObject + Clone + Default + Send + Sync + 'static> ResourceStore<T> {
    /// Whether this resource is served from the watch cache.
    pub fn is_cached(&self) -> bool {
        matches!(self, Self::Cached(_))
    }
}

impl ApiStore {
    /// The store of a resource: with [`ApiStoreBuilder::watch_cache`] naming it, a
    /// ready watch cache over [`ApiStore::store`] (made on the first call and shared
    /// after); otherwise that store itself. Consistent reads come from the cache only
    /// when every etcd endpoint answers progress requests correctly (3.4.31+, 3.5.13+).
    ///
    /// # Errors
    ///
    /// The cache's first list of the resource, if it fails.
    pub async fn resource_store<T>(&self, resource: &str) -> Result<ResourceStore<T>>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        let settings = &self.cache;
        if !settings.resources.contains(resource) {
            return Ok(ResourceStore::Direct(self.store(resource)));
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
                let store = self.store::<T>(resource);
                let layout = self.resource_layout(resource);
                let mut config = CacherConfig::new(
                    format!("/{}", layout.key_prefix),
                    layout.group_resource.to_string(),
                );
                config.consistent_reads_from_cache = store
                    .check_request_watch_progress_support()
                    .await
                    .unwrap_or(false);
                config.metrics = settings.metrics.clone();
                let cacher = Cacher::new(store, config);
                let mut cachers = settings
                    .cachers
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                // Another caller may have made one meanwhile: keep the first.
                let kept = cachers
                    .entry(id)
                    .or_insert_with(|| Box::new(cacher.clone()));
                kept.downcast_ref::<Cacher<Etcd3Store<T>>>()
                    .cloned()
                    .unwrap_or(cacher)
            }
        };
        cacher.wait_until_ready().await?;
        Ok(ResourceStore::Cached(cacher))
    }
}

impl<T: ApiObject + Clone + Default + Send + Sync + 'static> Storage for ResourceStore<T> {
    type Object = T;

    fn versioner(&self) -> &dyn Versioner {
        match self {
            Self::Direct(store) => store.versioner(),
            Self::Cached(cacher) => cacher.versioner(),
        }
    }

    async fn create(&self, key: &str, object: T, ttl: u64) -> Result<T> {
        match self {
            Self::Direct(store) => store.create(key, object, ttl).await,
            Self::Cached(cacher) => cacher.create(key, object, ttl).await,
        }
    }

    async fn get(&self, key: &str, options: &GetOptions) -> Result<T> {
        match self {
            Self::Direct(store) => store.get(key, options).await,
            Self::Cached(cacher) => cacher.get(key, options).await,
        }
    }

    async fn delete(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        match self {
            Self::Direct(store) => store.delete(key, options).await,
            Self::Cached(cacher) => cacher.delete(key, options).await,
        }
    }

    async fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<T>,
        try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
    {
        match self {
            Self::Direct(store) => store.guaranteed_update(key, options, try_update).await,
            Self::Cached(cacher) => cacher.guaranteed_update(key, options, try_update).await,
        }
    }

    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<T>> {
        match self {
            Self::Direct(store) => store.list(key, options).await,
            Self::Cached(cacher) => cacher.list(key, options).await,
        }
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<T>> {
        match self {
            Self::Direct(store) => store.watch(key, options).await,
            Self::Cached(cacher) => cacher.watch(key, options).await,
        }
    }

    async fn count(&self, key: &str) -> Result<i64> {
        match self {
            Self::Direct(store) => store.count(key).await,
            Self::Cached(cacher) => cacher.count(key).await,
        }
    }

    async fn readiness_check(&self) -> Result<()> {
        match self {
            Self::Direct(store) => store.readiness_check().await,
            Self::Cached(cacher) => cacher.readiness_check().await,
        }
    }

    async fn request_watch_progress(&self) -> Result<()> {
        match self {
            Self::Direct(store) => store.request_watch_progress().await,
            Self::Cached(cacher) => cacher.request_watch_progress().await,
        }
    }

    async fn get_current_resource_version(&self) -> Result<u64> {
        match self {
            Self::Direct(store) => store.get_current_resource_version().await,
            Self::Cached(cacher) => cacher.get_current_resource_version().await,
        }
    }

    async fn stats(&self) -> Result<Stats> {
        match self {
            Self::Direct(store) => store.stats().await,
            Self::Cached(cacher) => cacher.stats().await,
        }
    }

    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()> {
        match self {
            Self::Direct(store) => store.enable_resource_size_estimation(keys),
            Self::Cached(cacher) => cacher.enable_resource_size_estimation(keys),
        }
    }

    fn compact_revision(&self) -> i64 {
        match self {
            Self::Direct(store) => store.compact_revision(),
            Self::Cached(cacher) => cacher.compact_revision(),
        }
    }
}
