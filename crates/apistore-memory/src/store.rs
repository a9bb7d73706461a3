//! The in-memory store: the state its operations share, and get, create and count.
//! The bytes layering is `apistore_backend::object`'s (shared with the etcd3 store); guaranteed update and delete, list and watch
//! live in their own files.
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

use apistore_backend::ObjectLayers;
use apistore_storage::{ApiObject, Codec, GetOptions, JsonCodec, Result, StorageError, Versioner};
use apistore_value::{IdentityTransformer, Transformer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::hub::WatchHub;
use crate::key::{as_directory, path_prefix, prepare_key};
use crate::kv::MemoryKv;
use crate::lease;
use crate::mvcc::Keys;
use apistore_storage::key_prefix::within;

/// How a store lays out its objects: the etcd3 store's `StoreConfig` without what only
/// a network needs (timeouts, lease reuse).
#[derive(Debug, Clone)]
pub struct MemoryStoreConfig {
    /// The prefix every key is stored under (default `/registry`).
    pub prefix: String,
    /// The group-resource string of the objects (`pods`, `deployments.apps`).
    pub group_resource: String,
    /// The key, relative to the prefix, under which all objects of this resource live
    /// (`/pods`); read for the current revision by watches that need it.
    pub resource_prefix: String,
    /// kube-apiserver's `WatchList` feature gate (off by default, as in v0.31.1).
    pub watch_list: bool,
    /// Refuse keys outside `resource_prefix` (an invalid key error).
    pub confine_keys: bool,
}

impl Default for MemoryStoreConfig {
    fn default() -> Self {
        Self {
            prefix: "/registry".to_owned(),
            group_resource: String::new(),
            resource_prefix: String::new(),
            watch_list: false,
            confine_keys: false,
        }
    }
}

impl MemoryStoreConfig {
    /// A config for one resource under `/registry`: `resource` is the group-resource
    /// string and, with a leading `/`, the resource prefix.
    pub fn for_resource(resource: &str) -> Self {
        Self {
            group_resource: resource.to_owned(),
            resource_prefix: format!("/{resource}"),
            ..Self::default()
        }
    }
}

/// A store of `T` objects in a [`MemoryKv`], behaving as the etcd3 store does in etcd.
pub struct MemoryStore<T> {
    pub(crate) kv: MemoryKv,
    /// Codec, value transformer and versioner.
    pub(crate) layers: ObjectLayers<T>,
    pub(crate) path_prefix: Arc<str>,
    pub(crate) resource_prefix: Arc<str>,
    pub(crate) group_resource: Arc<str>,
    pub(crate) confine_keys: bool,
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
            path_prefix: Arc::clone(&self.path_prefix),
            resource_prefix: Arc::clone(&self.resource_prefix),
            group_resource: Arc::clone(&self.group_resource),
            confine_keys: self.confine_keys,
            watch_list: self.watch_list,
            reads: Arc::clone(&self.reads),
            hub: Arc::clone(&self.hub),
        }
    }
}

impl<T> fmt::Debug for MemoryStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("path_prefix", &self.path_prefix)
            .field("group_resource", &self.group_resource)
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
            layers: ObjectLayers::new(codec, transformer, ()),
            path_prefix: path_prefix(&config.prefix).into(),
            resource_prefix: config.resource_prefix.into(),
            group_resource: config.group_resource.into(),
            confine_keys: config.confine_keys,
            watch_list: config.watch_list,
            reads: Arc::new(AtomicU64::new(0)),
            hub: Arc::new(WatchHub::default()),
        }
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
        &self.path_prefix
    }

    /// The group-resource string of this store.
    pub fn group_resource(&self) -> &str {
        &self.group_resource
    }

    /// The key, relative to the prefix, under which this store's objects live.
    pub fn resource_prefix(&self) -> &str {
        &self.resource_prefix
    }

    /// How many range reads (gets and list pages) this store and its clones made: what
    /// the etcd3 store records as `get` and `list` requests.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// The stored key a caller's key maps to, after validation.
    pub fn prepare_key(&self, key: &str) -> Result<String> {
        if self.confine_keys && !within(key, &self.resource_prefix) {
            return Err(StorageError::InvalidKey {
                key: key.to_owned(),
                problem: "key outside the resource prefix of this store",
            });
        }
        prepare_key(&self.path_prefix, key)
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

    /// Create: "mod revision is 0" then put; the object comes back with the put's
    /// revision.
    pub(crate) fn create_object(&self, key: &str, mut obj: T, ttl: u64) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        if matches!(self.layers.versioner().object_resource_version(&obj), Ok(v) if v != 0) {
            return Err(StorageError::ResourceVersionSetOnCreate { key: prepared });
        }
        let data = self.layers.encode(&prepared, &mut obj)?;
        let mut obj = self.layers.as_written(&prepared, obj, &data)?;
        let deadline = self.deadline(&prepared, ttl)?;
        let stored = self.layers.transform_to_storage(&prepared, data)?;
        let revision = self
            .kv
            .write(|mvcc| mvcc.put_if(&prepared, 0, stored, deadline))
            .map_err(|_| StorageError::KeyExists {
                key: prepared.clone(),
                resource_version: 0,
            })?;
        self.layers.set_revision(&mut obj, revision);
        Ok(obj)
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
