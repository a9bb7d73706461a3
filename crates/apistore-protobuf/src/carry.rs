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

use std::collections::HashMap;

use apistore_storage::KubeVersion;

use crate::error::{ProtobufError, Step, WouldDropFields, format_path};
use crate::schema::{Message, Schema, Special, Ty};
use crate::walk::MAX_DEPTH;
use crate::wire::{Fields, WireVal, put_bytes, put_key, put_varint};

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

/// Walks stored protobuf against one schema.
pub(crate) struct Carrier<'s> {
    schema: &'s Schema,
    version: KubeVersion,
    kind: &'s str,
    path: Vec<Step<'s>>,
    depth: usize,
}

impl<'s> Carrier<'s> {
    pub(crate) fn new(schema: &'s Schema, version: KubeVersion, kind: &'s str) -> Self {
        Self {
            schema,
            version,
            kind,
            path: Vec::new(),
            depth: 0,
        }
    }

    /// The carrier of one top-level field's message (`metadata`), so that what it
    /// reports names the field path from the object.
    pub(crate) fn within(mut self, field: &'s str) -> Self {
        self.path.push(Step::Field(field));
        self
    }

    fn malformed(&self, reason: String) -> ProtobufError {
        ProtobufError::Decode {
            kind: self.kind.to_owned(),
            path: format_path(&self.path),
            reason,
        }
    }

