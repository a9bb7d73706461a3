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
//!
//! The parts: `value.rs` (one value and the `Deserializer` over it), `structs.rs` (a
//! struct's fields as a JSON object's members), `collections.rs` (lists and Go maps),
//! `error.rs` (the field path and the deserializer's error).

mod collections;
mod error;
mod structs;
mod value;

#[cfg(test)]
mod tests;

use std::cell::RefCell;

use serde::de;

use crate::error::ProtobufError;
use crate::schema::{Message, Schema};
use crate::walk::{Entries, EntryLists, Segs, collect_into};

use error::{DeError, Path, PathStep};
pub(crate) use value::go_string;
use value::{Val, ValueDe};

/// Deserializes the top-level object of kind `kind` (message `m`, protobuf `raw`),
/// with kind and apiVersion from the envelope.
pub(crate) fn deserialize<'de, T: de::Deserialize<'de>>(
    schema: &'de Schema,
    kind: &'de str,
    m: &'de Message,
    raw: &'de [u8],
    api_version: &'de str,
) -> Result<T, ProtobufError> {
    deserialize_val(
        schema,
        kind,
        PathStep::Root,
        Val::Top(m, Segs::One(raw), api_version),
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
        lists: RefCell::new(EntryLists::from_thread()),
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
    lists: RefCell<EntryLists<'de>>,
}

impl<'de> Ctx<'de> {
    /// The known fields of `m` in a reused buffer.
    fn collect(&self, m: &Message, segs: &[&'de [u8]]) -> Result<Entries<'de>, String> {
        let mut entries = self.lists.borrow_mut().take();
        collect_into(m, segs, &mut entries)?;
        Ok(entries)
    }

    fn give_back(&self, entries: Entries<'de>) {
        self.lists.borrow_mut().give_back(entries);
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
