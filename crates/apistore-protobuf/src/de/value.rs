//! One value as the JSON text would hold it, and the `Deserializer` over it.

use std::borrow::Cow;

use base64::Engine as _;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, IntoDeserializer, Visitor};

use super::Ctx;
use super::collections::{ElementsAccess, MapEntriesAccess};
use super::error::{DeError, Path, json_err};
use super::structs::StructAccess;
use crate::json_write::{go_number, utf8_len, validate};
use crate::schema::{Message, Special, Ty};
use crate::special::{SpecialValue, interpret, unquoted};
use crate::walk::{MAX_DEPTH, Segs, Slot, map_entries};
use crate::wire::WireVal;

/// One value, as the JSON text would hold it.
pub(super) enum Val<'de, 'v> {
    /// The top-level object: its message, protobuf (in one segment, or several when
    /// fields were cut out) and the envelope's apiVersion.
    Top(&'de Message, Segs<'de>, &'de str),
    Null,
    /// Go string bytes (invalid UTF-8 becomes U+FFFD per byte, as Go writes it).
    Str(&'de [u8]),
    /// A string from the schema or the envelope.
    Name(&'de str),
    Owned(String),
    Bool(bool),
    Int(i64),
    F64(f64),
    /// `[]byte`: a base64 string.
    Bytes(&'de [u8]),
    /// Raw JSON (RawExtension, FieldsV1, apiextensions JSON), still to validate.
    Raw(&'de [u8]),
    /// `[]` (an empty named slice as a map value).
    EmptySeq,
    /// A struct, or a special type, from its merged segments.
    Message(usize, Segs<'de>),
    Elements(&'de Ty, Cow<'v, [(usize, WireVal<'de>)]>),
    Map(&'de Ty, &'v [(usize, WireVal<'de>)]),
}

pub(super) fn zero<'de, 'v>(ty: &Ty) -> Val<'de, 'v> {
    match ty {
        Ty::Str => Val::Name(""),
        Ty::Bool => Val::Bool(false),
        _ => Val::Int(0),
    }
}

pub(super) fn scalar<'de, 'v>(ty: &Ty, v: WireVal<'de>) -> Result<Val<'de, 'v>, String> {
    Ok(match (ty, v) {
        (Ty::Str, WireVal::Bytes(b)) => Val::Str(b),
        (Ty::Bytes, WireVal::Bytes(b)) => Val::Bytes(b),
        (Ty::Bool, WireVal::Varint(x)) => Val::Bool(x != 0),
        (Ty::I32, WireVal::Varint(x)) => Val::Int(i64::from(x as i32)),
        (Ty::I64, WireVal::Varint(x)) => Val::Int(x as i64),
        (Ty::F64, WireVal::Fixed64(x)) => Val::F64(f64::from_bits(x)),
        _ => return Err("value does not match the field's type".into()),
    })
}

pub(super) fn present<'de, 'v>(
    ty: &Ty,
    vals: &[(usize, WireVal<'de>)],
) -> Result<Val<'de, 'v>, String> {
    match ty {
        Ty::Msg(id) => Ok(Val::Message(*id, Segs::of(vals))),
        _ => match vals.last() {
            Some((_, v)) => scalar(ty, *v),
            None => Err("missing value".into()),
        },
    }
}

pub(super) fn from_slot<'de, 'v>(
    s: Slot<'de, 'de>,
    vals: &'v [(usize, WireVal<'de>)],
) -> Result<Val<'de, 'v>, String> {
    Ok(match s {
        Slot::Null => Val::Null,
        Slot::Zero(ty) => zero(ty),
        Slot::Scalar(ty, v) => scalar(ty, v)?,
        Slot::Elements(inner, _) => Val::Elements(inner, Cow::Borrowed(vals)),
        Slot::Map(inner) => Val::Map(inner, vals),
        Slot::Present(inner) => present(inner, vals)?,
        Slot::Message(id) => Val::Message(id, Segs::of(vals)),
    })
}

/// Go's JSON string for these bytes, as text: valid UTF-8 borrowed, each invalid
/// byte replaced by U+FFFD (Go's `utf8.DecodeRune` view, not Rust's lossy one).
pub(crate) fn go_string(b: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(b) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(b.len() + 8);
    let mut i = 0;
    while i < b.len() {
        if b[i] < 0x80 {
            out.push(char::from(b[i]));
            i += 1;
            continue;
        }
        match utf8_len(&b[i..]).and_then(|n| Some((n, std::str::from_utf8(b.get(i..i + n)?).ok()?)))
        {
            Some((n, s)) => {
                out.push_str(s);
                i += n;
            }
            None => {
                out.push('\u{fffd}');
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// A deserializer for one value.
pub(super) struct ValueDe<'p, 'de> {
    pub(super) ctx: &'p Ctx<'de>,
    pub(super) path: &'p Path<'p>,
    /// The message nesting depth of the value's container.
    pub(super) depth: usize,
    pub(super) val: Val<'de, 'p>,
}

impl<'p, 'de> ValueDe<'p, 'de> {
    fn err(&self, reason: impl Into<String>) -> DeError {
        self.ctx.err(self.path, reason)
    }

    /// Turns a special type into the value it stands for (a Time into its string, a
    /// JSONSchemaPropsOrBool into a schema or a bool, ...). Every value passes here,
    /// most of them no special type: that check is inlined, the work is not.
    #[inline(always)]
    fn resolve(&mut self) -> Result<(), DeError> {
        match &self.val {
            Val::Message(id, _)
                if !matches!(
                    self.ctx.schema.messages[*id].special,
                    Special::None | Special::TypeMeta
                ) =>
            {
                self.resolve_special()
            }
            _ => Ok(()),
        }
    }

    #[inline(never)]
    fn resolve_special(&mut self) -> Result<(), DeError> {
        while let Val::Message(id, segs) = &self.val {
            let m = &self.ctx.schema.messages[*id];
            if matches!(m.special, Special::None | Special::TypeMeta) {
                break;
            }
            let depth = self.depth + 1;
            if depth > MAX_DEPTH {
                return Err(self.err(format!("messages nested deeper than {MAX_DEPTH}")));
            }
            let sv = interpret(m, segs.as_slice()).map_err(|e| self.err(e))?;
            let val = match sv {
                SpecialValue::Null => Val::Null,
                SpecialValue::Quoted(text) => Val::Owned(unquoted(text).map_err(|e| self.err(e))?),
                SpecialValue::Text(Cow::Borrowed(s)) => Val::Name(s),
                SpecialValue::Text(Cow::Owned(s)) => Val::Owned(s),
                SpecialValue::Str(b) => Val::Str(b),
                SpecialValue::Int(i) => Val::Int(i),
                SpecialValue::Bool(b) => Val::Bool(b),
                SpecialValue::Raw(b) => Val::Raw(b),
                SpecialValue::Present(ty, vals) => present(ty, &vals).map_err(|e| self.err(e))?,
                SpecialValue::Elements(inner, vals, _) => Val::Elements(inner, Cow::Owned(vals)),
            };
            self.depth = depth;
            self.val = val;
        }
        Ok(())
    }

    fn raw_json(&self, b: &[u8]) -> Result<(), DeError> {
        validate(b).map_err(|e| self.err(e))
    }
}

impl<'de> de::Deserializer<'de> for ValueDe<'_, 'de> {
    type Error = DeError;

    fn deserialize_any<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, DeError> {
        self.resolve()?;
        let de = self;
        let (ctx, path, depth) = (de.ctx, de.path, de.depth);
        match de.val {
            Val::Top(m, parts, av) => {
                let entries = ctx
                    .collect(m, parts.as_slice())
                    .map_err(|e| ctx.err(path, e))?;
                visitor.visit_map(StructAccess::new(
                    ctx,
                    path,
                    depth,
                    m,
                    entries,
                    Some((ctx.kind, av)),
                ))
            }
            Val::Null => visitor.visit_unit(),
            Val::Str(b) => match go_string(b) {
                Cow::Borrowed(s) => visitor.visit_borrowed_str(s),
                Cow::Owned(s) => visitor.visit_string(s),
            },
            Val::Name(s) => visitor.visit_borrowed_str(s),
            Val::Owned(s) => visitor.visit_string(s),
            Val::Bool(b) => visitor.visit_bool(b),
            Val::Int(i) => match u64::try_from(i) {
                Ok(u) => visitor.visit_u64(u),
                Err(_) => visitor.visit_i64(i),
            },
            Val::F64(f) => {
                let n = go_number(f).map_err(|e| ctx.err(path, e))?;
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f))
                }
            }
            Val::Bytes(b) => {
                visitor.visit_string(base64::engine::general_purpose::STANDARD.encode(b))
            }
            Val::Raw(b) => {
                validate(b).map_err(|e| ctx.err(path, e))?;
                let mut json = serde_json::Deserializer::from_slice(b);
                let v = de::Deserializer::deserialize_any(&mut json, visitor)
                    .map_err(|e| json_err(&e))?;
                json.end().map_err(|e| json_err(&e))?;
                Ok(v)
            }
            Val::EmptySeq => visitor.visit_seq(ElementsAccess {
                ctx,
                path,
                depth,
                inner: &Ty::Str,
                vals: Cow::Borrowed(&[]),
                i: 0,
                pos: 0,
                idx: 0,
            }),
            Val::Message(id, segs) => {
                let depth = depth + 1;
                if depth > MAX_DEPTH {
                    return Err(ctx.err(path, format!("messages nested deeper than {MAX_DEPTH}")));
                }
                let m = &ctx.schema.messages[id];
                let entries = ctx
                    .collect(m, segs.as_slice())
                    .map_err(|e| ctx.err(path, e))?;
                visitor.visit_map(StructAccess::new(ctx, path, depth, m, entries, None))
            }
            Val::Elements(inner, vals) => visitor.visit_seq(ElementsAccess {
                ctx,
                path,
                depth,
                inner,
                vals,
                i: 0,
                pos: 0,
                idx: 0,
            }),
            Val::Map(inner, vals) => {
                let entries = map_entries(inner, vals).map_err(|e| ctx.err(path, e))?;
                visitor.visit_map(MapEntriesAccess {
                    ctx,
                    path,
                    depth,
                    inner,
                    entries,
                    i: 0,
                })
            }
        }
    }

    fn deserialize_option<V: Visitor<'de>>(mut self, visitor: V) -> Result<V::Value, DeError> {
        self.resolve()?;
        let de = self;
        match de.val {
            Val::Null => visitor.visit_none(),
            Val::Raw(b) => {
                de.raw_json(b)?;
                let mut json = serde_json::Deserializer::from_slice(b);
                let v = de::Deserializer::deserialize_option(&mut json, visitor)
                    .map_err(|e| json_err(&e))?;
                json.end().map_err(|e| json_err(&e))?;
                Ok(v)
            }
            _ => visitor.visit_some(de),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        mut self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DeError> {
        self.resolve()?;
        let de = self;
        match de.val {
            Val::Str(b) => match go_string(b) {
                Cow::Borrowed(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
                Cow::Owned(s) => visitor.visit_enum(s.into_deserializer()),
            },
            Val::Name(s) => visitor.visit_enum(BorrowedStrDeserializer::new(s)),
            Val::Owned(s) => visitor.visit_enum(s.into_deserializer()),
            Val::Raw(b) => {
                de.raw_json(b)?;
                let mut json = serde_json::Deserializer::from_slice(b);
                let v = de::Deserializer::deserialize_enum(&mut json, name, variants, visitor)
                    .map_err(|e| json_err(&e))?;
                json.end().map_err(|e| json_err(&e))?;
                Ok(v)
            }
            _ => de.deserialize_any(visitor),
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct
        identifier ignored_any
    }
}
