//! Any `Serialize` object -> kube's protobuf, with no JSON text in between: a
//! `serde::Serializer` that writes the wire format with the schema as the object's
//! own `Serialize` walks it.
//!
//! The bytes are the ones `encode.rs` writes from the object's JSON text (what
//! `serde_json::to_vec` makes of it), and only those: this writer covers the shapes
//! objects have (structs and maps of strings, numbers, booleans, lists and the
//! special types in their JSON forms) and gives up on anything else, returning
//! `None` so the caller takes the JSON path, which then writes the object or names
//! what is wrong with it. Given up on: a key the schema does not have, a name twice
//! in one object, a value of the wrong JSON type, floats where Go has integers, map
//! keys out of order, the apiextensions schema unions (`JSONSchemaPropsOrBool` and
//! the like), an apiVersion or kind twice, and a top level without both. Every error
//! is the JSON path's to report, so none is reported here.
//!
//! How: a struct's members arrive in the order its `Serialize` writes them, not in
//! protobuf tag order, so each member is written (key and value) at the end of one
//! shared buffer and remembered by its route (the field, through any inline structs);
//! when the struct ends its members are put in tag order, with the zero values Go
//! writes for the fields that had none (`encode.rs` writes those), and copied back
//! over where they were written. Maps arrive sorted (a `BTreeMap`'s order is Go's),
//! lists in order, so neither is reordered.
//!
//! The parts: `value.rs` (one value of a schema type), `members.rs` (a struct's
//! members, a map's entries, a list's elements).

mod members;
mod value;

#[cfg(test)]
mod tests;

use std::fmt;

use serde::Serialize;

use crate::encode::Encoder;
use crate::schema::{Message, Schema, Special, Ty};
use crate::walk::MAX_DEPTH;
use crate::wire::{begin_len, end_len, put_bytes};

use value::ValueSer;

/// The object is not one this writer is sure to write as the JSON path would: take
/// that path. Carries nothing, as it is never shown.
#[derive(Debug)]
pub(crate) struct Fallback;

impl fmt::Display for Fallback {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not written directly; the JSON path writes it")
    }
}

impl std::error::Error for Fallback {}

impl serde::ser::Error for Fallback {
    fn custom<T: fmt::Display>(_msg: T) -> Self {
        Self
    }
}

/// What a value's serializer wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Written {
    /// The value, under its key.
    Value,
    /// Nothing: the value was `null` (the caller writes what null means there).
    Null,
}

/// Where a value sits, which decides what a `null` becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// A struct member: null is absent (the struct writes the field's zero value).
    Member,
    /// A list element: null is the element type's zero value.
    Element,
    /// A Go map's value: null is the value type's zero value (`[]byte` too).
    MapValue,
}

/// The object's apiVersion, its kind's name in the schema, and its protobuf fields
/// (no envelope); `None` when the JSON path must write it.
pub(crate) fn encode<T: Serialize + ?Sized>(
    schema: &Schema,
    object: &T,
) -> Option<(String, String, Vec<u8>)> {
    let mut w = Writer {
        schema,
        encoder: Encoder::new(schema, ""),
        out: Vec::with_capacity(4096),
        depth: 0,
        type_meta: None,
        spare_parts: Vec::new(),
        spare_bytes: Vec::new(),
    };
    object.serialize(value::TopSer { w: &mut w }).ok()?;
    let (api_version, kind) = w.type_meta.take()?;
    Some((api_version, kind, w.out))
}

/// One member written at the end of the shared buffer: `out[start..end]` (nothing
/// when `null`), for the field at the end of `route`.
#[derive(Debug, Clone, Copy)]
struct Part<'s> {
    route: &'s [u16],
    start: usize,
    end: usize,
    null: bool,
}

/// The state one encode shares across its serializers.
pub(crate) struct Writer<'s> {
    schema: &'s Schema,
    /// Writes the zero values of absent fields (`encode.rs`, so they are its bytes).
    encoder: Encoder<'s>,
    /// Every value written so far, members of unfinished structs still in the order
    /// they arrived.
    out: Vec<u8>,
    depth: usize,
    /// (apiVersion, kind) once the top-level object has ended.
    type_meta: Option<(String, String)>,
    /// Buffers of finished structs, for the next ones to reuse.
    spare_parts: Vec<Vec<Part<'s>>>,
    spare_bytes: Vec<Vec<u8>>,
}

impl<'s> Writer<'s> {
    fn enter(&mut self) -> Result<(), Fallback> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(Fallback);
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// Writes `v` as a value of type `ty` under `tag`, at `place`.
    fn value<T: Serialize + ?Sized>(
        &mut self,
        ty: &'s Ty,
        tag: u32,
        v: &T,
        place: Place,
    ) -> Result<Written, Fallback> {
        let ty = match ty {
            // A pointer's target; a list or map of pointers is not a Go shape kube has.
            Ty::Ptr(inner) if place == Place::Member => &**inner,
            Ty::Ptr(_) => return Err(Fallback),
            _ => ty,
        };
        let start = self.out.len();
        let written = match ty {
            Ty::Msg(id) => match self.schema.messages[*id].special {
                // The value's own JSON text, as `serde_json` writes it inside the object.
                Special::RawJson | Special::Json => {
                    let text = serde_json::to_vec(v).map_err(|_| Fallback)?;
                    if text == b"null" {
                        Written::Null
                    } else {
                        let mark = begin_len(&mut self.out, tag);
                        put_bytes(&mut self.out, 1, &text);
                        end_len(&mut self.out, mark);
                        Written::Value
                    }
                }
                // A named slice (`ExtraValue`, `AttestationValue`): a message whose
                // field 1 holds the items; null is the message without items, as
                // `encode.rs` writes it.
                Special::WrapSlice => {
                    let Some(items) = self.schema.messages[*id].tagged(1) else {
                        return Err(Fallback);
                    };
                    self.enter()?;
                    let mark = begin_len(&mut self.out, tag);
                    self.value(&items.ty, 1, v, Place::Member)?;
                    end_len(&mut self.out, mark);
                    self.leave();
                    Written::Value
                }
                Special::OrBool | Special::OrArray | Special::OrStringArray => {
                    return Err(Fallback);
                }
                _ => v.serialize(ValueSer { w: self, ty, tag })?,
            },
            _ => v.serialize(ValueSer { w: self, ty, tag })?,
        };
        if written == Written::Value {
            return Ok(Written::Value);
        }
        self.out.truncate(start);
        match place {
            Place::Member => Ok(Written::Null),
            Place::Element | Place::MapValue => {
                self.encoder
                    .absent_value(ty, tag, &mut self.out)
                    .map_err(|_| Fallback)?;
                Ok(Written::Value)
            }
        }
    }

