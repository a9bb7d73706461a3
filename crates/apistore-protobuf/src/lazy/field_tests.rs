//! [`LazyObject::field_str`] against the body a whole decode gives: every field at depth
//! one and two of every golden fixture (present or not, scalar or not), merged
//! occurrences, wrong types, and corrupt bytes.

use std::borrow::Cow;

use apistore_storage::Codec;
use serde_json::Value;

use super::LazyObject;
use super::tests::{codec, dynamic_codec, golden, lazy, realistic_pod, with_field};
use crate::ProtobufError;
use crate::schema::Ty;
use crate::wire::put_bytes;

/// What `field_str` should say for `path` of a body a whole decode gave: the text of a
/// scalar, `None` for nothing or null, `Err(())` for an object, a list or a float.
fn expected<'v>(
    body: &'v serde_json::Map<String, Value>,
    path: &[&str],
) -> Result<Option<Cow<'v, str>>, ()> {
    let mut value = body.get(path[0]);
    for name in &path[1..] {
        value = match value {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(map)) => map.get(*name),
            Some(_) => return Err(()),
        };
    }
    Ok(match value {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(Cow::Borrowed(s.as_str())),
        Some(Value::Bool(b)) => Some(Cow::Owned(b.to_string())),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(Cow::Owned(n.to_string())),
        Some(_) => return Err(()),
    })
}

/// Compares `field_str` on a fresh object (read from the stored bytes) and on one
/// whose body is decoded (read from the map) with the whole decode's body.
fn check(
    object: &LazyObject,
    decoded: &LazyObject,
    body: &serde_json::Map<String, Value>,
    path: &[&str],
    what: &str,
) {
    let want = expected(body, path);
    for (how, from) in [("stored", object), ("decoded", decoded)] {
        match (&want, from.field_str(path)) {
            (Ok(want), Ok(got)) => assert_eq!(&got, want, "{what} {path:?} from {how}"),
            (Err(()), Err(ProtobufError::NotText { .. })) => {}
            (want, got) => panic!("{what} {path:?} from {how}: want {want:?}, got {got:?}"),
        }
    }
}

#[test]
fn every_field_at_depth_two_reads_as_the_body_shows_it_for_every_golden_case() {
    let (mut cases, mut paths, mut texts) = (0, 0, 0);
    let kp = super::tests::kp();
    for (file, case, stored) in golden() {
        let Ok(object) = codec().decode(&stored) else {
            continue;
        };
        let what = format!("{file} {case}");
        let decoded = lazy(&stored);
        let body = dynamic_codec().decode(&stored).unwrap().data;
        assert_eq!(decoded.body().unwrap(), &body, "{what}");
        cases += 1;
        // Every JSON name the kind's schema has at depth one and two, present or not,
        // and every key the body has there (map keys included).
        let (_, _, m, _) = kp.open(&stored).unwrap();
        let mut all: Vec<Vec<String>> = Vec::new();
        for f in m
            .fields
            .iter()
            .filter(|f| !f.inline && &*f.json != "metadata")
        {
            all.push(vec![f.json.to_string()]);
            let inner = match &f.ty {
                Ty::Msg(id) => Some(*id),
                Ty::Ptr(t) => match **t {
                    Ty::Msg(id) => Some(id),
                    _ => None,
                },
                _ => None,
            };
            if let Some(id) = inner {
                for g in kp.schema.messages[id].fields.iter().filter(|g| !g.inline) {
                    all.push(vec![f.json.to_string(), g.json.to_string()]);
                }
            }
        }
        for (k, v) in &body {
            all.push(vec![k.clone()]);
            if let Value::Object(map) = v {
                for k2 in map.keys() {
                    all.push(vec![k.clone(), k2.clone()]);
                }
            }
        }
        all.sort();
        all.dedup();
        for path in &all {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            check(&object, &decoded, &body, &path, &what);
            paths += 1;
            if matches!(expected(&body, &path), Ok(Some(_))) {
                texts += 1;
            }
        }
        assert!(!object.is_body_decoded(), "{what}");
    }
    assert!(cases > 400, "{cases} cases");
    assert!(texts > 1000, "{texts} texts of {paths} paths");
}

#[test]
fn the_realistic_pod_s_node_name_and_friends() {
    let object = lazy(&realistic_pod());
    let get = |path: &[&str]| object.field_str(path).unwrap();
    assert_eq!(
        get(&["spec", "nodeName"]).as_deref(),
        Some("ip-127-0-1-23.ec2.internal")
    );
    assert!(matches!(get(&["spec", "nodeName"]), Some(Cow::Borrowed(_))));
    assert_eq!(get(&["status", "phase"]).as_deref(), Some("Running"));
    assert_eq!(
        get(&["status", "startTime"]).as_deref(),
        Some("2024-09-12T08:30:15Z")
    );
    assert_eq!(
        get(&["spec", "terminationGracePeriodSeconds"]).as_deref(),
        Some("30")
    );
    assert_eq!(
        get(&["spec", "enableServiceLinks"]).as_deref(),
        Some("true")
    );
    assert_eq!(
        get(&["spec", "nodeSelector", "kubernetes.io/os"]).as_deref(),
        Some("linux")
    );
    assert_eq!(get(&["spec", "nodeSelector", "absent"]), None);
    assert_eq!(get(&["spec", "hostname"]), None);
    assert_eq!(get(&["spec", "noSuchField"]), None);
    assert_eq!(get(&["noSuchField", "x"]), None);
    assert_eq!(get(&["kind"]).as_deref(), Some("Pod"));
    assert_eq!(get(&["apiVersion"]).as_deref(), Some("v1"));
    assert!(!object.is_body_decoded());
}

