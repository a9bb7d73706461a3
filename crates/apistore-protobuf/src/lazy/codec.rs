//! [`LazyCodec`]: [`LazyObject`] as an [`apistore_storage::Codec`], so that an
//! `Etcd3Store<LazyObject>` (or any backend, and the watch cache over it) can hold
//! objects that decode their bodies only when asked.

use apistore_storage::{Codec, CodecError, DynamicObject, KubeVersion};
use bytes::Bytes;

use super::LazyObject;
use crate::{KubeProtobuf, MediaType, Result, StorageCodec};

/// The codec of [`LazyObject`]s: reads kube protobuf lazily (JSON whole) and writes
/// its media type, with the protobuf schema of one kube minor (the newest apistore
/// knows unless told).
///
/// Writing protobuf, an object read from protobuf whose body was not changed is its
/// stored bytes with the metadata re-encoded and spliced in (the stored bytes
/// themselves when the metadata is unchanged too): lossless, unknown fields included.
/// Anything else is encoded whole, as [`StorageCodec`] encodes a [`DynamicObject`],
/// carrying over fields the schema does not know from the bytes the object was read
/// from (or, for an object never stored, from the value it replaces).
///
/// A decode copies the plain bytes once: the object owns exactly its own value, never
/// a slice of a larger read that it would keep alive.
#[derive(Debug, Clone)]
pub struct LazyCodec {
    /// What an object is encoded whole with; its media type and kube version are this
    /// codec's.
    whole: StorageCodec<DynamicObject>,
}

impl LazyCodec {
    /// A codec that writes `write`, with the newest kube schema apistore knows.
    pub const fn new(write: MediaType) -> Self {
        Self::for_kube(write, KubeVersion::LATEST)
    }

    /// A codec that writes `write` as kube `version` does (its protobuf schema).
    pub const fn for_kube(write: MediaType, version: KubeVersion) -> Self {
        Self {
            whole: StorageCodec::for_kube(write, version),
        }
    }

    /// The media type this codec writes.
    pub const fn write_media_type(&self) -> MediaType {
        self.whole.write_media_type()
    }

    /// The kube minor whose schema this codec reads and writes protobuf with.
    pub const fn kube_version(&self) -> KubeVersion {
        self.whole.kube_version()
    }

    fn protobuf(&self) -> &'static KubeProtobuf {
        KubeProtobuf::for_version(self.kube_version())
    }

    /// Encodes `object`, spliced when it can be, else whole; `previous` is the value
    /// it replaces, if any.
    ///
    /// The splice writes the object's own stored bytes, so it is taken only when they
    /// are what is being replaced (the usual guaranteed update: the object was decoded
    /// from `previous`). An object read at another revision is encoded whole and carries
    /// what its schema cannot show from `previous`, as `StorageCodec` does for any
    /// object: fields a newer kube wrote there since are kept, not overwritten by older
    /// bytes.
    fn encode_object(
        &self,
        object: &LazyObject,
        previous: Option<&[u8]>,
    ) -> Result<Bytes, CodecError> {
        let stored = object.stored_bytes().map(|b| &b[..]);
        let replaces_own_bytes = match (previous, stored) {
            (None, _) => true,
            (Some(previous), Some(stored)) => previous == stored,
            (Some(_), None) => false,
        };
        if self.write_media_type() == MediaType::Protobuf && replaces_own_bytes {
            if let Some(bytes) = object
                .spliced(self.protobuf())
                .map_err(|e| CodecError::Encode(Box::new(e)))?
            {
                return Ok(bytes);
            }
        }
        let whole = object
            .to_dynamic()
            .map_err(|e| CodecError::Encode(Box::new(e)))?;
        // What the object's read could not show is in the value it replaces, or else in
        // the bytes it was read from (only protobuf is ever kept).
        match previous.or(stored) {
            Some(from) => self.whole.encode_replacing(&whole, from),
            None => self.whole.encode(&whole),
        }
    }
}

impl Default for LazyCodec {
    fn default() -> Self {
        Self::new(MediaType::default())
    }
}

impl Codec<LazyObject> for LazyCodec {
    fn encode(&self, object: &LazyObject) -> Result<Bytes, CodecError> {
        self.encode_object(object, None)
    }

    fn decode(&self, data: &[u8]) -> Result<LazyObject, CodecError> {
        LazyObject::decode(self.protobuf(), Bytes::copy_from_slice(data))
            .map_err(|e| CodecError::Decode(Box::new(e)))
    }

    fn encode_replacing(&self, object: &LazyObject, previous: &[u8]) -> Result<Bytes, CodecError> {
        self.encode_object(object, Some(previous))
    }

    fn carries_previous(&self) -> bool {
        true
    }

    /// The protobuf the object was read from. A store that finds the object encodes to
    /// these very bytes (body untouched, metadata unchanged but for the resourceVersion
    /// it clears) may start a guaranteed update from it, as from a watch cache's copy,
    /// without reading the key again.
    fn stored_value<'a>(&self, object: &'a LazyObject) -> Option<&'a [u8]> {
        object.stored_bytes().map(|stored| stored.as_ref())
    }

    /// A store answers a write with the object decoded from what it wrote: cheap here
    /// (envelope and metadata), and it leaves the answer holding the bytes now stored.
    fn round_trips(&self) -> bool {
        false
    }
}
