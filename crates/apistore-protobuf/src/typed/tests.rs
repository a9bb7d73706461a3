// Tests may unwrap: a panic there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The generated decode held equal to the serde path (`KubeProtobuf::decode`, itself
//! held equal to Go's JSON by the golden tests) on every golden case of every kind
//! k8s-openapi has, and hostile bytes.

use std::path::{Path, PathBuf};

use apistore_storage::KubeVersion;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use proptest::prelude::*;
use serde::Serialize;

use super::{GeneratedResource, VisitResource};
use crate::{KubeProtobuf, ProtobufError};

/// One resource type of the enabled k8s-openapi version.
struct Resource {
    api_version: &'static str,
    kind: &'static str,
    check: fn(&KubeProtobuf, &[u8]) -> Outcome,
}

/// Every resource type the generated code has.
fn resources() -> Vec<Resource> {
    struct List(Vec<Resource>);
    impl VisitResource for List {
        fn visit<T: GeneratedResource>(&mut self) {
            self.0.push(Resource {
                api_version: T::API_VERSION,
                kind: T::KIND,
                check: check::<T>,
            });
        }
    }
    let mut list = List(Vec::new());
    super::generated::each_resource(&mut list);
    list.0
}

enum Outcome {
    Equal,
    /// The serde path refused the object (k8s-openapi would refuse Go's JSON too).
    SerdeRefused,
    Failed(String),
}

fn check<T: GeneratedResource>(kp: &KubeProtobuf, stored: &[u8]) -> Outcome {
    let by_serde = kp.decode::<T>(stored);
    let direct = kp.decode_k8s::<T>(stored);
    match (by_serde, direct) {
        (Ok(a), Ok(b)) if a == b => Outcome::Equal,
        (Ok(a), Ok(b)) if same_but_float_rounding(&a, &b) => Outcome::Equal,
        (Ok(a), Ok(b)) => {
            let (a, b) = (
                serde_json::to_string(&a).unwrap(),
                serde_json::to_string(&b).unwrap(),
            );
            let at = a
                .bytes()
                .zip(b.bytes())
                .position(|(x, y)| x != y)
                .unwrap_or_else(|| a.len().min(b.len()));
            let from = at.saturating_sub(120);
            Outcome::Failed(format!(
                "differs from the serde path at byte {at}:\n      serde:  ...{}\n      direct: ...{}",
                a.get(from..(at + 80).min(a.len())).unwrap_or(""),
                b.get(from..(at + 80).min(b.len())).unwrap_or("")
            ))
        }
        (Ok(_), Err(e)) => Outcome::Failed(format!("the serde path reads it, this one fails: {e}")),
        (Err(_), _) => Outcome::SerdeRefused,
    }
}

/// Whether two objects differ only in floats a few units in the last place apart.
/// The serde path reads a float from Go's shortest text with serde_json, whose
/// parsing is not always correctly rounded (`0.17731489839449965` for the stored
/// `...963`); this decode keeps the stored bits.
fn same_but_float_rounding<T: Serialize>(a: &T, b: &T) -> bool {
    fn close(a: &serde_json::Value, b: &serde_json::Value) -> bool {
        use serde_json::Value::{Array, Number, Object};
        match (a, b) {
            (Number(x), Number(y)) => match (x.as_f64(), y.as_f64()) {
                (Some(x), Some(y)) if x.is_finite() && y.is_finite() => {
                    x == y || (x.to_bits().abs_diff(y.to_bits()) <= 2 && x.signum() == y.signum())
                }
                _ => x == y,
            },
            (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| close(x, y)),
            (Object(x), Object(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((kx, vx), (ky, vy))| kx == ky && close(vx, vy))
            }
            _ => a == b,
        }
    }
    close(
        &serde_json::to_value(a).unwrap(),
        &serde_json::to_value(b).unwrap(),
    )
}

/// The committed 1.37 set (k8s-openapi's `latest` is 1.37: the generated code is
/// that version's), and interop's larger one when `APISTORE_GOLDEN_DIR` names a 1.37
/// set. Objects of older minors are held to the same through their own schema by
/// `older_minors_decode_through_serde_in_the_codec`.
fn fixture_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-1.37")];
    if let (Some(dir), Ok(kube)) = (
        std::env::var_os("APISTORE_GOLDEN_DIR"),
        std::env::var("APISTORE_GOLDEN_KUBE"),
    ) {
        if kube.parse::<KubeVersion>().ok() == Some(KubeVersion::V1_37) {
            dirs.push(PathBuf::from(dir));
        }
    }
    dirs
}

