//! Where a command that reads stored bytes itself (`history`, `analyze`) gets the
//! layout, codec and transformer of a resource: the facade online, the snapshot source
//! offline; and the [`Reader`] that turns a stored value into its object with them.

use std::sync::Arc;

use apistore::layers::value::{EncryptionConfig, Transformer};
use apistore::{ApiStore, Codec, DynamicObject, StorageLayout};
use bytes::Bytes;

use crate::offline::Offline;

/// Where the layout, codecs and transformers the values are read with come from.
#[derive(Clone, Copy)]
pub(crate) enum Layers<'a> {
    /// The facade's.
    Online(&'a ApiStore),
    /// The snapshot source's.
    Offline(&'a Offline),
}

impl Layers<'_> {
    /// kube's storage layout of the chosen kube version.
    pub(crate) fn layout(self) -> StorageLayout {
        match self {
            Self::Online(api) => api.layout(),
            Self::Offline(offline) => offline.layout,
        }
    }

    /// The `--encryption-config`, when given.
    pub(crate) fn encryption(&self) -> Option<&EncryptionConfig> {
        match self {
            Self::Online(api) => api.encryption_config(),
            Self::Offline(offline) => offline.encryption.as_deref(),
        }
    }

    /// The codec of a resource (either encoding read).
    pub(crate) fn codec(self, resource: &str) -> Arc<dyn Codec<DynamicObject>> {
        match self {
            Self::Online(api) => Arc::new(api.codec::<DynamicObject>(resource)),
            Self::Offline(offline) => Arc::new(offline.codec::<DynamicObject>(resource)),
        }
    }

    /// The value transformer of a resource (identity when not encrypted).
    pub(crate) fn transformer(self, resource: &str) -> Arc<dyn Transformer> {
        match self {
            Self::Online(api) => api.transformer_for(resource),
            Self::Offline(offline) => offline.transformer_for(resource),
        }
    }

    /// The reader of `resource`'s values.
    pub(crate) fn reader(self, resource: &str) -> Reader {
        Reader {
            codec: self.codec(resource),
            transformer: self.transformer(resource),
        }
    }
}

/// The codec and transformer of one resource.
pub(crate) struct Reader {
    codec: Arc<dyn Codec<DynamicObject>>,
    transformer: Arc<dyn Transformer>,
}

impl Reader {
    /// The value stored at `etcd_key` decrypted (the codec bytes) and decoded; why not,
    /// in words, when it cannot be.
    pub(crate) fn read(
        &self,
        etcd_key: &str,
        value: &Bytes,
    ) -> Result<(Bytes, DynamicObject), String> {
        let plain = self.decrypt(etcd_key, value)?;
        let object = self
            .codec
            .decode(&plain)
            .map_err(|e| format!("cannot decode: {e}"))?;
        Ok((plain, object))
    }

    /// The value stored at `etcd_key` decrypted: the codec's bytes, not decoded.
    pub(crate) fn decrypt(&self, etcd_key: &str, value: &Bytes) -> Result<Bytes, String> {
        self.transformer
            .transform_from_storage(value.clone(), etcd_key.as_bytes())
            .map(|plain| plain.data)
            .map_err(|e| format!("cannot decrypt: {e}"))
    }
}
