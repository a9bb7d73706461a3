//! Fields a schema does not know: finding them in stored bytes, and carrying them into
//! the bytes that replace them.
//!
//! A value written by a newer kube (or with a feature gate on) can hold protobuf fields
//! the chosen kube version's schema has no name for. Go's generated `Unmarshal` skips
//! them, and so does the decoder, so a read shows the object without them. A write of
//! that object would then delete them from etcd: an older kube-apiserver loses them the
//! same way, apistore must not. Here, a write that replaces stored bytes takes every
//! such field from the old bytes and puts it back into the new ones at the same place
//! in the message tree (fields in tag order, as gogo writes them). Where the change
//! makes the place ambiguous (a list whose length changed, the kind changed) the write
//! is refused with an error naming the field, never carried out with the field gone.
//!
//! This works on the protobuf alone: nothing is decoded to JSON, and bytes without
//! unknown fields (the common case) cost one walk that allocates nothing.
//!
//! `carrier.rs` is the walk itself; this file has what a caller sees of it (the
//! [`UnknownField`] report) and the protobuf helpers the walk uses.

mod carrier;

#[cfg(test)]
mod tests;

pub(crate) use carrier::Carrier;

use apistore_storage::KubeVersion;

use crate::schema::{Message, Schema, Special, Ty};
use crate::wire::{Fields, WireVal};

/// A protobuf field the schema has no name for, found in a stored value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Where in the object: the JSON path of the message holding it
    /// (`spec`, `spec.containers[1]`), `.` for the object itself.
    pub path: String,
    /// The Go type of the message holding it (`k8s.io/api/core/v1.PodSpec`).
    pub message: String,
    /// The protobuf field number.
    pub tag: u32,
    /// The kube version whose schema did not know the field.
    pub read_with: KubeVersion,
    /// Another kube version apistore knows whose schema has the field (the first
    /// newer one, else the newest older one: a field a later kube removed), and the
    /// field's JSON name there; `None` when no version apistore knows has it.
    pub known_from: Option<(KubeVersion, String)>,
}

impl UnknownField {
    /// `spec.resources` when a newer schema names the field, else `spec.<field 40>`.
    pub fn display_path(&self) -> String {
        let name = match &self.known_from {
            Some((_, json)) => json.clone(),
            None => format!("<field {}>", self.tag),
        };
        if self.path == "." {
            name
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// Which kube the field seems to come from, for messages: `kube 1.34 or newer`,
    /// `kube 1.35, removed by 1.36` for a field a later kube dropped, or `a kube newer
    /// than 1.37` when no schema apistore has knows it.
    pub fn origin(&self) -> String {
        match &self.known_from {
            Some((v, _)) if *v > self.read_with => format!("kube {v} or newer"),
            Some((v, _)) => format!("kube {v}, removed by {}", self.read_with),
            None => format!("a kube newer than {}", KubeVersion::LATEST),
        }
    }
}

/// How a field's value nests messages.
enum Shape {
    /// Not a message this walk looks into (scalars, the hand-written special types).
    Leaf,
    /// One message (merged from its occurrences).
    Single(usize),
    /// One message per occurrence.
    Repeated(usize),
    /// Map entries {1: key, 2: message value}.
    Map(usize),
}

fn message_id(schema: &Schema, ty: &Ty) -> Option<usize> {
    match ty {
        Ty::Ptr(inner) => message_id(schema, inner),
        // The special types are Go's hand-written forms (Time, Quantity, ...): their
        // protobuf is fixed and fully known.
        Ty::Msg(id) => matches!(
            schema.messages[*id].special,
            Special::None | Special::WrapSlice
        )
        .then_some(*id),
        _ => None,
    }
}

fn shape(schema: &Schema, ty: &Ty) -> Shape {
    match ty {
        Ty::Slice(inner) => message_id(schema, inner).map_or(Shape::Leaf, Shape::Repeated),
        Ty::Map(inner) => message_id(schema, inner).map_or(Shape::Leaf, Shape::Map),
        _ => message_id(schema, ty).map_or(Shape::Leaf, Shape::Single),
    }
}

/// One field as it sits on the wire, with its whole encoding (key included).
pub(crate) struct RawField<'a> {
    pub(crate) tag: u32,
    pub(crate) val: WireVal<'a>,
    /// The field's whole encoding: key, length and value.
    pub(crate) raw: &'a [u8],
}

/// The fields of a message with their encodings, in wire order.
pub(crate) fn fields_of(bytes: &[u8]) -> Result<Vec<RawField<'_>>, String> {
    let mut out = Vec::new();
    let mut it = Fields::new(bytes);
    let mut start = 0;
    while let Some(item) = it.next() {
        let (tag, val) = item?;
        let end = it.offset();
        out.push(RawField {
            tag,
            val,
            raw: &bytes[start..end],
        });
        start = end;
    }
    Ok(out)
}

/// The value bytes of a map entry's key (field 1) and value (field 2).
fn map_entry(entry: &[u8]) -> Result<(&[u8], Option<&[u8]>), String> {
    let (mut key, mut value) = (&b""[..], None);
    for item in Fields::new(entry) {
        match item? {
            (1, WireVal::Bytes(k)) => key = k,
            (2, WireVal::Bytes(v)) => value = Some(v),
            _ => {}
        }
    }
    Ok((key, value))
}

/// The namespace and name in an object's metadata (every kind's field 1, an
/// ObjectMeta with name at 1 and namespace at 3), empty where absent.
pub(crate) fn object_name(raw: &[u8]) -> (String, String) {
    let (mut namespace, mut name) = (String::new(), String::new());
    for item in Fields::new(raw) {
        let Ok((1, WireVal::Bytes(meta))) = item else {
            continue;
        };
        for field in Fields::new(meta) {
            match field {
                Ok((1, WireVal::Bytes(b))) => name = String::from_utf8_lossy(b).into_owned(),
                Ok((3, WireVal::Bytes(b))) => {
                    namespace = String::from_utf8_lossy(b).into_owned();
                }
                _ => {}
            }
        }
    }
    (namespace, name)
}

/// The first kube version newer than `version` whose schema has field `tag` in the
/// message named `message`, else the newest older one, with the field's JSON name
/// there.
fn known_from(version: KubeVersion, message: &str, tag: u32) -> Option<(KubeVersion, String)> {
    let newer = KubeVersion::ALL.iter().copied().filter(|v| *v > version);
    let older = KubeVersion::ALL
        .iter()
        .rev()
        .copied()
        .filter(|v| *v < version);
    newer.chain(older).find_map(|v| {
        let schema = &crate::KubeProtobuf::for_version(v).schema;
        let m: &Message = schema.message_named(message)?;
        let idx = m.field_for_tag(tag)?;
        Some((v, m.fields[idx].json.to_string()))
    })
}
