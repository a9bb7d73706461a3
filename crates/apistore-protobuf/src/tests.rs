//! Crate-level tests through the public API: specials both ways, inline fields,
//! omitempty and null rules, unknown fields, hostile bytes.

use proptest::prelude::*;
use serde_json::json;

use crate::{KubeProtobuf, MediaType, PROTOBUF_MAGIC, ProtobufError, StorageCodec, is_protobuf};

fn pb() -> &'static KubeProtobuf {
    KubeProtobuf::k8s_1_31()
}

/// JSON -> protobuf -> JSON.
fn round(v: serde_json::Value) -> String {
    let stored = pb().encode_value(&v).unwrap();
    assert!(is_protobuf(&stored));
    String::from_utf8(pb().decode_to_json(&stored).unwrap()).unwrap()
}

#[test]
fn configmap_round_trips_in_go_order_with_go_nulls() {
    let got = round(json!({
        "data": {"b": "2", "a": "<&>"},
        "metadata": {"name": "cm", "namespace": "ns", "labels": {"z": "1", "a": "2"}},
        "apiVersion": "v1",
        "kind": "ConfigMap",
    }));
    assert_eq!(
        got,
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"ns","creationTimestamp":null,"labels":{"a":"2","z":"1"}},"data":{"a":"\u003c\u0026\u003e","b":"2"}}"#
    );
}

