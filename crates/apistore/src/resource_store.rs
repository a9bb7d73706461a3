//! One handle per resource, whatever is behind it: [`ResourceStore`] is the etcd3
//! store, the watch cache over it, or the in-memory store, as kube-rs's `Api<K>` is
//! one type whatever the client talks to. Both facades hand it out
//! ([`ApiStore::resource_store`](crate::ApiStore::resource_store),
//! [`MemoryApiStore::resource_store`](crate::MemoryApiStore::resource_store), and
//! `typed::<K>()` with the `k8s-openapi` feature), so code written against it runs on
//! etcd in production and in memory in a unit test, and [`StoreExt::namespaced`] gives
//! the same namespaced view on all of them.
//!
//! A resource store is confined to its resource's key prefix, and checks on create and
//! update that the object's name and namespace are the ones its key names:
//! kube-apiserver's registry never stores an object under another object's key. A list
//! or watch of the resource's prefix itself is recursive whatever the options say (no
//! object lives at the prefix, so kube's exact-key read there is always empty).

use std::borrow::Cow;
use std::sync::Arc;

#[cfg(feature = "watch-cache")]
use apistore_cacher::Cacher;
use apistore_etcd3::Etcd3Store;
#[cfg(feature = "memory")]
use apistore_memory::MemoryStore;
use apistore_protobuf::LazyObject;
use apistore_storage::{
    ApiObject, Codec, DeleteOptions, GetOptions, KeysFn, ListOptions, ObjectList, ResponseMeta,
    Result, Stats, Storage, StorageError, Update, UpdateOptions, Versioner, WatchStream,
};

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::ApiStore;
use crate::scoped::StoreExt;

/// A store of one resource: the etcd3 store, the watch cache over it, or the in-memory
/// store; a [`Storage`] whichever it is.
// The direct variant is the store callers would hold anyway; boxing it would add an
// indirection to every request of the uncached resources for no gain.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum ResourceStore<T: ApiObject + Clone + Default + Send + Sync + 'static> {
    /// Every request goes to etcd.
    Direct(Etcd3Store<T>),
    /// Reads and watches are served from the watch cache.
    #[cfg(feature = "watch-cache")]
    Cached(Cacher<Etcd3Store<T>>),
    /// Every request goes to an in-memory key space ([`crate::MemoryApiStore`]).
    #[cfg(feature = "memory")]
    Memory(MemoryStore<T>),
}

/// Calls the same method on whichever store is behind a [`ResourceStore`].
macro_rules! each {
    ($self:expr, $store:ident => $call:expr) => {
        match $self {
            ResourceStore::Direct($store) => $call,
            #[cfg(feature = "watch-cache")]
            ResourceStore::Cached($store) => $call,
            #[cfg(feature = "memory")]
            ResourceStore::Memory($store) => $call,
        }
    };
}

impl<T: ApiObject + Clone + Default + Send + Sync + 'static> ResourceStore<T> {
    /// Whether this resource is served from the watch cache.
    pub fn is_cached(&self) -> bool {
        #[cfg(feature = "watch-cache")]
        if matches!(self, Self::Cached(_)) {
            return true;
        }
        false
    }

    /// The key, relative to the store prefix, under which this resource's objects live
    /// (`/configmaps`, `/deployments`, `/example.com/widgets`).
    pub fn resource_prefix(&self) -> &str {
        match self {
            Self::Direct(store) => store.resource_prefix(),
            #[cfg(feature = "watch-cache")]
            Self::Cached(cacher) => cacher.storage().resource_prefix(),
            #[cfg(feature = "memory")]
            Self::Memory(store) => store.resource_prefix(),
        }
    }

    /// The namespace and name `key` gives its object: `<resource prefix>/<ns>/<name>`
    /// or `<resource prefix>/<name>`; `None` for a key of another shape (left to the
    /// store to refuse).
    fn key_names<'k>(&self, key: &'k str) -> Option<(&'k str, &'k str)> {
        let prefix = self.resource_prefix().trim_matches('/');
        let rest = key.trim_start_matches('/').strip_prefix(prefix)?;
        let rest = rest.strip_prefix('/')?;
        match rest.split_once('/') {
            Some((namespace, name)) if !name.contains('/') => Some((namespace, name)),
            Some(_) => None,
            None => Some(("", rest)),
        }
    }

    /// `options`, made recursive when `key` is the resource's own prefix: no object
    /// lives at the prefix itself, so a non-recursive read there (kube's exact-key
    /// semantics) could only ever be empty, and a kube-rs user's
    /// `ListParams::default()` means "all of them".
    fn recursive_at_resource_prefix<'o>(
        &self,
        key: &str,
        options: &'o ListOptions,
    ) -> Cow<'o, ListOptions> {
        let at_prefix = key.trim_matches('/') == self.resource_prefix().trim_matches('/');
        if options.recursive || !at_prefix {
            // The common case: no copy of the options (and their selectors) per request.
            return Cow::Borrowed(options);
        }
        Cow::Owned(ListOptions {
            recursive: true,
            ..options.clone()
        })
    }

    /// Refuses an object whose name or namespace is not the one its key names (a
    /// cluster-scoped key has no namespace segment; an object that leaves either empty
    /// is not checked on it).
    fn check_object_matches_key(&self, key: &str, object: &T) -> Result<()> {
        let Some((namespace, name)) = self.key_names(key) else {
            return Ok(());
        };
        let mismatch = |what: &str, in_object: &str, in_key: &str| {
            StorageError::bad_request(
                key,
                format!(
                    "the {what} of the object ({in_object:?}) does not match the {what} its \
                     key names ({in_key:?}); use the key <resource>/<namespace>/<name> of the object"
                ),
            )
        };
        if !object.name().is_empty() && object.name() != name {
            return Err(mismatch("name", object.name(), name));
        }
        if !object.namespace().is_empty() && object.namespace() != namespace {
            return Err(mismatch("namespace", object.namespace(), namespace));
        }
        Ok(())
    }
}

