//! [`LazyObject`] and [`LazyCodec`]: lossless writes of untouched bodies (Go's own bytes
//! from the golden fixtures, and values with fields of a newer kube), metadata changes,
//! the body against a `DynamicObject` decode, owned bodies, stored JSON, hostile bytes.

use std::path::Path;

use apistore_storage::{Codec, DynamicObject};
use base64::Engine as _;
use bytes::Bytes;
use serde_json::json;

use super::{LazyCodec, LazyObject};
use crate::envelope;
use crate::wire::{Fields, WireVal, put_bytes, put_key, put_varint};
use crate::{KubeProtobuf, MediaType, ProtobufError, StorageCodec};

pub(super) fn kp() -> &'static KubeProtobuf {
    KubeProtobuf::k8s_1_31()
}

pub(super) fn codec() -> LazyCodec {
    LazyCodec::for_kube(MediaType::Protobuf, apistore_storage::KubeVersion::V1_31)
}

pub(super) fn dynamic_codec() -> StorageCodec<DynamicObject> {
    StorageCodec::for_kube(MediaType::Protobuf, apistore_storage::KubeVersion::V1_31)
}

/// Every (kind file, case name, stored bytes) of the 1.31 golden fixtures: the bytes
/// kube-apiserver's own serializer wrote.
pub(super) fn golden() -> Vec<(String, String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut out = Vec::new();
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "index.json"))
        .collect();
    files.sort();
    for path in files {
        let fixture: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        for case in fixture["cases"].as_array().unwrap() {
            let Some(pb) = case["protobuf"].as_str() else {
                continue;
            };
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(pb)
                .unwrap();
            out.push((
                file.clone(),
                case["name"].as_str().unwrap().to_owned(),
                bytes,
            ));
        }
    }
    out
}

/// Go's bytes for the realistic Pod of the golden fixtures.
pub(super) fn realistic_pod() -> Vec<u8> {
    golden()
        .into_iter()
        .find(|(file, case, _)| file == "core_v1_Pod.json" && case == "realistic/pod")
        .map(|(_, _, bytes)| bytes)
        .unwrap()
}

pub(super) fn lazy(stored: &[u8]) -> LazyObject {
    codec().decode(stored).unwrap()
}

#[test]
fn an_untouched_object_writes_back_go_s_bytes_for_every_golden_kind() {
    let (mut checked, mut without_metadata) = (0, Vec::new());
    for (file, case, stored) in golden() {
        let object = match codec().decode(&stored) {
            Ok(object) => object,
            Err(e) => {
                // Kinds that are not objects (options, reviews) have no metadata.
                assert!(
                    e.to_string().contains("has no metadata field"),
                    "{file} {case}: {e}"
                );
                without_metadata.push(file);
                continue;
            }
        };
        let written = codec().encode(&object).unwrap();
        assert_eq!(written, stored, "{file} {case}");
        checked += 1;
    }
    assert!(checked > 400, "checked {checked} cases");
    assert!(!without_metadata.iter().any(|f| f == "core_v1_Pod.json"));
}

#[test]
fn the_realistic_pod_round_trips_byte_for_byte_with_its_resource_version_cleared() {
    let stored = realistic_pod();
    let mut object = lazy(&stored);
    // What the store does: stamp the revision after a read, clear it before a write.
    object.metadata_mut().resource_version = "42".to_owned();
    assert!(!object.is_body_decoded());
    object.metadata_mut().resource_version.clear();
    let written = codec().encode(&object).unwrap();
    assert_eq!(written, stored);
    // Unchanged, the write is the stored bytes themselves, not a copy.
    assert_eq!(written.as_ptr(), object.stored_bytes().unwrap().as_ptr());
    assert!(!object.is_body_decoded());
}

#[test]
fn metadata_and_body_equal_a_dynamic_object_decode_of_the_same_bytes() {
    let mut compared = 0;
    for (file, case, stored) in golden() {
        let Ok(object) = codec().decode(&stored) else {
            continue;
        };
        compared += 1;
        let whole = dynamic_codec().decode(&stored).unwrap();
        assert_eq!(object.api_version(), whole.api_version, "{file} {case}");
        assert_eq!(object.kind(), whole.kind, "{file} {case}");
        assert_eq!(object.metadata(), &whole.metadata, "{file} {case}");
        assert_eq!(object.body().unwrap(), &whole.data, "{file} {case}");
        assert_eq!(object.to_dynamic().unwrap(), whole, "{file} {case}");
    }
    // Only kinds without a metadata field are skipped: nearly every case compares.
    assert!(
        compared > 400,
        "only {compared} golden cases decoded lazily"
    );
}

