//! kube-apiserver's protobuf storage encoding for every built-in kind.
//!
//! kube-apiserver stores built-in types as `k8s\0` followed by a protobuf
//! `runtime.Unknown` {typeMeta, raw, contentEncoding, contentType}, where `raw` is the
//! object's gogo-generated protobuf (k8s.io/api `generated.pb.go`). This crate turns
//! those bytes into exactly the JSON Go's `encoding/json.Marshal` writes for the same
//! object ([`KubeProtobuf::decode_to_json`]; [`KubeProtobuf::decode_to_value`] builds
//! the `serde_json::Value` of that text without writing it), and JSON into exactly the bytes
//! kube-apiserver writes ([`KubeProtobuf::encode_json`]). [`StorageCodec`] makes that
//! an [`apistore_storage::Codec`] for any serde type: it reads either encoding by
//! sniffing and writes the one it is told to. [`LazyObject`] (with [`LazyCodec`]) is a
//! second representation: the stored bytes and decoded metadata, the body decoded only
//! when asked, and writes that splice new metadata into the stored bytes.
//!
//! # Why a schema generated from Go, not .proto files
//!
//! Byte-exact JSON needs what only the Go types know: each field's JSON name,
//! `omitempty`, which embedded structs are inlined into their parent's JSON
//! (`Volume.VolumeSource` is tag 2 in protobuf, flattened in JSON), and the Go
//! declaration order JSON fields come out in. The `.proto` files behind k8s-pb,
//! k8s-rs-pb or a prost-reflect descriptor carry none of that. So `interop/schema`, a
//! small Go program, walks each kube minor's own types with reflection and writes
//! `schema/k8s-1.3X.json` (1.31 to 1.37), embedded here and parsed when first used
//! ([`KubeProtobuf::for_version`]). Nothing about the
//! Kubernetes types is written by hand; only the handful of types whose JSON Go
//! writes by hand (`metav1.Time`, `resource.Quantity`, `intstr.IntOrString`,
//! `runtime.RawExtension`, apiextensions' `JSONSchemaPropsOr*`, ...) have code here.
//! See `docs/protobuf.md`.
//!
//! # Hostile bytes
//!
//! Decoding never panics: truncated varints, lengths past the end, wrong wire types,
//! groups, unknown kinds and nesting deeper than 100 messages are errors that name the
//! kind and field path. Unknown fields inside a known message are skipped, as Go's
//! generated `Unmarshal` skips them, but never lost on a write: a value written by a
//! newer kube keeps them through a read, a change and a write
//! ([`KubeProtobuf::carry_unknown_fields`], which [`StorageCodec`] applies to every
//! update), and [`KubeProtobuf::unknown_fields`] says what a read could not show.

mod carry;
mod codec;
mod de;
mod decode;
mod dynamic;
mod encode;
mod envelope;
mod error;
mod json_read;
mod json_write;
mod lazy;
mod quantity;
mod schema;
mod ser;
mod sink;
mod sizes;
mod special;
mod time;
// The decode methods of the public `FromKubeProtobuf` take this crate's private
// types: the trait carrying them is sealed, implemented here only.
#[cfg(feature = "k8s-openapi")]
#[allow(private_interfaces)]
mod typed;
mod walk;
mod wire;

#[cfg(test)]
mod tests;

use std::sync::OnceLock;

use apistore_storage::KubeVersion;

pub use carry::UnknownField;
pub use codec::{MediaType, PartialRead, StorageCodec, UnknownFieldsObserver};
pub use envelope::PROTOBUF_MAGIC;
pub use error::{ProtobufError, Result, WouldDropFields};
pub use lazy::{LazyCodec, LazyObject, LazySelector};
pub use sizes::MetadataSizes;
#[cfg(feature = "k8s-openapi")]
pub use typed::FromKubeProtobuf;

use schema::Schema;

/// Whether stored bytes are kube protobuf (start with [`PROTOBUF_MAGIC`]).
pub fn is_protobuf(stored: &[u8]) -> bool {
    stored.starts_with(&PROTOBUF_MAGIC)
}

/// The transcoder between kube's protobuf storage encoding and Go's JSON, over the
/// embedded schema of one kube minor's Kubernetes types.
#[derive(Debug)]
pub struct KubeProtobuf {
    schema: Schema,
    version: KubeVersion,
}

