//! Protobuf -> Go JSON: walks an object's protobuf as its Go type's generated
//! `Unmarshal` would, and writes the JSON text `encoding/json.Marshal` would write for
//! the resulting Go value, straight into a `Vec<u8>` (no intermediate tree).
//!
//! Go semantics kept: the last occurrence of a scalar wins, repeated occurrences of a
//! nested message merge, unknown fields are skipped, fields come out in Go declaration
//! order with `omitempty` and inline structs, map keys sorted.

use base64::Engine as _;

use crate::error::{ProtobufError, Step, format_path};
use crate::json_write::{write_compact, write_f64, write_int, write_str};
use crate::quantity;
use crate::schema::{Message, Schema, Special, Ty};
use crate::time::{ZERO_TIME_UNIX, write_duration, write_rfc3339};
use crate::wire::{Fields, WireVal, read_varint};

/// Nested messages deeper than this are refused (a hostile value could otherwise
/// recurse without bound through JSONSchemaProps).
pub(crate) const MAX_DEPTH: usize = 100;

type Entries<'a> = Vec<(usize, WireVal<'a>)>;

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

    /// Reads the known fields of `m` from its (merged) segments, sorted by field index
    /// with wire order kept within a field.
    fn collect<'a>(&self, m: &Message, segs: &[&'a [u8]]) -> Result<Entries<'a>, ProtobufError> {
        let mut entries = Vec::new();
        for seg in segs {
            for item in Fields::new(seg) {
                let (tag, val) = item.map_err(|e| self.err(e))?;
                let Some(idx) = m.field_for_tag(tag) else {
                    continue;
                };
                let ty = &m.fields[idx].ty;
                if !wire_fits(ty, &val) {
                    return Err(self.err(format!(
                        "proto: wrong wireType = {} for field {} (tag {tag}) of {}",
                        val.wire_type(),
                        m.fields[idx].json,
                        m.name
                    )));
                }
                entries.push((idx, val));
            }
        }
        entries.sort_by_key(|e| e.0);
        Ok(entries)
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
                let segs = segments(vals);
                self.enter()?;
                let ce = self.collect(cm, &segs)?;
                self.fields(cm, &ce, None, first)?;
                self.depth -= 1;
                continue;
            }
            self.path.push(Step::Field(&f.json));
            self.field(&f.ty, f.omitempty, &f.json, vals, first)?;
            self.path.pop();
        }
        Ok(())
    }

    fn field(
        &mut self,
        ty: &'s Ty,
        omitempty: bool,
        name: &str,
        vals: &[(usize, WireVal<'_>)],
        first: &mut bool,
    ) -> Result<(), ProtobufError> {
        let last = vals.last().map(|v| v.1);
        match ty {
            Ty::Slice(inner) => {
                let n = self.count(inner, vals)?;
                if n == 0 {
                    if !omitempty {
                        self.key(name, first);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                self.key(name, first);
                self.elements(inner, vals)
            }
            Ty::Map(inner) => {
                if vals.is_empty() {
                    if !omitempty {
                        self.key(name, first);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                self.key(name, first);
                self.map(inner, vals)
            }
            Ty::Ptr(inner) => {
                if vals.is_empty() {
                    if !omitempty {
                        self.key(name, first);
                        self.out.extend_from_slice(b"null");
                    }
                    return Ok(());
                }
                self.key(name, first);
                self.present(inner, vals)
            }
            Ty::Bytes => match last {
                None if omitempty => Ok(()),
                Some(WireVal::Bytes(b)) if omitempty && b.is_empty() => Ok(()),
                None => {
                    self.key(name, first);
                    self.out.extend_from_slice(b"null");
                    Ok(())
                }
                Some(_) => {
                    self.key(name, first);
                    self.present(ty, vals)
                }
            },
            Ty::Msg(id) => {
                let m = &self.schema.messages[*id];
                if m.special == Special::WrapSlice {
                    let items = self.wrapped_items(m, vals)?;
                    if omitempty && items == 0 {
                        return Ok(());
                    }
                }
                self.key(name, first);
                self.message(*id, &segments(vals))
            }
            Ty::Str | Ty::Bool | Ty::I32 | Ty::I64 | Ty::F64 => {
                if omitempty && last.is_none_or(|v| scalar_is_zero(ty, v)) {
                    return Ok(());
                }
                self.key(name, first);
                match last {
                    Some(v) => self.scalar(ty, v),
                    None => {
                        self.zero_scalar(ty);
                        Ok(())
                    }
                }
            }
        }
    }

    fn wrapped_items(
        &self,
        m: &Message,
        vals: &[(usize, WireVal<'_>)],
    ) -> Result<usize, ProtobufError> {
        let e = self.collect(m, &segments(vals))?;
        Ok(e.len())
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
            Ty::Msg(id) => self.message(*id, &segments(vals)),
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

    /// The number of elements of a repeated field (packed numbers counted inside).
    fn count(&self, inner: &Ty, vals: &[(usize, WireVal<'_>)]) -> Result<usize, ProtobufError> {
        let mut n = 0;
        for (_, v) in vals {
            match (inner, v) {
                (Ty::I32 | Ty::I64 | Ty::Bool, WireVal::Bytes(b)) => {
                    let mut pos = 0;
                    while pos < b.len() {
                        read_varint(b, &mut pos).map_err(|e| self.err(e))?;
                        n += 1;
                    }
                }
                (Ty::F64, WireVal::Bytes(b)) => {
                    if b.len() % 8 != 0 {
                        return Err(self.err("packed fixed64 length is not a multiple of 8"));
                    }
                    n += b.len() / 8;
                }
                _ => n += 1,
            }
        }
        Ok(n)
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
        let mut entries: Vec<(&[u8], Option<WireVal<'_>>)> = Vec::with_capacity(vals.len());
        for (_, v) in vals {
            let WireVal::Bytes(entry) = v else {
                return Err(self.err("map entry is not length-delimited"));
            };
            let (mut key, mut value): (&[u8], Option<WireVal<'_>>) = (b"", None);
            for item in Fields::new(entry) {
                match item.map_err(|e| self.err(e))? {
                    (1, WireVal::Bytes(k)) => key = k,
                    (2, v) => {
                        if !wire_fits(inner, &v) {
                            return Err(self.err("map value has the wrong wire type"));
                        }
                        value = Some(v);
                    }
                    (1, _) => return Err(self.err("map key has the wrong wire type")),
                    _ => {}
                }
            }
            entries.push((key, value));
        }
        // Later entries win for a repeated key, as they do in Go's map.
        entries.reverse();
        entries.sort_by(|a, b| a.0.cmp(b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        self.out.push(b'{');
        for (i, (k, v)) in entries.iter().enumerate() {
            self.sep(i);
            write_str(&mut self.out, k);
            self.out.push(b':');
            self.path
                .push(Step::Key(String::from_utf8_lossy(k).into_owned()));
            match (inner, v) {
                // Go's map decoding starts each value from `&T{}`: for a named slice
                // (ExtraValue) that is an empty, non-nil slice: `[]`, not null.
                (Ty::Msg(id), v)
                    if self.schema.messages[*id].special == Special::WrapSlice
                        && self.wrapped_items(
                            &self.schema.messages[*id],
                            &v.map(|v| (0, v)).into_iter().collect::<Vec<_>>(),
                        )? == 0 =>
                {
                    self.out.extend_from_slice(b"[]");
                }
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
            Special::Time | Special::MicroTime => self.time(m.special, segs)?,
            Special::Quantity => {
                let mut text: &[u8] = b"0";
                // Quantity.Unmarshal parses each field 1 it sees; the last one stays.
                for seg in segs {
                    for item in Fields::new(seg) {
                        if let (1, v) = item.map_err(|e| self.err(e))? {
                            let WireVal::Bytes(b) = v else {
                                return Err(self.err("quantity string has the wrong wire type"));
                            };
                            text = b;
                        }
                    }
                }
                let s = std::str::from_utf8(text).map_err(|_| self.err("quantity is not UTF-8"))?;
                let canonical = quantity::canonical(s).map_err(|e| self.err(e))?;
                write_str(&mut self.out, canonical.as_bytes());
            }
            Special::Duration => {
                let e = self.collect(m, segs)?;
                let n = e.last().map_or(0, |v| match v.1 {
                    WireVal::Varint(x) => x as i64,
                    _ => 0,
                });
                write_duration(&mut self.out, n);
            }
            Special::IntOrString => {
                let e = self.collect(m, segs)?;
                let get = |tag: u32| {
                    let idx = m.field_for_tag(tag)?;
                    e.iter().rev().find(|x| x.0 == idx).map(|x| x.1)
                };
                match get(1) {
                    None | Some(WireVal::Varint(0)) => {
                        let v = match get(2) {
                            Some(WireVal::Varint(x)) => x as i32,
                            _ => 0,
                        };
                        write_int(&mut self.out, i64::from(v));
                    }
                    Some(WireVal::Varint(1)) => match get(3) {
                        Some(WireVal::Bytes(b)) => write_str(&mut self.out, b),
                        _ => self.out.extend_from_slice(b"\"\""),
                    },
                    Some(_) => return Err(self.err("impossible IntOrString.Type")),
                }
            }
            Special::RawJson | Special::Json => {
                let e = self.collect(m, segs)?;
                let raw = e.last().and_then(|v| match v.1 {
                    WireVal::Bytes(b) => Some(b),
                    _ => None,
                });
                match raw {
                    None => self.out.extend_from_slice(b"null"),
                    Some([]) if m.special == Special::Json => self.out.extend_from_slice(b"null"),
                    Some(b) => write_compact(&mut self.out, b).map_err(|e| self.err(e))?,
                }
            }
            Special::OrBool | Special::OrArray | Special::OrStringArray => {
                self.schema_or(m, segs)?;
            }
            Special::WrapSlice => {
                let e = self.collect(m, segs)?;
                let Some(f) = m.tagged(1) else {
                    return Err(self.err("wrapped slice without items"));
                };
                if e.is_empty() {
                    self.out.extend_from_slice(b"null");
                } else if let Ty::Slice(inner) = &f.ty {
                    self.elements(inner, &e)?;
                }
            }
        }
        self.depth -= 1;
        Ok(())
    }

    fn time(&mut self, special: Special, segs: &[&[u8]]) -> Result<(), ProtobufError> {
        // Time.Unmarshal replaces the value each time: the last segment is the value.
        let Some(seg) = segs.last().filter(|s| !s.is_empty()) else {
            self.out.extend_from_slice(b"null");
            return Ok(());
        };
        let (mut secs, mut nanos) = (0i64, 0i64);
        for item in Fields::new(seg) {
            match item.map_err(|e| self.err(e))? {
                (1, WireVal::Varint(x)) => secs = x as i64,
                (2, WireVal::Varint(x)) => nanos = i64::from(x as i32),
                (1 | 2, _) => return Err(self.err("timestamp field has the wrong wire type")),
                _ => {}
            }
        }
        if special == Special::Time {
            nanos = 0;
        } else {
            // Duration.Truncate(time.Microsecond) rounds toward zero; time.Unix then
            // normalises a negative remainder into the seconds.
            nanos -= nanos % 1000;
            secs = secs
                .checked_add(nanos.div_euclid(1_000_000_000))
                .ok_or_else(|| self.err("timestamp out of range"))?;
            nanos = nanos.rem_euclid(1_000_000_000);
        }
        if secs == ZERO_TIME_UNIX && nanos == 0 {
            self.out.extend_from_slice(b"null");
            return Ok(());
        }
        let micros = (special == Special::MicroTime).then_some((nanos / 1000) as u32);
        write_rfc3339(&mut self.out, secs, micros);
        Ok(())
    }

    /// JSONSchemaPropsOrBool / OrArray / OrStringArray: schema-or-something JSON.
    fn schema_or(&mut self, m: &'s Message, segs: &[&[u8]]) -> Result<(), ProtobufError> {
        let e = self.collect(m, segs)?;
        let (schema_tag, other_tag) = if m.special == Special::OrBool {
            (2, 1)
        } else {
            (1, 2)
        };
        let (Some(si), Some(oi)) = (m.field_for_tag(schema_tag), m.field_for_tag(other_tag)) else {
            return Err(self.err(format!("{} lacks its fields", m.name)));
        };
        let schema_vals: Vec<_> = e.iter().filter(|x| x.0 == si).copied().collect();
        let other: Vec<_> = e.iter().filter(|x| x.0 == oi).copied().collect();
        let schema_ty = match &m.fields[si].ty {
            Ty::Ptr(inner) => &**inner,
            t => t,
        };
        match m.special {
            Special::OrBool => {
                if !schema_vals.is_empty() {
                    self.present(schema_ty, &schema_vals)?;
                } else {
                    let allows = matches!(other.last(), Some((_, WireVal::Varint(x))) if *x != 0);
                    self.out
                        .extend_from_slice(if allows { b"true" } else { b"false" });
                }
            }
            _ => {
                let Ty::Slice(inner) = &m.fields[oi].ty else {
                    return Err(self.err(format!("{} lacks its list", m.name)));
                };
                if self.count(inner, &other)? > 0 {
                    self.elements(inner, &other)?;
                } else if !schema_vals.is_empty() {
                    self.present(schema_ty, &schema_vals)?;
                } else {
                    self.out.extend_from_slice(b"null");
                }
            }
        }
        Ok(())
    }
}

fn segments<'a>(vals: &[(usize, WireVal<'a>)]) -> Vec<&'a [u8]> {
    vals.iter()
        .filter_map(|v| match v.1 {
            WireVal::Bytes(b) => Some(b),
            _ => None,
        })
        .collect()
}

fn scalar_is_zero(ty: &Ty, v: WireVal<'_>) -> bool {
    match (ty, v) {
        (Ty::Str, WireVal::Bytes(b)) => b.is_empty(),
        (Ty::Bool, WireVal::Varint(x)) => x == 0,
        (Ty::I32, WireVal::Varint(x)) => x as i32 == 0,
        (Ty::I64, WireVal::Varint(x)) => x == 0,
        (Ty::F64, WireVal::Fixed64(x)) => f64::from_bits(x) == 0.0,
        _ => false,
    }
}

/// Whether a wire value can be this type (Go's generated code errors otherwise).
fn wire_fits(ty: &Ty, v: &WireVal<'_>) -> bool {
    match ty {
        Ty::Ptr(inner) => wire_fits(inner, v),
        Ty::Slice(inner) => match **inner {
            Ty::I32 | Ty::I64 | Ty::Bool | Ty::F64 => {
                matches!(v, WireVal::Bytes(_)) || wire_fits(inner, v)
            }
            _ => wire_fits(inner, v),
        },
        Ty::Str | Ty::Bytes | Ty::Msg(_) | Ty::Map(_) => matches!(v, WireVal::Bytes(_)),
        Ty::Bool | Ty::I32 | Ty::I64 => matches!(v, WireVal::Varint(_)),
        Ty::F64 => matches!(v, WireVal::Fixed64(_)),
    }
}
