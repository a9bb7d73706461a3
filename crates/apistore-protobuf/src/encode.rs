//! Go JSON -> protobuf: reads JSON as `encoding/json.Unmarshal` would into the kind's
//! Go type, and writes the bytes gogo's generated `Marshal` would write for it: fields
//! in ascending tag order, non-pointer scalars, strings and structs always, pointers
//! and `[]byte` only when non-nil, repeated fields unpacked, maps sorted by key.
//!
//! A JSON field the Go type does not have is an error naming its path.

use base64::Engine as _;

use crate::error::{ProtobufError, Step, format_path};
use crate::json_read::{J, Node};
use crate::quantity;
use crate::schema::{Message, Schema, Special, Ty};
use crate::time::{ZERO_TIME_UNIX, parse_duration, parse_rfc3339};
use crate::wire::{begin_len, end_len, put_bytes, put_key, put_varint};

/// An object's members sorted by key, the last of repeated keys winning (as Go's
/// decoder, which decodes each in turn into the same field, leaves it).
type Index<'n, 'a> = Vec<(&'n str, &'n Node<'a>)>;

fn index<'n, 'a>(members: &'n [(std::borrow::Cow<'a, str>, Node<'a>)]) -> Index<'n, 'a> {
    let mut idx: Index<'n, 'a> = members.iter().rev().map(|(k, v)| (k.as_ref(), v)).collect();
    idx.sort_by(|a, b| a.0.cmp(b.0));
    idx.dedup_by(|a, b| a.0 == b.0);
    idx
}

fn lookup<'n, 'a>(idx: &Index<'n, 'a>, key: &str) -> Option<&'n Node<'a>> {
    idx.binary_search_by(|e| e.0.cmp(key))
        .ok()
        .map(|i| idx[i].1)
}

pub(crate) struct Encoder<'s> {
    schema: &'s Schema,
    kind: &'s str,
    path: Vec<Step<'s>>,
    depth: usize,
}

impl<'s> Encoder<'s> {
    pub(crate) fn new(schema: &'s Schema, kind: &'s str) -> Self {
        Self {
            schema,
            kind,
            path: Vec::new(),
            depth: 0,
        }
    }

    fn err(&self, reason: impl Into<String>) -> ProtobufError {
        ProtobufError::Encode {
            kind: self.kind.to_string(),
            path: format_path(&self.path),
            reason: reason.into(),
        }
    }

    /// Encodes the top-level object's fields (no length prefix).
    pub(crate) fn object(
        &mut self,
        m: &'s Message,
        node: &Node<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        self.struct_body(m, Some(node), out)
    }

    /// Encodes the fields of one nested message (no key, no length prefix), the value
    /// of the top-level field `field`: a lazy object's metadata, alone.
    pub(crate) fn nested(
        &mut self,
        field: &'s str,
        m: &'s Message,
        node: &Node<'_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        self.path.push(Step::Field(field));
        self.enter()?;
        self.struct_body(m, Some(node), out)?;
        self.depth -= 1;
        self.path.pop();
        Ok(())
    }

    /// Writes what [`Self::object`] writes for the non-inline field `f` of a struct
    /// whose JSON has no value for it (absent or null): its zero value, or nothing for
    /// a pointer, slice or map. The serde writer (`ser/`) fills its gaps with this.
    pub(crate) fn absent_field(
        &mut self,
        f: &'s crate::schema::Field,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        self.field(&f.ty, f.tag, None, out)
    }

    /// Writes what a `null` list element or map value of type `ty` becomes: the
    /// type's zero value under `tag`.
    pub(crate) fn absent_value(
        &mut self,
        ty: &'s Ty,
        tag: u32,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        self.value(ty, tag, None, out)
    }

