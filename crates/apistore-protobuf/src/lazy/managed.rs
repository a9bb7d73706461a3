//! A lazy object's `metadata.managedFields`, left as stored protobuf by a read: found
//! by name in the kind's `metav1.ObjectMeta` (tag 17), cut out of the metadata before it
//! is decoded, walked without building anything so that a read still refuses what a
//! whole decode refuses, and decoded only when the complete metadata is asked for.
//!
//! Most of a decoded Pod's metadata is its managed fields (a `serde_json` tree per
//! entry's `fieldsV1`), and nothing in a store reads them.

use std::fmt;

use apistore_storage::ObjectMeta;
use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;

use super::layout::{Layout, MetaField};
use super::{LazyObject, Stored, split};
use crate::walk::Segs;
use crate::{KubeProtobuf, ProtobufError, Result, de as pb_de};

impl LazyObject {
    /// Moves the managed fields into `metadata`, decoded, so that it is complete and
    /// can be handed out to change. Should they not decode (a read refuses such
    /// bytes, so not for an object read through [`LazyCodec`]), they stay stored and
    /// writes keep them as stored.
    pub(super) fn own_managed_fields(&mut self) {
        if !self.managed_stored {
            return;
        }
        let full = match self.full_metadata.take() {
            Some(full) => Ok(*full),
            None => self.with_managed_fields(),
        };
        if let Ok(full) = full {
            self.metadata = full;
            self.managed_stored = false;
        }
    }

    /// `metadata` with the stored managed fields decoded into it.
    pub(super) fn with_managed_fields(&self) -> Result<ObjectMeta> {
        let mut full = self.metadata.clone();
        if let Some(stored) = &self.stored {
            if let Some(managed) = stored.decode_managed_fields()? {
                full.extra.insert(MANAGED_FIELDS.to_owned(), managed);
            }
        }
        Ok(full)
    }
}

impl Stored {
    /// Decodes `metadata.managedFields`: `None` when the object has none.
    pub(super) fn decode_managed_fields(&self) -> Result<Option<Value>> {
        let (_, kind_name, m, raw) = self.protobuf.open(&self.bytes)?;
        let (field, layout) = split(kind_name, m, raw)?;
        let Some(tag) = managed_tag(self.protobuf, field) else {
            return Ok(None);
        };
        let (_, managed) = layout
            .meta_without(tag)
            .map_err(|reason| malformed_metadata(kind_name, reason))?;
        if managed.is_empty() {
            return Ok(None);
        }
        let only: ManagedOnly = pb_de::deserialize_message(
            &self.protobuf.schema,
            kind_name,
            "metadata",
            field.id,
            Segs::from_vec(managed),
        )?;
        Ok(only.0)
    }
}

/// `metadata.managedFields`' JSON name.
pub(super) const MANAGED_FIELDS: &str = "managedFields";

/// The tag of `managedFields` in the kind's metadata message, when the schema has
/// one (`metav1.ObjectMeta`'s field 17).
pub(super) fn managed_tag(protobuf: &KubeProtobuf, field: MetaField) -> Option<u32> {
    protobuf
        .schema
        .messages
        .get(field.id)?
        .fields
        .iter()
        .find(|f| !f.inline && &*f.json == MANAGED_FIELDS)
        .map(|f| f.tag)
}

fn malformed_metadata(kind: &str, reason: String) -> ProtobufError {
    ProtobufError::Decode {
        kind: kind.to_owned(),
        path: "metadata".to_owned(),
        reason,
    }
}

/// The object's metadata without field `managed` (its managed fields), and whether
/// it has any. They are checked (walked as a decode would, nothing built) so that a
/// later [`LazyObject::metadata`] cannot fail on them and a read refuses what a whole
/// decode refuses.
pub(super) fn decode_partial_metadata(
    protobuf: &KubeProtobuf,
    kind: &str,
    field: MetaField,
    layout: &Layout<'_>,
    managed: u32,
) -> Result<(ObjectMeta, bool)> {
    let (others, taken) = layout
        .meta_without(managed)
        .map_err(|reason| malformed_metadata(kind, reason))?;
    let meta: ObjectMeta = pb_de::deserialize_message(
        &protobuf.schema,
        kind,
        "metadata",
        field.id,
        Segs::from_vec(others),
    )?;
    let has_managed = !taken.is_empty();
    if has_managed {
        pb_de::deserialize_message::<IgnoredAny>(
            &protobuf.schema,
            kind,
            "metadata",
            field.id,
            Segs::from_vec(taken),
        )?;
    }
    Ok((meta, has_managed))
}

/// `managedFields` read from a metadata message holding only them: every other field
/// the walk presents (a null `creationTimestamp`) skipped.
struct ManagedOnly(Option<Value>);

impl<'de> Deserialize<'de> for ManagedOnly {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct ManagedVisitor;

        impl<'de> Visitor<'de> for ManagedVisitor {
            type Value = ManagedOnly;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }

            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<ManagedOnly, A::Error> {
                let mut managed = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == MANAGED_FIELDS {
                        managed = Some(map.next_value::<Value>()?);
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(ManagedOnly(managed))
            }
        }

        deserializer.deserialize_map(ManagedVisitor)
    }
}