#[test]
fn metadata_changes_land_and_the_body_bytes_stay_as_stored() {
    let stored = realistic_pod();
    let mut object = lazy(&stored);
    let meta = object.metadata_mut();
    meta.labels.insert("added".to_owned(), "yes".to_owned());
    meta.annotations.clear();
    meta.generation = Some(99);
    let written = codec().encode(&object).unwrap();
    assert_ne!(written, stored);
    let back = dynamic_codec().decode(&written).unwrap();
    assert_eq!(back.metadata, object.metadata().clone());
    assert_eq!(back.data, dynamic_codec().decode(&stored).unwrap().data);
    // Everything after the metadata field is the stored bytes.
    let tail = |bytes: &[u8]| {
        let raw = envelope::parse(bytes).unwrap().raw;
        let mut fields = Fields::new(raw);
        let first = fields.next().unwrap().unwrap();
        assert_eq!(first.0, 1);
        raw[fields.offset()..].to_vec()
    };
    assert_eq!(tail(&written), tail(&stored));
    assert!(!object.is_body_decoded());
}

/// `stored` with `extra` appended to the message at `path` (tags from the object's
/// top level; the first occurrence of each).
pub(super) fn with_field(stored: &[u8], path: &[u32], extra: &[u8]) -> Vec<u8> {
    fn append(message: &[u8], path: &[u32], extra: &[u8]) -> Vec<u8> {
        let Some((&tag, rest)) = path.split_first() else {
            return [message, extra].concat();
        };
        let mut out = Vec::new();
        let mut fields = Fields::new(message);
        let (mut start, mut done) = (0, false);
        while let Some(item) = fields.next() {
            let (field, val) = item.unwrap();
            let end = fields.offset();
            match val {
                WireVal::Bytes(inner) if field == tag && !done => {
                    put_bytes(&mut out, tag, &append(inner, rest, extra));
                    done = true;
                }
                _ => out.extend_from_slice(&message[start..end]),
            }
            start = end;
        }
        assert!(done, "no field {tag}");
        out
    }
    let env = envelope::parse(stored).unwrap();
    let raw = append(env.raw, path, extra);
    envelope::write(
        std::str::from_utf8(env.api_version).unwrap(),
        std::str::from_utf8(env.kind).unwrap(),
        &raw,
    )
}

/// A string field `tag` no kube has.
pub(super) fn unknown_string(tag: u32, text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    put_bytes(&mut out, tag, text.as_bytes());
    out
}

#[test]
fn fields_of_a_newer_kube_survive_byte_for_byte_unchanged_and_through_a_metadata_change() {
    let mut stored = realistic_pod();
    // At the top level (a varint), in spec, in spec.containers[0], and in metadata.
    stored = with_field(&stored, &[], &{
        let mut v = Vec::new();
        put_key(&mut v, 77, 0);
        put_varint(&mut v, 5);
        v
    });
    stored = with_field(&stored, &[2], &unknown_string(901, "spec-future"));
    stored = with_field(&stored, &[2, 2], &unknown_string(902, "container-future"));
    stored = with_field(&stored, &[1], &unknown_string(903, "meta-future"));
    let unknown = kp().unknown_fields(&stored).unwrap();
    assert_eq!(unknown.len(), 4, "{unknown:?}");

    let mut object = lazy(&stored);
    assert_eq!(codec().encode(&object).unwrap(), stored);

    object
        .metadata_mut()
        .labels
        .insert("changed".to_owned(), "1".to_owned());
    let written = codec().encode(&object).unwrap();
    assert_ne!(written, stored);
    assert_eq!(kp().unknown_fields(&written).unwrap(), unknown);
    let back = dynamic_codec().decode(&written).unwrap();
    assert_eq!(
        back.metadata.labels.get("changed").map(String::as_str),
        Some("1")
    );
    for text in ["spec-future", "container-future", "meta-future"] {
        let found = written
            .windows(text.len())
            .filter(|w| *w == text.as_bytes());
        assert_eq!(found.count(), 1, "{text}");
    }
}

#[test]
fn an_object_read_at_an_older_revision_keeps_what_a_newer_kube_wrote_since() {
    let older = realistic_pod();
    // Since the object was read, a newer kube wrote the value again with a field no
    // kube here knows.
    let newer = with_field(&older, &[], &unknown_string(9999, "written since"));
    let mut object = lazy(&older);
    object
        .metadata_mut()
        .labels
        .insert("changed".to_owned(), "yes".to_owned());
    let written = codec().encode_replacing(&object, &newer).unwrap();
    let unknown = |bytes: &[u8]| kp().unknown_fields(bytes).unwrap();
    assert_eq!(unknown(&written), unknown(&newer));
    assert!(!unknown(&written).is_empty());
    let back = dynamic_codec().decode(&written).unwrap();
    assert_eq!(
        back.metadata.labels.get("changed").map(String::as_str),
        Some("yes")
    );
}

#[test]
fn a_changed_body_is_encoded_whole_and_keeps_fields_of_a_newer_kube() {
    let stored = with_field(&realistic_pod(), &[2], &unknown_string(901, "spec-future"));
    let mut object = lazy(&stored);
    object
        .body_mut()
        .unwrap()
        .get_mut("spec")
        .and_then(|spec| spec.as_object_mut())
        .unwrap()
        .insert("nodeName".to_owned(), json!("node-b"));
    assert!(object.is_body_owned());
    let written = codec().encode(&object).unwrap();
    let back = dynamic_codec().decode(&written).unwrap();
    assert_eq!(back.data["spec"]["nodeName"], "node-b");
    assert_eq!(back.metadata, object.metadata().clone());
    assert_eq!(kp().unknown_fields(&written).unwrap().len(), 1);
}

