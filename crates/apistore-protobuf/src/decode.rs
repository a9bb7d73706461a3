//! Protobuf -> Go JSON: walks an object's protobuf as its Go type's generated
//! `Unmarshal` would, and writes the JSON text `encoding/json.Marshal` would write for
//! the resulting Go value, straight into a `Vec<u8>` (no intermediate tree).
//!
//! Which fields come out and how (Go declaration order, `omitempty`, `null`, inline
//! structs, map keys sorted) is decided in `walk.rs`; what the hand-written special
//! types mean is in `special.rs`. This file only writes the text. The serde
//! `Deserializer` in `de.rs` follows the same answers without writing any.

use base64::Engine as _;

pub(crate) use crate::walk::MAX_DEPTH;

use crate::error::{ProtobufError, Step, format_path};
use crate::json_write::{write_compact, write_f64, write_int, write_str};
use crate::schema::{Message, Schema, Special, Ty};
use crate::special::{SpecialValue, interpret};
use crate::walk::{Entries, Segs, Slot, collect, is_empty_wrapped, map_entries, slot};
use crate::wire::{WireVal, read_varint};

pub(crate) struct Decoder<'s> {
    schema: &'s Schema,
    kind: &'s str,
    pub(crate) out: Vec<u8>,
    path: Vec<Step<'s>>,
    depth: usize,
}

impl<'s> Decoder<'s> {
    pub(crate) fn new(schema: &'s Schema, kind: &'s str, size_hint: usize) -> Self {
        Self {
            schema,
            kind,
            out: Vec::with_capacity(size_hint * 2 + 64),
            path: Vec::new(),
            depth: 0,
        }
    }

    fn err(&self, reason: impl Into<String>) -> ProtobufError {
        ProtobufError::Decode {
            kind: self.kind.to_string(),
            path: format_path(&self.path),
            reason: reason.into(),
        }
    }

    /// Writes the top-level object, with kind and apiVersion from the envelope.
    pub(crate) fn object(
        &mut self,
        m: &'s Message,
        raw: &[u8],
        api_version: &str,
    ) -> Result<(), ProtobufError> {
        let entries = self.collect(m, &[raw])?;
        self.out.push(b'{');
        let mut first = true;
        self.fields(m, &entries, Some((self.kind, api_version)), &mut first)?;
        self.out.push(b'}');
        Ok(())
    }

