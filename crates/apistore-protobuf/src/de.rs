//! Protobuf -> any serde type, with no JSON text in between: a `serde::Deserializer`
//! that walks an object's protobuf with the schema and presents exactly the values
//! the JSON `decode.rs` writes would parse to (`serde_json`'s view of that text).
//!
//! Same field names in Go declaration order, the same `omitempty` and `null` rules,
//! inline structs flattened, the special types in their JSON forms (times, durations
//! and Quantities as strings, IntOrString as a number or a string, raw JSON parsed
//! with `serde_json`, `[]byte` as base64), map keys sorted, invalid UTF-8 replaced per
//! byte as Go does. Which fields appear and what they hold comes from `walk.rs` and
//! `special.rs`, the same answers the JSON writer follows. Numbers are presented as
//! `serde_json` reads them back: non-negative integers as u64, floats through Go's
//! formatting (so `2.0` is the integer 2, as the text `2` is).
//!
//! Strings are borrowed from the stored bytes where they are valid UTF-8, so a
//! visitor that keeps borrowed strings (serde's buffering for `#[serde(flatten)]`)
//! copies nothing twice. Errors name the kind and the field path.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;

use base64::Engine as _;
use serde::de::value::BorrowedStrDeserializer;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{ProtobufError, Step, format_path};
use crate::json_write::{utf8_len, validate, write_f64};
use crate::schema::{Message, Schema, Special, Ty};
use crate::special::{SpecialValue, interpret};
use crate::walk::{
    Entries, MAX_DEPTH, MapEntries, Segs, Slot, collect_into, is_empty_wrapped, map_entries, slot,
};
use crate::wire::{WireVal, read_varint};

/// Deserializes the top-level object of kind `kind` (message `m`, protobuf `raw`),
/// with kind and apiVersion from the envelope.
pub(crate) fn deserialize<'de, T: de::Deserialize<'de>>(
    schema: &'de Schema,
    kind: &'de str,
    m: &'de Message,
    raw: &'de [u8],
    api_version: &'de str,
) -> Result<T, ProtobufError> {
    deserialize_parts(schema, kind, m, Segs::One(raw), api_version)
}

/// [`deserialize`] of a top-level object whose fields are in several segments (the
/// object's protobuf with some fields cut out: a lazy object's body without its
/// metadata).
pub(crate) fn deserialize_parts<'de, T: de::Deserialize<'de>>(
    schema: &'de Schema,
    kind: &'de str,
    m: &'de Message,
    parts: Segs<'de>,
    api_version: &'de str,
) -> Result<T, ProtobufError> {
    deserialize_val(
        schema,
        kind,
        PathStep::Root,
        Val::Top(m, parts, api_version),
    )
}

/// Deserializes the message (`id`, from its merged occurrences) of the top-level
/// field `field` of a value of kind `kind`: a lazy object's metadata, without the rest
/// of the object. Errors name paths from the object (`metadata.labels`).
pub(crate) fn deserialize_message<'de, T: de::Deserialize<'de>>(
    schema: &'de Schema,
    kind: &'de str,
    field: &'de str,
    id: usize,
    segs: Segs<'de>,
) -> Result<T, ProtobufError> {
    deserialize_val(schema, kind, PathStep::Field(field), Val::Message(id, segs))
}

fn deserialize_val<'de, T: de::Deserialize<'de>>(
    schema: &'de Schema,
    kind: &'de str,
    root: PathStep<'de>,
    val: Val<'de, '_>,
) -> Result<T, ProtobufError> {
    let ctx = Ctx {
        schema,
        kind,
        buffers: RefCell::new(Vec::new()),
    };
    let root = Path {
        parent: None,
        step: root,
    };
    let de = ValueDe {
        ctx: &ctx,
        path: &root,
        depth: 0,
        val,
    };
    T::deserialize(de).map_err(|e| e.into_protobuf(kind))
}

struct Ctx<'de> {
    schema: &'de Schema,
    kind: &'de str,
    /// Entry buffers of structs already walked, for the next ones to reuse.
    buffers: RefCell<Vec<Entries<'de>>>,
}

