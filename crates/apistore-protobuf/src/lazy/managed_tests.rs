//! `metadata.managedFields` kept as stored protobuf: complete metadata on request,
//! the store's accessors without decoding them, writes that copy them byte for byte
//! (unknown fields included) or re-encode them when they changed, and corrupt managed
//! fields refused at the read as a whole decode refuses them.

use apistore_storage::{ApiObject, Codec};
use serde_json::json;

use super::tests::{
    codec, dynamic_codec, golden, kp, lazy, realistic_pod, unknown_string, with_field,
};
use crate::envelope;
use crate::wire::{Fields, WireVal};

/// `metadata.managedFields`' tag in `metav1.ObjectMeta`.
const MANAGED: u32 = 17;
/// `metadata.annotations`' tag.
const ANNOTATIONS: u32 = 12;
/// `metadata.resourceVersion`'s tag.
const RESOURCE_VERSION: u32 = 6;

/// The stored metadata's fields (tag, raw encoding), in wire order.
fn meta_fields(stored: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let raw = envelope::parse(stored).unwrap().raw;
    let mut fields = Fields::new(raw);
    let (tag, meta) = fields.next().unwrap().unwrap();
    assert_eq!(tag, 1);
    let WireVal::Bytes(meta) = meta else {
        panic!("metadata is not a message")
    };
    crate::carry::fields_of(meta)
        .unwrap()
        .into_iter()
        .map(|f| (f.tag, f.raw.to_vec()))
        .collect()
}

/// Every byte of the object after its metadata field.
fn after_metadata(stored: &[u8]) -> Vec<u8> {
    let raw = envelope::parse(stored).unwrap().raw;
    let mut fields = Fields::new(raw);
    fields.next().unwrap().unwrap();
    raw[fields.offset()..].to_vec()
}

fn has_managed_fields(stored: &[u8]) -> bool {
    meta_fields(stored).iter().any(|(tag, _)| *tag == MANAGED)
}

#[test]
fn a_read_leaves_managed_fields_stored_and_metadata_is_still_complete() {
    let stored = realistic_pod();
    let object = lazy(&stored);
    assert!(object.is_managed_fields_stored());
    // The store's accessors answer from the metadata as read.
    assert_eq!(object.name(), "api-7c9d8b6f5-x2k4q");
    assert_eq!(object.namespace(), "prod");
    assert_eq!(
        object.labels().get("tier").map(String::as_str),
        Some("backend")
    );
    assert!(object.uid().starts_with("5f2b1c9e"));
    assert!(object.is_managed_fields_stored());

    let whole = dynamic_codec().decode(&stored).unwrap();
    assert!(whole.metadata.extra.contains_key("managedFields"));
    assert_eq!(object.metadata(), &whole.metadata);
    assert_eq!(object.try_metadata().unwrap(), &whole.metadata);
    // Decoded once, then kept.
    assert!(!object.is_managed_fields_stored());
    let again: *const _ = object.metadata();
    assert_eq!(again, object.metadata() as *const _);
    assert!(!object.is_body_decoded());
}

#[test]
fn a_clone_and_debug_show_the_same_object() {
    let object = lazy(&realistic_pod());
    let debug = format!("{object:?}");
    assert!(debug.contains("managed_fields_stored: true"), "{debug}");
    let copy = object.clone();
    assert!(copy.is_managed_fields_stored());
    assert_eq!(copy.metadata(), object.metadata());
    // A clone of an object whose complete metadata is built keeps it.
    let copy = object.clone();
    assert!(!copy.is_managed_fields_stored());
    assert_eq!(copy.metadata(), object.metadata());
}

#[test]
fn a_store_side_change_does_not_lose_the_complete_metadata_it_cached() {
    let mut object = lazy(&realistic_pod());
    assert!(object.metadata().extra.contains_key("managedFields"));
    object.set_resource_version("9".to_owned());
    object
        .annotations_mut()
        .insert("added".to_owned(), "1".to_owned());
    let meta = object.metadata();
    assert_eq!(meta.resource_version, "9");
    assert_eq!(meta.annotations.get("added").map(String::as_str), Some("1"));
    assert!(meta.extra.contains_key("managedFields"));
}

#[test]
fn store_side_changes_write_managed_fields_as_stored_for_every_golden_kind() {
    let mut checked = 0;
    for (file, case, stored) in golden() {
        let Ok(mut object) = codec().decode(&stored) else {
            continue;
        };
        if file.ends_with("List.json") || !has_managed_fields(&stored) {
            continue;
        }
        // What a store does: stamp and clear the resourceVersion, and an annotation
        // through the accessor (a guaranteed update's own change).
        object.set_resource_version("42".to_owned());
        object.set_resource_version(String::new());
        object
            .annotations_mut()
            .insert("lazy.example.com/changed".to_owned(), "1".to_owned());
        assert!(object.is_managed_fields_stored(), "{file} {case}");
        let written = codec().encode(&object).unwrap();
        assert!(object.is_managed_fields_stored(), "{file} {case}");

        let mut expected = dynamic_codec().decode(&stored).unwrap();
        expected.metadata.resource_version.clear();
        expected
            .metadata
            .annotations
            .insert("lazy.example.com/changed".to_owned(), "1".to_owned());
        let back = dynamic_codec().decode(&written).unwrap();
        assert_eq!(back, expected, "{file} {case}");
        // Every metadata field but the annotations (and the resourceVersion a fuzzed
        // case stored, cleared as the store clears it) as stored, in the stored order;
        // every byte after the metadata as stored.
        let but_annotations = |bytes: &[u8]| {
            meta_fields(bytes)
                .into_iter()
                .filter(|(tag, _)| *tag != ANNOTATIONS && *tag != RESOURCE_VERSION)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            but_annotations(&written),
            but_annotations(&stored),
            "{file} {case}"
        );
        assert_eq!(
            after_metadata(&written),
            after_metadata(&stored),
            "{file} {case}"
        );
        checked += 1;
    }
    assert!(checked > 20, "checked {checked} cases");
}