#[test]
fn every_golden_case_decodes_as_the_serde_path_does() {
    let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
    let resources = resources();
    assert!(
        resources.len() >= 100,
        "only {} resource types generated",
        resources.len()
    );
    for dir in fixture_dirs() {
        let (mut equal, mut refused, mut kinds, mut cases) = (0, 0, 0, 0);
        let mut failures = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .collect();
        files.sort();
        for file in files {
            let fixture: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
            let (Some(av), Some(kind)) = (fixture["apiVersion"].as_str(), fixture["kind"].as_str())
            else {
                continue;
            };
            let Some(r) = resources
                .iter()
                .find(|r| r.api_version == av && r.kind == kind)
            else {
                continue;
            };
            kinds += 1;
            for case in fixture["cases"].as_array().unwrap() {
                let Some(pb) = case["protobuf"].as_str() else {
                    continue;
                };
                cases += 1;
                let stored = STANDARD.decode(pb).unwrap();
                match (r.check)(kp, &stored) {
                    Outcome::Equal => equal += 1,
                    Outcome::SerdeRefused => refused += 1,
                    Outcome::Failed(why) => {
                        failures.push(format!("{av} {kind} {}: {why}", case["name"]));
                    }
                }
            }
        }
        eprintln!(
            "{}: {equal} of {cases} cases of {kinds} kinds decoded equal to the serde path; \
             {refused} the serde path refuses",
            dir.display()
        );
        assert!(
            failures.is_empty(),
            "{} cases differ:\n  {}",
            failures.len(),
            failures.join("\n  ")
        );
        assert!(
            kinds >= 90,
            "only {kinds} kinds checked in {}",
            dir.display()
        );
        assert!(
            equal * 10 >= cases * 9,
            "only {equal} of {cases} cases compared in {}",
            dir.display()
        );
    }
}

/// The committed realistic Pod.
fn realistic_pod() -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden-1.37/core_v1_Pod.json");
    let fixture: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let case = fixture["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "realistic/pod")
        .unwrap();
    STANDARD.decode(case["protobuf"].as_str().unwrap()).unwrap()
}

#[test]
fn a_realistic_pod_has_its_fields() {
    let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
    let pod: Pod = kp.decode_k8s(&realistic_pod()).unwrap();
    assert!(pod.metadata.name.as_deref().is_some_and(|n| !n.is_empty()));
    let spec = pod.spec.unwrap();
    assert!(!spec.containers.is_empty());
    assert!(!spec.containers[0].name.is_empty());
    assert!(pod.status.is_some());
}

#[test]
fn the_codec_decodes_resources_by_the_generated_code_and_other_types_by_serde() {
    let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
    let stored = realistic_pod();
    let generated = super::decode_generated::<Pod>(kp, &stored)
        .expect("Pod has a generated decoder")
        .unwrap();
    assert_eq!(generated, kp.decode::<Pod>(&stored).unwrap());
    assert!(super::decode_generated::<apistore_storage::DynamicObject>(kp, &stored).is_none());
    assert!(super::decode_generated::<serde_json::Value>(kp, &stored).is_none());
    let codec =
        crate::StorageCodec::<Pod>::for_kube(crate::MediaType::Protobuf, KubeVersion::V1_37);
    assert_eq!(
        apistore_storage::Codec::decode(&codec, &stored).unwrap(),
        generated
    );
}

#[test]
fn older_minors_decode_through_serde_in_the_codec() {
    // A 1.31 CSINode has no status; k8s-openapi 1.37's has one, which the generated
    // code would fill in empty. A codec of kube 1.31 keeps 1.31's view.
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/storage.k8s.io_v1_CSINode.json");
    let fixture: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let kp = KubeProtobuf::for_version(KubeVersion::V1_31);
    let codec = crate::StorageCodec::<k8s_openapi::api::storage::v1::CSINode>::for_kube(
        crate::MediaType::Protobuf,
        KubeVersion::V1_31,
    );
    let mut checked = 0;
    for case in fixture["cases"].as_array().unwrap() {
        let stored = STANDARD.decode(case["protobuf"].as_str().unwrap()).unwrap();
        assert!(
            super::decode_generated::<k8s_openapi::api::storage::v1::CSINode>(kp, &stored)
                .is_none()
        );
        let by_serde = kp
            .decode::<k8s_openapi::api::storage::v1::CSINode>(&stored)
            .unwrap();
        assert_eq!(
            apistore_storage::Codec::decode(&codec, &stored).unwrap(),
            by_serde
        );
        checked += 1;
    }
    assert!(checked > 0);
}

