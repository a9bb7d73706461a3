//! A lazy object's metadata written back into its stored protobuf: re-encoded, with
//! what the stored metadata holds that the schema has no name for carried over, and
//! every metadata field whose value did not change copied as stored.
//!
//! Copying unchanged fields keeps their exact bytes where a decode and re-encode would
//! not: the raw JSON of `managedFields[].fieldsV1` is read into `serde_json` values,
//! which do not remember how Go escaped it (`\u003e` or `>`), so a label change would
//! otherwise rewrite every managed field's text into an equal but different form.

use apistore_storage::ObjectMeta;
use serde_json::{Map, Value};

use super::layout::MetaField;
use crate::carry::{Carrier, fields_of};
use crate::encode::Encoder;
use crate::schema::Message;
use crate::{KubeProtobuf, ProtobufError, Result, json_read};

/// The protobuf of the kind's metadata field (no key, no length) for `new`, replacing
/// `old_bytes` (the stored metadata, which decodes to `old`).
pub(super) fn write(
    protobuf: &KubeProtobuf,
    kind: &str,
    field: MetaField,
    old_bytes: &[u8],
    old: &ObjectMeta,
    new: &ObjectMeta,
) -> Result<Vec<u8>> {
    let m = message(protobuf, kind, field)?;
    let mut bytes = encode(protobuf, kind, m, new)?;
    if let Some(carried) = Carrier::new(&protobuf.schema, protobuf.version, kind)
        .within("metadata")
        .carry(field.id, old_bytes, &bytes)?
    {
        bytes = carried;
    }
    keep_unchanged(kind, m, old_bytes, old, &bytes, new)
}

fn message<'s>(protobuf: &'s KubeProtobuf, kind: &str, field: MetaField) -> Result<&'s Message> {
    protobuf
        .schema
        .messages
        .get(field.id)
        .ok_or_else(|| encode_error(kind, "the schema has no message for it".to_owned()))
}

fn encode_error(kind: &str, reason: String) -> ProtobufError {
    ProtobufError::Encode {
        kind: kind.to_owned(),
        path: "metadata".to_owned(),
        reason,
    }
}

/// The metadata as the protobuf of message `m`, through the JSON its serde form is.
fn encode(protobuf: &KubeProtobuf, kind: &str, m: &Message, meta: &ObjectMeta) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(meta).map_err(|e| encode_error(kind, e.to_string()))?;
    let node = json_read::parse(&json)?;
    let mut out = Vec::with_capacity(json.len());
    Encoder::new(&protobuf.schema, kind).nested("metadata", m, &node, &mut out)?;
    Ok(out)
}

/// `new_bytes` with each known field whose value is the same in `old` and `new`
/// taken from `old_bytes` as stored (all its occurrences, at its first place).
fn keep_unchanged(
    kind: &str,
    m: &Message,
    old_bytes: &[u8],
    old: &ObjectMeta,
    new_bytes: &[u8],
    new: &ObjectMeta,
) -> Result<Vec<u8>> {
    let as_map = |meta: &ObjectMeta| match serde_json::to_value(meta) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(encode_error(kind, e.to_string())),
    };
    let (old_json, new_json) = (as_map(old)?, as_map(new)?);
    let malformed = |reason: String| ProtobufError::Decode {
        kind: kind.to_owned(),
        path: "metadata".to_owned(),
        reason,
    };
    let old_fields = fields_of(old_bytes).map_err(malformed)?;
    let new_fields = fields_of(new_bytes).map_err(malformed)?;
    let unchanged = |tag: u32| {
        m.field_for_tag(tag)
            .and_then(|i| m.fields.get(i))
            .filter(|f| !f.inline)
            .is_some_and(|f| old_json.get(&*f.json) == new_json.get(&*f.json))
    };
    let mut out = Vec::with_capacity(new_bytes.len());
    let mut copied: Vec<u32> = Vec::new();
    for field in &new_fields {
        if !unchanged(field.tag) {
            out.extend_from_slice(field.raw);
        } else if !copied.contains(&field.tag) {
            copied.push(field.tag);
            for stored in old_fields.iter().filter(|o| o.tag == field.tag) {
                out.extend_from_slice(stored.raw);
            }
        }
    }
    Ok(out)
}
