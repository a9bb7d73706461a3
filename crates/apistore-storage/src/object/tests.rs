use super::*;

#[test]
fn dynamic_object_keeps_unknown_fields_through_a_round_trip() {
    let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","creationTimestamp":"2024-01-01T00:00:00Z","labels":{"a":"b"}},"data":{"k":"v"}}"#;
    let obj: DynamicObject = serde_json::from_str(json).unwrap();
    assert_eq!(obj.name(), "cm");
    assert_eq!(obj.namespace(), "ns");
    assert_eq!(obj.labels().get("a").map(String::as_str), Some("b"));
    let back: serde_json::Value = serde_json::to_value(&obj).unwrap();
    let orig: serde_json::Value = serde_json::from_str(json).unwrap();
    assert_eq!(back, orig);
}

use serde::Deserialize;

/// The derived, flattened shape the hand-written `Deserialize` follows.
#[derive(Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DerivedMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    uid: String,
    #[serde(default)]
    resource_version: String,
    #[serde(default)]
    self_link: String,
    #[serde(default)]
    generation: Option<i64>,
    #[serde(default)]
    labels: Labels,
    #[serde(default)]
    annotations: Labels,
    #[serde(flatten)]
    extra: serde_json::Map<String, serde_json::Value>,
}

/// As [`DerivedMeta`], for the object.
#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct DerivedObject {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    metadata: DerivedMeta,
    #[serde(flatten)]
    data: serde_json::Map<String, serde_json::Value>,
}

fn same_as_derived(json: &str) {
    let by_hand = serde_json::from_str::<DynamicObject>(json);
    let derived = serde_json::from_str::<DerivedObject>(json);
    match (by_hand, derived) {
        (Ok(object), Ok(derived)) => {
            let meta = derived.metadata;
            let m = &object.metadata;
            assert_eq!(
                (&object.api_version, &object.kind, &object.data),
                (&derived.api_version, &derived.kind, &derived.data),
                "{json}"
            );
            assert_eq!(
                (
                    &m.name,
                    &m.namespace,
                    &m.uid,
                    &m.resource_version,
                    &m.self_link
                ),
                (
                    &meta.name,
                    &meta.namespace,
                    &meta.uid,
                    &meta.resource_version,
                    &meta.self_link
                ),
                "{json}"
            );
            assert_eq!(
                (m.generation, &m.labels, &m.annotations, &m.extra),
                (
                    meta.generation,
                    &meta.labels,
                    &meta.annotations,
                    &meta.extra
                ),
                "{json}"
            );
        }
        (Err(by_hand), Err(derived)) => {
            let derived = derived
                .to_string()
                .replace("DerivedMeta", "ObjectMeta")
                .replace("DerivedObject", "DynamicObject");
            assert_eq!(by_hand.to_string(), derived, "{json}");
        }
        (by_hand, derived) => panic!("{json}: by hand {by_hand:?}, derived {derived:?}"),
    }
}

#[test]
fn deserialize_by_hand_matches_the_derived_flattened_shape() {
    for json in [
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"5","selfLink":"/x","generation":3,"labels":{"a":"b"},"annotations":{"c":"d"},"creationTimestamp":null,"ownerReferences":[{"kind":"RS"}]},"spec":{"nodeName":"n","containers":[{"name":"c","ports":[{"containerPort":80}]}]},"status":{"phase":"Running","x":1.5,"y":-2}}"#,
        r#"{}"#,
        r#"{"kind":"ConfigMap","data":{"k":"v"},"data":{"k":"w"}}"#,
        r#"{"metadata":{"generation":null,"extra":{"deep":[true,null]}}}"#,
        r#"{"kind":"A","kind":"B"}"#,
        r#"{"metadata":{"name":"a","name":"b"}}"#,
        r#"{"metadata":{"labels":null}}"#,
        r#"{"metadata":null}"#,
        r#"{"apiVersion":7}"#,
        r#"{"metadata":{"generation":"x"}}"#,
        r#"[]"#,
        r#"{"spec":"#,
    ] {
        same_as_derived(json);
    }
}

