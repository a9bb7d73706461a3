//! kube's protobuf straight into k8s-openapi's types, by code generated from the
//! schema (`cargo xtask gen-typed`): no serde calls, no JSON view, each wire field
//! written into its struct field as it is read, the way Go's generated `Unmarshal`
//! fills a `v1.Pod`.
//!
//! The result is the object [`KubeProtobuf::decode`] gives through serde (a
//! differential test over the golden fixtures holds the two equal): the same Go JSON
//! rules decide what each field holds. A non-`omitempty` scalar absent from the wire
//! is its zero (`Some("")`, `Some(0)`), an `omitempty` one whose last value is zero is
//! `None`, a struct field (not a pointer) is always there, filled with its own zeros,
//! times are cut to what their JSON keeps (seconds, microseconds), Quantities are
//! canonical, strings carry Go's per-byte U+FFFD for invalid UTF-8. Where serde would
//! refuse the object (a required field the JSON leaves out) this decode keeps the
//! field's default instead.
//!
//! The parts: `fields.rs` (what one wire field does to a struct field of each shape:
//! a value, a list, a map, a nested struct), `scalars.rs` (Go's scalar types),
//! `leaves.rs` (k8s-openapi's hand-written
//! types: Quantity, Time, IntOrString, ...; the raw-JSON ones go through the serde
//! path), `generated.rs` (every struct of k8s-openapi 1.33 to 1.37: code that differs
//! between versions inside k8s-openapi's `k8s_if_*!` macros, so only the enabled
//! version's is compiled).

mod fields;
// Generated code names every type by its path (its own included) and may use only
// part of what is passed to it (a `finish` with zeros but no nested struct leaves
// `cx` unused).
#[allow(unused_variables, clippy::use_self)]
mod generated;
mod leaves;
mod scalars;

/// What the generated file uses.
mod prelude {
    pub(super) use super::fields::{
        list, list_msg, map, map_msg, map_wrapped, msg, msg_zero, one, zero,
    };
    pub(super) use super::leaves::{
        GoBytes, GoIntOrString, GoMicroTime, GoQuantity, GoTime, list_serde, map_serde, serde_one,
        serde_zero,
    };
    pub(super) use super::scalars::{GoBool, GoF64, GoI32, GoI64, GoStr};
    pub(super) use super::sealed::Message;
    pub(super) use super::{Cx, FieldError, FromKubeProtobuf, at, inline};
    pub(super) use crate::wire::WireVal;
}

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::OnceLock;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ProtobufError;
use crate::schema::Schema;
use crate::wire::{Fields, WireVal};
use crate::{KubeProtobuf, Result};

/// Nesting deeper than this many messages is refused, as the JSON path refuses it.
const MAX_DEPTH: u32 = 100;

/// A k8s-openapi type decoded straight from kube's protobuf by generated code, with
/// [`KubeProtobuf::decode_k8s`]. Implemented for every k8s-openapi struct whose Go
/// type the embedded schema has, for the k8s-openapi version the application enabled
/// (1.33 to 1.37); not for implementing outside this crate.
pub trait FromKubeProtobuf: sealed::Message {}

impl KubeProtobuf {
    /// Decodes stored bytes (`k8s\0` envelope) of a k8s-openapi resource straight into
    /// it: the object [`decode`](Self::decode) gives for the same bytes, two to three
    /// times faster (no serde, no JSON view: generated code per type writes each wire
    /// field into its struct field). The fields Go's JSON always has are those of
    /// k8s-openapi's version: with a schema of another kube minor, an object may get
    /// an empty struct its own minor's JSON leaves out.
    ///
    /// # Errors
    ///
    /// [`ProtobufError::UnknownKind`] for a kind the schema lacks, and
    /// [`ProtobufError::Decode`] for an object of another kind than `T` or malformed
    /// protobuf (naming the field path).
    pub fn decode_k8s<T>(&self, stored: &[u8]) -> Result<T>
    where
        T: FromKubeProtobuf + k8s_openapi::Resource,
    {
        let (av, kind, _, raw) = self.open(stored)?;
        if av != T::API_VERSION || kind != T::KIND {
            return Err(wrong_type::<T>(av, kind));
        }
        let mut cx = Cx {
            schema: &self.schema,
            kind,
            depth: 0,
            run: 0,
        };
        let mut object = T::default();
        merge(&mut object, raw, &mut cx).map_err(|e| e.into_protobuf(kind))?;
        Ok(object)
    }
}

/// The error for bytes of another kind than the type asked for: a decode error that
/// says both.
fn wrong_type<T: k8s_openapi::Resource>(av: &str, kind: &str) -> ProtobufError {
    ProtobufError::Decode {
        kind: kind.to_owned(),
        path: ".".to_owned(),
        reason: format!(
            "the stored object is {av} {kind}, not the {} {} asked for",
            T::API_VERSION,
            T::KIND
        ),
    }
}