    fn enter(&mut self) -> Result<(), ProtobufError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.malformed(format!("nesting deeper than {MAX_DEPTH} messages")));
        }
        Ok(())
    }

    /// Whether message `id` in `bytes` holds a field the schema does not know, at any
    /// depth.
    pub(crate) fn has_unknown(&mut self, id: usize, bytes: &[u8]) -> Result<bool, ProtobufError> {
        self.enter()?;
        let m = &self.schema.messages[id];
        let mut found = false;
        for item in Fields::new(bytes) {
            let (tag, val) = item.map_err(|e| self.malformed(e))?;
            let Some(idx) = m.field_for_tag(tag) else {
                found = true;
                break;
            };
            let WireVal::Bytes(b) = val else { continue };
            let inner = match shape(self.schema, &m.fields[idx].ty) {
                Shape::Leaf => continue,
                Shape::Single(child) | Shape::Repeated(child) => (child, b),
                Shape::Map(child) => match map_entry(b).map_err(|e| self.malformed(e))? {
                    (_, Some(v)) => (child, v),
                    (_, None) => continue,
                },
            };
            if self.has_unknown(inner.0, inner.1)? {
                found = true;
                break;
            }
        }
        self.depth -= 1;
        Ok(found)
    }

    /// Every field of message `id` in `bytes` the schema does not know, with its path.
    pub(crate) fn list_unknown(
        &mut self,
        id: usize,
        bytes: &[u8],
        out: &mut Vec<UnknownField>,
    ) -> Result<(), ProtobufError> {
        self.enter()?;
        let m = &self.schema.messages[id];
        let mut seen: HashMap<u32, usize> = HashMap::new();
        for item in Fields::new(bytes) {
            let (tag, val) = item.map_err(|e| self.malformed(e))?;
            let Some(idx) = m.field_for_tag(tag) else {
                // A repeated unknown field is one field.
                if !out
                    .iter()
                    .any(|u| u.tag == tag && u.path == format_path(&self.path))
                {
                    out.push(UnknownField {
                        path: format_path(&self.path),
                        message: m.name.to_string(),
                        tag,
                        read_with: self.version,
                        known_from: known_from(self.version, &m.name, tag),
                    });
                }
                continue;
            };
            let WireVal::Bytes(b) = val else { continue };
            let f = &m.fields[idx];
            // Inline structs are flattened into their parent's JSON: no path step.
            let step = !f.inline;
            match shape(self.schema, &f.ty) {
                Shape::Leaf => {}
                Shape::Single(child) => {
                    if step {
                        self.path.push(Step::Field(&f.json));
                    }
                    self.list_unknown(child, b, out)?;
                    if step {
                        self.path.pop();
                    }
                }
                Shape::Repeated(child) => {
                    let n = seen.entry(tag).or_insert(0);
                    self.path.push(Step::Field(&f.json));
                    self.path.push(Step::Index(*n));
                    *n += 1;
                    self.list_unknown(child, b, out)?;
                    self.path.pop();
                    self.path.pop();
                }
                Shape::Map(child) => {
                    let (key, value) = map_entry(b).map_err(|e| self.malformed(e))?;
                    if let Some(v) = value {
                        self.path.push(Step::Field(&f.json));
                        self.path
                            .push(Step::Key(String::from_utf8_lossy(key).into_owned()));
                        self.list_unknown(child, v, out)?;
                        self.path.pop();
                        self.path.pop();
                    }
                }
            }
        }
        self.depth -= 1;
        Ok(())
    }

    /// The refusal for a field that cannot be placed in the new bytes.
    pub(crate) fn cannot_carry(&mut self, id: usize, old: &[u8], why: String) -> ProtobufError {
        let mut unknown = Vec::new();
        // The walk already succeeded on these bytes in has_unknown.
        let _ = self.list_unknown(id, old, &mut unknown);
        let fields = unknown
            .iter()
            .map(|u| {
                format!(
                    "{} (protobuf field {} of {}, from {})",
                    u.display_path(),
                    u.tag,
                    u.message,
                    u.origin()
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let newest = unknown
            .iter()
            .filter_map(|u| u.known_from.as_ref().map(|(v, _)| *v))
            .filter(|v| *v > self.version)
            .max();
        let older = unknown
            .iter()
            .filter_map(|u| u.known_from.as_ref().map(|(v, _)| *v))
            .find(|v| *v < self.version);
        let fix = match (newest, older) {
            (Some(v), _) => format!(
                "read and write it with kube version {v} or newer (--kube-version / the builder's kube_version), whose schema has these fields"
            ),
            (None, Some(v)) => format!(
                "kube {v} wrote these fields and a later kube removed them: read and write it with kube version {v} (--kube-version / the builder's kube_version)"
            ),
            (None, None) => "apistore has no schema that knows these fields; change the object with the kube-apiserver that wrote it".to_owned(),
        };
        ProtobufError::WouldDropFields(Box::new(WouldDropFields {
            kind: self.kind.to_owned(),
            version: self.version,
            path: format_path(&self.path),
            fields,
            reason: why,
            fix,
        }))
    }

    /// `new` (the replacing bytes of message `id`) with every field of `old` the schema
    /// does not know put back where it was; `None` when `old` has none (use `new`).
    pub(crate) fn carry(
        &mut self,
        id: usize,
        old: &[u8],
        new: &[u8],
    ) -> Result<Option<Vec<u8>>, ProtobufError> {
        if !self.has_unknown(id, old)? {
            return Ok(None);
        }
        self.enter()?;
        let m = &self.schema.messages[id];
        let old_fields = fields_of(old).map_err(|e| self.malformed(e))?;
        let new_fields = fields_of(new).map_err(|e| self.malformed(e))?;
        let mut pending: Vec<&RawField<'_>> = old_fields
            .iter()
            .filter(|f| m.field_for_tag(f.tag).is_none())
            .collect();
        pending.sort_by_key(|f| f.tag);
        let mut pending = pending.into_iter().peekable();
        let mut out = Vec::with_capacity(new.len() + old.len() / 8);
        // Which occurrence of a repeated field the new bytes are at, per tag.
        let mut occurrence: HashMap<u32, usize> = HashMap::new();
        for nf in &new_fields {
            while let Some(u) = pending.next_if(|u| u.tag < nf.tag) {
                out.extend_from_slice(u.raw);
            }
            let Some(idx) = m.field_for_tag(nf.tag) else {
                out.extend_from_slice(nf.raw);
                continue;
            };
            let f = &m.fields[idx];
            let WireVal::Bytes(new_body) = nf.val else {
                out.extend_from_slice(nf.raw);
                continue;
            };
            let merged = match shape(self.schema, &f.ty) {
                Shape::Leaf => None,
                Shape::Single(child) => {
                    // Go merges a message's occurrences; so do its bytes concatenated.
                    let old_body: Vec<u8> = old_fields
                        .iter()
                        .filter(|o| o.tag == nf.tag)
                        .filter_map(|o| match o.val {
                            WireVal::Bytes(b) => Some(b),
                            _ => None,
                        })
                        .flatten()
                        .copied()
                        .collect();
                    self.step(f, None, |c| c.carry(child, &old_body, new_body))?
                }
                Shape::Repeated(child) => {
                    let olds: Vec<&[u8]> = old_fields
                        .iter()
                        .filter(|o| o.tag == nf.tag)
                        .filter_map(|o| match o.val {
                            WireVal::Bytes(b) => Some(b),
                            _ => None,
                        })
                        .collect();
                    let news = new_fields.iter().filter(|o| o.tag == nf.tag).count();
                    let n = occurrence.entry(nf.tag).or_insert(0);
                    let at = *n;
                    *n += 1;
                    if at == 0 && olds.len() != news {
                        // Elements pair by position only when the list kept its length.
                        for (i, o) in olds.iter().enumerate() {
                            let mut probe = Carrier::new(self.schema, self.version, self.kind);
                            if probe.has_unknown(child, o)? {
                                self.path.push(Step::Field(&f.json));
                                self.path.push(Step::Index(i));
                                let err = self.cannot_carry(
                                    child,
                                    o,
                                    format!(
                                        "{} went from {} to {news} elements, so the old element [{i}] has no place in the new list",
                                        f.json,
                                        olds.len()
                                    ),
                                );
                                return Err(err);
                            }
                        }
                    }
                    match olds.get(at) {
                        Some(old_el) if olds.len() == news => {
                            self.step(f, Some(Step::Index(at)), |c| {
                                c.carry(child, old_el, new_body)
                            })?
                        }
                        _ => None,
                    }
                }
                Shape::Map(child) => {
                    let (key, new_value) = map_entry(new_body).map_err(|e| self.malformed(e))?;
                    let old_value = old_fields
                        .iter()
                        .filter(|o| o.tag == nf.tag)
                        .filter_map(|o| match o.val {
                            WireVal::Bytes(b) => map_entry(b).ok(),
                            _ => None,
                        })
                        .rfind(|(k, _)| *k == key)
                        .and_then(|(_, v)| v);
                    match (old_value, new_value) {
                        (Some(ov), Some(nv)) => {
                            let step = Step::Key(String::from_utf8_lossy(key).into_owned());
                            self.step(f, Some(step), |c| c.carry(child, ov, nv))?
                                .map(|value| {
                                    let mut entry = Vec::with_capacity(key.len() + value.len() + 8);
                                    put_bytes(&mut entry, 1, key);
                                    put_bytes(&mut entry, 2, &value);
                                    entry
                                })
                        }
                        _ => None,
                    }
                }
            };
            match merged {
                Some(body) => {
                    put_key(&mut out, nf.tag, 2);
                    put_varint(&mut out, body.len() as u64);
                    out.extend_from_slice(&body);
                }
                None => out.extend_from_slice(nf.raw),
            }
        }
        for u in pending {
            out.extend_from_slice(u.raw);
        }
        self.depth -= 1;
        Ok(Some(out))
    }

    /// Runs `f` one field (and index or key) deeper in the path.
    fn step<R>(
        &mut self,
        field: &'s crate::schema::Field,
        sub: Option<Step<'s>>,
        f: impl FnOnce(&mut Self) -> Result<R, ProtobufError>,
    ) -> Result<R, ProtobufError> {
        let pushed = usize::from(!field.inline) + usize::from(sub.is_some());
        if !field.inline {
            self.path.push(Step::Field(&field.json));
        }
        if let Some(s) = sub {
            self.path.push(s);
        }
        let result = f(self);
        for _ in 0..pushed {
            self.path.pop();
        }
        result
    }
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

#[cfg(test)]
mod tests {
    use apistore_storage::{Codec, DynamicObject};
    use serde_json::json;

    use super::*;
    use crate::{KubeProtobuf, MediaType, StorageCodec, envelope};

    fn pb() -> &'static KubeProtobuf {
        KubeProtobuf::k8s_1_31()
    }

    /// A field number no kube type uses, in a varint field.
    fn unknown_varint(tag: u32, value: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_key(&mut out, tag, 0);
        put_varint(&mut out, value);
        out
    }

    /// `body` (a message) with the occurrences of `tag` rewritten by `f` (with their
    /// index among that tag's occurrences).
    fn rewrite(body: &[u8], tag: u32, f: &mut dyn FnMut(usize, &[u8]) -> Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        let mut n = 0;
        for field in fields_of(body).unwrap() {
            match field.val {
                WireVal::Bytes(b) if field.tag == tag => {
                    put_bytes(&mut out, tag, &f(n, b));
                    n += 1;
                }
                _ => out.extend_from_slice(field.raw),
            }
        }
        out
    }

    fn pod(containers: usize) -> serde_json::Value {
        let containers: Vec<_> = (0..containers)
            .map(|i| json!({"name": format!("c{i}"), "image": "nginx"}))
            .collect();
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "demo", "uid": "u1"},
            "spec": {"containers": containers, "nodeName": "n1"},
        })
    }

    /// A Pod as a newer kube would store it: field 777 in its PodSpec (spec is Pod's
    /// field 2) and field 778 in its first container (PodSpec's field 2).
    fn newer_pod(containers: usize) -> Vec<u8> {
        let stored = pb().encode_value(&pod(containers)).unwrap();
        let env = envelope::parse(&stored).unwrap();
        let raw = rewrite(env.raw, 2, &mut |_, spec| {
            let mut spec = rewrite(spec, 2, &mut |i, container| {
                let mut c = container.to_vec();
                if i == 0 {
                    c.extend(unknown_varint(778, 5));
                }
                c
            });
            spec.extend(unknown_varint(777, 1));
            spec
        });
        envelope::write("v1", "Pod", &raw)
    }

    #[test]
    fn unknown_fields_are_listed_with_their_paths() {
        let found = pb().unknown_fields(&newer_pod(2)).unwrap();
        let paths: Vec<_> = found.iter().map(UnknownField::display_path).collect();
        assert_eq!(
            paths,
            ["spec.containers[0].<field 778>", "spec.<field 777>"],
            "{found:?}"
        );
        assert_eq!(found[1].message, "k8s.io/api/core/v1.PodSpec");
        assert_eq!(found[1].tag, 777);
        assert!(found[1].origin().starts_with("a kube newer than"));
        assert!(
            pb().unknown_fields(&pb().encode_value(&pod(2)).unwrap())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_update_carries_unknown_fields_and_a_no_op_writes_the_same_bytes() {
        let stored = newer_pod(2);
        let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, pb().version());
        let mut obj = codec.decode(&stored).unwrap();
        // A read shows what the schema knows.
        assert!(!serde_json::to_string(&obj).unwrap().contains("777"));

        let same = codec.encode_replacing(&obj, &stored).unwrap();
        assert_eq!(
            &same[..],
            &stored[..],
            "a no-op update must not change the bytes"
        );

        obj.metadata.labels.insert("tier".into(), "gold".into());
        let written = codec.encode_replacing(&obj, &stored).unwrap();
        let carried = pb().unknown_fields(&written).unwrap();
        assert_eq!(carried, pb().unknown_fields(&stored).unwrap());
        let back = codec.decode(&written).unwrap();
        assert_eq!(back.metadata.labels["tier"], "gold");
        // Without the previous value the fields would be gone: the case this prevents.
        let plain = codec.encode(&obj).unwrap();
        assert!(pb().unknown_fields(&plain).unwrap().is_empty());
    }

    #[test]
    fn a_list_that_changed_length_refuses_rather_than_drops() {
        let stored = newer_pod(2);
        let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, pb().version());
        let mut obj = codec.decode(&stored).unwrap();
        obj.data["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "c9", "image": "busybox"}));
        let err = codec
            .encode_replacing(&obj, &stored)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("spec.containers[0].<field 778>")
                && err.contains("containers went from 2 to 3 elements")
                && err.contains("refusing to write this Pod"),
            "{err}"
        );

        // Elements without unknown fields may come and go freely.
        let mut obj = codec.decode(&stored).unwrap();
        obj.data["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .truncate(1);
        // Element 1 had no unknown field, but the list changed length: element 0's
        // place is still ambiguous, so this is refused too.
        assert!(codec.encode_replacing(&obj, &stored).is_err());
    }

    #[test]
    fn a_changed_kind_or_a_json_write_refuses_rather_than_drops() {
        let stored = newer_pod(1);
        let json = StorageCodec::<DynamicObject>::for_kube(MediaType::Json, pb().version());
        let obj = json.decode(&stored).unwrap();
        let err = json
            .encode_replacing(&obj, &stored)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not the same apiVersion and kind in protobuf"),
            "{err}"
        );
        // Bytes with nothing unknown have nothing to carry.
        let plain = pb().encode_value(&pod(1)).unwrap();
        assert!(json.encode_replacing(&obj, &plain).is_ok());
    }

    #[test]
    fn a_137_pod_read_with_131_keeps_its_pod_level_resources() {
        let new = KubeProtobuf::for_version(KubeVersion::V1_37);
        let mut with_resources = pod(1);
        with_resources["spec"]["resources"] = json!({"limits": {"cpu": "2"}});
        let stored = new.encode_value(&with_resources).unwrap();
        assert!(new.unknown_fields(&stored).unwrap().is_empty());

        // gogo writes a non-pointer scalar even when zero, so a 1.37 Pod always holds
        // status.observedGeneration (1.33), unknown to 1.31 like spec.resources (1.32).
        let found = pb().unknown_fields(&stored).unwrap();
        let named: Vec<_> = found
            .iter()
            .map(|f| (f.display_path(), f.origin()))
            .collect();
        assert_eq!(
            named,
            [
                ("spec.resources".to_owned(), "kube 1.32 or newer".to_owned()),
                (
                    "status.observedGeneration".to_owned(),
                    "kube 1.33 or newer".to_owned()
                )
            ]
        );

        let old = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, KubeVersion::V1_31);
        let mut obj = old.decode(&stored).unwrap();
        assert!(obj.data["spec"].get("resources").is_none());
        obj.metadata.labels.insert("a".into(), "b".into());
        let written = old.encode_replacing(&obj, &stored).unwrap();
        let back: serde_json::Value =
            serde_json::from_slice(&new.decode_to_json(&written).unwrap()).unwrap();
        assert_eq!(back["spec"]["resources"], json!({"limits": {"cpu": "2"}}));
        assert_eq!(back["metadata"]["labels"], json!({"a": "b"}));
    }

    #[test]
    fn creation_timestamp_null_until_134_and_left_out_after() {
        let stored = pb().encode_value(&pod(1)).unwrap();
        for &v in KubeVersion::ALL {
            let text = String::from_utf8(
                KubeProtobuf::for_version(v)
                    .decode_to_json(&stored)
                    .unwrap(),
            )
            .unwrap();
            let has_null = text.contains(r#""creationTimestamp":null"#);
            assert_eq!(has_null, v < KubeVersion::V1_34, "{v}: {text}");
            // The typed path agrees with the text.
            let obj: DynamicObject = KubeProtobuf::for_version(v).decode(&stored).unwrap();
            assert_eq!(
                obj.metadata.extra.contains_key("creationTimestamp"),
                v < KubeVersion::V1_34,
                "{v}"
            );
        }
        let mut stamped = pod(1);
        stamped["metadata"]["creationTimestamp"] = json!("2026-01-02T03:04:05Z");
        let stored = pb().encode_value(&stamped).unwrap();
        let text = String::from_utf8(pb_latest().decode_to_json(&stored).unwrap()).unwrap();
        assert!(
            text.contains(r#""creationTimestamp":"2026-01-02T03:04:05Z""#),
            "{text}"
        );
    }

    fn pb_latest() -> &'static KubeProtobuf {
        KubeProtobuf::latest()
    }

    #[test]
    fn every_embedded_schema_is_the_minor_it_is_filed_under() {
        for &v in KubeVersion::ALL {
            let text = crate::schema::SCHEMA_JSON[v.index()];
            let root: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(root["schema"], format!("k8s-{v}"));
            let kinds = KubeProtobuf::for_version(v).schema.kind_count();
            assert!(kinds > 250, "{v}: {kinds} kinds");
            assert_eq!(KubeProtobuf::for_version(v).version(), v);
        }
        assert!(KubeProtobuf::latest().knows("resource.k8s.io/v1", "DeviceClass"));
        assert!(!pb().knows("resource.k8s.io/v1", "DeviceClass"));
    }

    #[test]
    fn hostile_previous_bytes_are_errors_not_panics() {
        let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, pb().version());
        let obj: DynamicObject = serde_json::from_value(pod(1)).unwrap();
        let good = newer_pod(1);
        for cut in [5, 20, good.len() / 2, good.len() - 3] {
            let _ = codec.encode_replacing(&obj, &good[..cut]);
            let _ = pb().unknown_fields(&good[..cut]);
        }
    }
}