#[test]
fn another_kind_is_refused_by_name() {
    let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
    let err = kp.decode_k8s::<ConfigMap>(&realistic_pod()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("v1 Pod") && text.contains("v1 ConfigMap"),
        "{text}"
    );
}

/// The realistic Pod's object bytes, out of their envelope.
fn realistic_pod_raw() -> Vec<u8> {
    let stored = realistic_pod();
    crate::envelope::parse(&stored).unwrap().raw.to_vec()
}

#[test]
fn malformed_bytes_name_the_field() {
    let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
    let raw = realistic_pod_raw();
    // The object cut short inside a well-formed envelope: an error (at the field
    // whose length runs past the end), or (cut at a field boundary) a smaller
    // object; never a panic.
    let mut errors = 0;
    for end in (1..raw.len()).step_by(7) {
        let stored = crate::envelope::write("v1", "Pod", &raw[..end]);
        if let Err(ProtobufError::Decode { kind, path, .. }) = kp.decode_k8s::<Pod>(&stored) {
            assert_eq!(kind, "Pod");
            assert!(!path.is_empty());
            errors += 1;
        }
    }
    assert!(errors > 0, "no truncation was reported as a decode error");
    // A container's name sent as a varint: refused, at its path.
    let container = [0x08, 0x01];
    let spec = [&[0x12, 0x02][..], &container].concat();
    let raw = [&[0x12, 0x04][..], &spec].concat();
    let stored = crate::envelope::write("v1", "Pod", &raw);
    let err = kp.decode_k8s::<Pod>(&stored).unwrap_err();
    assert_eq!(
        err,
        ProtobufError::Decode {
            kind: "Pod".into(),
            path: "spec.containers[0].name".into(),
            reason: "wrong wire type 0".into(),
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A byte of the object changed anywhere: never a panic, and where the serde
    /// path reads the result, the same object.
    #[test]
    fn changed_bytes_decode_as_the_serde_path_does(at in 0usize..10_000, byte in any::<u8>()) {
        let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
        let mut raw = realistic_pod_raw();
        let at = at % raw.len();
        raw[at] = byte;
        let stored = crate::envelope::write("v1", "Pod", &raw);
        if let Outcome::Failed(why) = check::<Pod>(kp, &stored) {
            prop_assert!(false, "byte {} set to {}: {}", at, byte, why);
        }
    }
}

/// A length-delimited field on its own.
fn field(tag: u32, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::wire::put_bytes(&mut out, tag, bytes);
    out
}

/// An `EnvVar` named `name`.
fn env_var(name: &str) -> Vec<u8> {
    field(7, &field(1, name.as_bytes()))
}

#[test]
fn a_list_in_one_row_is_sized_once_and_one_in_several_rows_keeps_wire_order() {
    // Container "one": twenty env entries in a row (Go's order). Container "split":
    // twenty in two rows of ten with its image between them, which protobuf allows.
    let env_row = |from: usize| (from..from + 10).map(|i| env_var(&format!("E{i}")));
    let one: Vec<u8> = std::iter::once(field(1, b"one"))
        .chain(env_row(0))
        .chain(env_row(10))
        .collect::<Vec<_>>()
        .concat();
    let split: Vec<u8> = std::iter::once(field(1, b"split"))
        .chain(env_row(0))
        .chain([field(2, b"busybox")])
        .chain(env_row(10))
        .collect::<Vec<_>>()
        .concat();
    let spec = [field(2, &one), field(2, &split)].concat();
    let stored = crate::envelope::write("v1", "Pod", &field(2, &spec));
    let kp = KubeProtobuf::for_version(KubeVersion::V1_37);
    assert!(matches!(check::<Pod>(kp, &stored), Outcome::Equal));

    let pod: Pod = kp.decode_k8s(&stored).unwrap();
    let containers = pod.spec.unwrap().containers;
    assert_eq!(containers.capacity(), 2, "the containers' row was counted");
    let want: Vec<String> = (0..20).map(|i| format!("E{i}")).collect();
    for container in &containers {
        let env = container.env.as_ref().unwrap();
        let names: Vec<String> = env.iter().map(|e| e.name.clone()).collect();
        assert_eq!(names, want, "{}", container.name);
        // Grown one at a time to eight and then by doubling, twenty would have room
        // for 32; each row is counted, so the split list has room for its 10 + 10.
        assert_eq!(env.capacity(), 20, "{}", container.name);
    }
    assert_eq!(containers[1].image.as_deref(), Some("busybox"));
}
