//! [`LazyObject`]: an API object that keeps the bytes it was read from and its decoded
//! metadata, and decodes the rest (`spec`, `status`, `data`, ...) only when asked.
//!
//! # Why
//!
//! What a store and a watch cache do with most objects needs only the metadata: the
//! key (namespace, name), preconditions (uid, resourceVersion), label selectors, the
//! resourceVersion stamped on every read. A [`DynamicObject`] decodes everything into
//! a tree of `serde_json::Value`s first; for a realistic Pod most of its decode time
//! and most of the memory it holds are the body's tree. A `LazyObject` pays for the
//! envelope, the metadata and one copy of the stored bytes, and leaves the body as
//! protobuf until [`LazyObject::body`] is called. It is a second representation beside
//! [`DynamicObject`], not a faster decode of the same thing: the first body access
//! costs what a full decode costs.
//!
//! # Managed fields
//!
//! `metadata.managedFields` are most of a Pod's decoded metadata (a `serde_json` tree
//! per entry's `fieldsV1`) and nothing in a store reads them, so a read leaves them as
//! stored protobuf too: checked (walked as a decode would, nothing built, so a read
//! refuses what a whole decode refuses) but not decoded. The store's own accessors
//! ([`ApiObject::meta`]: name, namespace, uid, labels, annotations, resourceVersion)
//! work on the metadata without them; [`LazyObject::metadata`] decodes them once into a
//! complete copy it keeps; [`LazyObject::metadata_mut`] moves them into the metadata to
//! change. A write copies undecoded or unchanged managed fields as stored, byte for
//! byte, and re-encodes changed ones.
//!
//! # Reading one body field
//!
//! [`LazyObject::field_str`] reads a scalar at a JSON path (`spec.nodeName`, what a
//! Pod's field selector needs) from the stored protobuf with the kind's schema, without
//! decoding the body (src/lazy/field.rs).
//!
//! # Writing it back
//!
//! [`LazyCodec`] writes an object whose body was not changed ([`LazyObject::body_mut`]
//! not called) as its stored bytes with the metadata field re-encoded and every other
//! field copied as stored, so fields this crate's schema does not know (a newer kube
//! wrote them) survive byte for byte, in the body and, carried over, in the metadata.
//! Unchanged metadata gives back the stored bytes themselves. A changed body is
//! encoded whole, as [`StorageCodec`](crate::StorageCodec) encodes a `DynamicObject`,
//! carrying unknown fields over from the stored bytes.
//!
//! # Stored JSON
//!
//! A value that is not kube protobuf (a custom resource) is decoded whole, as a
//! `DynamicObject` would be, and held decoded: JSON decode is already cheap and a
//! `DynamicObject` keeps every field, so nothing is lost.

mod codec;
mod field;
#[cfg(test)]
mod field_tests;
mod layout;
mod managed;
#[cfg(test)]
mod managed_tests;
mod meta;
mod selector;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::OnceLock;

use apistore_storage::{ApiObject, DynamicObject, MetaAccessor, ObjectMeta};
use bytes::Bytes;
use serde_json::{Map, Value};

pub use codec::LazyCodec;
use layout::{Layout, MetaField};
use managed::{decode_partial_metadata, managed_tag};
pub use selector::LazySelector;

use crate::{KubeProtobuf, ProtobufError, Result, de as pb_de, is_protobuf};

/// An object's body: every top-level field but `apiVersion`, `kind` and `metadata`,
/// as [`DynamicObject::data`] holds it.
type Body = Map<String, Value>;