#[test]
fn envelope_is_written_as_kube_writes_it() {
    let stored = pb()
        .encode_value(&json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
        .unwrap();
    assert_eq!(&stored[..4], &PROTOBUF_MAGIC);
    assert_eq!(
        KubeProtobuf::type_meta(&stored).unwrap(),
        ("v1".to_string(), "ConfigMap".to_string())
    );
    // typeMeta, raw, then empty contentEncoding and contentType.
    assert_eq!(&stored[4..22], b"\x0a\x0f\x0a\x02v1\x12\x09ConfigMap\x12");
    assert_eq!(&stored[stored.len() - 4..], b"\x1a\x00\x22\x00");
}

#[test]
fn negative_int32_is_a_ten_byte_varint() {
    let stored = pb()
        .encode_value(&json!({
            "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": "p"}, "value": -1
        }))
        .unwrap();
    let ten = [
        0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
    ];
    assert!(stored.windows(ten.len()).any(|w| w == ten), "{stored:x?}");
    assert!(round(json!({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "p"}, "value": -1})).contains(r#""value":-1"#));
}

#[test]
fn specials_both_ways() {
    let got = round(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": "2024-01-02T03:04:05+01:00",
            "deletionTimestamp": "2024-01-02T03:04:05.9Z",
            "managedFields": [{"manager": "m", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": { "f:labels" : {}}}}]},
        "spec": {"containers": [{"name": "c",
            "resources": {"limits": {"cpu": "1000m", "memory": "1.5"}},
            "livenessProbe": {"httpGet": {"port": 8080, "path": "/"}},
            "readinessProbe": {"tcpSocket": {"port": "http"}}}]}
    }));
    assert!(
        got.contains(r#""creationTimestamp":"2024-01-02T02:04:05Z""#),
        "{got}"
    );
    assert!(
        got.contains(r#""deletionTimestamp":"2024-01-02T03:04:05Z""#),
        "{got}"
    );
    assert!(
        got.contains(r#""fieldsV1":{"f:metadata":{"f:labels":{}}}"#),
        "{got}"
    );
    assert!(
        got.contains(r#""limits":{"cpu":"1","memory":"1500m"}"#),
        "{got}"
    );
    // ProbeHandler is inline in JSON, a nested message in protobuf.
    assert!(
        got.contains(r#""livenessProbe":{"httpGet":{"path":"/","port":8080},"timeoutSeconds""#)
            || got.contains(r#""livenessProbe":{"httpGet":{"path":"/","port":8080}"#),
        "{got}"
    );
    assert!(got.contains(r#""tcpSocket":{"port":"http"}"#), "{got}");

    let lease = round(
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "l"}, "spec": {"renewTime": "2024-01-02T03:04:05.123456Z"}}),
    );
    assert!(
        lease.contains(r#""renewTime":"2024-01-02T03:04:05.123456Z""#),
        "{lease}"
    );

    let rev = round(
        json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": "r"}, "data": {"b": [1, "x<"]}, "revision": 3}),
    );
    assert!(
        rev.contains(r#""data":{"b":[1,"x\u003c"]},"revision":3"#),
        "{rev}"
    );

    let crd = round(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "c"}, "spec": {"group": "g", "names": {"plural": "ps", "kind": "P"}, "scope": "Namespaced",
        "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
            "type": "object", "additionalProperties": false, "default": {"a": 1},
            "properties": {"x": {"type": "array", "items": {"type": "string"}, "maximum": 1.5e300}},
            "dependencies": {"x": ["y"]}}}}]}}),
    );
    assert!(crd.contains(r#""default":{"a":1}"#), "{crd}");
    assert!(crd.contains(r#""additionalProperties":false"#), "{crd}");
    assert!(crd.contains(r#""items":{"type":"string"}"#), "{crd}");
    assert!(crd.contains(r#""maximum":1.5e+300"#), "{crd}");
    assert!(crd.contains(r#""dependencies":{"x":["y"]}"#), "{crd}");
}

#[test]
fn inline_volume_source_and_omitempty_rules() {
    let got = round(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [], "volumes": [{"name": "v", "emptyDir": {}}]}}),
    );
    // Non-pointer structs are never empty; nil slices without omitempty are null.
    assert!(
        got.contains(r#""volumes":[{"name":"v","emptyDir":{}}],"containers":null"#),
        "{got}"
    );
    assert!(got.contains(r#""status":{}"#), "{got}");
    // Secret data: []byte values as base64.
    let s = round(
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"k": "aGk="}}),
    );
    assert!(s.contains(r#""data":{"k":"aGk="}"#), "{s}");
}

#[test]
fn unknown_fields_are_errors_naming_path_and_kind() {
    let err = pb()
        .encode_value(
            &json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "imagee": "x"}]}}),
        )
        .unwrap_err();
    assert_eq!(
        err,
        ProtobufError::UnknownField {
            kind: "Pod".into(),
            path: "spec.containers[0].imagee".into()
        }
    );
    let err = pb()
        .encode_value(&json!({"apiVersion": "v1", "kind": "Pod", "bogus": 1}))
        .unwrap_err();
    assert!(err.to_string().contains("\"bogus\" in Pod"), "{err}");
    let err = pb()
        .encode_value(&json!({"apiVersion": "v1", "kind": "Pod", "spec": {"priority": "high"}}))
        .unwrap_err();
    assert!(
        err.to_string().contains("Pod") && err.to_string().contains("spec.priority"),
        "{err}"
    );
    let err = pb()
        .encode_value(&json!({"apiVersion": "example.com/v1", "kind": "Widget"}))
        .unwrap_err();
    assert!(matches!(err, ProtobufError::UnknownKind { .. }));
}

#[test]
fn null_means_the_zero_value() {
    let a = round(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": null, "data": null, "immutable": null}),
    );
    let b = round(json!({"apiVersion": "v1", "kind": "ConfigMap"}));
    assert_eq!(a, b);
    assert_eq!(
        b,
        r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"creationTimestamp":null}}"#
    );
}

fn stored(kind: &str, raw: &[u8]) -> Vec<u8> {
    crate::envelope::write("v1", kind, raw)
}

#[test]
fn hostile_bytes_error_and_name_the_kind() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated varint", stored("Pod", &[0x08, 0x80])),
        ("length past end", stored("Pod", &[0x0a, 0x7f, 0x01])),
        ("wrong wire type", stored("Pod", &[0x08, 0x01])),
        ("bad nested", stored("Pod", &[0x0a, 0x02, 0x0a, 0x05])),
        ("illegal wire type", stored("Pod", &[0x0f])),
        ("tag 0", stored("Pod", &[0x00, 0x00])),
    ];
    for (what, bytes) in cases {
        let err = pb().decode_to_json(&bytes).unwrap_err();
        assert!(err.to_string().contains("Pod"), "{what}: {err}");
    }
    assert_eq!(
        pb().decode_to_json(b"{}").unwrap_err(),
        ProtobufError::NotProtobuf
    );
    assert!(matches!(
        pb().decode_to_json(&crate::envelope::write("v9", "Nope", b""))
            .unwrap_err(),
        ProtobufError::UnknownKind { .. }
    ));
    assert!(pb().decode_to_json(b"k8s\0\x0a\x05").is_err());
    // Unknown fields inside a known message are skipped.
    let ok = pb()
        .decode_to_json(&stored("ConfigMap", &[0xf8, 0x01, 0x05]))
        .unwrap();
    assert_eq!(
        ok,
        br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"creationTimestamp":null}}"#
    );
}

