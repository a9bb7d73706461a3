//! The in-memory store: the state its operations share, and get and count. The bytes
//! layering is `apistore_backend::object`'s and the write decisions
//! `apistore_backend::write`'s (both shared with the etcd3 store); create, guaranteed
//! update and delete (`update.rs`), list and watch live in their own files.
//!
//! Every operation does what the etcd3 store does (`pkg/storage/etcd3/store.go` of
//! k8s.io/apiserver v0.31.1) with a [`MemoryKv`] standing in for etcd: the same key
//! preparation, the codec then the value transformer with the stored key as
//! authenticated data, the mod revision as resourceVersion, compare-and-swap writes.
//! Values are transformed and decoded outside the key space's lock, so a transformer
//! may itself call the store.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use apistore_backend::{KeyScope, ObjectLayers, ResourceConfig};
use apistore_storage::{
    ApiObject, Codec, GetOptions, JsonCodec, Result, StorageError, StoredSelector,
};
use apistore_value::{IdentityTransformer, Transformer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::hub::WatchHub;
use crate::kv::MemoryKv;
use crate::lease;
use crate::mvcc::Keys;
use apistore_backend::key::as_directory;

/// How a store lays out its objects: the core every backend takes (prefix, resource,
/// feature gates, kube version), without what only a network needs (timeouts, lease
/// reuse), which the etcd3 store's `StoreConfig` adds.
pub type MemoryStoreConfig = ResourceConfig;

/// A store of `T` objects in a [`MemoryKv`], behaving as the etcd3 store does in etcd.
pub struct MemoryStore<T> {
    pub(crate) kv: MemoryKv,
    /// Codec, value transformer and versioner.
    pub(crate) layers: ObjectLayers<T>,
    /// Where the keys live, and whether they are confined to the resource prefix.
    pub(crate) scope: KeyScope,
    pub(crate) watch_list: bool,
    /// Range reads made, shared by clones (what the etcd3 store counts as `get` and
    /// `list` requests).
    pub(crate) reads: Arc<AtomicU64>,
    pub(crate) hub: Arc<WatchHub>,
}

impl<T> Clone for MemoryStore<T> {
    fn clone(&self) -> Self {
        Self {
            kv: self.kv.clone(),
            layers: self.layers.clone(),
            scope: self.scope.clone(),
            watch_list: self.watch_list,
            reads: Arc::clone(&self.reads),
            hub: Arc::clone(&self.hub),
        }
    }
}

impl<T> fmt::Debug for MemoryStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("path_prefix", &self.scope.path_prefix())
            .field("group_resource", &self.scope.group_resource())
            .field("transformer", self.layers.transformer())
            .finish_non_exhaustive()
    }
}

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// A store of `T` objects in `kv` with the JSON codec and no encryption.
    pub fn new(kv: MemoryKv, config: MemoryStoreConfig) -> Self
    where
        T: Serialize + DeserializeOwned,
    {
        Self::with_parts(
            kv,
            config,
            Arc::new(JsonCodec::<T>::new()),
            Arc::new(IdentityTransformer),
        )
    }

    /// A store with an explicit codec and value transformer.
    pub fn with_parts(
        kv: MemoryKv,
        config: MemoryStoreConfig,
        codec: Arc<dyn Codec<T>>,
        transformer: Arc<dyn Transformer>,
    ) -> Self {
        Self {
            kv,
            layers: {
                let mut layers = ObjectLayers::new(codec, transformer, ());
                layers.set_unsafe_malformed_object_deletion(config.corrupt_object_reporting());
                layers
            },
            scope: config.key_scope(),
            watch_list: config.watch_list,
            reads: Arc::new(AtomicU64::new(0)),
            hub: Arc::new(WatchHub::default()),
        }
    }

    /// Reads a large page of a list back on up to `threads` threads at once (builder
    /// style; 0, the default, for one per core; 1 as kube-apiserver, on the calling
    /// thread alone): see [`ObjectLayers::set_read_threads`](apistore_backend::ObjectLayers::set_read_threads).
    pub fn with_read_threads(mut self, threads: usize) -> Self {
        self.layers.set_read_threads(threads);
        self
    }

    /// Lets a list judge its selectors on each value's stored bytes through
    /// `selector` and decode only the values they keep (builder style; off by default,
    /// as in kube-apiserver): see
    /// [`ObjectLayers::set_stored_selector`](apistore_backend::ObjectLayers::set_stored_selector).
    pub fn with_stored_selector(mut self, selector: Arc<dyn StoredSelector>) -> Self {
        self.layers.set_stored_selector(Some(selector));
        self
    }

    /// Replaces the value transformer (builder style).
    pub fn with_transformer(mut self, transformer: Arc<dyn Transformer>) -> Self {
        self.layers.set_transformer(transformer);
        self
    }

    /// Turns kube-apiserver's `WatchList` feature gate on or off (builder style).
    pub fn with_watch_list(mut self, enabled: bool) -> Self {
        self.watch_list = enabled;
        self
    }

    /// Turns kube's `AllowUnsafeMalformedObjectDeletion` behaviour on or off for this
    /// store (builder style; the default follows the kube version, see
    /// [`ResourceConfig::allow_unsafe_malformed_object_deletion`](apistore_backend::ResourceConfig::allow_unsafe_malformed_object_deletion)).
    pub fn with_unsafe_malformed_object_deletion(mut self, enabled: bool) -> Self {
        self.layers.set_unsafe_malformed_object_deletion(
            enabled.then(|| Arc::clone(self.scope.group_resource_arc())),
        );
        self
    }

    /// The key space this store keeps its objects in.
    pub fn kv(&self) -> &MemoryKv {
        &self.kv
    }

    /// The value transformer.
    pub fn transformer(&self) -> &Arc<dyn Transformer> {
        self.layers.transformer()
    }

    /// The normalised path prefix every key is joined to (`/registry/`).
    pub fn path_prefix(&self) -> &str {
        self.scope.path_prefix()
    }

    /// The group-resource string of this store.
    pub fn group_resource(&self) -> &str {
        self.scope.group_resource()
    }

    /// The key, relative to the prefix, under which this store's objects live.
    pub fn resource_prefix(&self) -> &str {
        self.scope.resource_prefix()
    }

    /// How many range reads (gets and list pages) this store and its clones made: what
    /// the etcd3 store records as `get` and `list` requests.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// The stored key a caller's key maps to, after validation.
    pub fn prepare_key(&self, key: &str) -> Result<String> {
        self.scope.prepare_key(key)
    }

    pub(crate) fn count_read(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
    }

    /// The TTL deadline of a write, starting the expiry task when there is one.
    pub(crate) fn deadline(&self, key: &str, ttl: u64) -> Result<Option<std::time::Duration>> {
        let deadline = lease::deadline(key, self.kv.shared.clock.now(), ttl)?;
        if deadline.is_some() {
            self.kv.ensure_reaper();
        }
        Ok(deadline)
    }

    /// Get: the latest value, then the minimum-resourceVersion check (before the
    /// existence check, as the etcd3 store).
    pub(crate) fn get_object(&self, key: &str, options: &GetOptions) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        self.count_read();
        let (kv, revision) = {
            let mvcc = self.kv.read();
            (mvcc.get(&prepared), mvcc.revision())
        };
        self.layers.validate_minimum_resource_version(
            &prepared,
            &options.resource_version,
            revision,
        )?;
        let Some(kv) = kv else {
            if options.ignore_not_found {
                return Ok(T::default());
            }
            return Err(StorageError::not_found(prepared));
        };
        self.layers
            .decode_stored(&prepared, kv.value, kv.mod_revision)
    }

    /// Count: the live keys under `key/`.
    pub(crate) fn count_objects(&self, key: &str) -> Result<i64> {
        let prepared = as_directory(self.prepare_key(key)?);
        let keys = Keys::Prefix {
            start: &prepared,
            prefix: &prepared,
        };
        let range = self
            .kv
            .read()
            .range(&keys, 0, 0)
            .map_err(|err| crate::kv::revision_error(&prepared, err))?;
        Ok(range.count)
    }
}