/// An API object read from storage that decodes its body only on first use.
///
/// Holds the `apiVersion`, `kind` and [`ObjectMeta`] (decoded at once: the store and
/// selectors need them; `managedFields` left stored until [`Self::metadata`] or
/// [`Self::metadata_mut`] asks for them), and the stored protobuf bytes the body is
/// decoded from when [`Self::body`] is first called (then cached); the first call
/// costs about what a whole [`DynamicObject`] decode does. It is a second
/// representation, not a faster decode of the same thing. One body field can be read
/// without decoding the body ([`Self::field_str`]).
///
/// Written through [`LazyCodec`] with its body untouched, the object is its stored
/// bytes with the metadata re-encoded and spliced in (the stored bytes themselves when
/// the metadata did not change either): fields the schema does not know survive byte
/// for byte. After [`Self::body_mut`], or when built from a `DynamicObject`, it is
/// encoded whole, unknown fields carried over from the bytes it was read from. Stored
/// JSON (a custom resource) is decoded whole at once and loses nothing.
///
/// Build one from a [`DynamicObject`] (`LazyObject::from(object)`) to create objects;
/// read them through a store built with [`LazyCodec`].
#[derive(Clone, Default)]
pub struct LazyObject {
    api_version: String,
    kind: String,
    /// The metadata the store reads and changes; without `managedFields` while
    /// `managed_stored` (they are then only in `stored`).
    metadata: ObjectMeta,
    /// Whether `metadata.managedFields` were left out of `metadata` at the read and
    /// are still only in the stored bytes: nothing in a store reads them, and as
    /// `serde_json` trees they were most of a read object's memory. Only ever set
    /// with `stored`.
    managed_stored: bool,
    /// `metadata` with the managed fields decoded into it, built by the first
    /// [`Self::metadata`] while `managed_stored`; emptied by any change to `metadata`.
    /// Boxed: one word in every object that never needs it.
    full_metadata: OnceLock<Box<ObjectMeta>>,
    /// The protobuf this object was read from; `None` for one built from a
    /// `DynamicObject` or read from JSON.
    stored: Option<Stored>,
    /// The body decoded from `stored`, once asked for.
    decoded: OnceLock<Body>,
    /// The body when it is owned: handed out to change, or never stored. Once set, the
    /// stored bytes are no longer the body's truth, and a write encodes it whole.
    owned: Option<Body>,
}

/// Stored protobuf and the schema to read its body with.
#[derive(Clone)]
struct Stored {
    bytes: Bytes,
    protobuf: &'static KubeProtobuf,
}

impl LazyObject {
    /// Reads a stored value (plain bytes, after the value transformer): kube protobuf
    /// lazily with `protobuf`'s schema (the envelope and metadata now, the body on
    /// first use), anything else as a JSON object, whole.
    ///
    /// # Errors
    ///
    /// A malformed envelope, a kind the schema does not have, malformed top-level
    /// protobuf or metadata; JSON that is not an object. Faults inside the body are
    /// found by the first [`Self::body`].
    pub fn decode(protobuf: &'static KubeProtobuf, stored: Bytes) -> Result<Self> {
        if !is_protobuf(&stored) {
            let object: DynamicObject =
                serde_json::from_slice(&stored).map_err(|e| ProtobufError::StoredJson {
                    reason: e.to_string(),
                })?;
            return Ok(Self::from(object));
        }
        let (av, kind_name, m, raw) = protobuf.open(&stored)?;
        let (field, layout) = split(kind_name, m, raw)?;
        let (metadata, managed_stored) = match managed_tag(protobuf, field) {
            Some(tag) => decode_partial_metadata(protobuf, kind_name, field, &layout, tag)?,
            None => (decode_metadata(protobuf, kind_name, field, &layout)?, false),
        };
        let (api_version, kind) = (av.to_owned(), kind_name.to_owned());
        Ok(Self {
            api_version,
            kind,
            metadata,
            managed_stored,
            full_metadata: OnceLock::new(),
            stored: Some(Stored {
                bytes: stored,
                protobuf,
            }),
            decoded: OnceLock::new(),
            owned: None,
        })
    }

    /// `apiVersion`.
    pub fn api_version(&self) -> &str {
        &self.api_version
    }

    /// `kind`.
    pub fn kind(&self) -> &str {
        &self.kind
    }

    /// The object's metadata, complete: `managedFields` included.
    ///
    /// A read leaves `managedFields` as stored protobuf (checked, not decoded); the
    /// first call decodes them into a copy of the metadata kept with the object, so it
    /// costs about what the read saved. The store's own accessors
    /// ([`ApiObject::meta`]: name, namespace, uid, labels, annotations,
    /// resourceVersion) never need them.
    ///
    /// The read checked that the managed fields decode, so [`Self::try_metadata`]
    /// does not fail on an object read through [`LazyCodec`]; if it ever did, this
    /// returns the metadata without them (writes keep them as stored regardless).
    pub fn metadata(&self) -> &ObjectMeta {
        self.try_metadata().unwrap_or(&self.metadata)
    }

