//! Unknown fields found, carried, and refused where their place is ambiguous.

use apistore_storage::{Codec, DynamicObject};
use serde_json::json;

use super::*;
use crate::wire::{put_bytes, put_key, put_varint};
use crate::{KubeProtobuf, MediaType, StorageCodec, envelope};

fn pb() -> &'static KubeProtobuf {
    KubeProtobuf::k8s_1_31()
}

/// A field number no kube type uses, in a varint field.
fn unknown_varint(tag: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    put_key(&mut out, tag, 0);
    put_varint(&mut out, value);
    out
}

/// `body` (a message) with the occurrences of `tag` rewritten by `f` (with their
/// index among that tag's occurrences).
fn rewrite(body: &[u8], tag: u32, f: &mut dyn FnMut(usize, &[u8]) -> Vec<u8>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut n = 0;
    for field in fields_of(body).unwrap() {
        match field.val {
            WireVal::Bytes(b) if field.tag == tag => {
                put_bytes(&mut out, tag, &f(n, b));
                n += 1;
            }
            _ => out.extend_from_slice(field.raw),
        }
    }
    out
}

fn pod(containers: usize) -> serde_json::Value {
    let containers: Vec<_> = (0..containers)
        .map(|i| json!({"name": format!("c{i}"), "image": "nginx"}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "demo", "uid": "u1"},
        "spec": {"containers": containers, "nodeName": "n1"},
    })
}

/// A Pod as a newer kube would store it: field 777 in its PodSpec (spec is Pod's
/// field 2) and field 778 in its first container (PodSpec's field 2).
fn newer_pod(containers: usize) -> Vec<u8> {
    let stored = pb().encode_value(&pod(containers)).unwrap();
    let env = envelope::parse(&stored).unwrap();
    let raw = rewrite(env.raw, 2, &mut |_, spec| {
        let mut spec = rewrite(spec, 2, &mut |i, container| {
            let mut c = container.to_vec();
            if i == 0 {
                c.extend(unknown_varint(778, 5));
            }
            c
        });
        spec.extend(unknown_varint(777, 1));
        spec
    });
    envelope::write("v1", "Pod", &raw)
}

#[test]
fn unknown_fields_are_listed_with_their_paths() {
    let found = pb().unknown_fields(&newer_pod(2)).unwrap();
    let paths: Vec<_> = found.iter().map(UnknownField::display_path).collect();
    assert_eq!(
        paths,
        ["spec.containers[0].<field 778>", "spec.<field 777>"],
        "{found:?}"
    );
    assert_eq!(found[1].message, "k8s.io/api/core/v1.PodSpec");
    assert_eq!(found[1].tag, 777);
    assert!(found[1].origin().starts_with("a kube newer than"));
    assert!(
        pb().unknown_fields(&pb().encode_value(&pod(2)).unwrap())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn an_update_carries_unknown_fields_and_a_no_op_writes_the_same_bytes() {
    let stored = newer_pod(2);
    let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, pb().version());
    let mut obj = codec.decode(&stored).unwrap();
    // A read shows what the schema knows.
    assert!(!serde_json::to_string(&obj).unwrap().contains("777"));

    let same = codec.encode_replacing(&obj, &stored).unwrap();
    assert_eq!(
        &same[..],
        &stored[..],
        "a no-op update must not change the bytes"
    );

    obj.metadata.labels.insert("tier".into(), "gold".into());
    let written = codec.encode_replacing(&obj, &stored).unwrap();
    let carried = pb().unknown_fields(&written).unwrap();
    assert_eq!(carried, pb().unknown_fields(&stored).unwrap());
    let back = codec.decode(&written).unwrap();
    assert_eq!(back.metadata.labels["tier"], "gold");
    // Without the previous value the fields would be gone: the case this prevents.
    let plain = codec.encode(&obj).unwrap();
    assert!(pb().unknown_fields(&plain).unwrap().is_empty());
}

#[test]
fn a_list_that_changed_length_refuses_rather_than_drops() {
    let stored = newer_pod(2);
    let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, pb().version());
    let mut obj = codec.decode(&stored).unwrap();
    obj.data["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "c9", "image": "busybox"}));
    let err = codec
        .encode_replacing(&obj, &stored)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.containers[0].<field 778>")
            && err.contains("containers went from 2 to 3 elements")
            && err.contains("refusing to write this Pod"),
        "{err}"
    );

    // Elements without unknown fields may come and go freely.
    let mut obj = codec.decode(&stored).unwrap();
    obj.data["spec"]["containers"]
        .as_array_mut()
        .unwrap()
        .truncate(1);
    // Element 1 had no unknown field, but the list changed length: element 0's
    // place is still ambiguous, so this is refused too.
    assert!(codec.encode_replacing(&obj, &stored).is_err());
}

