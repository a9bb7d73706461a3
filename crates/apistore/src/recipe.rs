//! The recipe both facades follow to make a store of a resource: where its keys live
//! (kube's layout for the chosen minor, under the prefix, confined to the resource's key
//! prefix), how its values are encoded (kube's protobuf or JSON, or the media type set),
//! and how they are encrypted (the EncryptionConfiguration's providers for it).
//!
//! [`ApiStore`](crate::ApiStore) and [`MemoryApiStore`](crate::MemoryApiStore) each hold
//! one, so a test on the in-memory facade sees the very bytes, keys and codecs the etcd
//! facade would use.

use std::sync::Arc;

use apistore_backend::ResourceConfig;
use apistore_layout::{ResourceLayout, StorageEncoding, StorageLayout};
use apistore_protobuf::{LazyCodec, LazyObject, MediaType, StorageCodec, UnknownFieldsObserver};
use apistore_storage::{Codec, KubeVersion, StorageError};
use apistore_value::config::EncryptionConfig;
use apistore_value::{IdentityTransformer, Transformer};

/// An observer in a struct that derives `Debug`.
#[derive(Clone)]
pub(crate) struct ObserverSlot(pub(crate) UnknownFieldsObserver);

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UnknownFieldsObserver")
    }
}

/// Layout, codec and transformer choices for every store of one facade.
#[derive(Debug, Clone)]
pub(crate) struct StoreRecipe {
    pub(crate) layout: StorageLayout,
    pub(crate) kube_version: KubeVersion,
    pub(crate) prefix: String,
    pub(crate) storage_media_type: Option<MediaType>,
    pub(crate) encryption: Option<Arc<EncryptionConfig>>,
    pub(crate) unknown_fields: Option<ObserverSlot>,
}

impl Default for StoreRecipe {
    fn default() -> Self {
        Self {
            layout: StorageLayout::for_kube(KubeVersion::LATEST),
            kube_version: KubeVersion::LATEST,
            prefix: "/registry".to_owned(),
            storage_media_type: None,
            encryption: None,
            unknown_fields: None,
        }
    }
}

impl StoreRecipe {
    /// Follows the layout and schema of another kube minor.
    pub(crate) fn set_kube_version(&mut self, version: KubeVersion) {
        self.kube_version = version;
        self.layout = StorageLayout::for_kube(version);
    }

    /// Where and how a resource is stored, after any storage media type override.
    pub(crate) fn resource_layout(&self, resource: &str) -> ResourceLayout {
        let mut layout = self.layout.resource(resource);
        if let Some(media_type) = self.storage_media_type {
            layout.encoding = match media_type {
                MediaType::Protobuf => StorageEncoding::Protobuf,
                MediaType::Json => StorageEncoding::Json,
            };
        }
        layout
    }

    /// The configuration every backend's store of `resource` takes: kube's key prefix,
    /// keys outside it refused, the chosen kube minor and its `WatchList` gate default.
    pub(crate) fn resource_config(&self, resource: &str) -> ResourceConfig {
        let layout = self.layout.resource(resource);
        ResourceConfig {
            prefix: self.prefix.clone(),
            group_resource: layout.group_resource.to_string(),
            resource_prefix: format!("/{}", layout.key_prefix),
            confine_keys: true,
            kube_version: self.kube_version,
            watch_list: apistore_backend::watch_list_default(self.kube_version),
            ..ResourceConfig::default()
        }
    }

    /// The codec of `resource`: reads JSON or protobuf, writes as kube-apiserver writes
    /// the resource, tells the unknown-fields observer of partial reads.
    pub(crate) fn codec<T>(&self, resource: &str) -> StorageCodec<T> {
        let codec = StorageCodec::for_kube(self.media_type(resource), self.kube_version);
        match &self.unknown_fields {
            Some(ObserverSlot(observer)) => codec.observe_unknown_fields(observer.clone()),
            None => codec,
        }
    }

    /// The media type kube-apiserver writes `resource` in (or the one set).
    fn media_type(&self, resource: &str) -> MediaType {
        match self.resource_layout(resource).encoding {
            StorageEncoding::Protobuf => MediaType::Protobuf,
            StorageEncoding::Json => MediaType::Json,
        }
    }

    /// The codec of `resource` for [`LazyObject`]s: the same media type and kube minor
    /// as [`Self::codec`]. It has no unknown-fields observer to tell: a lazy object
    /// keeps the bytes it was read from, and writes carry what its schema does not
    /// know over from them.
    pub(crate) fn lazy_codec(&self, resource: &str) -> Arc<dyn Codec<LazyObject>> {
        Arc::new(LazyCodec::for_kube(
            self.media_type(resource),
            self.kube_version,
        ))
    }

    /// The codec of `resource`, shared.
    pub(crate) fn shared_codec<T>(&self, resource: &str) -> Arc<dyn Codec<T>>
    where
        T: serde::Serialize + serde::de::DeserializeOwned + 'static,
        StorageCodec<T>: Codec<T>,
    {
        Arc::new(self.codec::<T>(resource))
    }

    /// The value transformer of `resource`: the encryption configuration's providers
    /// for it, identity when it is not listed or nothing is configured.
    pub(crate) fn transformer_for(&self, resource: &str) -> Arc<dyn Transformer> {
        match &self.encryption {
            Some(config) => config.transformer_for(resource),
            None => Arc::new(IdentityTransformer),
        }
    }

    /// The group-resource a name stands for in the chosen kube minor's layout (a
    /// group-resource, a kubectl short name or a singular; a custom resource as
    /// `<plural>.<group>`), or an error naming the closest resource it knows: a typo
    /// would otherwise make a key prefix kube-apiserver never reads, to which no
    /// EncryptionConfiguration entry applies.
    pub(crate) fn known_resource(&self, name: &str) -> Result<String, StorageError> {
        self.layout
            .lookup(name)
            .map(|layout| layout.group_resource.to_string())
            .map_err(|err| StorageError::bad_request(name, err.to_string()))
    }
}