    /// [`Self::metadata`], with the error of decoding the managed fields, if any.
    ///
    /// # Errors
    ///
    /// `managedFields` the schema's deserializer refuses, named by kind and path (a
    /// read through [`LazyCodec`] refuses such bytes already).
    pub fn try_metadata(&self) -> Result<&ObjectMeta> {
        if !self.managed_stored {
            return Ok(&self.metadata);
        }
        if let Some(full) = self.full_metadata.get() {
            return Ok(full);
        }
        let full = self.with_managed_fields()?;
        // Another thread may have built it meanwhile: the same metadata, keep either.
        Ok(self.full_metadata.get_or_init(|| Box::new(full)))
    }

    /// Whether `metadata.managedFields` are still only stored protobuf (not decoded):
    /// until [`Self::metadata`] or [`Self::metadata_mut`] asks for them.
    pub fn is_managed_fields_stored(&self) -> bool {
        self.managed_stored && self.full_metadata.get().is_none()
    }

    /// The object's metadata, to change, `managedFields` included (decoded now if
    /// they were not). A write re-encodes only the metadata fields that changed and
    /// copies the others as stored.
    pub fn metadata_mut(&mut self) -> &mut ObjectMeta {
        self.own_managed_fields();
        &mut self.metadata
    }

    /// The stored protobuf this object was read from, if it was (the body's source
    /// until [`Self::body_mut`]).
    pub fn stored_bytes(&self) -> Option<&Bytes> {
        self.stored.as_ref().map(|s| &s.bytes)
    }

    /// Whether the body is decoded (or owned) already: a [`Self::body`] call costs
    /// nothing more.
    pub fn is_body_decoded(&self) -> bool {
        self.owned.is_some() || self.decoded.get().is_some() || self.stored.is_none()
    }

    /// Whether the body was handed out to change, or never stored: a write then
    /// encodes the object whole.
    pub fn is_body_owned(&self) -> bool {
        self.owned.is_some()
    }

    /// The body: every top-level field but `apiVersion`, `kind` and `metadata`, as
    /// [`DynamicObject::data`] holds it (equal to it for the same bytes). Decoded from
    /// the stored bytes on the first call, then cached.
    ///
    /// # Errors
    ///
    /// Malformed protobuf in the body, named by kind and field path. Not cached: every
    /// call reports it.
    pub fn body(&self) -> Result<&Map<String, Value>> {
        if let Some(body) = &self.owned {
            return Ok(body);
        }
        if let Some(body) = self.decoded.get() {
            return Ok(body);
        }
        let body = match &self.stored {
            Some(stored) => stored.decode_body()?,
            None => Body::new(),
        };
        // Another thread may have decoded it meanwhile: the same body, keep either.
        Ok(self.decoded.get_or_init(|| body))
    }

    /// The body, to change. From then on a write encodes the whole object rather
    /// than splicing new metadata into the stored bytes.
    ///
    /// # Errors
    ///
    /// As [`Self::body`].
    pub fn body_mut(&mut self) -> Result<&mut Map<String, Value>> {
        let body = match self.owned.take() {
            Some(body) => body,
            None => match self.decoded.take() {
                Some(body) => body,
                None => match &self.stored {
                    Some(stored) => stored.decode_body()?,
                    None => Body::new(),
                },
            },
        };
        Ok(self.owned.insert(body))
    }

    /// The object as a [`DynamicObject`] (the body decoded if it was not).
    ///
    /// # Errors
    ///
    /// As [`Self::body`].
    pub fn to_dynamic(&self) -> Result<DynamicObject> {
        Ok(DynamicObject {
            api_version: self.api_version.clone(),
            kind: self.kind.clone(),
            metadata: self.try_metadata()?.clone(),
            data: self.body()?.clone(),
        })
    }

    /// The object as a [`DynamicObject`], moving what it holds.
    ///
    /// # Errors
    ///
    /// As [`Self::body`].
    pub fn into_dynamic(mut self) -> Result<DynamicObject> {
        if self.managed_stored {
            self.metadata = self.with_managed_fields()?;
            self.managed_stored = false;
        }
        let data = std::mem::take(self.body_mut()?);
        Ok(DynamicObject {
            api_version: self.api_version,
            kind: self.kind,
            metadata: self.metadata,
            data,
        })
    }

