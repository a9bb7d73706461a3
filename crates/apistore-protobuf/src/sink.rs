//! Where the protobuf walk of `decode.rs` puts what it reads: Go's JSON text
//! ([`JsonText`], `decode_to_json`) or the `serde_json::Value` tree `serde_json` would
//! read from that text ([`ValueTree`], `decode_to_value` and the storage codec's
//! `DynamicObject`). One walk decides every field; a sink only spells the values, so
//! the tree is the text's by construction rather than by a second set of rules.
//!
//! The walk calls a sink in JSON's order: `begin_object`, then `key` before each
//! member's value (`comma` between members and between array elements), `end_object`;
//! arrays alike. Values are the leaf calls.

use std::borrow::Cow;

use base64::Engine as _;
use serde_json::{Map, Number, Value};

use crate::de::go_string;
use crate::json_write::{go_number, validate, write_compact, write_f64, write_int, write_str};
use crate::special::unquoted;

/// What the walk writes into. Errors are the reasons a value cannot be written, for
/// the walk to put the kind and path on.
pub(crate) trait Sink {
    /// `{`.
    fn begin_object(&mut self);
    /// `}`.
    fn end_object(&mut self);
    /// `[`, for an array of `len` elements (a tree makes room for them at once).
    fn begin_array(&mut self, len: usize);
    /// `]`.
    fn end_array(&mut self);
    /// `,` between members or elements.
    fn comma(&mut self);
    /// A member's name and `:` (bytes of a Go string, possibly invalid UTF-8).
    fn key(&mut self, name: &[u8]);
    /// A struct field's name (the schema's, so text) and `:`.
    fn field(&mut self, name: &str);
    /// `null`.
    fn null(&mut self);
    /// `true` or `false`.
    fn bool(&mut self, b: bool);
    /// An integer.
    fn int(&mut self, v: i64);
    /// A float64 as Go writes it (`2`, not `2.0`); not finite is an error.
    fn f64(&mut self, v: f64) -> Result<(), String>;
    /// A Go string (invalid UTF-8 written as Go writes it).
    fn str(&mut self, s: &[u8]);
    /// A string known to be text (a canonical Quantity).
    fn text(&mut self, s: Cow<'_, str>);
    /// A `[]byte`: its base64.
    fn bytes(&mut self, b: &[u8]);
    /// A JSON string already written with its quotes and needing no escapes (times,
    /// durations).
    fn quoted(&mut self, text: Vec<u8>) -> Result<(), String>;
    /// Raw JSON a `MarshalJSON` returned (RawExtension, FieldsV1): validated, then
    /// written as Go compacts it.
    fn raw(&mut self, json: &[u8]) -> Result<(), String>;
}

/// Go's JSON text, appended to a buffer.
pub(crate) struct JsonText(pub(crate) Vec<u8>);

impl Sink for JsonText {
    fn begin_object(&mut self) {
        self.0.push(b'{');
    }
    fn end_object(&mut self) {
        self.0.push(b'}');
    }
    fn begin_array(&mut self, _len: usize) {
        self.0.push(b'[');
    }
    fn end_array(&mut self) {
        self.0.push(b']');
    }
    fn comma(&mut self) {
        self.0.push(b',');
    }
    fn key(&mut self, name: &[u8]) {
        write_str(&mut self.0, name);
        self.0.push(b':');
    }
    fn field(&mut self, name: &str) {
        self.key(name.as_bytes());
    }
    fn null(&mut self) {
        self.0.extend_from_slice(b"null");
    }
    fn bool(&mut self, b: bool) {
        self.0.extend_from_slice(if b { b"true" } else { b"false" });
    }
    fn int(&mut self, v: i64) {
        write_int(&mut self.0, v);
    }
    fn f64(&mut self, v: f64) -> Result<(), String> {
        write_f64(&mut self.0, v)
    }
    fn str(&mut self, s: &[u8]) {
        write_str(&mut self.0, s);
    }
    fn text(&mut self, s: Cow<'_, str>) {
        write_str(&mut self.0, s.as_bytes());
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.push(b'"');
        let text = base64::engine::general_purpose::STANDARD.encode(b);
        self.0.extend_from_slice(text.as_bytes());
        self.0.push(b'"');
    }
    fn quoted(&mut self, text: Vec<u8>) -> Result<(), String> {
        self.0.extend_from_slice(&text);
        Ok(())
    }
    fn raw(&mut self, json: &[u8]) -> Result<(), String> {
        write_compact(&mut self.0, json)
    }
}

/// One open container of a [`ValueTree`].
enum Open {
    /// An object and the name of the member whose value comes next.
    Object(Map<String, Value>, Option<String>),
    /// An array.
    Array(Vec<Value>),
}

/// The `serde_json::Value` that `serde_json` reads from the [`JsonText`] of the same
/// walk, built without the text: numbers as it parses them (`2` an integer, `-2` a
/// negative one), a later member of the same name replacing an earlier one.
pub(crate) struct ValueTree {
    open: Vec<Open>,
    /// The finished top-level value.
    done: Option<Value>,
}

/// Open containers a tree makes room for at first: a Pod nests about ten deep. Grown
/// from nothing in every decode (4, 8, then 16 of 56 bytes), the stack left glibc's
/// malloc free chunks that its later requests sorted through: over the same decodes of
/// the bench's Pod, `_int_malloc` ran 128 M instructions against 83 M with this room
/// made at once, and a decode took 42 µs against 34 (callgrind, the decode tool).
const FIRST_DEPTH: usize = 16;

impl Default for ValueTree {
    fn default() -> Self {
        Self {
            open: Vec::with_capacity(FIRST_DEPTH),
            done: None,
        }
    }
}

impl ValueTree {
    /// The value written, once its last container has closed.
    pub(crate) fn finish(self) -> Option<Value> {
        self.done
    }

