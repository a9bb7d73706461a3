//! [`StorageCodec`]: the protobuf transcoder as an [`apistore_storage::Codec`] for any
//! serde type, reading JSON or protobuf by sniffing and writing the configured one.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;
use std::sync::Arc;

use apistore_storage::{Codec, CodecError, KubeVersion};
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{KubeProtobuf, UnknownField, is_protobuf};

/// The media type a codec writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MediaType {
    /// `application/json`.
    #[default]
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl MediaType {
    /// The MIME type.
    pub const fn mime(self) -> &'static str {
        match self {
            Self::Json => "application/json",
            Self::Protobuf => "application/vnd.kubernetes.protobuf",
        }
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mime())
    }
}

/// The error for an unrecognised media type name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown media type {0:?}: expected json, protobuf, application/json or application/vnd.kubernetes.protobuf"
)]
pub struct ParseMediaTypeError(String);

impl FromStr for MediaType {
    type Err = ParseMediaTypeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "json" | "application/json" => Ok(Self::Json),
            "protobuf" | "application/vnd.kubernetes.protobuf" => Ok(Self::Protobuf),
            other => Err(ParseMediaTypeError(other.to_string())),
        }
    }
}

/// A codec for any serde object type: decodes JSON or kube protobuf (by the
/// `k8s\0` magic, value by value) and encodes with its write media type, with the
/// protobuf schema of one kube minor (the newest apistore knows unless told).
///
/// An update never loses what a read could not show: protobuf fields the schema has
/// no name for (a newer kube wrote them) are carried from the replaced value into the
/// new one ([`Codec::encode_replacing`]), or the write is refused naming them.
///
/// Protobuf is read by the fastest way the type has: k8s-openapi's types by generated
/// code (with the `k8s-openapi` feature), `DynamicObject` by the walk's value tree
/// ([`KubeProtobuf::decode_dynamic`](crate::KubeProtobuf::decode_dynamic)), anything
/// else through serde. A newtype around one of those is "anything else": to keep the
/// fast way, decode with the inner type's codec and wrap the result.
pub struct StorageCodec<T> {
    write: MediaType,
    version: KubeVersion,
    observer: Option<UnknownFieldsObserver>,
    _t: PhantomData<fn() -> T>,
}

/// Told of every value a [`StorageCodec`] decoded without showing all of it: fields
/// its kube version's schema has no name for ([`StorageCodec::observe_unknown_fields`]).
pub type UnknownFieldsObserver = Arc<dyn Fn(&PartialRead) + Send + Sync>;

/// A value read without some of its fields: which object, and which fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialRead {
    /// The object's apiVersion.
    pub api_version: String,
    /// The object's kind.
    pub kind: String,
    /// The object's namespace (empty for a cluster-scoped one).
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// What the read could not show.
    pub fields: Vec<UnknownField>,
}

