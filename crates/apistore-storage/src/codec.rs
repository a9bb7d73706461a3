//! Codecs: object <-> bytes, the layer below the value transformer.
//!
//! kube-apiserver stores built-in types as protobuf and custom resources as JSON; the
//! storage layer treats codec output as opaque bytes. JSON is what apistore ships.

use std::marker::PhantomData;

use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// An error from a codec.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The object could not be encoded.
    #[error("encode failed: {0}")]
    Encode(#[source] crate::BoxError),
    /// The bytes could not be decoded into the object type.
    #[error("decode failed: {0}")]
    Decode(#[source] crate::BoxError),
}

/// Turns objects into bytes and back.
pub trait Codec<T>: Send + Sync + 'static {
    /// Encodes an object.
    fn encode(&self, object: &T) -> Result<Bytes, CodecError>;
    /// Decodes bytes into an object.
    fn decode(&self, data: &[u8]) -> Result<T, CodecError>;

    /// Whether decoding what [`Self::encode`] wrote gives back an object equal to the one
    /// encoded. kube-apiserver's store answers a create or update with the object decoded
    /// from the bytes it wrote (so a caller sees what a later read returns: defaults a
    /// protobuf round trip fills in, for one); a codec for which the round trip is the
    /// identity lets a store skip that decode. True unless a codec says otherwise.
    fn round_trips(&self) -> bool {
        true
    }

    /// Encodes `object` to replace `previous`, the plain bytes currently stored under
    /// its key, carrying over what `previous` holds that a decode into `T` could not
    /// show (fields of a newer kube than the codec's schema knows), so a read, a change
    /// and a write lose nothing the caller did not change. An error when something
    /// would be lost that cannot be carried names it. The default encodes `object` as
    /// [`Self::encode`] does: right for a codec whose decode drops nothing.
    fn encode_replacing(&self, object: &T, previous: &[u8]) -> Result<Bytes, CodecError> {
        let _ = previous;
        self.encode(object)
    }

    /// Whether [`Self::encode_replacing`] needs the bytes really stored: a store must
    /// then not stand in a caller's cached object for them (an encoding of a decoded
    /// object has already lost what the decode could not show). False unless a codec
    /// says otherwise.
    fn carries_previous(&self) -> bool {
        false
    }

    /// The plain value `object` was decoded from, when this codec's objects keep it
    /// (`None` by default). A store compares it with the object's encoding: when they
    /// are the same bytes, that value is what was stored at the object's revision, so
    /// a caller's cached object may stand in for a read even when
    /// [`Self::carries_previous`], since carrying over from it loses nothing.
    fn stored_value<'a>(&self, object: &'a T) -> Option<&'a [u8]> {
        let _ = object;
        None
    }
}

/// The JSON codec, for any serde type.
pub struct JsonCodec<T>(PhantomData<fn() -> T>);

impl<T> JsonCodec<T> {
    /// A new JSON codec.
    pub const fn new() -> Self {
        Self(PhantomData)
    }
}

impl<T> Default for JsonCodec<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Clone for JsonCodec<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

impl<T> std::fmt::Debug for JsonCodec<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JsonCodec")
    }
}

impl<T> Codec<T> for JsonCodec<T>
where
    T: Serialize + DeserializeOwned + 'static,
{
    fn encode(&self, object: &T) -> Result<Bytes, CodecError> {
        serde_json::to_vec(object)
            .map(Bytes::from)
            .map_err(|e| CodecError::Encode(Box::new(e)))
    }

    fn decode(&self, data: &[u8]) -> Result<T, CodecError> {
        serde_json::from_slice(data).map_err(|e| CodecError::Decode(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    #[test]
    fn json_codec_round_trips_and_rejects_garbage() {
        let codec = JsonCodec::<DynamicObject>::new();
        let obj = DynamicObject::new("v1", "ConfigMap", "cm");
        let bytes = codec.encode(&obj).unwrap();
        assert_eq!(codec.decode(&bytes).unwrap(), obj);
        let err = codec.decode(b"\x00\xffnot json").unwrap_err();
        assert!(err.to_string().starts_with("decode failed"), "{err}");
    }
}
