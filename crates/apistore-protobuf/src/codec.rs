//! [`StorageCodec`]: the protobuf transcoder as an [`apistore_storage::Codec`] for any
//! serde type, reading JSON or protobuf by sniffing and writing the configured one.

use std::fmt;
use std::marker::PhantomData;
use std::str::FromStr;

use apistore_storage::{Codec, CodecError};
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{KubeProtobuf, is_protobuf};

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
/// `k8s\0` magic, value by value) and encodes with its write media type.
pub struct StorageCodec<T> {
    write: MediaType,
    _t: PhantomData<fn() -> T>,
}

impl<T> StorageCodec<T> {
    /// A codec that writes `write`.
    pub const fn new(write: MediaType) -> Self {
        Self {
            write,
            _t: PhantomData,
        }
    }

    /// The media type this codec writes.
    pub const fn write_media_type(&self) -> MediaType {
        self.write
    }
}

impl<T> Clone for StorageCodec<T> {
    fn clone(&self) -> Self {
        Self::new(self.write)
    }
}

impl<T> fmt::Debug for StorageCodec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageCodec")
            .field("write", &self.write)
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
                let value =
                    serde_json::to_value(object).map_err(|e| CodecError::Encode(Box::new(e)))?;
                match KubeProtobuf::k8s_1_31().encode_value(&value) {
                    Ok(b) => Ok(Bytes::from(b)),
                    Err(crate::ProtobufError::UnknownKind { api_version, kind }) => {
                        Err(CodecError::Encode(Box::new(UnknownKindForProtobuf {
                            api_version,
                            kind,
                        })))
                    }
                    Err(e) => Err(CodecError::Encode(Box::new(e))),
                }
            }
        }
    }

    fn decode(&self, data: &[u8]) -> Result<T, CodecError> {
        if is_protobuf(data) {
            // Straight from the protobuf into T: no JSON text in between.
            KubeProtobuf::k8s_1_31()
                .decode(data)
                .map_err(|e| CodecError::Decode(Box::new(e)))
        } else {
            serde_json::from_slice(data).map_err(|e| CodecError::Decode(Box::new(e)))
        }
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
    "{kind:?} in {api_version:?} has no protobuf encoding in the k8s 1.31 schema (custom resources and unknown kinds are stored as JSON): use MediaType::Json for it"
)]
struct UnknownKindForProtobuf {
    api_version: String,
    kind: String,
}