    /// Puts the members of struct `m` written since `base` in tag order, zero values
    /// for the fields without one, and writes them back from `base`.
    fn finish_struct(
        &mut self,
        m: &'s Message,
        mut parts: Vec<Part<'s>>,
        base: usize,
    ) -> Result<(), Fallback> {
        let mut body = self.spare_bytes.pop().unwrap_or_default();
        body.clear();
        let done = assemble(
            self.schema,
            &mut self.encoder,
            &self.out,
            m,
            &mut parts,
            0,
            &mut body,
        );
        self.out.truncate(base);
        self.out.extend_from_slice(&body);
        self.spare_bytes.push(body);
        parts.clear();
        self.spare_parts.push(parts);
        done
    }

    fn parts(&mut self) -> Vec<Part<'s>> {
        self.spare_parts.pop().unwrap_or_default()
    }
}

/// Writes the fields of `m` in tag order into `body`: for each, its part (bytes in
/// `src`) or its zero value; an inline struct's from the parts routed through it.
/// `d` is how far along the parts' routes `m` is.
fn assemble<'s>(
    schema: &'s Schema,
    encoder: &mut Encoder<'s>,
    src: &[u8],
    m: &'s Message,
    parts: &mut [Part<'s>],
    d: usize,
    body: &mut Vec<u8>,
) -> Result<(), Fallback> {
    if d > 16 {
        return Err(Fallback);
    }
    if parts.iter().all(|p| p.route.len() == d + 1) {
        return assemble_flat(encoder, src, m, parts, d, body);
    }
    let rank = |p: &Part<'_>| {
        p.route
            .get(d)
            .and_then(|&fi| m.rank.get(usize::from(fi)))
            .copied()
            .unwrap_or(u16::MAX)
    };
    // Stable: a name twice keeps its order (and is refused below anyway).
    if !parts.is_sorted_by_key(rank) {
        parts.sort_by_key(rank);
    }
    let mut next = 0;
    for (pos, &fi) in m.by_tag.iter().enumerate() {
        let f = &m.fields[fi];
        let from = next;
        while parts.get(next).is_some_and(|p| usize::from(rank(p)) == pos) {
            next += 1;
        }
        let group = &mut parts[from..next];
        if f.inline {
            let Ty::Msg(child) = f.ty else {
                return Err(Fallback);
            };
            let mark = begin_len(body, f.tag);
            assemble(
                schema,
                encoder,
                src,
                &schema.messages[child],
                group,
                d + 1,
                body,
            )?;
            end_len(body, mark);
            continue;
        }
        match group {
            [] => encoder.absent_field(f, body).map_err(|_| Fallback)?,
            [p] if p.null => encoder.absent_field(f, body).map_err(|_| Fallback)?,
            [p] => body.extend_from_slice(src.get(p.start..p.end).ok_or(Fallback)?),
            // The same name twice: the JSON path keeps the last, with its own rules.
            _ => return Err(Fallback),
        }
    }
    // Parts left are for fields protobuf has no tag for: the JSON path skips them too.
    Ok(())
}

/// [`assemble`] when no member is routed through an inline struct (nearly always):
/// each part put in its field's place, no sorting.
fn assemble_flat<'s>(
    encoder: &mut Encoder<'s>,
    src: &[u8],
    m: &'s Message,
    parts: &[Part<'s>],
    d: usize,
    body: &mut Vec<u8>,
) -> Result<(), Fallback> {
    // Part index by tag rank; structs have a few dozen fields.
    const NONE: u16 = u16::MAX;
    let mut by_rank = [NONE; 128];
    let by_rank = by_rank.get_mut(..m.by_tag.len()).ok_or(Fallback)?;
    for (i, p) in parts.iter().enumerate() {
        let Some(&r) = p.route.get(d).and_then(|&fi| m.rank.get(usize::from(fi))) else {
            return Err(Fallback);
        };
        // Fields protobuf has no tag for: the JSON path skips them too.
        let Some(slot) = by_rank.get_mut(usize::from(r)) else {
            continue;
        };
        if *slot != NONE {
            // The same name twice: the JSON path keeps the last, with its own rules.
            return Err(Fallback);
        }
        *slot = u16::try_from(i).map_err(|_| Fallback)?;
    }
    for (&fi, &slot) in m.by_tag.iter().zip(by_rank.iter()) {
        let f = &m.fields[fi];
        match parts.get(usize::from(slot)) {
            Some(p) if !p.null => body.extend_from_slice(src.get(p.start..p.end).ok_or(Fallback)?),
            // Absent or null; an inline struct with no members is its zero value too.
            _ => encoder.absent_field(f, body).map_err(|_| Fallback)?,
        }
    }
    Ok(())
}