    fn struct_body(
        &mut self,
        m: &'s Message,
        node: Option<&Node<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        let members: &[_] = match node.map(|n| &n.v) {
            None | Some(J::Null) => &[],
            Some(J::Obj(members)) => members,
            Some(_) => {
                return Err(self.err(format!(
                    "cannot unmarshal {} into Go struct {}",
                    describe(node),
                    m.name
                )));
            }
        };
        let idx = index(members);
        for (key, _) in &idx {
            if m.json_names.binary_search_by(|n| (**n).cmp(key)).is_err() {
                let mut path = format_path(&self.path);
                if path == "." {
                    path.clear();
                } else {
                    path.push('.');
                }
                path.push_str(key);
                return Err(ProtobufError::UnknownField {
                    kind: self.kind.to_string(),
                    path,
                });
            }
        }
        self.fields(m, &idx, out)
    }

    fn fields(
        &mut self,
        m: &'s Message,
        idx: &Index<'_, '_>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        for &fi in &m.by_tag {
            let f = &m.fields[fi];
            if f.inline {
                let Ty::Msg(child) = f.ty else {
                    return Err(self.err("inline field of non-struct type"));
                };
                let cm = &self.schema.messages[child];
                self.enter()?;
                let mark = begin_len(out, f.tag);
                self.fields(cm, idx, out)?;
                end_len(out, mark);
                self.depth -= 1;
                continue;
            }
            let node = lookup(idx, &f.json).filter(|n| n.v != J::Null);
            self.path.push(Step::Field(&f.json));
            self.field(&f.ty, f.tag, node, out)?;
            self.path.pop();
        }
        Ok(())
    }

    fn enter(&mut self) -> Result<(), ProtobufError> {
        self.depth += 1;
        if self.depth > crate::decode::MAX_DEPTH {
            return Err(self.err("objects nested too deeply"));
        }
        Ok(())
    }

    /// A field; `node` is `None` for absent or null.
    fn field(
        &mut self,
        ty: &'s Ty,
        tag: u32,
        node: Option<&Node<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        match ty {
            Ty::Ptr(inner) => match node {
                None => Ok(()),
                Some(n) => self.value(inner, tag, Some(n), out),
            },
            Ty::Bytes => match node {
                None => Ok(()),
                Some(n) => self.value(ty, tag, Some(n), out),
            },
            Ty::Slice(inner) => match node.map(|n| &n.v) {
                None => Ok(()),
                Some(J::Arr(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        self.path.push(Step::Index(i));
                        let item = Some(item).filter(|n| n.v != J::Null);
                        self.value(inner, tag, item, out)?;
                        self.path.pop();
                    }
                    Ok(())
                }
                Some(_) => Err(self.err(format!(
                    "cannot unmarshal {} into a Go slice",
                    describe(node)
                ))),
            },
            Ty::Map(inner) => match node.map(|n| &n.v) {
                None => Ok(()),
                Some(J::Obj(members)) => {
                    for (k, v) in index(members) {
                        self.path.push(Step::Key(k.to_string()));
                        let mark = begin_len(out, tag);
                        put_bytes(out, 1, k.as_bytes());
                        let v = Some(v).filter(|n| n.v != J::Null);
                        // gogo writes a map's []byte value even when nil.
                        if **inner == Ty::Bytes && v.is_none() {
                            put_bytes(out, 2, b"");
                        } else {
                            self.value(inner, 2, v, out)?;
                        }
                        end_len(out, mark);
                        self.path.pop();
                    }
                    Ok(())
                }
                Some(_) => {
                    Err(self.err(format!("cannot unmarshal {} into a Go map", describe(node))))
                }
            },
            _ => self.value(ty, tag, node, out),
        }
    }