impl KubeProtobuf {
    /// The embedded schema of one kube minor (k8s.io/api, apiextensions-apiserver and
    /// kube-aggregator of that minor), parsed the first time it is asked for.
    pub fn for_version(version: KubeVersion) -> &'static Self {
        static SCHEMAS: [OnceLock<KubeProtobuf>; 7] = [const { OnceLock::new() }; 7];
        let index = version.index();
        let (Some(cell), Some(text)) = (SCHEMAS.get(index), schema::SCHEMA_JSON.get(index)) else {
            // KubeVersion and SCHEMA_JSON list the same minors (a test checks it); an
            // empty schema makes every call an error naming the kind.
            static EMPTY: OnceLock<KubeProtobuf> = OnceLock::new();
            return EMPTY.get_or_init(|| Self {
                schema: Schema::empty(),
                version,
            });
        };
        cell.get_or_init(|| {
            // The schema is a constant of the build, checked by this crate's tests; an
            // unparsable one is a build defect, and an empty schema (every kind
            // unknown, so every call errors) is the safe way to surface it.
            let schema = Schema::load(text).unwrap_or_else(|_| Schema::empty());
            Self { schema, version }
        })
    }

    /// The embedded schema of Kubernetes 1.31 (k8s.io/api, apiextensions-apiserver
    /// and kube-aggregator v0.31).
    pub fn k8s_1_31() -> &'static Self {
        Self::for_version(KubeVersion::V1_31)
    }

    /// The schema of the newest kube minor apistore knows.
    pub fn latest() -> &'static Self {
        Self::for_version(KubeVersion::LATEST)
    }

    /// The kube minor this schema is of.
    pub fn version(&self) -> KubeVersion {
        self.version
    }

    /// Whether the schema has this built-in kind.
    pub fn knows(&self, api_version: &str, kind: &str) -> bool {
        self.schema.kind(api_version, kind).is_some()
    }

    /// Decodes stored bytes (`k8s\0` envelope) into the JSON Go's `json.Marshal`
    /// writes for the object (kube's JSON serializer output minus its newline).
    pub fn decode_to_json(&self, stored: &[u8]) -> Result<Vec<u8>> {
        let (av, kind_name, m, raw) = self.open(stored)?;
        let mut dec = decode::Decoder::new(&self.schema, kind_name, raw.len());
        dec.object(m, &[raw], av)?;
        Ok(dec.out.0)
    }

    /// Decodes stored bytes into the `serde_json::Value` that `serde_json` reads from
    /// [`decode_to_json`](Self::decode_to_json)'s output, built straight from the
    /// protobuf (no text, and none of serde's visitor calls in between): the fastest
    /// way to an untyped tree of an object.
    pub fn decode_to_value(&self, stored: &[u8]) -> Result<serde_json::Value> {
        let (av, kind_name, m, raw) = self.open(stored)?;
        self.members_of(kind_name, m, &[raw], av)
            .map(serde_json::Value::Object)
    }

    /// The members of the JSON object of an object of kind `kind_name` (message `m`)
    /// from its bytes or their parts, built by the walk's value tree.
    pub(crate) fn members_of(
        &self,
        kind_name: &str,
        m: &schema::Message,
        parts: &[&[u8]],
        api_version: &str,
    ) -> Result<serde_json::Map<String, serde_json::Value>> {
        let mut dec =
            decode::Decoder::with_sink(&self.schema, kind_name, sink::ValueTree::default());
        dec.object(m, parts, api_version)?;
        match dec.out.finish() {
            Some(serde_json::Value::Object(members)) => Ok(members),
            _ => Err(ProtobufError::Decode {
                kind: kind_name.to_owned(),
                path: ".".to_owned(),
                reason: "the walk wrote no JSON object".to_owned(),
            }),
        }
    }

    /// Decodes stored bytes straight into any serde type, with no JSON text in
    /// between: `T` sees exactly the values `serde_json` would read from
    /// [`decode_to_json`](Self::decode_to_json)'s output, so
    /// `decode::<T>(b)` equals `serde_json::from_slice::<T>(&decode_to_json(b)?)`
    /// (errors aside: a value `T` refuses is [`ProtobufError::Deserialize`]).
    /// Strings valid as UTF-8 are borrowed from `stored`.
    pub fn decode<'de, T: serde::Deserialize<'de>>(&'de self, stored: &'de [u8]) -> Result<T> {
        let (av, kind_name, m, raw) = self.open(stored)?;
        de::deserialize(&self.schema, kind_name, m, raw, av)
    }

    /// Decodes stored bytes into a [`DynamicObject`](apistore_storage::DynamicObject)
    /// by way of [`decode_to_value`](Self::decode_to_value): the same object
    /// `decode::<DynamicObject>` gives (its body moved out of the tree, its metadata
    /// read from the tree's `metadata` member), and faster (docs/protobuf.md has the
    /// figures). A `StorageCodec<DynamicObject>` decodes this way; a codec of a newtype
    /// around `DynamicObject` goes through serde unless it wraps that codec.
    pub fn decode_dynamic(&self, stored: &[u8]) -> Result<apistore_storage::DynamicObject> {
        let (av, kind_name, m, raw) = self.open(stored)?;
        let members = self.members_of(kind_name, m, &[raw], av)?;
        apistore_storage::DynamicObject::from_members(members).map_err(|e| {
            ProtobufError::Deserialize {
                kind: kind_name.to_owned(),
                path: ".".to_owned(),
                reason: e.to_string(),
            }
        })
    }

    /// The envelope's apiVersion, the kind's name and message, and the object's bytes.
    fn open<'a>(
        &'a self,
        stored: &'a [u8],
    ) -> Result<(&'a str, &'a str, &'a schema::Message, &'a [u8])> {
        let env = envelope::parse(stored)?;
        let unknown = || ProtobufError::UnknownKind {
            api_version: String::from_utf8_lossy(env.api_version).into_owned(),
            kind: String::from_utf8_lossy(env.kind).into_owned(),
            version: self.version,
        };
        let (Ok(av), Ok(kind)) = (
            std::str::from_utf8(env.api_version),
            std::str::from_utf8(env.kind),
        ) else {
            return Err(unknown());
        };
        let (kind_name, m) = self.schema.kind_entry(av, kind).ok_or_else(unknown)?;
        Ok((av, kind_name, m, env.raw))
    }

    /// Encodes JSON text (any key order) into the bytes kube-apiserver stores.
    pub fn encode_json(&self, json: &[u8]) -> Result<Vec<u8>> {
        let node = json_read::parse(json)?;
        let json_read::J::Obj(members) = &node.v else {
            return Err(ProtobufError::Json {
                offset: 0,
                reason: "the object must be a JSON object".into(),
            });
        };
        let get = |key: &str| {
            members
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .and_then(|(_, v)| match &v.v {
                    json_read::J::Str(s) => Some(s.as_ref()),
                    _ => None,
                })
        };
        let (av, kind) = (get("apiVersion").unwrap_or(""), get("kind").unwrap_or(""));
        let (kind_name, m) =
            self.schema
                .kind_entry(av, kind)
                .ok_or_else(|| ProtobufError::UnknownKind {
                    api_version: av.to_string(),
                    kind: kind.to_string(),
                    version: self.version,
                })?;
        let mut raw = Vec::with_capacity(json.len());
        encode::Encoder::new(&self.schema, kind_name).object(m, &node, &mut raw)?;
        Ok(envelope::write(av, kind, &raw))
    }

    /// Encodes an object straight from its `Serialize` into the bytes kube-apiserver
    /// stores, the same bytes [`Self::encode_json`] writes from its JSON text (`ser/`);
    /// `None` when the object is of a shape only the JSON path writes, or one that path
    /// refuses (it names the error).
    pub(crate) fn encode_serialize<T: serde::Serialize + ?Sized>(
        &self,
        object: &T,
    ) -> Option<Vec<u8>> {
        let (av, kind, raw) = ser::encode(&self.schema, object)?;
        Some(envelope::write(&av, &kind, &raw))
    }

    /// Encodes a JSON value into the bytes kube-apiserver stores.
    pub fn encode_value(&self, value: &serde_json::Value) -> Result<Vec<u8>> {
        let text = serde_json::to_vec(value).map_err(|e| ProtobufError::Json {
            offset: 0,
            reason: e.to_string(),
        })?;
        self.encode_json(&text)
    }

    /// Every field of a stored value (`k8s\0` envelope) this schema has no name for:
    /// what a decode leaves out. Empty for a value of this kube minor or older.
    pub fn unknown_fields(&self, stored: &[u8]) -> Result<Vec<UnknownField>> {
        let (_, kind_name, m, raw) = self.open(stored)?;
        let mut out = Vec::new();
        if let Some(&id) = self.schema.by_name.get(&*m.name) {
            carry::Carrier::new(&self.schema, self.version, kind_name)
                .list_unknown(id, raw, &mut out)?;
        }
        Ok(out)
    }

    /// What a decode of `stored` leaves out, with the object it is of; `None` when
    /// nothing (or when the bytes are not a value of a kind this schema has, which a
    /// decode reports itself).
    pub fn partial_read(&self, stored: &[u8]) -> Option<PartialRead> {
        let (av, kind_name, m, raw) = self.open(stored).ok()?;
        let id = *self.schema.by_name.get(&*m.name)?;
        let mut carrier = carry::Carrier::new(&self.schema, self.version, kind_name);
        if !carrier.has_unknown(id, raw).ok()? {
            return None;
        }
        let mut fields = Vec::new();
        carrier.list_unknown(id, raw, &mut fields).ok()?;
        let (namespace, name) = carry::object_name(raw);
        Some(PartialRead {
            api_version: av.to_owned(),
            kind: kind_name.to_owned(),
            namespace,
            name,
            fields,
        })
    }

    /// `new` (stored bytes about to replace `previous` under the same key) with every
    /// field of `previous` this schema has no name for carried over to the same place,
    /// so a decode, a change and an encode lose nothing; `new` itself when `previous`
    /// has no such field or is not protobuf. Refused with
    /// [`ProtobufError::WouldDropFields`], naming the fields, where the change leaves
    /// them no place (a list whose length changed, another kind).
    pub fn carry_unknown_fields(&self, previous: &[u8], new: Vec<u8>) -> Result<Vec<u8>> {
        if !is_protobuf(previous) {
            return Ok(new);
        }
        let old_env = envelope::parse(previous)?;
        let Some(old_id) = self.kind_message_id(old_env.api_version, old_env.kind) else {
            // A kind this schema does not know could not have been decoded at all.
            return Ok(new);
        };
        let kind_name = String::from_utf8_lossy(old_env.kind).into_owned();
        let mut carrier = carry::Carrier::new(&self.schema, self.version, &kind_name);
        if !carrier.has_unknown(old_id, old_env.raw)? {
            return Ok(new);
        }
        let same_kind = is_protobuf(&new)
            && envelope::parse(&new)
                .is_ok_and(|e| e.api_version == old_env.api_version && e.kind == old_env.kind);
        if !same_kind {
            return Err(carrier.cannot_carry(
                old_id,
                old_env.raw,
                "the new value is not the same apiVersion and kind in protobuf".to_owned(),
            ));
        }
        let new_env = envelope::parse(&new)?;
        match carrier.carry(old_id, old_env.raw, new_env.raw)? {
            None => Ok(new),
            Some(raw) => Ok(envelope::write(
                &String::from_utf8_lossy(old_env.api_version),
                &kind_name,
                &raw,
            )),
        }
    }

    /// The message of an envelope's (apiVersion, kind), if the schema has it.
    fn kind_message_id(&self, api_version: &[u8], kind: &[u8]) -> Option<usize> {
        let (Ok(av), Ok(kind)) = (std::str::from_utf8(api_version), std::str::from_utf8(kind))
        else {
            return None;
        };
        let m = self.schema.kind(av, kind)?;
        self.schema.by_name.get(&*m.name).copied()
    }

    /// The byte counts of a stored object (its message, its `metadata.managedFields`,
    /// the value of `annotation`) read off the wire without decoding it: the same in
    /// every kube version, so no schema is needed.
    ///
    /// # Errors
    ///
    /// Bytes that are not kube protobuf, or whose envelope, top level or metadata is
    /// malformed.
    pub fn metadata_sizes(stored: &[u8], annotation: &str) -> Result<MetadataSizes> {
        sizes::metadata_sizes(stored, annotation)
    }

    /// The (apiVersion, kind) in the envelope, without decoding the object.
    pub fn type_meta(stored: &[u8]) -> Result<(String, String)> {
        let env = envelope::parse(stored)?;
        Ok((
            String::from_utf8_lossy(env.api_version).into_owned(),
            String::from_utf8_lossy(env.kind).into_owned(),
        ))
    }
}

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
