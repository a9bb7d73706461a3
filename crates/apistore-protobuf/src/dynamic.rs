//! A [`DynamicObject`] from the value tree of its JSON, without a second pass over
//! the body: `apiVersion`, `kind` and `metadata` are taken out of the top-level map
//! and read as `DynamicObject`'s `Deserialize` reads them, and what is left is the
//! body as it stands. Going through `Deserialize` for the whole object would rebuild
//! every map of the body (serde hands a value over member by member).

use std::any::{Any, TypeId};

use apistore_storage::{DynamicObject, ObjectMeta};
use serde::Deserialize;
use serde_json::Value;

use crate::{KubeProtobuf, ProtobufError, Result};

/// The object `serde_json::from_value::<DynamicObject>(value)` gives, moving the body.
pub(crate) fn from_value(value: Value) -> Result<DynamicObject, serde_json::Error> {
    let Value::Object(mut data) = value else {
        // Not an object: `Deserialize` says why.
        return serde_json::from_value(value);
    };
    let api_version = take::<String>(&mut data, "apiVersion")?;
    let kind = take::<String>(&mut data, "kind")?;
    let metadata = take::<ObjectMeta>(&mut data, "metadata")?;
    Ok(DynamicObject {
        api_version,
        kind,
        metadata,
        data,
    })
}

/// The member `name` read as `T`, or `T`'s default when there is none (the three
/// members are `#[serde(default)]`).
fn take<T: Default + for<'de> Deserialize<'de>>(
    data: &mut serde_json::Map<String, Value>,
    name: &str,
) -> Result<T, serde_json::Error> {
    match data.remove(name) {
        Some(v) => T::deserialize(v),
        None => Ok(T::default()),
    }
}

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