    /// A value that is written (non-pointer, or a non-nil pointer's target).
    fn value(
        &mut self,
        ty: &'s Ty,
        tag: u32,
        node: Option<&Node<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        match ty {
            Ty::Str => {
                let s = match node.map(|n| &n.v) {
                    None => "",
                    Some(J::Str(s)) => s,
                    Some(_) => return Err(self.type_err(node, "string")),
                };
                put_bytes(out, tag, s.as_bytes());
            }
            Ty::Bool => {
                let b = match node.map(|n| &n.v) {
                    None => false,
                    Some(J::Bool(b)) => *b,
                    Some(_) => return Err(self.type_err(node, "bool")),
                };
                put_key(out, tag, 0);
                put_varint(out, u64::from(b));
            }
            Ty::I32 | Ty::I64 => {
                let v: i64 = match node.map(|n| &n.v) {
                    None => 0,
                    Some(J::Num(t)) => {
                        let v: i64 = t.parse().map_err(|_| {
                            self.type_err(node, if *ty == Ty::I32 { "int32" } else { "int64" })
                        })?;
                        if *ty == Ty::I32 && i32::try_from(v).is_err() {
                            return Err(self.type_err(node, "int32"));
                        }
                        v
                    }
                    Some(_) => return Err(self.type_err(node, "integer")),
                };
                put_key(out, tag, 0);
                put_varint(out, v as u64);
            }
            Ty::F64 => {
                let v: f64 = match node.map(|n| &n.v) {
                    None => 0.0,
                    Some(J::Num(t)) => t
                        .parse::<f64>()
                        .ok()
                        .filter(|f| f.is_finite())
                        .ok_or_else(|| self.type_err(node, "float64"))?,
                    Some(_) => return Err(self.type_err(node, "float64")),
                };
                put_key(out, tag, 1);
                out.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Ty::Bytes => {
                let data = match node.map(|n| &n.v) {
                    None => Vec::new(),
                    Some(J::Str(s)) => base64::engine::general_purpose::STANDARD
                        .decode(s.as_bytes())
                        .map_err(|e| self.err(format!("illegal base64 data: {e}")))?,
                    Some(_) => return Err(self.type_err(node, "[]byte")),
                };
                put_bytes(out, tag, &data);
            }
            Ty::Msg(id) => {
                self.enter()?;
                let mark = begin_len(out, tag);
                self.message(*id, node, out)?;
                end_len(out, mark);
                self.depth -= 1;
            }
            Ty::Ptr(_) | Ty::Slice(_) | Ty::Map(_) => {
                return Err(self.err("nested pointer, slice or map types are not supported"));
            }
        }
        Ok(())
    }

    fn type_err(&self, node: Option<&Node<'_>>, want: &str) -> ProtobufError {
        self.err(format!(
            "cannot unmarshal {} into Go value of type {want}",
            describe(node)
        ))
    }

    /// A struct's body (the bytes inside its length prefix).
    fn message(
        &mut self,
        id: usize,
        node: Option<&Node<'_>>,
        out: &mut Vec<u8>,
    ) -> Result<(), ProtobufError> {
        let schema = self.schema;
        let m = &schema.messages[id];
        let node = node.filter(|n| n.v != J::Null);
        match m.special {
            Special::None | Special::TypeMeta => self.struct_body(m, node, out),
            Special::Time | Special::MicroTime => {
                let Some(n) = node else { return Ok(()) };
                let J::Str(s) = &n.v else {
                    return Err(self.type_err(node, "metav1.Time (a string)"));
                };
                let micro = m.special == Special::MicroTime;
                let (secs, nanos) = parse_rfc3339(s, micro).map_err(|e| self.err(e))?;
                // IsZero looks at the parsed instant; Time's protobuf then drops nanos.
                if secs == ZERO_TIME_UNIX && nanos == 0 {
                    return Ok(());
                }
                let nanos = if micro { nanos - nanos % 1000 } else { 0 };
                put_key(out, 1, 0);
                put_varint(out, secs as u64);
                put_key(out, 2, 0);
                put_varint(out, u64::from(nanos));
                Ok(())
            }
            Special::Duration => {
                let nanos = match node.map(|n| &n.v) {
                    None => 0,
                    Some(J::Str(s)) => parse_duration(s).map_err(|e| self.err(e))?,
                    Some(_) => return Err(self.type_err(node, "metav1.Duration (a string)")),
                };
                put_key(out, 1, 0);
                put_varint(out, nanos as u64);
                Ok(())
            }
            Special::Quantity => {
                let text = match node {
                    None => "0".to_string(),
                    Some(n) => {
                        // UnmarshalJSON strips the quotes without unescaping, then spaces.
                        let raw = std::str::from_utf8(n.raw)
                            .map_err(|_| self.err("quantity is not UTF-8"))?;
                        let raw = raw
                            .strip_prefix('"')
                            .and_then(|r| r.strip_suffix('"'))
                            .unwrap_or(raw);
                        raw.trim().to_string()
                    }
                };
                let canonical = quantity::canonical(&text).map_err(|e| self.err(e))?;
                put_bytes(out, 1, canonical.as_bytes());
                Ok(())
            }
            Special::IntOrString => {
                let (kind, int, text): (u64, i64, &str) = match node.map(|n| &n.v) {
                    None => (0, 0, ""),
                    Some(J::Str(s)) => (1, 0, s),
                    Some(J::Num(t)) => {
                        let v: i32 = t.parse().map_err(|_| self.type_err(node, "int32"))?;
                        (0, i64::from(v), "")
                    }
                    Some(_) => return Err(self.type_err(node, "int32")),
                };
                put_key(out, 1, 0);
                put_varint(out, kind);
                put_key(out, 2, 0);
                put_varint(out, int as u64);
                put_bytes(out, 3, text.as_bytes());
                Ok(())
            }
            Special::RawJson | Special::Json => {
                if let Some(n) = node {
                    put_bytes(out, 1, n.raw);
                }
                Ok(())
            }
            Special::OrBool => {
                let schema_id = self.schema_ref(m, 2)?;
                match node.map(|n| &n.v) {
                    None | Some(J::Bool(false)) => {
                        put_key(out, 1, 0);
                        put_varint(out, 0);
                    }
                    Some(J::Bool(true)) => {
                        put_key(out, 1, 0);
                        put_varint(out, 1);
                    }
                    Some(J::Obj(_)) => {
                        put_key(out, 1, 0);
                        put_varint(out, 1);
                        self.value(schema_id, 2, node, out)?;
                    }
                    Some(_) => return Err(self.err("boolean or JSON schema expected")),
                }
                Ok(())
            }
            Special::OrArray | Special::OrStringArray => {
                let schema_id = self.schema_ref(m, 1)?;
                match node.map(|n| &n.v) {
                    Some(J::Obj(_)) => self.value(schema_id, 1, node, out),
                    Some(J::Arr(_)) => {
                        let Some(list) = m.tagged(2) else {
                            return Err(self.err("schema list field missing"));
                        };
                        self.field(&list.ty, 2, node, out)
                    }
                    _ => Ok(()),
                }
            }
            Special::WrapSlice => {
                let Some(items) = m.tagged(1) else {
                    return Err(self.err("wrapped slice without items"));
                };
                self.field(&items.ty, 1, node, out)
            }
        }
    }

    fn schema_ref(&self, m: &'s Message, tag: u32) -> Result<&'s Ty, ProtobufError> {
        match m.tagged(tag).map(|f| &f.ty) {
            Some(Ty::Ptr(inner)) => Ok(inner),
            _ => Err(self.err(format!("{} lacks its schema field", m.name))),
        }
    }
}

fn describe(node: Option<&Node<'_>>) -> &'static str {
    match node.map(|n| &n.v) {
        None | Some(J::Null) => "null",
        Some(J::Bool(_)) => "bool",
        Some(J::Num(_)) => "number",
        Some(J::Str(_)) => "string",
        Some(J::Arr(_)) => "array",
        Some(J::Obj(_)) => "object",
    }
}
