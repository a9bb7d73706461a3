//! The facade without etcd: [`ApiStore::in_memory`] hands out the same typed and dynamic
//! stores as [`ApiStore`], kept in an in-memory key space with etcd's semantics
//! (`apistore-memory`), for unit tests of controllers and anything else that would
//! otherwise need an etcd process.
//!
//! # Why a type of its own
//!
//! [`ApiStore::store`] returns an [`Etcd3Store`](crate::Etcd3Store), a concrete type that
//! the command, the examples and every caller's signatures name. Making it generic, or
//! an enum over backends, would change all of them and put a branch in every request.
//! Instead [`MemoryApiStore`] has the same `store`, `dynamic_store`, `resource_layout`,
//! `layout` and `transformer_for` methods, returning [`MemoryStore`]s; both store types
//! implement [`Storage`](crate::Storage), so code written against `Storage` (as a
//! controller should be) runs on either, and a test swaps one constructor for the
//! other. The stores use the same layout (`apistore-layout`: key prefixes, confined
//! keys) and the same codecs (kube's protobuf for built-ins, JSON for custom
//! resources) and encryption configuration as the etcd facade, so the bytes a test
//! sees are the bytes etcd would hold.
//!
//! ```
//! use apistore::{ApiStore, DynamicObject, GetOptions, Storage};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let api = ApiStore::in_memory();
//! let widgets = api.dynamic_store("widgets.example.com")?;
//! let key = api.resource_layout("widgets.example.com").key("default", "w1");
//! let w = DynamicObject::new("example.com/v1", "Widget", "w1").within("default");
//! let created = widgets.create(&key, w, 0).await?;
//! let read = widgets.get(&key, &GetOptions::default()).await?;
//! assert_eq!(created, read);
//! // The bytes are where kube-apiserver would keep them.
//! assert!(api.kv().raw_get("/registry/example.com/widgets/default/w1").is_some());
//! # Ok::<(), apistore::StorageError>(()) }).unwrap();
//! ```

use std::sync::Arc;

use apistore_layout::{ResourceLayout, StorageLayout};
use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_protobuf::{LazyObject, MediaType, UnknownFieldsObserver};
use apistore_storage::{ApiObject, Codec, DynamicObject, KubeVersion, Result};
use apistore_value::Transformer;
use apistore_value::config::EncryptionConfig;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::recipe::{ObserverSlot, StoreRecipe};
use crate::{ApiStore, ResourceStore};

impl ApiStore {
    /// A facade over a fresh in-memory key space instead of etcd, with kube-apiserver's
    /// defaults (prefix `/registry`, kube's layout and encodings, no encryption).
    pub fn in_memory() -> MemoryApiStore {
        MemoryApiStore::new(MemoryKv::new(KvConfig::default()))
    }
}

/// An [`ApiStore`] without etcd: one in-memory key space that hands out one typed store
/// per resource, laid out and encoded as the etcd facade's.
#[derive(Debug, Clone)]
pub struct MemoryApiStore {
    kv: MemoryKv,
    pub(crate) recipe: StoreRecipe,
}

impl MemoryApiStore {
    /// A facade over `kv` (for a key space with its own [`KvConfig`] or clock), with
    /// kube-apiserver's defaults.
    pub fn new(kv: MemoryKv) -> Self {
        Self {
            kv,
            recipe: StoreRecipe::default(),
        }
    }

    /// The kube minor whose layout and protobuf schema the stores use (builder style;
    /// default the newest known), as [`ApiStoreBuilder::kube_version`](crate::ApiStoreBuilder::kube_version).
    pub fn kube_version(mut self, version: KubeVersion) -> Self {
        self.recipe.set_kube_version(version);
        self
    }

