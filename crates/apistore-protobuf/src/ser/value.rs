//! One value of a schema type, and the top-level object.

use base64::Engine as _;
use serde::Serialize;
use serde::ser::{self, Impossible};

use super::members::{MapOrStruct, MapWriter, MsgWriter, SeqWriter};
use super::{Fallback, Writer, Written};
use crate::quantity;
use crate::schema::{Special, Ty};
use crate::time::{ZERO_TIME_UNIX, parse_duration, parse_rfc3339};
use crate::wire::{begin_len, end_len, put_bytes, put_key, put_varint};

/// The serializer methods a value of this kind never calls correctly: the JSON path's.
macro_rules! give_up {
    (@numbers $r:ty; $($rest:tt)*) => {
        give_up! {
            serialize_bool(bool) -> $r;
            serialize_i8(i8) -> $r;
            serialize_i16(i16) -> $r;
            serialize_i32(i32) -> $r;
            serialize_i64(i64) -> $r;
            serialize_i128(i128) -> $r;
            serialize_u8(u8) -> $r;
            serialize_u16(u16) -> $r;
            serialize_u32(u32) -> $r;
            serialize_u64(u64) -> $r;
            serialize_u128(u128) -> $r;
            serialize_f32(f32) -> $r;
            serialize_f64(f64) -> $r;
            serialize_char(char) -> $r;
            $($rest)*
        }
    };
    ($($method:ident($($arg:ty),*) -> $ret:ty;)*) => {
        $(fn $method(self, $(_: $arg),*) -> Result<$ret, Fallback> {
            Err(Fallback)
        })*
    };
}

/// A value of schema type `ty` (no pointer, no raw JSON: `Writer::value` took those),
/// written under `tag`.
pub(super) struct ValueSer<'w, 's> {
    pub(super) w: &'w mut Writer<'s>,
    pub(super) ty: &'s Ty,
    pub(super) tag: u32,
}

impl<'w, 's> ValueSer<'w, 's> {
    fn special(&self) -> Option<Special> {
        match self.ty {
            Ty::Msg(id) => Some(self.w.schema.messages[*id].special),
            _ => None,
        }
    }

    fn int(mut self, v: i64) -> Result<Written, Fallback> {
        let special = self.special();
        let out = &mut self.w.out;
        match (self.ty, special) {
            (Ty::I32, _) if i32::try_from(v).is_ok() => {
                put_key(out, self.tag, 0);
                put_varint(out, v as u64);
            }
            (Ty::I64, _) => {
                put_key(out, self.tag, 0);
                put_varint(out, v as u64);
            }
            // The text `serde_json` writes for an integer parses to the nearest f64,
            // as the cast rounds.
            (Ty::F64, _) => {
                put_key(out, self.tag, 1);
                out.extend_from_slice(&(v as f64).to_bits().to_le_bytes());
            }
            (_, Some(Special::Quantity)) => return self.quantity(&v.to_string()),
            (_, Some(Special::IntOrString)) => {
                let v = i32::try_from(v).map_err(|_| Fallback)?;
                self.int_or_string(0, i64::from(v), "");
            }
            _ => return Err(Fallback),
        }
        Ok(Written::Value)
    }

    /// A Quantity from its JSON text without quotes (`encode.rs` reads the raw text).
    fn quantity(self, text: &str) -> Result<Written, Fallback> {
        let canonical = quantity::canonical(text.trim()).map_err(|_| Fallback)?;
        let mark = begin_len(&mut self.w.out, self.tag);
        put_bytes(&mut self.w.out, 1, canonical.as_bytes());
        end_len(&mut self.w.out, mark);
        Ok(Written::Value)
    }

    fn int_or_string(&mut self, kind: u64, int: i64, text: &str) {
        let out = &mut self.w.out;
        let mark = begin_len(out, self.tag);
        put_key(out, 1, 0);
        put_varint(out, kind);
        put_key(out, 2, 0);
        put_varint(out, int as u64);
        put_bytes(out, 3, text.as_bytes());
        end_len(out, mark);
    }