impl ApiStore {
    /// The store of a resource, named as kube names it (`configmaps`,
    /// `deployments.apps`, `widgets.example.com`), by a kubectl short name (`cm`,
    /// `deploy`) or a singular: with [`ApiStoreBuilder::watch_cache`](crate::ApiStoreBuilder)
    /// naming it (the `watch-cache` feature), a ready watch cache over
    /// [`ApiStore::store`], made on the first call and shared after; otherwise that
    /// store itself.
    ///
    /// # Errors
    ///
    /// A resource the kube version's layout does not know (not a custom resource's
    /// `<plural>.<group>` either), with the closest it knows; the cache's first list of
    /// the resource, if it fails.
    pub async fn resource_store<T>(&self, resource: &str) -> Result<ResourceStore<T>>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        let canonical = self.recipe.known_resource(resource)?;
        let codec = self.recipe.shared_codec(&canonical);
        self.resource_store_with(&canonical, codec).await
    }

    /// The store of a resource as [`Self::resource_store`] gives it, holding
    /// [`LazyObject`]s ([`ApiStore::lazy_store`]): a watch cache of them when the
    /// resource is cached, the representation whose cache holds less per object than
    /// kube-apiserver's (docs/protobuf.md, *Choosing a representation*). Its cache is
    /// its own, beside any cache of another object type for the same resource.
    ///
    /// # Errors
    ///
    /// As [`Self::resource_store`].
    pub async fn lazy_resource_store(&self, resource: &str) -> Result<ResourceStore<LazyObject>> {
        let canonical = self.recipe.known_resource(resource)?;
        let codec = self.recipe.lazy_codec(&canonical);
        self.resource_store_with(&canonical, codec).await
    }

    /// The handle of a canonical resource name whose objects `codec` reads and writes.
    async fn resource_store_with<T>(
        &self,
        canonical: &str,
        codec: Arc<dyn Codec<T>>,
    ) -> Result<ResourceStore<T>>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        #[cfg(feature = "watch-cache")]
        if let Some(cacher) = self
            .cached_store::<T>(canonical, Arc::clone(&codec))
            .await?
        {
            return Ok(ResourceStore::Cached(cacher));
        }
        Ok(ResourceStore::Direct(
            self.canonical_store_with(canonical, codec),
        ))
    }
}

impl<T: ApiObject + Clone + Default + Send + Sync + 'static> StoreExt for ResourceStore<T> {
    fn resource_key_prefix(&self) -> &str {
        self.resource_prefix().trim_start_matches('/')
    }
}

impl<T: ApiObject + Clone + Default + Send + Sync + 'static> Storage for ResourceStore<T> {
    type Object = T;

    fn versioner(&self) -> &dyn Versioner {
        each!(self, store => store.versioner())
    }

    async fn create(&self, key: &str, object: T, ttl: u64) -> Result<T> {
        self.check_object_matches_key(key, &object)?;
        each!(self, store => store.create(key, object, ttl).await)
    }

    async fn get(&self, key: &str, options: &GetOptions) -> Result<T> {
        each!(self, store => store.get(key, options).await)
    }

    async fn delete(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        each!(self, store => store.delete(key, options).await)
    }

    async fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<T>,
        mut try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
    {
        // The updated object must still be the one its key names.
        let checked = |current: T, meta: &ResponseMeta| {
            let update = try_update(current, meta)?;
            self.check_object_matches_key(key, &update.object)?;
            Ok(update)
        };
        each!(self, store => store.guaranteed_update(key, options, checked).await)
    }

    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<T>> {
        let options = self.recursive_at_resource_prefix(key, options);
        each!(self, store => store.list(key, &options).await)
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<T>> {
        let options = self.recursive_at_resource_prefix(key, options);
        each!(self, store => store.watch(key, &options).await)
    }

    async fn count(&self, key: &str) -> Result<i64> {
        each!(self, store => store.count(key).await)
    }

    async fn readiness_check(&self) -> Result<()> {
        each!(self, store => store.readiness_check().await)
    }

    async fn request_watch_progress(&self) -> Result<()> {
        each!(self, store => store.request_watch_progress().await)
    }

    async fn get_current_resource_version(&self) -> Result<u64> {
        each!(self, store => store.get_current_resource_version().await)
    }

    async fn stats(&self) -> Result<Stats> {
        each!(self, store => store.stats().await)
    }

    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()> {
        each!(self, store => store.enable_resource_size_estimation(keys))
    }

    fn compact_revision(&self) -> i64 {
        each!(self, store => store.compact_revision())
    }

    fn supports_watch_list(&self) -> bool {
        each!(self, store => store.supports_watch_list())
    }
}