impl<'de> Ctx<'de> {
    /// The known fields of `m` in a reused buffer.
    fn collect(&self, m: &Message, segs: &[&'de [u8]]) -> Result<Entries<'de>, String> {
        let mut entries = self
            .buffers
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(16));
        collect_into(m, segs, &mut entries)?;
        Ok(entries)
    }

    fn give_back(&self, mut entries: Entries<'de>) {
        entries.clear();
        self.buffers.borrow_mut().push(entries);
    }

    #[cold]
    fn err(&self, path: &Path<'_>, reason: impl Into<String>) -> DeError {
        DeError::protobuf(ProtobufError::Decode {
            kind: self.kind.to_string(),
            path: path.format(),
            reason: reason.into(),
        })
    }
}

/// The field path, as a chain of stack frames' steps; formatted only for errors.
struct Path<'p> {
    parent: Option<&'p Self>,
    step: PathStep<'p>,
}

#[derive(Clone, Copy)]
enum PathStep<'p> {
    Root,
    Field(&'p str),
    Index(usize),
    Key(&'p [u8]),
}

impl<'p> Path<'p> {
    fn child(&'p self, step: PathStep<'p>) -> Self {
        Self {
            parent: Some(self),
            step,
        }
    }

    fn format(&self) -> String {
        let mut steps = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            match p.step {
                PathStep::Root => {}
                PathStep::Field(f) => steps.push(Step::Field(f)),
                PathStep::Index(i) => steps.push(Step::Index(i)),
                PathStep::Key(k) => steps.push(Step::Key(String::from_utf8_lossy(k).into_owned())),
            }
            at = p.parent;
        }
        steps.reverse();
        format_path(&steps)
    }
}

/// The deserializer's error: a protobuf error already naming kind and path, or a
/// visitor's own complaint (a missing field, a wrong type) that gets the path of the
/// innermost value it came out of. Boxed, so the `Result`s passed up through every
/// visitor call stay a word wide.
#[derive(Debug)]
pub(crate) struct DeError(Box<DeErrorKind>);

#[derive(Debug)]
enum DeErrorKind {
    Protobuf(ProtobufError),
    Custom {
        reason: String,
        path: Option<String>,
    },
}

impl DeError {
    fn protobuf(e: ProtobufError) -> Self {
        Self(Box::new(DeErrorKind::Protobuf(e)))
    }

    fn custom_text(reason: String) -> Self {
        Self(Box::new(DeErrorKind::Custom { reason, path: None }))
    }

    fn at(mut self, at: &Path<'_>) -> Self {
        if let DeErrorKind::Custom {
            path: path @ None, ..
        } = &mut *self.0
        {
            *path = Some(at.format());
        }
        self
    }

