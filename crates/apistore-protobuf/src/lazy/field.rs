//! One scalar of a lazy object's body read by its JSON path straight from the stored
//! protobuf, without decoding the body: what a field selector on a body field
//! (`spec.nodeName` of a Pod) needs from each of the objects a list reads.
//!
//! The walk follows the kind's schema as a whole decode does (`walk.rs`): the JSON name
//! of each step gives the field and its protobuf tag, every occurrence of a message
//! field is merged (Go's `Unmarshal`), the last occurrence of a scalar wins, and
//! [`slot`] says whether Go's JSON leaves the field out, writes `null`, or writes a
//! value. So the answer is what [`LazyObject::body`] would show at that path, which
//! the tests check for every golden fixture.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::Value;

use super::LazyObject;
use crate::schema::{Field, Message, Schema, Special, Ty};
use crate::walk::{MAX_DEPTH, Segs, Slot, map_entries, slot, wire_fits};
use crate::wire::{Fields, WireVal};
use crate::{KubeProtobuf, ProtobufError, Result, de as pb_de};

impl LazyObject {
    /// The text of the scalar at the JSON field `path` of the object (`["spec",
    /// "nodeName"]`), as [`Self::body`] would show it, without decoding the body: read
    /// from the stored protobuf, or from the body when it is decoded or owned already.
    /// A string is borrowed from the stored bytes when it can be; a boolean is `true`
    /// or `false`, an integer its decimal digits, a `[]byte` its base64; a time, a
    /// quantity or an int-or-string their JSON text.
    ///
    /// `Ok(None)` when the field is absent, `null`, or left out of the JSON (an empty
    /// `omitempty` field), and for names the kind's schema does not have (as the body
    /// would have nothing there). `apiVersion` and `kind` read as themselves; the
    /// metadata is read with [`Self::metadata`].
    ///
    /// # Errors
    ///
    /// [`ProtobufError::NotText`] when the path ends at an object, a list, a map or a
    /// float, goes through a scalar, or starts at `metadata`; [`ProtobufError::Decode`]
    /// for malformed protobuf on the way, named by kind and path. Never a panic.
    pub fn field_str(&self, path: &[&str]) -> Result<Option<Cow<'_, str>>> {
        let not_text = |reason: &str| ProtobufError::NotText {
            kind: self.kind.clone(),
            path: path.join("."),
            reason: reason.to_owned(),
        };
        match path {
            [] => return Err(not_text("an empty path")),
            ["apiVersion"] => return Ok(Some(Cow::Borrowed(&self.api_version))),
            ["kind"] => return Ok(Some(Cow::Borrowed(&self.kind))),
            ["apiVersion" | "kind", ..] => return Err(not_text("a path through a string")),
            ["metadata", ..] => return Err(not_text("metadata is read with metadata()")),
            _ => {}
        }
        match &self.stored {
            Some(stored) if !self.is_body_decoded() => {
                read_stored(stored.protobuf, &stored.bytes, path)
            }
            _ => read_value(self.body()?, path).map_err(|reason| not_text(&reason)),
        }
    }
}

/// The scalar at `path` of a decoded body, as text.
fn read_value<'v>(
    body: &'v serde_json::Map<String, Value>,
    path: &[&str],
) -> Result<Option<Cow<'v, str>>, String> {
    let Some((first, rest)) = path.split_first() else {
        return Err("an empty path".to_owned());
    };
    let Some(mut value) = body.get(*first) else {
        return Ok(None);
    };
    for name in rest {
        value = match value {
            Value::Object(map) => match map.get(*name) {
                Some(value) => value,
                None => return Ok(None),
            },
            Value::Null => return Ok(None),
            other => return Err(format!("a path through {}", what(other))),
        };
    }
    Ok(match value {
        Value::Null => None,
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Bool(b) => Some(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(Cow::Owned(n.to_string())),
        other => return Err(format!("the value is {}", what(other))),
    })
}

fn what(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number that is not an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The scalar at `path` (not empty, not into metadata) of the stored protobuf.
fn read_stored<'b>(
    protobuf: &'static KubeProtobuf,
    bytes: &'b [u8],
    path: &[&str],
) -> Result<Option<Cow<'b, str>>> {
    let (_, kind, m, raw) = protobuf.open(bytes)?;
    let reader = Reader {
        schema: &protobuf.schema,
        kind,
        path,
    };
    reader.read(m, Segs::One(raw))
}

/// One read's context: for the walk and for the errors it names.
struct Reader<'s, 'p> {
    schema: &'s Schema,
    kind: &'s str,
    path: &'p [&'p str],
}