impl PartialRead {
    /// `Pod demo/p1`, `Node n1`.
    pub fn object(&self) -> String {
        if self.namespace.is_empty() {
            format!("{} {}", self.kind, self.name)
        } else {
            format!("{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

impl<T> StorageCodec<T> {
    /// A codec that writes `write`, with the newest kube schema apistore knows.
    pub const fn new(write: MediaType) -> Self {
        Self::for_kube(write, KubeVersion::LATEST)
    }

    /// A codec that writes `write` as kube `version` does (its protobuf schema).
    pub const fn for_kube(write: MediaType, version: KubeVersion) -> Self {
        Self {
            write,
            version,
            observer: None,
            _t: PhantomData,
        }
    }

    /// Tells `observer` of every value decoded without some of its fields (builder
    /// style): the way to know that a read did not show everything, since the object
    /// itself cannot say so. Values without such fields cost one walk more, with no
    /// allocation.
    pub fn observe_unknown_fields(mut self, observer: UnknownFieldsObserver) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The media type this codec writes.
    pub const fn write_media_type(&self) -> MediaType {
        self.write
    }

    /// The kube minor whose schema this codec reads and writes protobuf with.
    pub const fn kube_version(&self) -> KubeVersion {
        self.version
    }

    fn protobuf(&self) -> &'static KubeProtobuf {
        KubeProtobuf::for_version(self.version)
    }
}

impl<T> Clone for StorageCodec<T> {
    fn clone(&self) -> Self {
        Self {
            write: self.write,
            version: self.version,
            observer: self.observer.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for StorageCodec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageCodec")
            .field("write", &self.write)
            .field("version", &self.version)
            .field("observed", &self.observer.is_some())
            .finish()
    }
}

impl<T> Default for StorageCodec<T> {
    fn default() -> Self {
        Self::new(MediaType::default())
    }
}

impl<T> Codec<T> for StorageCodec<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    fn encode(&self, object: &T) -> Result<Bytes, CodecError> {
        match self.write {
            MediaType::Json => serde_json::to_vec(object)
                .map(Bytes::from)
                .map_err(|e| CodecError::Encode(Box::new(e))),
            MediaType::Protobuf => {
                // Straight from the object's `Serialize` to protobuf when that writer
                // is sure of the bytes (nearly always: ser/)...
                if let Some(b) = self.protobuf().encode_serialize(object) {
                    return Ok(Bytes::from(b));
                }
                // ...else through JSON text, which the encoder reads as Go's decoder
                // would (any key order, the last of repeated keys winning), and which
                // names what is wrong with an object it refuses.
                let text =
                    serde_json::to_vec(object).map_err(|e| CodecError::Encode(Box::new(e)))?;
                match self.protobuf().encode_json(&text) {
                    Ok(b) => Ok(Bytes::from(b)),
                    Err(crate::ProtobufError::UnknownKind {
                        api_version,
                        kind,
                        version,
                    }) => Err(CodecError::Encode(Box::new(UnknownKindForProtobuf {
                        api_version,
                        kind,
                        version,
                    }))),
                    Err(e) => Err(CodecError::Encode(Box::new(e))),
                }
            }
        }
    }

    fn decode(&self, data: &[u8]) -> Result<T, CodecError> {
        if is_protobuf(data) {
            // A k8s-openapi resource by its generated code (the same object, two to
            // three times faster); a DynamicObject through the walk's value tree (no
            // serde visitor calls: 45 µs a bench Pod against 49); any other T
            // straight from the protobuf through serde. None has JSON text between.
            let kp = self.protobuf();
            #[cfg(feature = "k8s-openapi")]
            let decoded = crate::typed::decode_generated::<T>(kp, data)
                .or_else(|| crate::dynamic::decode_if_dynamic::<T>(kp, data))
                .unwrap_or_else(|| kp.decode(data));
            #[cfg(not(feature = "k8s-openapi"))]
            let decoded =
                crate::dynamic::decode_if_dynamic::<T>(kp, data).unwrap_or_else(|| kp.decode(data));
            let object = decoded.map_err(|e| CodecError::Decode(Box::new(e)))?;
            if let Some(observer) = &self.observer {
                if let Some(read) = self.protobuf().partial_read(data) {
                    observer(&read);
                }
            }
            Ok(object)
        } else {
            serde_json::from_slice(data).map_err(|e| CodecError::Decode(Box::new(e)))
        }
    }

    fn encode_replacing(&self, object: &T, previous: &[u8]) -> Result<Bytes, CodecError> {
        let new = self.encode(object)?;
        if !is_protobuf(previous) {
            // JSON is decoded into T whole: what T keeps is T's to say.
            return Ok(new);
        }
        self.protobuf()
            .carry_unknown_fields(previous, new.into())
            .map(Bytes::from)
            .map_err(|e| CodecError::Encode(Box::new(e)))
    }

    fn carries_previous(&self) -> bool {
        true
    }

    /// A protobuf round trip fills in what Go writes for absent fields
    /// (`creationTimestamp: null`, empty `spec` and `status`), so it is not the identity.
    fn round_trips(&self) -> bool {
        self.write == MediaType::Json
    }
}

/// Writing protobuf for a kind the schema does not know.
#[derive(Debug, thiserror::Error)]
#[error(
    "{kind:?} in {api_version:?} has no protobuf encoding in the kube {version} schema (custom resources and unknown kinds are stored as JSON): use MediaType::Json for it, or a newer kube version if it is a built-in kind of one"
)]
struct UnknownKindForProtobuf {
    api_version: String,
    kind: String,
    version: KubeVersion,
}
