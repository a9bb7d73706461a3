//! The read-only source `--snapshot FILE` names: an etcd snapshot or a member's data
//! directory opened with `apistore-snapshot` (no etcd process), seen through the same
//! layout, codecs and `--encryption-config` as the online commands, so that a value
//! reads offline exactly as it reads from etcd. Which commands use it is the dispatch's
//! (`commands.rs`); what each prints is theirs.

use std::path::Path;
use std::sync::Arc;

use apistore::layers::value::{EncryptionConfig, IdentityTransformer, Transformer};
use apistore::{
    ApiObject, BuildError, Codec, KubeVersion, MediaType, StorageCodec, StorageEncoding,
    StorageLayout,
};
use apistore_snapshot::{Snapshot, SnapshotStore, SnapshotStoreConfig};

use crate::args::GlobalArgs;
use crate::error::CliError;

/// A snapshot with the cluster's layout, encodings and encryption.
#[derive(Clone)]
pub(crate) struct Offline {
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) layout: StorageLayout,
    pub(crate) kube_version: KubeVersion,
    pub(crate) prefix: String,
    pub(crate) encryption: Option<Arc<EncryptionConfig>>,
    storage_media_type: Option<MediaType>,
    unknown_fields: apistore::UnknownFieldsObserver,
}

impl Offline {
    /// Opens `path` with the global flags' kube version, prefix, media type and
    /// encryption configuration (its `kms` providers reach their plugins as online).
    pub(crate) fn open(global: &GlobalArgs, path: &Path) -> Result<Self, CliError> {
        let kube_version = crate::commands::kube_version(global)?;
        let storage_media_type = crate::commands::storage_media_type(global)?;
        let encryption = match &global.encryption_config {
            Some(config) => Some(Arc::new(read_encryption_config(config)?)),
            None => None,
        };
        // Opened after the flags are checked: a mistake on the command line is reported
        // before a large file is read.
        let snapshot = Snapshot::open(path).map_err(CliError::Snapshot)?;
        Ok(Self {
            snapshot: Arc::new(snapshot),
            layout: StorageLayout::for_kube(kube_version),
            kube_version,
            prefix: global.prefix.clone(),
            encryption,
            storage_media_type,
            unknown_fields: crate::commands::warn_partial_reads(kube_version),
        })
    }

    /// The resource a key belongs to, as online (`--resource` first).
    pub(crate) fn resource_of(&self, global: &GlobalArgs, key: &str) -> Result<String, CliError> {
        crate::keys::resource_of_key(self.layout, global, key)
    }

    /// The value transformer of a resource: the configuration's providers, or identity.
    pub(crate) fn transformer_for(&self, resource: &str) -> Arc<dyn Transformer> {
        match &self.encryption {
            Some(config) => config.transformer_for(resource),
            None => Arc::new(IdentityTransformer),
        }
    }

    /// The codec of a resource, as the facade's: either encoding read, the kube
    /// version's schema, partial reads named on stderr.
    pub(crate) fn codec<T>(&self, resource: &str) -> StorageCodec<T> {
        self.codec_observed(resource, Arc::clone(&self.unknown_fields))
    }

    /// The codec of a resource whose partial reads go to `observer`.
    fn codec_observed<T>(
        &self,
        resource: &str,
        observer: apistore::UnknownFieldsObserver,
    ) -> StorageCodec<T> {
        let encoding = match self.storage_media_type {
            Some(media_type) => media_type,
            None => match self.layout.resource(resource).encoding {
                StorageEncoding::Protobuf => MediaType::Protobuf,
                StorageEncoding::Json => MediaType::Json,
            },
        };
        StorageCodec::for_kube(encoding, self.kube_version).observe_unknown_fields(observer)
    }

    /// A read-only store of `T` objects of `resource` over the snapshot.
    pub(crate) fn store<T>(&self, resource: &str) -> SnapshotStore<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + serde::Serialize + 'static,
        T: serde::de::DeserializeOwned,
    {
        self.store_observed(resource, Arc::clone(&self.unknown_fields))
    }

    /// [`Self::store`], its partial reads told to `observer` instead of stderr.
    pub(crate) fn store_observed<T>(
        &self,
        resource: &str,
        observer: apistore::UnknownFieldsObserver,
    ) -> SnapshotStore<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + serde::Serialize + 'static,
        T: serde::de::DeserializeOwned,
    {
        let codec: Arc<dyn Codec<T>> = Arc::new(self.codec_observed::<T>(resource, observer));
        SnapshotStore::with_parts(
            Arc::clone(&self.snapshot),
            SnapshotStoreConfig {
                prefix: self.prefix.clone(),
            },
            codec,
            self.transformer_for(resource),
        )
    }
}

/// Reads an EncryptionConfiguration file as the facade's builder does.
pub(crate) fn read_encryption_config(path: &Path) -> Result<EncryptionConfig, CliError> {
    let grpc = apistore::layers::value::kms_v2::GrpcKmsConnector;
    EncryptionConfig::from_file_with_kms(path, &grpc).map_err(|source| {
        CliError::Connect(BuildError::Encryption {
            path: path.to_owned(),
            source,
        })
    })
}