    fn time(self, s: &str, micro: bool) -> Result<Written, Fallback> {
        let (secs, nanos) = parse_rfc3339(s, micro).map_err(|_| Fallback)?;
        let out = &mut self.w.out;
        let mark = begin_len(out, self.tag);
        // A zero instant is written as the empty message, as `encode.rs` writes it.
        if secs != ZERO_TIME_UNIX || nanos != 0 {
            let nanos = if micro { nanos - nanos % 1000 } else { 0 };
            put_key(out, 1, 0);
            put_varint(out, secs as u64);
            put_key(out, 2, 0);
            put_varint(out, u64::from(nanos));
        }
        end_len(out, mark);
        Ok(Written::Value)
    }

    /// A struct's members, its key and length prefix begun.
    fn message(self) -> Result<MsgWriter<'w, 's>, Fallback> {
        let Ty::Msg(id) = self.ty else {
            return Err(Fallback);
        };
        let m = &self.w.schema.messages[*id];
        if !matches!(m.special, Special::None | Special::TypeMeta) {
            return Err(Fallback);
        }
        self.w.enter()?;
        let mark = begin_len(&mut self.w.out, self.tag);
        Ok(MsgWriter::nested(self.w, m, mark))
    }
}

impl<'w, 's> ser::Serializer for ValueSer<'w, 's> {
    type Ok = Written;
    type Error = Fallback;
    type SerializeSeq = SeqWriter<'w, 's>;
    type SerializeTuple = Impossible<Written, Fallback>;
    type SerializeTupleStruct = Impossible<Written, Fallback>;
    type SerializeTupleVariant = Impossible<Written, Fallback>;
    type SerializeMap = MapOrStruct<'w, 's>;
    type SerializeStruct = MsgWriter<'w, 's>;
    type SerializeStructVariant = Impossible<Written, Fallback>;

    fn serialize_bool(self, v: bool) -> Result<Written, Fallback> {
        if *self.ty != Ty::Bool {
            return Err(Fallback);
        }
        put_key(&mut self.w.out, self.tag, 0);
        put_varint(&mut self.w.out, u64::from(v));
        Ok(Written::Value)
    }

    fn serialize_i8(self, v: i8) -> Result<Written, Fallback> {
        self.int(i64::from(v))
    }

    fn serialize_i16(self, v: i16) -> Result<Written, Fallback> {
        self.int(i64::from(v))
    }

    fn serialize_i32(self, v: i32) -> Result<Written, Fallback> {
        self.int(i64::from(v))
    }

    fn serialize_i64(self, v: i64) -> Result<Written, Fallback> {
        self.int(v)
    }

    fn serialize_u8(self, v: u8) -> Result<Written, Fallback> {
        self.int(i64::from(v))
    }

    fn serialize_u16(self, v: u16) -> Result<Written, Fallback> {
        self.int(i64::from(v))
    }

    fn serialize_u32(self, v: u32) -> Result<Written, Fallback> {
        self.int(i64::from(v))
    }

    fn serialize_u64(self, v: u64) -> Result<Written, Fallback> {
        match i64::try_from(v) {
            Ok(v) => self.int(v),
            Err(_) if *self.ty == Ty::F64 => {
                put_key(&mut self.w.out, self.tag, 1);
                let bits = (v as f64).to_bits().to_le_bytes();
                self.w.out.extend_from_slice(&bits);
                Ok(Written::Value)
            }
            Err(_) if self.special() == Some(Special::Quantity) => self.quantity(&v.to_string()),
            Err(_) => Err(Fallback),
        }
    }

