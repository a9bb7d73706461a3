//! Protobuf -> Go JSON: walks an object's protobuf as its Go type's generated
//! `Unmarshal` would, and writes the JSON `encoding/json.Marshal` would write for
//! the resulting Go value into a [`Sink`]: the text itself, straight into a `Vec<u8>`,
//! or the `serde_json::Value` read from it (no text in between).
//!
//! Which fields come out and how (Go declaration order, `omitempty`, `null`, inline
//! structs, map keys sorted) is decided in `walk.rs`; what the hand-written special
//! types mean is in `special.rs`. This file only writes the values. The serde
//! `Deserializer` in `de.rs` follows the same answers without writing any.

pub(crate) use crate::walk::MAX_DEPTH;

use crate::error::{ProtobufError, Step, format_path};
use crate::schema::{Message, Schema, Special, Ty};
use crate::sink::{JsonText, Sink};
use crate::special::{SpecialValue, interpret};
use crate::walk::{
    Entries, EntryLists, FieldWalk, Segs, Slot, collect_into, is_empty_wrapped, map_entries, slot,
};
use crate::wire::{WireVal, read_varint};

pub(crate) struct Decoder<'s: 'a, 'a, S: Sink = JsonText> {
    schema: &'s Schema,
    kind: &'s str,
    pub(crate) out: S,
    /// Where the walk is: field names (the schema's) and map keys (the value's).
    path: Vec<Step<'a>>,
    depth: usize,
    /// Field lists of messages written, for the next message to reuse.
    lists: EntryLists<'a>,
}

impl<'s: 'a, 'a> Decoder<'s, 'a> {
    /// A decoder writing Go's JSON text, with room for about `size_hint` bytes of
    /// protobuf.
    pub(crate) fn new(schema: &'s Schema, kind: &'s str, size_hint: usize) -> Self {
        Self::with_sink(
            schema,
            kind,
            JsonText(Vec::with_capacity(size_hint * 2 + 64)),
        )
    }
}

