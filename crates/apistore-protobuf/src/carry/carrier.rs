//! The walk that finds unknown fields and carries them from old bytes into new ones.

use std::collections::HashMap;

use apistore_storage::KubeVersion;

use super::{RawField, Shape, UnknownField, fields_of, known_from, map_entry, shape};
use crate::error::{ProtobufError, Step, WouldDropFields, format_path};
use crate::schema::Schema;
use crate::walk::MAX_DEPTH;
use crate::wire::{Fields, WireVal, put_bytes, put_key, put_varint};

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