    /// The prefix every key is stored under (builder style; default `/registry`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.recipe.prefix = prefix.into();
        self
    }

    /// Encrypts at rest as this `EncryptionConfiguration` says (builder style).
    pub fn encryption_config(mut self, config: EncryptionConfig) -> Self {
        self.recipe.encryption = Some(Arc::new(config));
        self
    }

    /// Writes every resource in this encoding instead of kube's choice per resource
    /// (builder style), as [`ApiStoreBuilder::storage_media_type`](crate::ApiStoreBuilder::storage_media_type).
    pub fn storage_media_type(mut self, media_type: MediaType) -> Self {
        self.recipe.storage_media_type = Some(media_type);
        self
    }

    /// The key space: raw bytes, revisions, compaction, TTL expiry.
    pub fn kv(&self) -> &MemoryKv {
        &self.kv
    }

    /// kube-apiserver's storage layout, which says where each resource's objects live.
    pub fn layout(&self) -> StorageLayout {
        self.recipe.layout
    }

    /// Tells `observer` of every value a store decodes without some of its fields
    /// (builder style), as [`ApiStoreBuilder::observe_unknown_fields`](crate::ApiStoreBuilder::observe_unknown_fields).
    pub fn observe_unknown_fields(mut self, observer: UnknownFieldsObserver) -> Self {
        self.recipe.unknown_fields = Some(ObserverSlot(observer));
        self
    }

    /// Where and how a resource is stored, as [`ApiStore::resource_layout`].
    pub fn resource_layout(&self, resource: &str) -> ResourceLayout {
        self.recipe.resource_layout(resource)
    }

    /// The store configuration for a resource: kube's key prefix, keys outside it
    /// refused, as [`ApiStore::store_config`].
    pub fn store_config(&self, resource: &str) -> MemoryStoreConfig {
        self.recipe.resource_config(resource)
    }

    /// The value transformer for a resource, as [`ApiStore::transformer_for`].
    pub fn transformer_for(&self, resource: &str) -> Arc<dyn Transformer> {
        self.recipe.transformer_for(resource)
    }

    /// A typed store for a resource, as [`ApiStore::store`]: keys relative to the
    /// prefix and under the resource's key prefix, values read in either encoding and
    /// written as kube-apiserver writes this resource.
    ///
    /// # Errors
    ///
    /// A name the chosen kube version does not know, as [`ApiStore::store`].
    pub fn store<T>(&self, resource: &str) -> Result<MemoryStore<T>>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        let resource = self.recipe.known_resource(resource)?;
        Ok(self.canonical_store(&resource))
    }

    /// [`Self::store`] of a name already made canonical by the layout.
    fn canonical_store<T>(&self, resource: &str) -> MemoryStore<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        self.canonical_store_with(resource, self.recipe.shared_codec(resource))
    }

    /// The store of a canonical resource name with `codec`.
    fn canonical_store_with<T>(&self, resource: &str, codec: Arc<dyn Codec<T>>) -> MemoryStore<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        MemoryStore::with_parts(
            self.kv.clone(),
            self.store_config(resource),
            codec,
            self.transformer_for(resource),
        )
    }

    /// A store of [`LazyObject`]s for a resource, as [`ApiStore::lazy_store`]: the
    /// same bytes and codec the etcd facade's would use.
    ///
    /// # Errors
    ///
    /// A name the chosen kube version does not know, as [`ApiStore::store`].
    pub fn lazy_store(&self, resource: &str) -> Result<MemoryStore<LazyObject>> {
        let resource = self.recipe.known_resource(resource)?;
        Ok(self.canonical_store_with(&resource, self.recipe.lazy_codec(&resource)))
    }

    /// A store of [`DynamicObject`]s for a resource, as [`ApiStore::dynamic_store`].
    ///
    /// # Errors
    ///
    /// A name the chosen kube version does not know, as [`ApiStore::store`].
    pub fn dynamic_store(&self, resource: &str) -> Result<MemoryStore<DynamicObject>> {
        self.store(resource)
    }

    /// The store of a resource as one [`ResourceStore`] handle, as
    /// [`ApiStore::resource_store`]: named as kube names it, by a kubectl short name or
    /// a singular; a name the layout does not know is an error naming the closest.
    pub async fn resource_store<T>(&self, resource: &str) -> Result<ResourceStore<T>>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        Ok(ResourceStore::Memory(self.store(resource)?))
    }

    /// The store of a resource as one [`ResourceStore`] handle of [`LazyObject`]s, as
    /// [`ApiStore::lazy_resource_store`].
    ///
    /// # Errors
    ///
    /// A name the chosen kube version does not know, as [`ApiStore::store`].
    pub async fn lazy_resource_store(&self, resource: &str) -> Result<ResourceStore<LazyObject>> {
        Ok(ResourceStore::Memory(self.lazy_store(resource)?))
    }
}