    fn into_protobuf(self, kind: &str) -> ProtobufError {
        match *self.0 {
            DeErrorKind::Protobuf(e) => e,
            DeErrorKind::Custom { reason, path } => ProtobufError::Deserialize {
                kind: kind.to_string(),
                path: path.unwrap_or_else(|| ".".into()),
                reason,
            },
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            DeErrorKind::Protobuf(e) => e.fmt(f),
            DeErrorKind::Custom { reason, path } => match path {
                Some(p) => write!(f, "at {p}: {reason}"),
                None => f.write_str(reason),
            },
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::custom_text(msg.to_string())
    }
}

fn json_err(e: &serde_json::Error) -> DeError {
    DeError::custom_text(e.to_string())
}

/// One value, as the JSON text would hold it.
enum Val<'de, 'v> {
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

fn zero<'de, 'v>(ty: &Ty) -> Val<'de, 'v> {
    match ty {
        Ty::Str => Val::Name(""),
        Ty::Bool => Val::Bool(false),
        _ => Val::Int(0),
    }
}

fn scalar<'de, 'v>(ty: &Ty, v: WireVal<'de>) -> Result<Val<'de, 'v>, String> {
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

fn present<'de, 'v>(ty: &Ty, vals: &[(usize, WireVal<'de>)]) -> Result<Val<'de, 'v>, String> {
    match ty {
        Ty::Msg(id) => Ok(Val::Message(*id, Segs::of(vals))),
        _ => match vals.last() {
            Some((_, v)) => scalar(ty, *v),
            None => Err("missing value".into()),
        },
    }
}

fn from_slot<'de, 'v>(
    s: Slot<'de, 'de>,
    vals: &'v [(usize, WireVal<'de>)],
) -> Result<Val<'de, 'v>, String> {
    Ok(match s {
        Slot::Null => Val::Null,
        Slot::Zero(ty) => zero(ty),
        Slot::Scalar(ty, v) => scalar(ty, v)?,
        Slot::Elements(inner) => Val::Elements(inner, Cow::Borrowed(vals)),
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
struct ValueDe<'p, 'de> {
    ctx: &'p Ctx<'de>,
    path: &'p Path<'p>,
    /// The message nesting depth of the value's container.
    depth: usize,
    val: Val<'de, 'p>,
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
                SpecialValue::Quoted(mut text) => {
                    // The text without its quotes, in place.
                    text.pop();
                    if !text.is_empty() {
                        text.remove(0);
                    }
                    match String::from_utf8(text) {
                        Ok(s) => Val::Owned(s),
                        Err(_) => return Err(self.err("special value is not UTF-8")),
                    }
                }
                SpecialValue::Text(Cow::Borrowed(s)) => Val::Name(s),
                SpecialValue::Text(Cow::Owned(s)) => Val::Owned(s),
                SpecialValue::Str(b) => Val::Str(b),
                SpecialValue::Int(i) => Val::Int(i),
                SpecialValue::Bool(b) => Val::Bool(b),
                SpecialValue::Raw(b) => Val::Raw(b),
                SpecialValue::Present(ty, vals) => present(ty, &vals).map_err(|e| self.err(e))?,
                SpecialValue::Elements(inner, vals) => Val::Elements(inner, Cow::Owned(vals)),
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
                // The number serde_json reads from Go's text for it: `2` is an integer.
                let mut text = Vec::with_capacity(24);
                write_f64(&mut text, f).map_err(|e| ctx.err(path, e))?;
                let n: serde_json::Number =
                    serde_json::from_slice(&text).map_err(|e| ctx.err(path, e.to_string()))?;
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

/// One frame of a struct's fields: the struct itself, or an inline struct within it.
struct Frame<'de> {
    m: &'de Message,
    entries: Entries<'de>,
    /// The next field index to look at.
    field: usize,
    /// The first entry not yet consumed.
    cursor: usize,
    /// The first of `m.visit_absent` not yet looked at.
    absent: usize,
}

impl<'de> Frame<'de> {
    fn new(m: &'de Message, entries: Entries<'de>) -> Self {
        Self {
            m,
            entries,
            field: 0,
            cursor: 0,
            absent: 0,
        }
    }

    /// The next field to look at: the next present one or the next that Go writes
    /// even when absent, whichever comes first (the others would be left out).
    fn next_field(&mut self) -> Option<usize> {
        let va = &self.m.visit_absent;
        while va.get(self.absent).is_some_and(|&i| i < self.field) {
            self.absent += 1;
        }
        let present = self.entries.get(self.cursor).map(|e| e.0);
        let absent = va.get(self.absent).copied();
        let i = match (present, absent) {
            (Some(p), Some(a)) => p.min(a),
            (Some(i), None) | (None, Some(i)) => i,
            (None, None) => return None,
        };
        self.field = i + 1;
        Some(i)
    }
}

enum Pending<'de> {
    Name(&'de str),
    Field {
        frame: usize,
        start: usize,
        end: usize,
        name: &'de str,
        slot: Slot<'de, 'de>,
    },
}

/// A struct's fields as a JSON object's members: Go declaration order, inline structs
/// flattened, fields Go leaves out skipped.
struct StructAccess<'p, 'de> {
    ctx: &'p Ctx<'de>,
    path: &'p Path<'p>,
    depth: usize,
    /// The struct itself, then the inline structs being walked inside it.
    root: Frame<'de>,
    inline: Vec<Frame<'de>>,
    /// At the top level, (kind, apiVersion) until TypeMeta's place is reached.
    type_meta: Option<(&'de str, &'de str)>,
    /// (kind, apiVersion, how many written) while writing them.
    writing_meta: Option<(&'de str, &'de str, u8)>,
    pending: Option<Pending<'de>>,
}

impl<'p, 'de> StructAccess<'p, 'de> {
    fn new(
        ctx: &'p Ctx<'de>,
        path: &'p Path<'p>,
        depth: usize,
        m: &'de Message,
        entries: Entries<'de>,
        type_meta: Option<(&'de str, &'de str)>,
    ) -> Self {
        Self {
            ctx,
            path,
            depth,
            root: Frame::new(m, entries),
            inline: Vec::new(),
            type_meta,
            writing_meta: None,
            pending: None,
        }
    }
}

impl<'de> MapAccess<'de> for StructAccess<'_, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        loop {
            if let Some((kind, av, done)) = self.writing_meta {
                let (name, value) = match done {
                    0 => ("kind", kind),
                    1 => ("apiVersion", av),
                    _ => {
                        self.writing_meta = None;
                        continue;
                    }
                };
                self.writing_meta = Some((kind, av, done + 1));
                if !value.is_empty() {
                    self.pending = Some(Pending::Name(value));
                    return seed
                        .deserialize(BorrowedStrDeserializer::new(name))
                        .map(Some);
                }
                continue;
            }
            let fi = self.inline.len();
            let frame = self.inline.last_mut().unwrap_or(&mut self.root);
            let Some(i) = frame.next_field() else {
                match self.inline.pop() {
                    Some(done) => {
                        self.ctx.give_back(done.entries);
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            let Some(f) = frame.m.fields.get(i) else {
                return Ok(None);
            };
            let start = frame.cursor;
            while frame.entries.get(frame.cursor).is_some_and(|e| e.0 == i) {
                frame.cursor += 1;
            }
            let end = frame.cursor;
            if f.inline {
                let Ty::Msg(child) = f.ty else {
                    return Err(self.ctx.err(
                        self.path,
                        format!("inline field of non-struct type in {}", frame.m.name),
                    ));
                };
                let cm = &self.ctx.schema.messages[child];
                if cm.special == Special::TypeMeta {
                    if fi == 0 {
                        if let Some((kind, av)) = self.type_meta.take() {
                            self.writing_meta = Some((kind, av, 0));
                        }
                    }
                    continue;
                }
                if self.depth + fi + 1 > MAX_DEPTH {
                    return Err(self.ctx.err(
                        self.path,
                        format!("messages nested deeper than {MAX_DEPTH}"),
                    ));
                }
                let segs = Segs::of(&frame.entries[start..end]);
                let entries = self
                    .ctx
                    .collect(cm, segs.as_slice())
                    .map_err(|e| self.ctx.err(self.path, e))?;
                self.inline.push(Frame::new(cm, entries));
                continue;
            }
            let vals = &frame.entries[start..end];
            let s = slot(self.ctx.schema, &f.ty, f.omitempty, f.omitzero, vals)
                .map_err(|e| self.ctx.err(&self.path.child(PathStep::Field(&f.json)), e))?;
            if let Some(slot) = s {
                self.pending = Some(Pending::Field {
                    frame: fi,
                    start,
                    end,
                    name: &f.json,
                    slot,
                });
                return seed
                    .deserialize(BorrowedStrDeserializer::new(&f.json))
                    .map(Some);
            }
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        match self.pending.take() {
            None => Err(de::Error::custom("a value asked for before its key")),
            Some(Pending::Name(value)) => seed.deserialize(ValueDe {
                ctx: self.ctx,
                path: self.path,
                depth: self.depth,
                val: Val::Name(value),
            }),
            Some(Pending::Field {
                frame,
                start,
                end,
                name,
                slot,
            }) => {
                let path = self.path.child(PathStep::Field(name));
                let f = match frame.checked_sub(1) {
                    None => Some(&self.root),
                    Some(k) => self.inline.get(k),
                };
                let vals = f
                    .and_then(|f| f.entries.get(start..end))
                    .unwrap_or_default();
                let val = from_slot(slot, vals).map_err(|e| self.ctx.err(&path, e))?;
                seed.deserialize(ValueDe {
                    ctx: self.ctx,
                    path: &path,
                    depth: self.depth + frame,
                    val,
                })
                .map_err(|e| e.at(&path))
            }
        }
    }
}

impl Drop for StructAccess<'_, '_> {
    fn drop(&mut self) {
        for f in self.inline.drain(..) {
            self.ctx.give_back(f.entries);
        }
        self.ctx.give_back(std::mem::take(&mut self.root.entries));
    }
}

/// A list's elements (packed numbers unpacked).
struct ElementsAccess<'p, 'de> {
    ctx: &'p Ctx<'de>,
    path: &'p Path<'p>,
    depth: usize,
    inner: &'de Ty,
    vals: Cow<'p, [(usize, WireVal<'de>)]>,
    /// The occurrence being read.
    i: usize,
    /// The position inside a packed occurrence.
    pos: usize,
    /// The next element's index.
    idx: usize,
}

impl<'de> SeqAccess<'de> for ElementsAccess<'_, 'de> {
    type Error = DeError;

    /// The elements left, exactly, when each occurrence is one element (packed
    /// numbers are not counted ahead): a `Vec` visitor then allocates once.
    fn size_hint(&self) -> Option<usize> {
        match self.inner {
            Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64 => None,
            _ => Some(self.vals.len().saturating_sub(self.i)),
        }
    }

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DeError> {
        loop {
            let Some(&(_, v)) = self.vals.get(self.i) else {
                return Ok(None);
            };
            let path = self.path.child(PathStep::Index(self.idx));
            let val = match (self.inner, v) {
                (Ty::I32 | Ty::I64 | Ty::Bool, WireVal::Bytes(b)) => {
                    if self.pos >= b.len() {
                        self.i += 1;
                        self.pos = 0;
                        continue;
                    }
                    let x = read_varint(b, &mut self.pos).map_err(|e| self.ctx.err(&path, e))?;
                    scalar(self.inner, WireVal::Varint(x))
                }
                (Ty::F64, WireVal::Bytes(b)) => {
                    let Some(chunk) = b.get(self.pos..self.pos + 8) else {
                        self.i += 1;
                        self.pos = 0;
                        continue;
                    };
                    self.pos += 8;
                    let mut a = [0u8; 8];
                    a.copy_from_slice(chunk);
                    scalar(self.inner, WireVal::Fixed64(u64::from_le_bytes(a)))
                }
                (Ty::Msg(id), WireVal::Bytes(b)) => {
                    self.i += 1;
                    Ok(Val::Message(*id, Segs::One(b)))
                }
                (Ty::Str | Ty::Bytes | Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64, v) => {
                    self.i += 1;
                    scalar(self.inner, v)
                }
                _ => Err("unsupported repeated element type".into()),
            }
            .map_err(|e| self.ctx.err(&path, e))?;
            self.idx += 1;
            return seed
                .deserialize(ValueDe {
                    ctx: self.ctx,
                    path: &path,
                    depth: self.depth,
                    val,
                })
                .map(Some)
                .map_err(|e| e.at(&path));
        }
    }
}

/// A Go map's entries, keys sorted.
struct MapEntriesAccess<'p, 'de> {
    ctx: &'p Ctx<'de>,
    path: &'p Path<'p>,
    depth: usize,
    inner: &'de Ty,
    entries: MapEntries<'de>,
    i: usize,
}

impl<'de> MapAccess<'de> for MapEntriesAccess<'_, 'de> {
    type Error = DeError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, DeError> {
        let Some(&(k, _)) = self.entries.get(self.i) else {
            return Ok(None);
        };
        seed.deserialize(ValueDe {
            ctx: self.ctx,
            path: self.path,
            depth: self.depth,
            val: Val::Str(k),
        })
        .map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, DeError> {
        let Some(&(k, v)) = self.entries.get(self.i) else {
            return Err(de::Error::custom("a value asked for past the map's end"));
        };
        self.i += 1;
        let path = self.path.child(PathStep::Key(k));
        let inner = self.inner;
        let empty_wrapped =
            is_empty_wrapped(self.ctx.schema, inner, v).map_err(|e| self.ctx.err(&path, e))?;
        let val = match (inner, v) {
            _ if empty_wrapped => Val::EmptySeq,
            (Ty::Msg(id), Some(WireVal::Bytes(b))) => Val::Message(*id, Segs::One(b)),
            (Ty::Msg(id), None) => Val::Message(*id, Segs::None),
            // A missing []byte value is Go's mapvalue := []byte{}: "".
            (Ty::Bytes, None) => Val::Name(""),
            (_, None) => zero(inner),
            (_, Some(v)) => scalar(inner, v).map_err(|e| self.ctx.err(&path, e))?,
        };
        seed.deserialize(ValueDe {
            ctx: self.ctx,
            path: &path,
            depth: self.depth,
            val,
        })
        .map_err(|e| e.at(&path))
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.entries.len() - self.i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::KubeProtobuf;

    #[test]
    fn invalid_utf8_is_replaced_per_byte_as_go_writes_it() {
        assert_eq!(go_string(b"plain"), Cow::Borrowed("plain"));
        assert_eq!(go_string(b"a\xffb\xe2\x82"), "a\u{fffd}b\u{fffd}\u{fffd}");
        assert_eq!(go_string(b"\xed\xa0\x80"), "\u{fffd}\u{fffd}\u{fffd}");
        assert_eq!(go_string("é\u{2028}".as_bytes()), "é\u{2028}");
        // What the JSON path gives for the same bytes.
        let kp = KubeProtobuf::k8s_1_31();
        let stored = kp
            .encode_value(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "c"}, "data": {"k": "v"}}))
            .unwrap();
        // Swap "v" for invalid bytes of the same length is not possible; append instead.
        let mut raw_cm = Vec::new();
        crate::wire::put_bytes(&mut raw_cm, 1, b"\x0a\x01c");
        let mut entry = Vec::new();
        crate::wire::put_bytes(&mut entry, 1, b"k\xff");
        crate::wire::put_bytes(&mut entry, 2, b"a\xe2\x82<");
        crate::wire::put_bytes(&mut raw_cm, 2, &entry);
        let bad = crate::envelope::write("v1", "ConfigMap", &raw_cm);
        let json = kp.decode_to_json(&bad).unwrap();
        let want: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(kp.decode::<serde_json::Value>(&bad).unwrap(), want);
        assert!(kp.decode::<serde_json::Value>(&stored).is_ok());
    }

    #[test]
    fn nesting_depth_bombs_are_refused() {
        let kp = KubeProtobuf::k8s_1_31();
        let schema = &kp.schema;
        let m = schema
            .messages
            .iter()
            .find(|m| {
                &*m.name
                    == "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaProps"
            })
            .unwrap();
        let not = m.fields.iter().find(|f| &*f.json == "not").unwrap().tag;
        let mut inner: Vec<u8> = Vec::new();
        for _ in 0..5_000 {
            let mut next = Vec::new();
            crate::wire::put_bytes(&mut next, not, &inner);
            inner = next;
        }
        let err = deserialize::<serde_json::Value>(
            schema,
            "CustomResourceDefinition",
            m,
            &inner,
            "apiextensions.k8s.io/v1",
        )
        .unwrap_err();
        assert!(err.to_string().contains("nested deeper than 100"), "{err}");
        assert!(
            err.to_string().contains("CustomResourceDefinition"),
            "{err}"
        );
    }
}