    /// The stored protobuf with this object's metadata spliced in, when the body is
    /// unchanged and `protobuf`'s schema has the stored kind; `None` when the object
    /// must be encoded whole. Unchanged metadata gives back the stored bytes.
    fn spliced(&self, protobuf: &KubeProtobuf) -> Result<Option<Bytes>> {
        let Some(stored) = self.stored.as_ref().filter(|_| self.owned.is_none()) else {
            return Ok(None);
        };
        let (av, kind_name, m, raw) = protobuf.open(&stored.bytes)?;
        if av != self.api_version || kind_name != self.kind {
            return Ok(None);
        }
        let (field, layout) = split(kind_name, m, raw)?;
        // Managed fields still stored are in neither decode, and are written as stored.
        let stored_only = match (self.managed_stored, managed_tag(protobuf, field)) {
            (false, _) => None,
            (true, Some(tag)) => Some(tag),
            // A schema without them cannot splice them: the whole encode decodes them.
            (true, None) => return Ok(None),
        };
        let old = match stored_only {
            Some(tag) => decode_partial_metadata(protobuf, kind_name, field, &layout, tag)?.0,
            None => decode_metadata(protobuf, kind_name, field, &layout)?,
        };
        if old == self.metadata {
            // Nothing to write but what is stored: byte for byte, no copy.
            return Ok(Some(stored.bytes.clone()));
        }
        let new = meta::write(
            protobuf,
            kind_name,
            field,
            &layout.meta_bytes(),
            &old,
            &self.metadata,
            stored_only,
        )?;
        let raw = layout.splice(field.tag, &new);
        Ok(Some(Bytes::from(crate::envelope::write(
            av, kind_name, &raw,
        ))))
    }
}

impl Stored {
    /// Decodes the body: the object's protobuf with its metadata fields cut out,
    /// walked into a value tree as a whole object's would be, `apiVersion`, `kind`
    /// and `metadata` (the zero value the walk writes for the cut-out field) taken
    /// out.
    fn decode_body(&self) -> Result<Body> {
        let (av, kind_name, m, raw) = self.protobuf.open(&self.bytes)?;
        let (_, layout) = split(kind_name, m, raw)?;
        let mut body = self
            .protobuf
            .members_of(kind_name, m, layout.rest_segs().as_slice(), av)?;
        for name in ["apiVersion", "kind", "metadata"] {
            body.remove(name);
        }
        Ok(body)
    }
}

/// The kind's metadata field and the object's protobuf split at it.
fn split<'a>(
    kind: &str,
    m: &crate::schema::Message,
    raw: &'a [u8],
) -> Result<(MetaField, Layout<'a>)> {
    let malformed = |reason: String| ProtobufError::Decode {
        kind: kind.to_owned(),
        path: ".".to_owned(),
        reason,
    };
    let field =
        MetaField::of(m).ok_or_else(|| malformed(format!("{} has no metadata field", m.name)))?;
    let layout = Layout::split(raw, field.tag).map_err(malformed)?;
    Ok((field, layout))
}

/// The object's metadata, from its occurrences in `layout`.
fn decode_metadata(
    protobuf: &KubeProtobuf,
    kind: &str,
    field: MetaField,
    layout: &Layout<'_>,
) -> Result<ObjectMeta> {
    pb_de::deserialize_message(
        &protobuf.schema,
        kind,
        "metadata",
        field.id,
        layout.meta_segs(),
    )
}

impl From<DynamicObject> for LazyObject {
    /// An object with its body owned: a write encodes it whole.
    fn from(object: DynamicObject) -> Self {
        Self {
            api_version: object.api_version,
            kind: object.kind,
            metadata: object.metadata,
            managed_stored: false,
            full_metadata: OnceLock::new(),
            stored: None,
            decoded: OnceLock::new(),
            owned: Some(object.data),
        }
    }
}

/// The store's accessors work on the metadata as read, without decoding the managed
/// fields (none of name, namespace, uid, labels, annotations and resourceVersion needs
/// them).
impl ApiObject for LazyObject {
    fn meta(&self) -> &dyn MetaAccessor {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        // The complete copy would no longer match.
        self.full_metadata.take();
        &mut self.metadata
    }
}

impl fmt::Debug for LazyObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LazyObject")
            .field("api_version", &self.api_version)
            .field("kind", &self.kind)
            .field("metadata", &self.metadata)
            .field("managed_fields_stored", &self.managed_stored)
            .field("stored_len", &self.stored.as_ref().map(|s| s.bytes.len()))
            .field("body_decoded", &self.is_body_decoded())
            .field("body_owned", &self.is_body_owned())
            .finish()
    }
}