#[test]
fn an_object_built_from_a_dynamic_object_encodes_as_the_dynamic_codec_does() {
    let whole = DynamicObject::new("v1", "ConfigMap", "cm")
        .within("ns")
        .with("data", json!({"k": "v"}));
    let object = LazyObject::from(whole.clone());
    assert!(object.is_body_owned());
    let written = codec().encode(&object).unwrap();
    assert_eq!(written, dynamic_codec().encode(&whole).unwrap());
    let read = lazy(&written);
    assert_eq!(read.body().unwrap()["data"], json!({"k": "v"}));
    assert_eq!(read.metadata().namespace, "ns");
}

#[test]
fn stored_json_is_read_whole_and_loses_no_field() {
    let text = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","finalizers":["x"]},"spec":{"size":3,"deep":{"a":[1,2]}},"extra":true}"#;
    let object = lazy(text);
    assert!(object.stored_bytes().is_none());
    assert_eq!(object.body().unwrap()["extra"], json!(true));
    let json_codec = LazyCodec::new(MediaType::Json);
    let written = json_codec.encode(&object).unwrap();
    let a: serde_json::Value = serde_json::from_slice(&written).unwrap();
    let b: serde_json::Value = serde_json::from_slice(text).unwrap();
    assert_eq!(a, b);
}

#[test]
fn json_that_is_not_an_object_is_a_typed_error() {
    let err = LazyObject::decode(kp(), Bytes::from_static(b"[1,2]")).unwrap_err();
    assert!(matches!(err, ProtobufError::StoredJson { .. }), "{err}");
}

#[test]
fn a_corrupt_body_is_reported_by_the_first_body_access_with_kind_and_path() {
    // spec (field 2) of the Pod with a containers entry (field 2) as a varint.
    let stored = with_field(&realistic_pod(), &[2], &[0x10, 0x01]);
    let object = lazy(&stored);
    let err = object.body().unwrap_err();
    match &err {
        ProtobufError::Decode { kind, path, .. } => {
            assert_eq!(kind, "Pod");
            assert_eq!(path, "spec", "{err}");
        }
        other => panic!("{other:?}"),
    }
    assert!(object.body().is_err());
    assert!(object.to_dynamic().is_err());
}

#[test]
fn truncated_and_flipped_bytes_are_errors_never_panics() {
    let stored = realistic_pod();
    for len in 0..stored.len() {
        let cut = &stored[..len];
        if let Ok(object) = codec().decode(cut) {
            let _ = object.body();
            let _ = codec().encode(&object);
        }
    }
    let err = codec().decode(&stored[..10]).unwrap_err();
    assert!(err.to_string().contains("decode failed"), "{err}");
    for at in (4..stored.len()).step_by(7) {
        let mut flipped = stored.clone();
        flipped[at] ^= 0xa5;
        if let Ok(mut object) = codec().decode(&flipped) {
            let _ = object.body();
            let _ = codec().encode(&object);
            let _ = object.body_mut();
            let _ = codec().encode(&object);
        }
    }
}

/// The object's metadata fields but labels (field 11), as stored, and every byte of
/// the object after its metadata.
fn all_but_labels(stored: &[u8]) -> (Vec<Vec<u8>>, Vec<u8>) {
    let raw = envelope::parse(stored).unwrap().raw;
    let mut fields = Fields::new(raw);
    let (tag, meta) = fields.next().unwrap().unwrap();
    assert_eq!(tag, 1);
    let WireVal::Bytes(meta) = meta else {
        panic!("metadata is not a message")
    };
    let kept = crate::carry::fields_of(meta)
        .unwrap()
        .into_iter()
        .filter(|f| f.tag != 11)
        .map(|f| f.raw.to_vec())
        .collect();
    (kept, raw[fields.offset()..].to_vec())
}

#[test]
fn a_label_change_rewrites_only_the_labels_for_every_golden_kind() {
    let mut checked = 0;
    for (file, case, stored) in golden() {
        let Ok(mut object) = codec().decode(&stored) else {
            continue;
        };
        if !file.ends_with("List.json")
            && envelope::parse(&stored).unwrap().raw.first() == Some(&0x0a)
        {
            object
                .metadata_mut()
                .labels
                .insert("lazy.example.com/changed".to_owned(), "1".to_owned());
            let written = codec().encode(&object).unwrap();
            let back = dynamic_codec().decode(&written).unwrap();
            assert_eq!(&back.metadata, object.metadata(), "{file} {case}");
            assert_eq!(
                all_but_labels(&written),
                all_but_labels(&stored),
                "{file} {case}"
            );
            checked += 1;
        }
    }
    assert!(checked > 300, "checked {checked} cases");
}