#[test]
fn unknown_fields_survive_a_store_side_change_with_managed_fields_stored() {
    let stored = with_field(&realistic_pod(), &[1], &unknown_string(903, "meta-future"));
    // And one inside the first managed fields entry.
    let stored = with_field(
        &stored,
        &[1, MANAGED],
        &unknown_string(904, "managed-future"),
    );
    let unknown = kp().unknown_fields(&stored).unwrap();
    assert_eq!(unknown.len(), 2, "{unknown:?}");
    let mut object = lazy(&stored);
    object
        .annotations_mut()
        .insert("changed".to_owned(), "yes".to_owned());
    let written = codec().encode(&object).unwrap();
    assert_eq!(kp().unknown_fields(&written).unwrap(), unknown);
    // The managed fields and the unknown field in their stored order: 17 then 903.
    let tags: Vec<u32> = meta_fields(&written).into_iter().map(|(t, _)| t).collect();
    let (m, u) = (
        tags.iter().position(|t| *t == MANAGED).unwrap(),
        tags.iter().position(|t| *t == 903).unwrap(),
    );
    assert!(m < u, "{tags:?}");
    assert_eq!(
        meta_fields(&written)
            .into_iter()
            .filter(|(t, _)| *t != ANNOTATIONS)
            .collect::<Vec<_>>(),
        meta_fields(&stored)
            .into_iter()
            .filter(|(t, _)| *t != ANNOTATIONS)
            .collect::<Vec<_>>()
    );
}

#[test]
fn changed_managed_fields_are_re_encoded_and_unchanged_ones_copied() {
    let stored = realistic_pod();
    let mut object = lazy(&stored);
    object.metadata_mut().extra["managedFields"][0]["manager"] = json!("someone-else");
    assert!(!object.is_managed_fields_stored());
    let written = codec().encode(&object).unwrap();
    let back = dynamic_codec().decode(&written).unwrap();
    assert_eq!(
        back.metadata.extra["managedFields"][0]["manager"],
        json!("someone-else")
    );
    assert_eq!(&back.metadata, object.metadata());
    assert_eq!(after_metadata(&written), after_metadata(&stored));

    // Materialised but unchanged: the stored bytes themselves.
    let mut object = lazy(&stored);
    let _ = object.metadata_mut();
    assert_eq!(codec().encode(&object).unwrap(), stored);
}

#[test]
fn a_whole_encode_with_managed_fields_stored_keeps_them() {
    let stored = realistic_pod();
    let mut object = lazy(&stored);
    object
        .body_mut()
        .unwrap()
        .insert("extraTopLevel".to_owned(), json!(null));
    object.body_mut().unwrap().remove("extraTopLevel");
    assert!(object.is_managed_fields_stored());
    let written = codec().encode(&object).unwrap();
    let back = dynamic_codec().decode(&written).unwrap();
    assert_eq!(back, dynamic_codec().decode(&stored).unwrap());
    let into = lazy(&stored).into_dynamic().unwrap();
    assert_eq!(into, back);
}

#[test]
fn corrupt_managed_fields_are_refused_at_the_read_as_a_whole_decode_refuses_them() {
    // A managed fields entry whose `manager` (field 1) is a varint.
    let mut entry = Vec::new();
    crate::wire::put_key(&mut entry, 1, 0);
    crate::wire::put_varint(&mut entry, 7);
    let mut field = Vec::new();
    crate::wire::put_bytes(&mut field, MANAGED, &entry);
    let stored = with_field(&realistic_pod(), &[1], &field);
    assert!(dynamic_codec().decode(&stored).is_err());
    let err = codec().decode(&stored).unwrap_err();
    assert!(err.to_string().contains("managedFields"), "{err}");

    // Raw fieldsV1 that is not JSON.
    let mut fields_v1 = Vec::new();
    crate::wire::put_bytes(&mut fields_v1, 1, b"{not json");
    let mut entry = Vec::new();
    crate::wire::put_bytes(&mut entry, 7, &fields_v1);
    let mut field = Vec::new();
    crate::wire::put_bytes(&mut field, MANAGED, &entry);
    let stored = with_field(&realistic_pod(), &[1], &field);
    let whole = dynamic_codec().decode(&stored);
    let lazily = codec().decode(&stored);
    assert_eq!(whole.is_err(), lazily.is_err(), "{whole:?} {lazily:?}");
}
