//! The storage codec's way to a [`DynamicObject`]: by
//! [`KubeProtobuf::decode_dynamic`], the walk's value tree, not serde's visitors.

use std::any::{Any, TypeId};

use apistore_storage::DynamicObject;

use crate::{KubeProtobuf, ProtobufError, Result};

/// `stored` decoded by [`KubeProtobuf::decode_dynamic`] when `T` is
/// [`DynamicObject`] (what the storage codec decodes untyped objects with); `None`
/// for any other type, which serde decodes.
pub(crate) fn decode_if_dynamic<T: 'static>(kp: &KubeProtobuf, stored: &[u8]) -> Option<Result<T>> {
    if TypeId::of::<T>() != TypeId::of::<DynamicObject>() {
        return None;
    }
    Some(kp.decode_dynamic(stored).and_then(|object| {
        let boxed: Box<dyn Any> = Box::new(object);
        boxed
            .downcast::<T>()
            .map(|b| *b)
            .map_err(|_| ProtobufError::Decode {
                kind: std::any::type_name::<T>().to_owned(),
                path: ".".to_owned(),
                reason: "a DynamicObject is not this type".to_owned(),
            })
    }))
}
