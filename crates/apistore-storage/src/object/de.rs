//! `Deserialize` for [`DynamicObject`] and [`ObjectMeta`] by hand, with what
//! `#[serde(flatten)]` would do and none of its cost.
//!
//! Derived, a flattened map makes serde buffer every field it does not know (a Pod's
//! whole `spec` and `status`) into its private `Content` tree first and only then build
//! the `serde_json::Value`s from that tree: each such field is built twice. Here the
//! known fields go to their types and every other field straight into a `Value`, as the
//! derived code's result would hold it: the same map, `default` for absent fields,
//! `duplicate field` for a known field given twice, the last of repeated other fields.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

use super::{DynamicObject, Labels, ObjectMeta};

/// A field name: one of `KNOWN` by index, or any other, owned for the map.
enum Key {
    Known(usize),
    Other(String),
}

/// Reads a [`Key`] against a list of known names.
struct KeySeed(&'static [&'static str]);

impl<'de> de::DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl Visitor<'_> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
        Ok(match self.0.iter().position(|known| *known == name) {
            Some(index) => Key::Known(index),
            None => Key::Other(name.to_owned()),
        })
    }

    fn visit_string<E: de::Error>(self, name: String) -> Result<Key, E> {
        Ok(match self.0.iter().position(|known| *known == name) {
            Some(index) => Key::Known(index),
            None => Key::Other(name),
        })
    }

    fn visit_bytes<E: de::Error>(self, name: &[u8]) -> Result<Key, E> {
        match std::str::from_utf8(name) {
            Ok(name) => self.visit_str(name),
            Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(name), &self)),
        }
    }
}

/// Sets a known field once; a second time is serde's `duplicate field` error.
fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
    slot: &mut Option<T>,
    name: &'static str,
) -> Result<(), A::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(name));
    }
    *slot = Some(map.next_value()?);
    Ok(())
}

const OBJECT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

impl<'de> Deserialize<'de> for DynamicObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ObjectVisitor;

        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = DynamicObject;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct DynamicObject")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DynamicObject, A::Error> {
                let (mut api_version, mut kind, mut metadata) = (None, None, None);
                let mut data = Map::new();
                while let Some(key) = map.next_key_seed(KeySeed(OBJECT_FIELDS))? {
                    match key {
                        Key::Known(0) => once(&mut map, &mut api_version, "apiVersion")?,
                        Key::Known(1) => once(&mut map, &mut kind, "kind")?,
                        Key::Known(_) => once(&mut map, &mut metadata, "metadata")?,
                        Key::Other(name) => {
                            data.insert(name, map.next_value::<Value>()?);
                        }
                    }
                }
                Ok(DynamicObject {
                    api_version: api_version.unwrap_or_default(),
                    kind: kind.unwrap_or_default(),
                    metadata: metadata.unwrap_or_default(),
                    data,
                })
            }
        }

        deserializer.deserialize_map(ObjectVisitor)
    }
}

const META_FIELDS: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "selfLink",
    "generation",
    "labels",
    "annotations",
];

impl<'de> Deserialize<'de> for ObjectMeta {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MetaVisitor;

        impl<'de> Visitor<'de> for MetaVisitor {
            type Value = ObjectMeta;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("struct ObjectMeta")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ObjectMeta, A::Error> {
                let (mut name, mut namespace, mut uid, mut resource_version, mut self_link) =
                    (None, None, None, None, None);
                let mut generation: Option<Option<i64>> = None;
                let (mut labels, mut annotations): (Option<Labels>, Option<Labels>) = (None, None);
                let mut extra = Map::new();
                while let Some(key) = map.next_key_seed(KeySeed(META_FIELDS))? {
                    match key {
                        Key::Known(0) => once(&mut map, &mut name, "name")?,
                        Key::Known(1) => once(&mut map, &mut namespace, "namespace")?,
                        Key::Known(2) => once(&mut map, &mut uid, "uid")?,
                        Key::Known(3) => {
                            once(&mut map, &mut resource_version, "resourceVersion")?;
                        }
                        Key::Known(4) => once(&mut map, &mut self_link, "selfLink")?,
                        Key::Known(5) => once(&mut map, &mut generation, "generation")?,
                        Key::Known(6) => once(&mut map, &mut labels, "labels")?,
                        Key::Known(_) => once(&mut map, &mut annotations, "annotations")?,
                        Key::Other(field) => {
                            extra.insert(field, map.next_value::<Value>()?);
                        }
                    }
                }
                Ok(ObjectMeta {
                    name: name.unwrap_or_default(),
                    namespace: namespace.unwrap_or_default(),
                    uid: uid.unwrap_or_default(),
                    resource_version: resource_version.unwrap_or_default(),
                    self_link: self_link.unwrap_or_default(),
                    generation: generation.flatten(),
                    labels: labels.unwrap_or_default(),
                    annotations: annotations.unwrap_or_default(),
                    extra,
                })
            }
        }

        deserializer.deserialize_map(MetaVisitor)
    }
}