impl<'s: 'a, 'a, S: Sink> Decoder<'s, 'a, S> {
    /// A decoder writing into `out`.
    pub(crate) fn with_sink(schema: &'s Schema, kind: &'s str, out: S) -> Self {
        Self {
            schema,
            kind,
            out,
            // A Pod's fields nest about ten deep: room for them at once.
            path: Vec::with_capacity(16),
            depth: 0,
            lists: EntryLists::from_thread(),
        }
    }

    fn err(&self, reason: impl Into<String>) -> ProtobufError {
        ProtobufError::Decode {
            kind: self.kind.to_string(),
            path: format_path(&self.path),
            reason: reason.into(),
        }
    }

    /// Writes the top-level object from its bytes (or their parts: a lazy object's
    /// with the metadata cut out), with kind and apiVersion from the envelope.
    pub(crate) fn object(
        &mut self,
        m: &'s Message,
        parts: &[&'a [u8]],
        api_version: &str,
    ) -> Result<(), ProtobufError> {
        let entries = self.collect(m, parts)?;
        self.out.begin_object();
        let mut first = true;
        self.fields(m, &entries, Some((self.kind, api_version)), &mut first)?;
        self.out.end_object();
        self.recycle(entries);
        Ok(())
    }

    /// The known fields of `m`, in a list a written message left rather than a new
    /// one (a Pod has dozens of messages).
    fn collect(&mut self, m: &Message, segs: &[&'a [u8]]) -> Result<Entries<'a>, ProtobufError> {
        let mut entries = self.lists.take();
        match collect_into(m, segs, &mut entries) {
            Ok(()) => Ok(entries),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Hands a message's field list back for reuse.
    fn recycle(&mut self, entries: Entries<'a>) {
        self.lists.give_back(entries);
    }

    fn key(&mut self, name: &str, first: &mut bool) {
        if !*first {
            self.out.comma();
        }
        *first = false;
        self.out.field(name);
    }

    /// Writes the fields of `m` into the object being written (inline structs share it).
    fn fields(
        &mut self,
        m: &'s Message,
        entries: &[(usize, WireVal<'a>)],
        top: Option<(&str, &str)>,
        first: &mut bool,
    ) -> Result<(), ProtobufError> {
        let mut walk = FieldWalk::default();
        while let Some((i, range)) = walk.next(m, entries) {
            let (Some(f), Some(vals)) = (m.fields.get(i), entries.get(range)) else {
                break;
            };
            if f.inline {
                let Ty::Msg(child) = f.ty else {
                    return Err(self.err(format!("inline field of non-struct type in {}", m.name)));
                };
                let cm = &self.schema.messages[child];
                if cm.special == Special::TypeMeta {
                    if let Some((kind, av)) = top {
                        for (name, v) in [("kind", kind), ("apiVersion", av)] {
                            if !v.is_empty() {
                                self.key(name, first);
                                self.out.str(v.as_bytes());
                            }
                        }
                    }
                    continue;
                }
                self.enter()?;
                let ce = self.collect(cm, Segs::of(vals).as_slice())?;
                self.fields(cm, &ce, None, first)?;
                self.recycle(ce);
                self.depth -= 1;
                continue;
            }
            self.path.push(Step::Field(&f.json));
            let s =
                slot(self.schema, &f.ty, f.omitempty, f.omitzero, vals).map_err(|e| self.err(e))?;
            if let Some(s) = s {
                self.key(&f.json, first);
                self.slot(s, vals)?;
            }
            self.path.pop();
        }
        Ok(())
    }

    /// Writes what a field, map value or pointer target holds.
    fn slot(
        &mut self,
        s: Slot<'s, 'a>,
        vals: &[(usize, WireVal<'a>)],
    ) -> Result<(), ProtobufError> {
        match s {
            Slot::Null => self.out.null(),
            Slot::Zero(ty) => self.zero_scalar(ty),
            Slot::Scalar(ty, v) => self.scalar(ty, v)?,
            Slot::Elements(inner, len) => self.elements(inner, vals, len)?,
            Slot::Map(inner) => self.map(inner, vals)?,
            Slot::Present(inner) => self.present(inner, vals)?,
            Slot::Message(id) => self.message(id, Segs::of(vals).as_slice())?,
        }
        Ok(())
    }

    fn zero_scalar(&mut self, ty: &Ty) {
        match ty {
            Ty::Str => self.out.str(b""),
            Ty::Bool => self.out.bool(false),
            _ => self.out.int(0),
        }
    }

    /// Writes a value known to be present (a non-nil pointer's target, a map value).
    fn present(&mut self, ty: &'s Ty, vals: &[(usize, WireVal<'a>)]) -> Result<(), ProtobufError> {
        match ty {
            Ty::Msg(id) => self.message(*id, Segs::of(vals).as_slice()),
            _ => match vals.last() {
                Some((_, v)) => self.scalar(ty, *v),
                None => Err(self.err("missing value")),
            },
        }
    }

    fn scalar(&mut self, ty: &Ty, v: WireVal<'_>) -> Result<(), ProtobufError> {
        match (ty, v) {
            (Ty::Str, WireVal::Bytes(b)) => self.out.str(b),
            (Ty::Bytes, WireVal::Bytes(b)) => self.out.bytes(b),
            (Ty::Bool, WireVal::Varint(x)) => self.out.bool(x != 0),
            (Ty::I32, WireVal::Varint(x)) => self.out.int(i64::from(x as i32)),
            (Ty::I64, WireVal::Varint(x)) => self.out.int(x as i64),
            (Ty::F64, WireVal::Fixed64(x)) => {
                self.out.f64(f64::from_bits(x)).map_err(|e| self.err(e))?;
            }
            _ => return Err(self.err("value does not match the field's type")),
        }
        Ok(())
    }

    /// Writes a list of `len` elements from the field's occurrences.
    fn elements(
        &mut self,
        inner: &'s Ty,
        vals: &[(usize, WireVal<'a>)],
        len: usize,
    ) -> Result<(), ProtobufError> {
        self.out.begin_array(len);
        let mut idx = 0;
        for (_, v) in vals {
            match (inner, v) {
                (Ty::I32 | Ty::I64 | Ty::Bool, WireVal::Bytes(b)) => {
                    let mut pos = 0;
                    while pos < b.len() {
                        let x = read_varint(b, &mut pos).map_err(|e| self.err(e))?;
                        self.sep(idx);
                        self.scalar(inner, WireVal::Varint(x))?;
                        idx += 1;
                    }
                }
                (Ty::F64, WireVal::Bytes(b)) => {
                    for c in b.chunks_exact(8) {
                        let mut a = [0u8; 8];
                        a.copy_from_slice(c);
                        self.sep(idx);
                        self.scalar(inner, WireVal::Fixed64(u64::from_le_bytes(a)))?;
                        idx += 1;
                    }
                }
                (Ty::Msg(id), WireVal::Bytes(b)) => {
                    self.sep(idx);
                    self.path.push(Step::Index(idx));
                    self.message(*id, &[b])?;
                    self.path.pop();
                    idx += 1;
                }
                (Ty::Str | Ty::Bytes | Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64, v) => {
                    self.sep(idx);
                    self.path.push(Step::Index(idx));
                    self.scalar(inner, *v)?;
                    self.path.pop();
                    idx += 1;
                }
                _ => return Err(self.err("unsupported repeated element type")),
            }
        }
        self.out.end_array();
        Ok(())
    }

    fn sep(&mut self, idx: usize) {
        if idx > 0 {
            self.out.comma();
        }
    }

    fn map(&mut self, inner: &'s Ty, vals: &[(usize, WireVal<'a>)]) -> Result<(), ProtobufError> {
        let entries = map_entries(inner, vals).map_err(|e| self.err(e))?;
        self.out.begin_object();
        for (i, (k, v)) in entries.iter().enumerate() {
            self.sep(i);
            self.out.key(k);
            self.path.push(Step::RawKey(k));
            let empty_wrapped =
                is_empty_wrapped(self.schema, inner, *v).map_err(|e| self.err(e))?;
            match (inner, v) {
                _ if empty_wrapped => {
                    self.out.begin_array(0);
                    self.out.end_array();
                }
                (Ty::Msg(id), Some(WireVal::Bytes(b))) => self.message(*id, &[b])?,
                (Ty::Msg(id), None) => self.message(*id, &[])?,
                // A missing []byte value is Go's mapvalue := []byte{}: "".
                (Ty::Bytes, None) => self.out.str(b""),
                (_, None) => self.zero_scalar(inner),
                (_, Some(v)) => self.scalar(inner, *v)?,
            }
            self.path.pop();
        }
        self.out.end_object();
        Ok(())
    }

    fn enter(&mut self) -> Result<(), ProtobufError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(format!("messages nested deeper than {MAX_DEPTH}")));
        }
        Ok(())
    }

    /// Writes a struct value from its merged segments (none: the zero value).
    fn message(&mut self, id: usize, segs: &[&'a [u8]]) -> Result<(), ProtobufError> {
        self.enter()?;
        let schema = self.schema;
        let m = &schema.messages[id];
        match m.special {
            Special::None | Special::TypeMeta => {
                let entries = self.collect(m, segs)?;
                self.out.begin_object();
                let mut first = true;
                self.fields(m, &entries, None, &mut first)?;
                self.out.end_object();
                self.recycle(entries);
            }
            _ => match interpret(m, segs).map_err(|e| self.err(e))? {
                SpecialValue::Null => self.out.null(),
                SpecialValue::Quoted(text) => self.out.quoted(text).map_err(|e| self.err(e))?,
                SpecialValue::Text(s) => self.out.text(s),
                SpecialValue::Str(b) => self.out.str(b),
                SpecialValue::Int(v) => self.out.int(v),
                SpecialValue::Bool(b) => self.out.bool(b),
                SpecialValue::Raw(b) => self.out.raw(b).map_err(|e| self.err(e))?,
                SpecialValue::Present(ty, vals) => self.present(ty, &vals)?,
                SpecialValue::Elements(inner, vals, len) => self.elements(inner, &vals, len)?,
            },
        }
        self.depth -= 1;
        Ok(())
    }
}