#[test]
fn a_changed_kind_or_a_json_write_refuses_rather_than_drops() {
    let stored = newer_pod(1);
    let json = StorageCodec::<DynamicObject>::for_kube(MediaType::Json, pb().version());
    let obj = json.decode(&stored).unwrap();
    let err = json
        .encode_replacing(&obj, &stored)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("not the same apiVersion and kind in protobuf"),
        "{err}"
    );
    // Bytes with nothing unknown have nothing to carry.
    let plain = pb().encode_value(&pod(1)).unwrap();
    assert!(json.encode_replacing(&obj, &plain).is_ok());
}

#[test]
fn a_137_pod_read_with_131_keeps_its_pod_level_resources() {
    let new = KubeProtobuf::for_version(KubeVersion::V1_37);
    let mut with_resources = pod(1);
    with_resources["spec"]["resources"] = json!({"limits": {"cpu": "2"}});
    let stored = new.encode_value(&with_resources).unwrap();
    assert!(new.unknown_fields(&stored).unwrap().is_empty());

    // gogo writes a non-pointer scalar even when zero, so a 1.37 Pod always holds
    // status.observedGeneration (1.33), unknown to 1.31 like spec.resources (1.32).
    let found = pb().unknown_fields(&stored).unwrap();
    let named: Vec<_> = found
        .iter()
        .map(|f| (f.display_path(), f.origin()))
        .collect();
    assert_eq!(
        named,
        [
            ("spec.resources".to_owned(), "kube 1.32 or newer".to_owned()),
            (
                "status.observedGeneration".to_owned(),
                "kube 1.33 or newer".to_owned()
            )
        ]
    );

    let old = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, KubeVersion::V1_31);
    let mut obj = old.decode(&stored).unwrap();
    assert!(obj.data["spec"].get("resources").is_none());
    obj.metadata.labels.insert("a".into(), "b".into());
    let written = old.encode_replacing(&obj, &stored).unwrap();
    let back: serde_json::Value =
        serde_json::from_slice(&new.decode_to_json(&written).unwrap()).unwrap();
    assert_eq!(back["spec"]["resources"], json!({"limits": {"cpu": "2"}}));
    assert_eq!(back["metadata"]["labels"], json!({"a": "b"}));
}

#[test]
fn creation_timestamp_null_until_134_and_left_out_after() {
    let stored = pb().encode_value(&pod(1)).unwrap();
    for &v in KubeVersion::ALL {
        let text = String::from_utf8(
            KubeProtobuf::for_version(v)
                .decode_to_json(&stored)
                .unwrap(),
        )
        .unwrap();
        let has_null = text.contains(r#""creationTimestamp":null"#);
        assert_eq!(has_null, v < KubeVersion::V1_34, "{v}: {text}");
        // The typed path agrees with the text.
        let obj: DynamicObject = KubeProtobuf::for_version(v).decode(&stored).unwrap();
        assert_eq!(
            obj.metadata.extra.contains_key("creationTimestamp"),
            v < KubeVersion::V1_34,
            "{v}"
        );
    }
    let mut stamped = pod(1);
    stamped["metadata"]["creationTimestamp"] = json!("2026-01-02T03:04:05Z");
    let stored = pb().encode_value(&stamped).unwrap();
    let text = String::from_utf8(pb_latest().decode_to_json(&stored).unwrap()).unwrap();
    assert!(
        text.contains(r#""creationTimestamp":"2026-01-02T03:04:05Z""#),
        "{text}"
    );
}

fn pb_latest() -> &'static KubeProtobuf {
    KubeProtobuf::latest()
}

#[test]
fn every_embedded_schema_is_the_minor_it_is_filed_under() {
    for &v in KubeVersion::ALL {
        let text = crate::schema::SCHEMA_JSON[v.index()];
        let root: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(root["schema"], format!("k8s-{v}"));
        let kinds = KubeProtobuf::for_version(v).schema.kind_count();
        assert!(kinds > 250, "{v}: {kinds} kinds");
        assert_eq!(KubeProtobuf::for_version(v).version(), v);
    }
    assert!(KubeProtobuf::latest().knows("resource.k8s.io/v1", "DeviceClass"));
    assert!(!pb().knows("resource.k8s.io/v1", "DeviceClass"));
}

#[test]
fn hostile_previous_bytes_are_errors_not_panics() {
    let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, pb().version());
    let obj: DynamicObject = serde_json::from_value(pod(1)).unwrap();
    let good = newer_pod(1);
    for cut in [5, 20, good.len() / 2, good.len() - 3] {
        let _ = codec.encode_replacing(&obj, &good[..cut]);
        let _ = pb().unknown_fields(&good[..cut]);
    }
}