#[test]
fn wrong_types_are_typed_errors_naming_the_path() {
    let object = lazy(&realistic_pod());
    for path in [
        &[][..],
        &["spec"][..],
        &["spec", "containers"][..],
        &["spec", "nodeName", "deeper"][..],
        &["spec", "containers", "name"][..],
        &["spec", "nodeSelector"][..],
        &["status", "startTime", "seconds"][..],
        &["metadata", "name"][..],
        &["kind", "x"][..],
    ] {
        match object.field_str(path) {
            Err(ProtobufError::NotText {
                kind, path: named, ..
            }) => {
                assert_eq!(kind, "Pod");
                assert_eq!(named, path.join("."));
            }
            other => panic!("{path:?}: {other:?}"),
        }
    }
}

#[test]
fn a_repeated_message_merges_and_the_last_scalar_wins() {
    let node_name_tag = {
        let kp = super::tests::kp();
        let pod = realistic_pod();
        let (_, _, m, _) = kp.open(&pod).unwrap();
        let spec = m.fields.iter().find(|f| &*f.json == "spec").unwrap();
        let Ty::Msg(id) = spec.ty else { panic!() };
        kp.schema.messages[id]
            .fields
            .iter()
            .find(|f| &*f.json == "nodeName")
            .unwrap()
            .tag
    };
    let mut later_spec = Vec::new();
    put_bytes(&mut later_spec, node_name_tag, b"later-node");
    let mut field = Vec::new();
    put_bytes(&mut field, 2, &later_spec);
    let stored = with_field(&realistic_pod(), &[], &field);
    let object = lazy(&stored);
    assert_eq!(
        object.field_str(&["spec", "nodeName"]).unwrap().as_deref(),
        Some("later-node")
    );
    assert_eq!(object.body().unwrap()["spec"]["nodeName"], "later-node");
    // The rest of the first spec is still there.
    assert_eq!(
        object
            .field_str(&["spec", "schedulerName"])
            .unwrap()
            .as_deref(),
        Some("default-scheduler")
    );
}

#[test]
fn corrupt_bytes_are_typed_errors_never_panics() {
    // spec with a nodeName (tag 10) given as a varint.
    let stored = with_field(&realistic_pod(), &[2], &[0x50, 0x01]);
    let object = lazy(&stored);
    match object.field_str(&["spec", "nodeName"]) {
        Err(ProtobufError::Decode { kind, path, .. }) => {
            assert_eq!(kind, "Pod");
            assert_eq!(path, "spec.nodeName");
        }
        other => panic!("{other:?}"),
    }
    // spec cut short inside: a length past the end.
    let stored = with_field(&realistic_pod(), &[2], &[0x52, 0x7f]);
    let object = lazy(&stored);
    assert!(matches!(
        object.field_str(&["spec", "nodeName"]),
        Err(ProtobufError::Decode { .. })
    ));
    let stored = realistic_pod();
    for at in (4..stored.len()).step_by(5) {
        let mut flipped = stored.clone();
        flipped[at] ^= 0x5a;
        if let Ok(object) = codec().decode(&flipped) {
            for path in [
                &["spec", "nodeName"][..],
                &["status", "startTime"][..],
                &["spec", "nodeSelector", "kubernetes.io/os"][..],
            ] {
                let _ = object.field_str(path);
            }
        }
    }
}

#[test]
fn stored_json_and_owned_bodies_are_read_from_the_map() {
    let text = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w"},"spec":{"node":"n1","size":3,"ratio":0.5,"on":false,"list":[1]}}"#;
    let object = lazy(text);
    let get = |path: &[&str]| object.field_str(path);
    assert_eq!(get(&["spec", "node"]).unwrap().as_deref(), Some("n1"));
    assert_eq!(get(&["spec", "size"]).unwrap().as_deref(), Some("3"));
    assert_eq!(get(&["spec", "on"]).unwrap().as_deref(), Some("false"));
    assert_eq!(get(&["spec", "absent"]).unwrap(), None);
    assert!(matches!(
        get(&["spec", "ratio"]),
        Err(ProtobufError::NotText { .. })
    ));
    assert!(matches!(
        get(&["spec", "list"]),
        Err(ProtobufError::NotText { .. })
    ));
    assert!(matches!(
        get(&["spec", "node", "x"]),
        Err(ProtobufError::NotText { .. })
    ));

    let mut owned = lazy(&realistic_pod());
    owned.body_mut().unwrap()["spec"]["nodeName"] = Value::from("moved");
    assert_eq!(
        owned.field_str(&["spec", "nodeName"]).unwrap().as_deref(),
        Some("moved")
    );
}