/// What every resource type the generated code decodes also is: what the codec needs
/// to hand it out and the test to compare it.
pub(crate) trait GeneratedResource:
    FromKubeProtobuf
    + k8s_openapi::Resource
    + Serialize
    + DeserializeOwned
    + PartialEq
    + Debug
    + 'static
{
}

impl<T> GeneratedResource for T where
    T: FromKubeProtobuf
        + k8s_openapi::Resource
        + Serialize
        + DeserializeOwned
        + PartialEq
        + Debug
        + 'static
{
}

/// Something done with each resource type the generated code decodes.
pub(crate) trait VisitResource {
    /// Called once per resource type.
    fn visit<T: GeneratedResource>(&mut self);
}

/// A type-erased [`KubeProtobuf::decode_k8s`]: fills the `Option<T>` behind `out`.
type DecodeInto = fn(&KubeProtobuf, &[u8], &mut dyn Any) -> Result<()>;

fn decode_into<T: GeneratedResource>(
    kp: &KubeProtobuf,
    stored: &[u8],
    out: &mut dyn Any,
) -> Result<()> {
    if let Some(slot) = out.downcast_mut::<Option<T>>() {
        *slot = Some(kp.decode_k8s::<T>(stored)?);
    }
    Ok(())
}

/// The generated decoder of every resource type, by type.
fn decoders() -> &'static HashMap<TypeId, DecodeInto> {
    struct Table(HashMap<TypeId, DecodeInto>);
    impl VisitResource for Table {
        fn visit<T: GeneratedResource>(&mut self) {
            self.0.insert(TypeId::of::<T>(), decode_into::<T>);
        }
    }
    static TABLE: OnceLock<HashMap<TypeId, DecodeInto>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Table(HashMap::new());
        generated::each_resource(&mut table);
        table.0
    })
}

/// `stored` decoded by the generated code when `T` is a k8s-openapi resource type it
/// has and `kp` is of k8s-openapi's kube minor (what [`crate::StorageCodec`] decodes a
/// typed object with); `None` otherwise, for serde. A codec of another minor keeps its
/// own schema's view: the generated code fills in what k8s-openapi's Go types have
/// (a 1.37 `CSINode`'s empty `status`, which a 1.31 one lacks).
pub(crate) fn decode_generated<T: 'static>(kp: &KubeProtobuf, stored: &[u8]) -> Option<Result<T>> {
    if kp.version().minor() != generated::MINOR {
        return None;
    }
    let decode = decoders().get(&TypeId::of::<T>())?;
    let mut slot: Option<T> = None;
    Some(match decode(kp, stored, &mut slot) {
        Ok(()) => slot.ok_or_else(|| ProtobufError::Decode {
            kind: std::any::type_name::<T>().to_owned(),
            path: ".".to_owned(),
            reason: "the generated decoder is registered under another type".to_owned(),
        }),
        Err(e) => Err(e),
    })
}

/// What a decode carries down: the schema (for the raw-JSON types read through the
/// serde path), the kind (for errors) and the nesting depth.
pub(crate) struct Cx<'s> {
    pub(crate) schema: &'s Schema,
    pub(crate) kind: &'s str,
    depth: u32,
    /// While a field is merged: when it is the first of a row of occurrences of its
    /// tag whose next field starts with the same key byte, how many the row has (1
    /// when only that byte matched), else 0. A list field then makes room for all of
    /// them at once (see `fields::push`): Go writes a repeated field's elements one
    /// after another.
    pub(crate) run: usize,
}

/// How many fields from `after` on carry `tag`, up to the first that does not (or a
/// malformed one, which the merge then reports).
fn same_tag_run(after: &Fields<'_>, tag: u32) -> usize {
    after
        .clone()
        .take_while(|field| matches!(field, Ok((t, _)) if *t == tag))
        .count()
}

/// Fills `object` from one occurrence of its message: each field merged in wire
/// order (a repeated message field merges into what is there, as Go's does), then the
/// zeros of the non-`omitempty` fields that did not come.
pub(crate) fn merge<T: sealed::Message>(
    object: &mut T,
    raw: &[u8],
    cx: &mut Cx<'_>,
) -> std::result::Result<(), FieldError> {
    cx.depth += 1;
    if cx.depth > MAX_DEPTH {
        return Err(FieldError::new(format!(
            "nesting deeper than {MAX_DEPTH} messages"
        )));
    }
    let mut seen = 0u128;
    each_field(raw, cx, |tag, value, cx| {
        object.merge_field(tag, value, cx, &mut seen)
    })?;
    object.finish(seen, cx)?;
    cx.depth -= 1;
    Ok(())
}