/// A Service whose one port's `targetPort` (an IntOrString) is written as these
/// segments, each a separate occurrence of the field that Go merges.
fn service_with_target_port(segments: &[Vec<u8>]) -> Vec<u8> {
    use crate::wire::put_bytes;
    let mut port = Vec::new();
    for segment in segments {
        put_bytes(&mut port, 4, segment);
    }
    let mut spec = Vec::new();
    put_bytes(&mut spec, 1, &port);
    let mut raw = Vec::new();
    put_bytes(&mut raw, 2, &spec);
    stored("Service", &raw)
}

#[test]
fn a_special_value_keeps_the_last_occurrence_and_refuses_a_wrong_wire_type() {
    use crate::wire::{put_bytes, put_key, put_varint};
    let int = |value: u64| {
        let mut seg = Vec::new();
        put_key(&mut seg, 1, 0);
        put_varint(&mut seg, 0);
        put_key(&mut seg, 2, 0);
        put_varint(&mut seg, value);
        seg
    };
    let text = |values: &[&[u8]]| {
        let mut seg = Vec::new();
        put_key(&mut seg, 1, 0);
        put_varint(&mut seg, 1);
        for value in values {
            put_bytes(&mut seg, 3, value);
        }
        seg
    };
    // Go merges the occurrences: the last Type and the last StrVal win, and an
    // IntVal written earlier stays behind unread.
    for (segments, port) in [
        (vec![int(80)], "80"),
        (vec![int(80), text(&[b"http"])], "\"http\""),
        (vec![text(&[b"a", b"b"])], "\"b\""),
        (vec![text(&[b"http"]), int(8080)], "8080"),
    ] {
        let bytes = service_with_target_port(&segments);
        let json = String::from_utf8(pb().decode_to_json(&bytes).unwrap()).unwrap();
        assert!(json.contains(&format!("\"targetPort\":{port}")), "{json}");
        let dynamic = pb().decode_dynamic(&bytes).unwrap();
        assert_eq!(
            dynamic.data["spec"]["ports"][0]["targetPort"].to_string(),
            port
        );
    }
    // A Type written as bytes is refused by name, through both walks.
    let mut wrong = Vec::new();
    put_bytes(&mut wrong, 1, b"1");
    let bytes = service_with_target_port(&[wrong]);
    assert_both_walks_refuse(
        &bytes,
        "Service",
        "spec.ports[0].targetPort",
        &["wrong wireType = 2 for field Type (tag 1)", "IntOrString"],
    );
}

/// The JSON text and the value tree (`DynamicObject`) walk alike: both refuse `bytes`
/// naming this kind and path, with a reason that says each of `said`.
fn assert_both_walks_refuse(bytes: &[u8], want_kind: &str, want_path: &str, said: &[&str]) {
    for err in [
        pb().decode_to_json(bytes).unwrap_err(),
        pb().decode_dynamic(bytes).unwrap_err(),
    ] {
        let ProtobufError::Decode { kind, path, reason } = &err else {
            panic!("not a decode error: {err:?}");
        };
        assert_eq!(kind, want_kind);
        assert_eq!(path, want_path);
        for part in said {
            assert!(reason.contains(part), "{reason} does not say {part}");
        }
    }
}