    fn serialize_f64(self, v: f64) -> Result<Written, Fallback> {
        // `serde_json` writes a finite f64 as text that parses back to it exactly; it
        // writes null for the others, and Go has integers where its text has a point.
        if *self.ty != Ty::F64 || !v.is_finite() {
            return Err(Fallback);
        }
        put_key(&mut self.w.out, self.tag, 1);
        self.w.out.extend_from_slice(&v.to_bits().to_le_bytes());
        Ok(Written::Value)
    }

    fn serialize_str(mut self, v: &str) -> Result<Written, Fallback> {
        match (self.ty, self.special()) {
            (Ty::Str, _) => put_bytes(&mut self.w.out, self.tag, v.as_bytes()),
            // `[]byte` is base64 in JSON.
            (Ty::Bytes, _) => {
                let data = base64::engine::general_purpose::STANDARD
                    .decode(v.as_bytes())
                    .map_err(|_| Fallback)?;
                put_bytes(&mut self.w.out, self.tag, &data);
            }
            (_, Some(Special::Time)) => return self.time(v, false),
            (_, Some(Special::MicroTime)) => return self.time(v, true),
            (_, Some(Special::Duration)) => {
                let nanos = parse_duration(v).map_err(|_| Fallback)?;
                let out = &mut self.w.out;
                let mark = begin_len(out, self.tag);
                put_key(out, 1, 0);
                put_varint(out, nanos as u64);
                end_len(out, mark);
            }
            // `encode.rs` reads a Quantity's raw text, escapes and all: the same text
            // only when `serde_json` escapes nothing in it.
            (_, Some(Special::Quantity)) => {
                if v.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
                    return Err(Fallback);
                }
                return self.quantity(v);
            }
            (_, Some(Special::IntOrString)) => self.int_or_string(1, 0, v),
            _ => return Err(Fallback),
        }
        Ok(Written::Value)
    }

    fn serialize_none(self) -> Result<Written, Fallback> {
        Ok(Written::Null)
    }

    fn serialize_unit(self) -> Result<Written, Fallback> {
        Ok(Written::Null)
    }

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Written, Fallback> {
        v.serialize(self)
    }

    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Written, Fallback> {
        self.serialize_str(variant)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        v: &T,
    ) -> Result<Written, Fallback> {
        v.serialize(self)
    }

    fn serialize_seq(self, _len: Option<usize>) -> Result<SeqWriter<'w, 's>, Fallback> {
        match self.ty {
            Ty::Slice(inner) => Ok(SeqWriter {
                w: self.w,
                inner,
                tag: self.tag,
            }),
            _ => Err(Fallback),
        }
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<MapOrStruct<'w, 's>, Fallback> {
        match self.ty {
            Ty::Map(inner) => Ok(MapOrStruct::Map(MapWriter::new(self.w, inner, self.tag))),
            _ => self.message().map(MapOrStruct::Struct),
        }
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<MsgWriter<'w, 's>, Fallback> {
        self.message()
    }

    give_up! {
        serialize_i128(i128) -> Written;
        serialize_u128(u128) -> Written;
        serialize_f32(f32) -> Written;
        serialize_char(char) -> Written;
        serialize_bytes(&[u8]) -> Written;
        serialize_unit_struct(&'static str) -> Written;
        serialize_tuple(usize) -> Impossible<Written, Fallback>;
        serialize_tuple_struct(&'static str, usize) -> Impossible<Written, Fallback>;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<Written, Fallback>;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<Written, Fallback>;
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _v: &T,
    ) -> Result<Written, Fallback> {
        Err(Fallback)
    }
}

/// The top-level object: a struct or map whose members start with `apiVersion` and
/// `kind`.
pub(super) struct TopSer<'w, 's> {
    pub(super) w: &'w mut Writer<'s>,
}

impl<'w, 's> ser::Serializer for TopSer<'w, 's> {
    type Ok = Written;
    type Error = Fallback;
    type SerializeSeq = Impossible<Written, Fallback>;
    type SerializeTuple = Impossible<Written, Fallback>;
    type SerializeTupleStruct = Impossible<Written, Fallback>;
    type SerializeTupleVariant = Impossible<Written, Fallback>;
    type SerializeMap = MsgWriter<'w, 's>;
    type SerializeStruct = MsgWriter<'w, 's>;
    type SerializeStructVariant = Impossible<Written, Fallback>;

    fn serialize_some<T: Serialize + ?Sized>(self, v: &T) -> Result<Written, Fallback> {
        v.serialize(self)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        v: &T,
    ) -> Result<Written, Fallback> {
        v.serialize(self)
    }

    fn serialize_map(self, _len: Option<usize>) -> Result<MsgWriter<'w, 's>, Fallback> {
        Ok(MsgWriter::top(self.w))
    }

    fn serialize_struct(
        self,
        _name: &'static str,
        _len: usize,
    ) -> Result<MsgWriter<'w, 's>, Fallback> {
        Ok(MsgWriter::top(self.w))
    }

    give_up! {
        @numbers Written;
        serialize_str(&str) -> Written;
        serialize_bytes(&[u8]) -> Written;
        serialize_none() -> Written;
        serialize_unit() -> Written;
        serialize_unit_struct(&'static str) -> Written;
        serialize_unit_variant(&'static str, u32, &'static str) -> Written;
        serialize_seq(Option<usize>) -> Impossible<Written, Fallback>;
        serialize_tuple(usize) -> Impossible<Written, Fallback>;
        serialize_tuple_struct(&'static str, usize) -> Impossible<Written, Fallback>;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<Written, Fallback>;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<Written, Fallback>;
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _v: &T,
    ) -> Result<Written, Fallback> {
        Err(Fallback)
    }
}

/// A string (a top-level apiVersion or kind, a key), handed to `take` as it is
/// serialized, so a key is looked up or written without a copy.
pub(super) struct KeySer<F>(pub(super) F);

impl<R, F: FnOnce(&str) -> Result<R, Fallback>> ser::Serializer for KeySer<F> {
    type Ok = R;
    type Error = Fallback;
    type SerializeSeq = Impossible<R, Fallback>;
    type SerializeTuple = Impossible<R, Fallback>;
    type SerializeTupleStruct = Impossible<R, Fallback>;
    type SerializeTupleVariant = Impossible<R, Fallback>;
    type SerializeMap = Impossible<R, Fallback>;
    type SerializeStruct = Impossible<R, Fallback>;
    type SerializeStructVariant = Impossible<R, Fallback>;

    fn serialize_str(self, v: &str) -> Result<R, Fallback> {
        (self.0)(v)
    }

    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        v: &T,
    ) -> Result<R, Fallback> {
        v.serialize(self)
    }

    give_up! {
        @numbers R;
        serialize_bytes(&[u8]) -> R;
        serialize_none() -> R;
        serialize_unit() -> R;
        serialize_unit_struct(&'static str) -> R;
        serialize_unit_variant(&'static str, u32, &'static str) -> R;
        serialize_seq(Option<usize>) -> Impossible<R, Fallback>;
        serialize_tuple(usize) -> Impossible<R, Fallback>;
        serialize_tuple_struct(&'static str, usize) -> Impossible<R, Fallback>;
        serialize_tuple_variant(&'static str, u32, &'static str, usize) -> Impossible<R, Fallback>;
        serialize_map(Option<usize>) -> Impossible<R, Fallback>;
        serialize_struct(&'static str, usize) -> Impossible<R, Fallback>;
        serialize_struct_variant(&'static str, u32, &'static str, usize) -> Impossible<R, Fallback>;
    }

    fn serialize_some<T: Serialize + ?Sized>(self, _v: &T) -> Result<R, Fallback> {
        Err(Fallback)
    }

    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        _v: &T,
    ) -> Result<R, Fallback> {
        Err(Fallback)
    }
}