    fn collect<'a>(&self, m: &Message, segs: &[&'a [u8]]) -> Result<Entries<'a>, ProtobufError> {
        collect(m, segs).map_err(|e| self.err(e))
    }

    fn key(&mut self, name: &str, first: &mut bool) {
        if !*first {
            self.out.push(b',');
        }
        *first = false;
        write_str(&mut self.out, name.as_bytes());
        self.out.push(b':');
    }

    /// Writes the fields of `m` into the object being written (inline structs share it).
    fn fields(
        &mut self,
        m: &'s Message,
        entries: &[(usize, WireVal<'_>)],
        top: Option<(&str, &str)>,
        first: &mut bool,
    ) -> Result<(), ProtobufError> {
        let mut cursor = 0;
        for (i, f) in m.fields.iter().enumerate() {
            let start = cursor;
            while cursor < entries.len() && entries[cursor].0 == i {
                cursor += 1;
            }
            let vals = &entries[start..cursor];
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
                                write_str(&mut self.out, v.as_bytes());
                            }
                        }
                    }
                    continue;
                }
                self.enter()?;
                let ce = self.collect(cm, Segs::of(vals).as_slice())?;
                self.fields(cm, &ce, None, first)?;
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
        s: Slot<'s, '_>,
        vals: &[(usize, WireVal<'_>)],
    ) -> Result<(), ProtobufError> {
        match s {
            Slot::Null => self.out.extend_from_slice(b"null"),
            Slot::Zero(ty) => self.zero_scalar(ty),
            Slot::Scalar(ty, v) => self.scalar(ty, v)?,
            Slot::Elements(inner) => self.elements(inner, vals)?,
            Slot::Map(inner) => self.map(inner, vals)?,
            Slot::Present(inner) => self.present(inner, vals)?,
            Slot::Message(id) => self.message(id, Segs::of(vals).as_slice())?,
        }
        Ok(())
    }

    fn zero_scalar(&mut self, ty: &Ty) {
        self.out.extend_from_slice(match ty {
            Ty::Str => b"\"\"",
            Ty::Bool => b"false",
            _ => b"0",
        });
    }

    /// Writes a value known to be present (a non-nil pointer's target, a map value).
    fn present(&mut self, ty: &'s Ty, vals: &[(usize, WireVal<'_>)]) -> Result<(), ProtobufError> {
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
            (Ty::Str, WireVal::Bytes(b)) => write_str(&mut self.out, b),
            (Ty::Bytes, WireVal::Bytes(b)) => {
                self.out.push(b'"');
                let s = base64::engine::general_purpose::STANDARD.encode(b);
                self.out.extend_from_slice(s.as_bytes());
                self.out.push(b'"');
            }
            (Ty::Bool, WireVal::Varint(x)) => {
                self.out
                    .extend_from_slice(if x != 0 { b"true" } else { b"false" });
            }
            (Ty::I32, WireVal::Varint(x)) => write_int(&mut self.out, i64::from(x as i32)),
            (Ty::I64, WireVal::Varint(x)) => write_int(&mut self.out, x as i64),
            (Ty::F64, WireVal::Fixed64(x)) => {
                write_f64(&mut self.out, f64::from_bits(x)).map_err(|e| self.err(e))?;
            }
            _ => return Err(self.err("value does not match the field's type")),
        }
        Ok(())
    }

    fn elements(
        &mut self,
        inner: &'s Ty,
        vals: &[(usize, WireVal<'_>)],
    ) -> Result<(), ProtobufError> {
        self.out.push(b'[');
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
        self.out.push(b']');
        Ok(())
    }

    fn sep(&mut self, idx: usize) {
        if idx > 0 {
            self.out.push(b',');
        }
    }

    fn map(&mut self, inner: &'s Ty, vals: &[(usize, WireVal<'_>)]) -> Result<(), ProtobufError> {
        let entries = map_entries(inner, vals).map_err(|e| self.err(e))?;
        self.out.push(b'{');
        for (i, (k, v)) in entries.iter().enumerate() {
            self.sep(i);
            write_str(&mut self.out, k);
            self.out.push(b':');
            self.path
                .push(Step::Key(String::from_utf8_lossy(k).into_owned()));
            let empty_wrapped =
                is_empty_wrapped(self.schema, inner, *v).map_err(|e| self.err(e))?;
            match (inner, v) {
                _ if empty_wrapped => self.out.extend_from_slice(b"[]"),
                (Ty::Msg(id), Some(WireVal::Bytes(b))) => self.message(*id, &[b])?,
                (Ty::Msg(id), None) => self.message(*id, &[])?,
                // A missing []byte value is Go's mapvalue := []byte{}: "".
                (Ty::Bytes, None) => self.out.extend_from_slice(b"\"\""),
                (_, None) => self.zero_scalar(inner),
                (_, Some(v)) => self.scalar(inner, *v)?,
            }
            self.path.pop();
        }
        self.out.push(b'}');
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
    fn message(&mut self, id: usize, segs: &[&[u8]]) -> Result<(), ProtobufError> {
        self.enter()?;
        let schema = self.schema;
        let m = &schema.messages[id];
        match m.special {
            Special::None | Special::TypeMeta => {
                let entries = self.collect(m, segs)?;
                self.out.push(b'{');
                let mut first = true;
                self.fields(m, &entries, None, &mut first)?;
                self.out.push(b'}');
            }
            _ => match interpret(m, segs).map_err(|e| self.err(e))? {
                SpecialValue::Null => self.out.extend_from_slice(b"null"),
                SpecialValue::Quoted(text) => self.out.extend_from_slice(&text),
                SpecialValue::Text(s) => write_str(&mut self.out, s.as_bytes()),
                SpecialValue::Str(b) => write_str(&mut self.out, b),
                SpecialValue::Int(v) => write_int(&mut self.out, v),
                SpecialValue::Bool(b) => {
                    self.out
                        .extend_from_slice(if b { b"true" } else { b"false" })
                }
                SpecialValue::Raw(b) => {
                    write_compact(&mut self.out, b).map_err(|e| self.err(e))?;
                }
                SpecialValue::Present(ty, vals) => self.present(ty, &vals)?,
                SpecialValue::Elements(inner, vals) => self.elements(inner, &vals)?,
            },
        }
        self.depth -= 1;
        Ok(())
    }
}