    fn put(&mut self, value: Value) {
        match self.open.last_mut() {
            Some(Open::Object(map, name)) => {
                // The walk names every member before its value; a nameless one
                // cannot come, and is dropped rather than given a made-up name.
                if let Some(name) = name.take() {
                    map.insert(name, value);
                }
            }
            Some(Open::Array(items)) => items.push(value),
            None => self.done = Some(value),
        }
    }
}

impl Sink for ValueTree {
    fn begin_object(&mut self) {
        self.open.push(Open::Object(Map::new(), None));
    }
    fn end_object(&mut self) {
        if let Some(Open::Object(map, _)) = self.open.pop() {
            self.put(Value::Object(map));
        }
    }
    fn begin_array(&mut self, len: usize) {
        self.open.push(Open::Array(Vec::with_capacity(len)));
    }
    fn end_array(&mut self) {
        if let Some(Open::Array(items)) = self.open.pop() {
            self.put(Value::Array(items));
        }
    }
    fn comma(&mut self) {}
    fn key(&mut self, name: &[u8]) {
        if let Some(Open::Object(_, pending)) = self.open.last_mut() {
            *pending = Some(go_string(name).into_owned());
        }
    }
    fn field(&mut self, name: &str) {
        if let Some(Open::Object(_, pending)) = self.open.last_mut() {
            *pending = Some(name.to_owned());
        }
    }
    fn null(&mut self) {
        self.put(Value::Null);
    }
    fn bool(&mut self, b: bool) {
        self.put(Value::Bool(b));
    }
    fn int(&mut self, v: i64) {
        self.put(Value::Number(Number::from(v)));
    }
    fn f64(&mut self, v: f64) -> Result<(), String> {
        self.put(Value::Number(go_number(v)?));
        Ok(())
    }
    fn str(&mut self, s: &[u8]) {
        self.put(Value::String(go_string(s).into_owned()));
    }
    fn text(&mut self, s: Cow<'_, str>) {
        self.put(Value::String(s.into_owned()));
    }
    fn bytes(&mut self, b: &[u8]) {
        self.put(Value::String(
            base64::engine::general_purpose::STANDARD.encode(b),
        ));
    }
    fn quoted(&mut self, text: Vec<u8>) -> Result<(), String> {
        self.put(Value::String(unquoted(text)?));
        Ok(())
    }
    fn raw(&mut self, json: &[u8]) -> Result<(), String> {
        validate(json)?;
        let value: Value = serde_json::from_slice(json).map_err(|e| e.to_string())?;
        self.put(value);
        Ok(())
    }
}