#[test]
fn metadata_from_its_members_is_the_deserialized_one() {
    use serde::Deserialize;
    for (i, json) in [
        r#"{}"#,
        r#"{"name":"p","namespace":"ns","uid":"u","resourceVersion":"7","selfLink":"/x","generation":3,"labels":{"a":"b","c":""},"annotations":{"k":"v"},"creationTimestamp":null,"managedFields":[{"fieldsV1":{"f:spec":{".":{}}},"manager":"m"}],"ownerReferences":[{"kind":"RS","controller":true}]}"#,
        r#"{"generation":null,"labels":{},"finalizers":["a"]}"#,
        r#"{"generation":-9223372036854775808}"#,
        // Wrong types: the error `Deserialize` gives, the first in key order.
        r#"{"name":null}"#,
        r#"{"uid":5,"name":null}"#,
        r#"{"labels":{"a":1}}"#,
        r#"{"labels":null}"#,
        r#"{"annotations":["a"]}"#,
        r#"{"generation":1.5}"#,
        r#"{"generation":"3"}"#,
        r#"{"generation":18446744073709551615}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let serde_json::Value::Object(members) = serde_json::from_str(json).unwrap() else {
            panic!("{json}: not an object");
        };
        let want = ObjectMeta::deserialize(serde_json::Value::Object(members.clone()))
            .map_err(|e| e.to_string());
        let got = ObjectMeta::from_members(members).map_err(|e| e.to_string());
        assert_eq!(got, want, "{json}");
        // The first four are metadata as it comes; every other has a wrong type.
        assert_eq!(got.is_ok(), i < 4, "{json}: {got:?}");
    }
}

#[test]
fn an_object_from_its_members_is_the_deserialized_one() {
    for json in [
        r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","generation":3,"labels":{"a":"b"},"creationTimestamp":null,"ownerReferences":[{"kind":"RS"}]},"spec":{"nodeName":"n"},"status":{"x":1.5,"y":-2}}"#,
        r#"{}"#,
        r#"{"data":{"k":"v"}}"#,
    ] {
        let serde_json::Value::Object(members) = serde_json::from_str(json).unwrap() else {
            panic!("{json}: not an object");
        };
        let want: DynamicObject = serde_json::from_str(json).unwrap();
        assert_eq!(
            DynamicObject::from_members(members).unwrap(),
            want,
            "{json}"
        );
    }
    // A known member of the wrong type: refused as `Deserialize` refuses it, named.
    for (json, name) in [
        (r#"{"metadata":{"name":null}}"#, "metadata"),
        (r#"{"metadata":{"labels":{"a":1}}}"#, "metadata"),
        (r#"{"metadata":{"annotations":[]}}"#, "metadata"),
        (r#"{"metadata":{"generation":1.5}}"#, "metadata"),
        (
            r#"{"metadata":{"generation":18446744073709551615}}"#,
            "metadata",
        ),
        (r#"{"metadata":[]}"#, "metadata"),
        (r#"{"apiVersion":7}"#, "apiVersion"),
        (r#"{"metadata":{"generation":"x"}}"#, "metadata"),
        (r#"{"metadata":null}"#, "metadata"),
    ] {
        assert!(
            serde_json::from_str::<DynamicObject>(json).is_err(),
            "{json}"
        );
        let serde_json::Value::Object(members) = serde_json::from_str(json).unwrap() else {
            panic!("{json}: not an object");
        };
        let err = DynamicObject::from_members(members)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with(&format!("{name}: ")), "{json}: {err}");
    }
}

#[test]
fn default_fields_are_name_and_namespace() {
    let obj = DynamicObject::new("v1", "ConfigMap", "cm").within("ns");
    let fields = obj.fields();
    assert_eq!(fields["metadata.name"], "cm");
    assert_eq!(fields["metadata.namespace"], "ns");
    let cluster = DynamicObject::new("v1", "Namespace", "ns");
    assert!(!cluster.fields().contains_key("metadata.namespace"));
}

#[cfg(feature = "k8s-openapi")]
#[test]
fn k8s_openapi_types_are_api_objects() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("cm".into());
    assert_eq!(cm.name(), "cm");
    assert_eq!(cm.resource_version(), "");
    cm.set_resource_version("5".into());
    assert_eq!(cm.metadata.resource_version.as_deref(), Some("5"));
    cm.set_resource_version(String::new());
    assert_eq!(cm.metadata.resource_version, None);
    assert!(cm.labels().is_empty());
}