impl<'s> Reader<'s, '_> {
    fn not_text(&self, reason: impl Into<String>) -> ProtobufError {
        ProtobufError::NotText {
            kind: self.kind.to_owned(),
            path: self.path.join("."),
            reason: reason.into(),
        }
    }

    /// Malformed protobuf at the first `depth` steps of the path.
    fn malformed(&self, depth: usize, reason: impl Into<String>) -> ProtobufError {
        let at = self.path.get(..depth).unwrap_or(self.path);
        ProtobufError::Decode {
            kind: self.kind.to_owned(),
            path: if at.is_empty() {
                ".".to_owned()
            } else {
                at.join(".")
            },
            reason: reason.into(),
        }
    }

    /// Walks the path from message `m` (its merged occurrences `segs`).
    fn read<'b>(&self, m: &'s Message, segs: Segs<'b>) -> Result<Option<Cow<'b, str>>> {
        let (mut m, mut segs) = (m, segs);
        for (depth, name) in self.path.iter().enumerate() {
            let last = depth + 1 == self.path.len();
            let chain = find(self.schema, m, name).unwrap_or_default();
            let Some((&field, inlines)) = chain.split_last() else {
                return Ok(None);
            };
            // Inline structs first (their fields are this level's in JSON), then the
            // field itself.
            let mut field_segs = segs;
            let mut owner = m;
            for inline in inlines {
                let vals = self.occurrences(owner, inline, &field_segs, depth)?;
                let Ty::Msg(id) = inline.ty else {
                    return Err(self.not_text("an inline field that is not a struct"));
                };
                owner = self.message(id)?;
                field_segs = Segs::of(&vals);
            }
            let vals = self.occurrences(owner, field, &field_segs, depth)?;
            let shown = slot(
                self.schema,
                &field.ty,
                field.omitempty,
                field.omitzero,
                &vals,
            )
            .map_err(|reason| self.malformed(depth + 1, reason))?;
            let Some(shown) = shown else {
                return Ok(None);
            };
            let next = match shown {
                Slot::Null => return Ok(None),
                Slot::Zero(ty) if last => return Ok(zero_text(ty)),
                Slot::Scalar(ty, v) if last => return self.scalar_text(ty, v, depth + 1),
                Slot::Present(ty) => match ty {
                    Ty::Msg(id) => Some((*id, Segs::of(&vals))),
                    _ if last => match vals.last() {
                        Some(&(_, v)) => return self.scalar_text(ty, v, depth + 1),
                        None => return Ok(None),
                    },
                    _ => None,
                },
                Slot::Message(id) => Some((id, Segs::of(&vals))),
                Slot::Map(inner) if depth + 2 == self.path.len() => {
                    return self.map_value(inner, &vals, depth + 1);
                }
                _ => None,
            };
            let Some((id, inner)) = next else {
                return Err(self.not_text(format!(
                    "{} is {}",
                    self.path[..=depth].join("."),
                    shape(&field.ty)
                )));
            };
            let message = self.message(id)?;
            if message.special != Special::None {
                // A time, a quantity, raw JSON (a RawExtension): its JSON is Go's
                // writing of the whole value, so decode that and read on in it.
                return self.special_text(id, inner, &self.path[depth + 1..]);
            }
            if last {
                return Err(self.not_text("the value is an object"));
            }
            if depth + 1 >= MAX_DEPTH {
                return Err(self.malformed(depth + 1, "nesting too deep"));
            }
            m = message;
            segs = inner;
        }
        Ok(None)
    }

    fn message(&self, id: usize) -> Result<&'s Message> {
        self.schema
            .messages
            .get(id)
            .ok_or_else(|| self.not_text(format!("the schema has no message {id}")))
    }

    /// Every occurrence of `field` of message `m` in `segs`, in wire order, each
    /// checked for a wire type Go accepts.
    fn occurrences<'b>(
        &self,
        m: &Message,
        field: &Field,
        segs: &Segs<'b>,
        depth: usize,
    ) -> Result<Vec<(usize, WireVal<'b>)>> {
        let mut vals = Vec::new();
        for seg in segs.as_slice() {
            for item in Fields::new(seg) {
                let (tag, val) = item.map_err(|reason| self.malformed(depth, reason))?;
                if tag != field.tag {
                    continue;
                }
                if !wire_fits(&field.ty, &val) {
                    return Err(self.malformed(
                        depth + 1,
                        format!(
                            "proto: wrong wireType = {} for field {} of {}",
                            val.wire_type(),
                            field.json,
                            m.name
                        ),
                    ));
                }
                vals.push((0, val));
            }
        }
        Ok(vals)
    }

    fn scalar_text<'b>(
        &self,
        ty: &Ty,
        v: WireVal<'b>,
        depth: usize,
    ) -> Result<Option<Cow<'b, str>>> {
        Ok(Some(match (ty, v) {
            (Ty::Str, WireVal::Bytes(b)) => pb_de::go_string(b),
            (Ty::Bytes, WireVal::Bytes(b)) => {
                Cow::Owned(base64::engine::general_purpose::STANDARD.encode(b))
            }
            (Ty::Bool, WireVal::Varint(x)) => Cow::Borrowed(if x != 0 { "true" } else { "false" }),
            (Ty::I32, WireVal::Varint(x)) => Cow::Owned((x as i32).to_string()),
            (Ty::I64, WireVal::Varint(x)) => Cow::Owned((x as i64).to_string()),
            (Ty::F64, _) => return Err(self.not_text("the value is a float")),
            _ => return Err(self.malformed(depth, "value does not match the field's type")),
        }))
    }

    /// The value of key `path`'s last step in a map field.
    fn map_value<'b>(
        &self,
        inner: &Ty,
        vals: &[(usize, WireVal<'b>)],
        depth: usize,
    ) -> Result<Option<Cow<'b, str>>> {
        let key = self.path.get(depth).copied().unwrap_or_default();
        let entries = map_entries(inner, vals).map_err(|reason| self.malformed(depth, reason))?;
        let Some(&(_, value)) = entries.iter().find(|(k, _)| pb_de::go_string(k) == key) else {
            return Ok(None);
        };
        match (inner, value) {
            (Ty::Str | Ty::Bytes | Ty::Bool | Ty::I32 | Ty::I64 | Ty::F64, Some(v)) => {
                self.scalar_text(inner, v, depth + 1)
            }
            (Ty::Str | Ty::Bytes, None) => Ok(Some(Cow::Borrowed(""))),
            (Ty::Bool | Ty::I32 | Ty::I64, None) => Ok(zero_text(inner)),
            // A quantity (a ResourceQuota's `hard`), written as one JSON value.
            (Ty::Msg(id), value) if self.message(*id)?.special != Special::None => {
                let segs = match value {
                    Some(WireVal::Bytes(b)) => Segs::One(b),
                    _ => Segs::None,
                };
                self.special_text(*id, segs, &[])
            }
            _ => Err(self.not_text(format!("the value is {}", shape(inner)))),
        }
    }

    /// The text at `rest` of a special type's JSON (a time, a quantity, an
    /// int-or-string, raw JSON): decoded as a whole decode does, since its JSON is Go's
    /// writing of the value, not stored text.
    fn special_text<'b>(
        &self,
        id: usize,
        segs: Segs<'_>,
        rest: &[&str],
    ) -> Result<Option<Cow<'b, str>>> {
        let value: Value =
            pb_de::deserialize_message(self.schema, self.kind, self.path[0], id, segs)?;
        let mut body = serde_json::Map::new();
        body.insert(String::new(), value);
        let path: Vec<&str> = std::iter::once("").chain(rest.iter().copied()).collect();
        match read_value(&body, &path) {
            Ok(text) => Ok(text.map(|t| Cow::Owned(t.into_owned()))),
            Err(reason) => Err(self.not_text(reason)),
        }
    }
}

