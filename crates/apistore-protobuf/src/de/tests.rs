//! The deserializer's own edge cases (the golden cases test it against the JSON writer).

use std::borrow::Cow;

use super::{deserialize, go_string};
use crate::KubeProtobuf;

#[test]
fn invalid_utf8_is_replaced_per_byte_as_go_writes_it() {
    assert_eq!(go_string(b"plain"), Cow::Borrowed("plain"));
    assert_eq!(go_string(b"a\xffb\xe2\x82"), "a\u{fffd}b\u{fffd}\u{fffd}");
    assert_eq!(go_string(b"\xed\xa0\x80"), "\u{fffd}\u{fffd}\u{fffd}");
    assert_eq!(go_string("é\u{2028}".as_bytes()), "é\u{2028}");
    // What the JSON path gives for the same bytes.
    let kp = KubeProtobuf::k8s_1_31();
    let stored = kp
        .encode_value(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c"}, "data": {"k": "v"}}))
        .unwrap();
    // Swap "v" for invalid bytes of the same length is not possible; append instead.
    let mut raw_cm = Vec::new();
    crate::wire::put_bytes(&mut raw_cm, 1, b"\x0a\x01c");
    let mut entry = Vec::new();
    crate::wire::put_bytes(&mut entry, 1, b"k\xff");
    crate::wire::put_bytes(&mut entry, 2, b"a\xe2\x82<");
    crate::wire::put_bytes(&mut raw_cm, 2, &entry);
    let bad = crate::envelope::write("v1", "ConfigMap", &raw_cm);
    let json = kp.decode_to_json(&bad).unwrap();
    let want: serde_json::Value = serde_json::from_slice(&json).unwrap();
    assert_eq!(kp.decode::<serde_json::Value>(&bad).unwrap(), want);
    assert!(kp.decode::<serde_json::Value>(&stored).is_ok());
}

#[test]
fn nesting_depth_bombs_are_refused() {
    let kp = KubeProtobuf::k8s_1_31();
    let schema = &kp.schema;
    let m = schema
        .messages
        .iter()
        .find(|m| {
            &*m.name == "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1.JSONSchemaProps"
        })
        .unwrap();
    let not = m.fields.iter().find(|f| &*f.json == "not").unwrap().tag;
    let mut inner: Vec<u8> = Vec::new();
    for _ in 0..5_000 {
        let mut next = Vec::new();
        crate::wire::put_bytes(&mut next, not, &inner);
        inner = next;
    }
    let err = deserialize::<serde_json::Value>(
        schema,
        "CustomResourceDefinition",
        m,
        &inner,
        "apiextensions.k8s.io/v1",
    )
    .unwrap_err();
    assert!(err.to_string().contains("nested deeper than 100"), "{err}");
    assert!(
        err.to_string().contains("CustomResourceDefinition"),
        "{err}"
    );
}
