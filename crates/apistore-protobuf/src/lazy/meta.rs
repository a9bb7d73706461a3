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
///
/// `stored_only` is a metadata field (by tag) that neither `old` nor `new` holds
/// because it was never decoded (a lazy object's `managedFields`): it is written as
/// stored, every occurrence, where Go's tag order puts it.
pub(super) fn write(
    protobuf: &KubeProtobuf,
    kind: &str,
    field: MetaField,
    old_bytes: &[u8],
    old: &ObjectMeta,
    new: &ObjectMeta,
    stored_only: Option<u32>,
) -> Result<Vec<u8>> {
    let m = message(protobuf, kind, field)?;
    let mut bytes = encode(protobuf, kind, m, new)?;
    if let Some(carried) = Carrier::new(&protobuf.schema, protobuf.version, kind)
        .within("metadata")
        .carry(field.id, old_bytes, &bytes)?
    {
        bytes = carried;
    }
    keep_unchanged(kind, m, old_bytes, old, &bytes, new, stored_only)
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
/// taken from `old_bytes` as stored (all its occurrences, at its first place), and
/// the `stored_only` field's stored occurrences before the first field of a higher
/// tag (or at the end).
fn keep_unchanged(
    kind: &str,
    m: &Message,
    old_bytes: &[u8],
    old: &ObjectMeta,
    new_bytes: &[u8],
    new: &ObjectMeta,
    stored_only: Option<u32>,
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
    // The stored-only field, once written; it is in neither decode, so `new_bytes`
    // has none of it.
    let mut pending = stored_only;
    let write_stored = |out: &mut Vec<u8>, tag: u32| {
        for stored in old_fields.iter().filter(|o| o.tag == tag) {
            out.extend_from_slice(stored.raw);
        }
    };
    for field in &new_fields {
        if let Some(tag) = pending.filter(|&tag| field.tag > tag) {
            write_stored(&mut out, tag);
            pending = None;
        }
        if Some(field.tag) == stored_only {
            // Not expected (neither decode has it): the stored bytes stand.
            continue;
        }
        if !unchanged(field.tag) {
            out.extend_from_slice(field.raw);
        } else if !copied.contains(&field.tag) {
            copied.push(field.tag);
            write_stored(&mut out, field.tag);
        }
    }
    if let Some(tag) = pending {
        write_stored(&mut out, tag);
    }
    Ok(out)
}