/// The fields of an inline struct's occurrence (`Volume`'s `VolumeSource`), each
/// handed to `field`: in JSON and in k8s-openapi they are the parent's own.
pub(crate) fn inline<'s>(
    value: WireVal<'_>,
    cx: &mut Cx<'s>,
    field: impl FnMut(u32, WireVal<'_>, &mut Cx<'s>) -> std::result::Result<(), FieldError>,
) -> std::result::Result<(), FieldError> {
    let WireVal::Bytes(raw) = value else {
        return Err(fields::wrong_wire(value));
    };
    each_field(raw, cx, field)
}

/// Each field of a message's bytes handed to `field` in wire order, with
/// [`Cx::run`] set for it.
#[inline(always)]
fn each_field<'s>(
    raw: &[u8],
    cx: &mut Cx<'s>,
    mut field: impl FnMut(u32, WireVal<'_>, &mut Cx<'s>) -> std::result::Result<(), FieldError>,
) -> std::result::Result<(), FieldError> {
    let mut fields = Fields::new(raw);
    // The tag of the row of fields being read: a row is counted at its first field.
    let mut row = 0u32;
    loop {
        let start = fields.offset();
        let Some(item) = fields.next() else { break };
        let (tag, value) = item.map_err(FieldError::new)?;
        cx.run = 0;
        // A repeated field's next element starts with the same key. Comparing its
        // first byte costs nothing for a field that is not repeated; a match is then
        // counted exactly. A Go map's entries are a repeated field too and are counted
        // for nothing (a map takes no size): one more field read per entry.
        if tag != row {
            row = tag;
            let next = fields.offset();
            if raw.get(start) == raw.get(next) {
                cx.run = 1 + same_tag_run(&fields, tag);
            }
        }
        field(tag, value, cx)?;
    }
    Ok(())
}

/// A decode failure with the path to it, built as the error returns through each
/// field and element (innermost first).
#[derive(Debug)]
pub(crate) struct FieldError {
    reason: String,
    /// Path steps, innermost first: a field's JSON name or an element's `[i]`/`[key]`.
    steps: Vec<Step>,
}

#[derive(Debug)]
enum Step {
    Field(&'static str),
    Index(usize),
    Key(String),
}

impl FieldError {
    #[cold]
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            steps: Vec::new(),
        }
    }

    /// The error from a deeper decode through the serde path, its path kept.
    #[cold]
    pub(crate) fn from_protobuf(e: ProtobufError) -> Self {
        match e {
            ProtobufError::Decode { path, reason, .. }
            | ProtobufError::Deserialize { path, reason, .. } => Self::new(if path == "." {
                reason
            } else {
                format!("{reason} (at {path} within)")
            }),
            other => Self::new(other.to_string()),
        }
    }

    #[cold]
    pub(crate) fn index(mut self, i: usize) -> Self {
        self.steps.push(Step::Index(i));
        self
    }

    #[cold]
    pub(crate) fn key(mut self, key: String) -> Self {
        self.steps.push(Step::Key(key));
        self
    }

    fn into_protobuf(self, kind: &str) -> ProtobufError {
        let mut path = String::new();
        for step in self.steps.iter().rev() {
            match step {
                Step::Field(name) => {
                    if !path.is_empty() {
                        path.push('.');
                    }
                    path.push_str(name);
                }
                Step::Index(i) => path.push_str(&format!("[{i}]")),
                Step::Key(k) => path.push_str(&format!("[{k:?}]")),
            }
        }
        if path.is_empty() {
            path.push('.');
        }
        ProtobufError::Decode {
            kind: kind.to_owned(),
            path,
            reason: self.reason,
        }
    }
}

/// `map_err` for a field: adds its JSON name to the path of an error from inside it.
pub(crate) fn at(name: &'static str) -> impl FnOnce(FieldError) -> FieldError {
    move |mut e| {
        e.steps.push(Step::Field(name));
        e
    }
}

// The decode methods are this crate's: `FromKubeProtobuf` is implemented here for
// k8s-openapi's types and nowhere else, so the trait that carries them is public (a
// bound of a public trait) but not nameable outside.
#[allow(unreachable_pub)]
mod sealed {
    use super::{Cx, FieldError};
    use crate::wire::WireVal;

    /// A struct the generated code fills field by field.
    pub trait Message: Default {
        /// Merges one wire field into the struct, marking in `seen` the fields whose
        /// absence [`Self::finish`] must fill.
        fn merge_field(
            &mut self,
            tag: u32,
            value: WireVal<'_>,
            cx: &mut Cx<'_>,
            seen: &mut u128,
        ) -> Result<(), FieldError>;

        /// Sets the non-`omitempty` fields not in `seen` to what Go's JSON has for
        /// them.
        fn finish(&mut self, seen: u128, cx: &mut Cx<'_>) -> Result<(), FieldError>;
    }
}

#[cfg(test)]
mod tests;