#[test]
fn a_fault_under_a_map_key_names_the_key() {
    use crate::wire::{put_bytes, put_key, put_varint};
    // ResourceQuota.spec.hard["c\xffu"] holds a Quantity whose string is a varint.
    let mut quantity = Vec::new();
    put_key(&mut quantity, 1, 0);
    put_varint(&mut quantity, 5);
    let mut entry = Vec::new();
    put_bytes(&mut entry, 1, b"c\xffu");
    put_bytes(&mut entry, 2, &quantity);
    let mut spec = Vec::new();
    put_bytes(&mut spec, 1, &entry);
    let mut raw = Vec::new();
    put_bytes(&mut raw, 2, &spec);
    let bytes = stored("ResourceQuota", &raw);
    assert_both_walks_refuse(
        &bytes,
        "ResourceQuota",
        "spec.hard[\"c\u{fffd}u\"]",
        &["wrong wire type"],
    );
}

#[test]
fn nesting_depth_bombs_are_refused() {
    // JSONSchemaProps.not is a *JSONSchemaProps: nest it far past the limit.
    let schema = &pb().schema;
    let id = schema
        .messages
        .iter()
        .position(|m| {
            &*m.name == "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaProps"
        })
        .unwrap();
    let m = &schema.messages[id];
    let not = m.fields.iter().find(|f| &*f.json == "not").unwrap().tag;
    let mut inner: Vec<u8> = Vec::new();
    for _ in 0..5_000 {
        let mut next = Vec::new();
        crate::wire::put_bytes(&mut next, not, &inner);
        inner = next;
    }
    let mut dec = crate::decode::Decoder::new(schema, "CustomResourceDefinition", inner.len());
    let err = dec
        .object(m, &[&inner], "apiextensions.k8s.io/v1")
        .unwrap_err();
    assert!(err.to_string().contains("nested deeper than 100"), "{err}");
    assert!(
        err.to_string().contains("CustomResourceDefinition"),
        "{err}"
    );
}

#[test]
fn media_type_parses_and_displays() {
    for (s, m) in [
        ("json", MediaType::Json),
        ("application/json", MediaType::Json),
        ("protobuf", MediaType::Protobuf),
        ("application/vnd.kubernetes.protobuf", MediaType::Protobuf),
    ] {
        assert_eq!(s.parse::<MediaType>().unwrap(), m);
    }
    assert!("yaml".parse::<MediaType>().is_err());
    assert_eq!(
        MediaType::Protobuf.to_string(),
        "application/vnd.kubernetes.protobuf"
    );
    assert_eq!(MediaType::default(), MediaType::Json);
}

#[test]
fn storage_codec_sniffs_and_refuses_unknown_kinds_for_protobuf() {
    use apistore_storage::Codec;
    let codec = StorageCodec::<serde_json::Value>::new(MediaType::Protobuf);
    assert_eq!(codec.write_media_type(), MediaType::Protobuf);
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
    let bytes = codec.encode(&cm).unwrap();
    assert!(is_protobuf(&bytes));
    let back = codec.decode(&bytes).unwrap();
    assert_eq!(back["metadata"]["name"], "c");
    assert_eq!(codec.decode(br#"{"a":1}"#).unwrap(), json!({"a": 1}));
    let err = codec
        .encode(&json!({"apiVersion": "example.com/v1", "kind": "Widget"}))
        .unwrap_err();
    assert!(err.to_string().contains("MediaType::Json"), "{err}");
}

proptest! {
    #[test]
    fn random_bytes_after_the_magic_never_panic(body in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut b = PROTOBUF_MAGIC.to_vec();
        b.extend_from_slice(&body);
        let _ = pb().decode_to_json(&b);
        let _ = KubeProtobuf::type_meta(&b);
    }

    #[test]
    fn random_object_bytes_in_a_valid_envelope_never_panic(
        body in proptest::collection::vec(any::<u8>(), 0..256),
        kind in prop::sample::select(vec!["Pod", "ConfigMap", "Secret", "Service", "Node"]),
    ) {
        let _ = pb().decode_to_json(&stored(kind, &body));
    }
}