/// The field of `m` whose JSON name is `name`, after the inline fields it is reached
/// through: `[inline..., field]`.
fn find<'s>(schema: &'s Schema, m: &'s Message, name: &str) -> Option<Vec<&'s Field>> {
    fn go<'s>(
        schema: &'s Schema,
        m: &'s Message,
        name: &str,
        depth: usize,
    ) -> Option<Vec<&'s Field>> {
        if let Some(f) = m.fields.iter().find(|f| !f.inline && &*f.json == name) {
            return Some(vec![f]);
        }
        if depth >= MAX_DEPTH {
            return None;
        }
        m.fields.iter().filter(|f| f.inline).find_map(|f| {
            let Ty::Msg(id) = f.ty else { return None };
            let inner = schema.messages.get(id)?;
            // TypeMeta's apiVersion and kind come from the envelope, not the message.
            if inner.special == Special::TypeMeta {
                return None;
            }
            let mut chain = go(schema, inner, name, depth + 1)?;
            chain.insert(0, f);
            Some(chain)
        })
    }
    go(schema, m, name, 0)
}

/// A scalar's zero value as Go's JSON writes it.
fn zero_text(ty: &Ty) -> Option<Cow<'static, str>> {
    Some(Cow::Borrowed(match ty {
        Ty::Str | Ty::Bytes => "",
        Ty::Bool => "false",
        _ => "0",
    }))
}

/// What a field of type `ty` is, for an error.
fn shape(ty: &Ty) -> &'static str {
    match ty {
        Ty::Slice(_) => "a list",
        Ty::Map(_) => "a map",
        Ty::Msg(_) => "an object",
        Ty::Ptr(inner) => shape(inner),
        Ty::F64 => "a float",
        Ty::Str | Ty::Bytes => "a string",
        Ty::Bool => "a boolean",
        Ty::I32 | Ty::I64 => "an integer",
    }
}
