//! The direct `Deserializer` (`KubeProtobuf::decode`) against the JSON contract.
//!
//! For every golden case, deserializing straight from the protobuf must give what
//! `serde_json` reads from `decode_to_json`'s text (itself byte-for-byte Go's, see
//! `golden.rs`): as a `serde_json::Value`, as apistore's `DynamicObject` (serde's
//! `flatten` buffering), and as k8s-openapi types; so must the value tree
//! (`decode_to_value`) and the storage codec's `DynamicObject`, built from it. Where `serde_json` refuses the
//! text for a type, the direct path must refuse too. Then hostile bytes: random
//! object bytes never panic, and whenever the JSON path decodes them, the direct path
//! gives the same value.
//!
//! Every committed set is read with its own minor's schema (`tests/golden` 1.31,
//! `tests/golden-1.<minor>`); `APISTORE_GOLDEN_DIR` and `APISTORE_GOLDEN_KUBE` point it
//! at one larger fixture set instead, as for `golden.rs`.

// Tests may unwrap: a panic there is a failed test (helpers outside #[test] too).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::path::{Path, PathBuf};

use apistore_protobuf::{KubeProtobuf, MediaType, PROTOBUF_MAGIC, StorageCodec};
use apistore_storage::{Codec, DynamicObject, KubeVersion};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Deserialize)]
struct Fixture {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    protobuf: String,
}

/// The fixture sets to read, each with the minor it was generated for: the committed
/// ones (the minors `golden.rs` checks), or the one `APISTORE_GOLDEN_DIR` names.
fn fixture_sets() -> Vec<(KubeVersion, PathBuf)> {
    if let Some(dir) = std::env::var_os("APISTORE_GOLDEN_DIR") {
        let version = std::env::var("APISTORE_GOLDEN_KUBE").map_or(KubeVersion::V1_31, |v| {
            v.parse()
                .unwrap_or_else(|e| panic!("APISTORE_GOLDEN_KUBE: {e}"))
        });
        return vec![(version, PathBuf::from(dir))];
    }
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    vec![
        (KubeVersion::V1_31, tests.join("golden")),
        (KubeVersion::V1_34, tests.join("golden-1.34")),
        (KubeVersion::V1_37, tests.join("golden-1.37")),
    ]
}

/// (file name, fixture) for every fixture file in `dir`, sorted.
fn fixtures(dir: &Path) -> Vec<(String, Fixture)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .filter(|p| p.file_name().is_some_and(|n| n != "index.json"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let f: Fixture = serde_json::from_slice(&std::fs::read(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (p.file_name().unwrap().to_string_lossy().into_owned(), f)
        })
        .collect()
}

/// The stored bytes of every case of one fixture.
fn cases(f: &Fixture) -> impl Iterator<Item = (&str, Vec<u8>)> {
    f.cases
        .iter()
        .map(|c| (c.name.as_str(), STANDARD.decode(&c.protobuf).unwrap()))
}

/// The direct path for `T` against `serde_json` over the JSON text: equal when the
/// text reads as `T`, an error when it does not, both with `kp`'s schema. Returns a
/// failure description.
fn compare<T>(kp: &KubeProtobuf, stored: &[u8]) -> Option<String>
where
    T: DeserializeOwned + PartialEq + Debug,
{
    let json = match kp.decode_to_json(stored) {
        Ok(j) => j,
        Err(e) => {
            return kp
                .decode::<T>(stored)
                .is_ok()
                .then(|| format!("decode_to_json fails ({e}) but decode succeeds"));
        }
    };
    match (serde_json::from_slice::<T>(&json), kp.decode::<T>(stored)) {
        (Ok(want), Ok(got)) if want == got => None,
        (Ok(want), Ok(got)) => Some(format!("differs:\n want {want:?}\n  got {got:?}")),
        (Ok(_), Err(e)) => Some(format!("serde_json reads the JSON, decode fails: {e}")),
        (Err(e), Ok(_)) => Some(format!(
            "serde_json refuses the JSON ({e}), decode succeeds"
        )),
        (Err(_), Err(_)) => None,
    }
}

fn assert_all<T>(only: Option<&str>) -> usize
where
    T: DeserializeOwned + PartialEq + Debug,
{
    assert_every(only, |kp, _, stored| compare::<T>(kp, stored))
}

/// Runs `check` on every golden case (of fixture file `only`, if given) and fails
/// with every case it describes as failed. Returns the number of cases.
fn assert_every(
    only: Option<&str>,
    check: impl Fn(&KubeProtobuf, KubeVersion, &[u8]) -> Option<String>,
) -> usize {
    let mut failures = Vec::new();
    let mut n = 0;
    for (version, dir) in fixture_sets() {
        let kp = KubeProtobuf::for_version(version);
        for (file, f) in fixtures(&dir) {
            if only.is_some_and(|o| o != file) {
                continue;
            }
            for (name, stored) in cases(&f) {
                n += 1;
                if let Some(why) = check(kp, version, &stored) {
                    failures.push(format!(
                        "{version} {} {} [{name}]: {why}",
                        f.api_version, f.kind
                    ));
                }
            }
        }
    }
    assert!(n > 0, "no cases for {only:?}");
    assert!(
        failures.is_empty(),
        "{} of {n} cases differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
    n
}

#[test]
fn every_golden_case_deserializes_as_a_value_equal_to_its_json() {
    let n = assert_all::<Value>(None);
    eprintln!("{n} cases as serde_json::Value: all equal");
}

#[test]
fn every_golden_case_deserializes_as_a_dynamic_object_equal_to_its_json() {
    let n = assert_all::<DynamicObject>(None);
    eprintln!("{n} cases as DynamicObject: all equal");
}

#[test]
fn k8s_openapi_types_deserialize_as_from_their_json() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret, Service};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    assert_all::<Pod>(Some("core_v1_Pod.json"));
    assert_all::<ConfigMap>(Some("core_v1_ConfigMap.json"));
    assert_all::<Secret>(Some("core_v1_Secret.json"));
    assert_all::<Service>(Some("core_v1_Service.json"));
    assert_all::<Node>(Some("core_v1_Node.json"));
    assert_all::<Lease>(Some("coordination.k8s.io_v1_Lease.json"));
    assert_all::<Deployment>(Some("apps_v1_Deployment.json"));
    assert_all::<CustomResourceDefinition>(Some(
        "apiextensions.k8s.io_v1_CustomResourceDefinition.json",
    ));
}

#[test]
fn the_storage_codec_decodes_protobuf_without_json_text() {
    for (version, dir) in fixture_sets() {
        let kp = KubeProtobuf::for_version(version);
        let (_, pods) = fixtures(&dir)
            .into_iter()
            .find(|(file, _)| file == "core_v1_Pod.json")
            .unwrap();
        let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, version);
        for (name, stored) in cases(&pods) {
            let Ok(json) = kp.decode_to_json(&stored) else {
                continue;
            };
            let Ok(want) = serde_json::from_slice::<DynamicObject>(&json) else {
                continue;
            };
            assert_eq!(codec.decode(&stored).unwrap(), want, "{version} {name}");
        }
    }
}

/// `decode_to_value` and the codec's `DynamicObject` (built from that value tree)
/// against `serde_json` over the text, and against the serde path: equal when the
/// text reads, an error when the text cannot be written. Returns a failure.
fn compare_tree(kp: &KubeProtobuf, version: KubeVersion, stored: &[u8]) -> Option<String> {
    let codec = StorageCodec::<DynamicObject>::for_kube(MediaType::Protobuf, version);
    let (tree, object) = (kp.decode_to_value(stored), codec.decode(stored));
    let Ok(json) = kp.decode_to_json(stored) else {
        return match (tree.is_ok(), object.is_ok()) {
            (false, false) => None,
            _ => Some("decode_to_json fails but the value tree decodes".to_owned()),
        };
    };
    let want: Value = match serde_json::from_slice(&json) {
        Ok(v) => v,
        Err(e) => return Some(format!("serde_json refuses decode_to_json's text: {e}")),
    };
    match tree {
        Ok(got) if got == want => {}
        Ok(got) => return Some(format!("value tree differs:\n want {want}\n  got {got}")),
        Err(e) => return Some(format!("value tree fails: {e}")),
    }
    match (serde_json::from_slice::<DynamicObject>(&json), object) {
        (Ok(want), Ok(got)) if want == got => {}
        (Ok(want), Ok(got)) => {
            return Some(format!(
                "DynamicObject differs:\n want {want:?}\n  got {got:?}"
            ));
        }
        (Ok(_), Err(e)) => return Some(format!("the codec's DynamicObject fails: {e}")),
        (Err(_), Ok(_)) => {
            return Some("serde_json refuses the DynamicObject, the codec reads it".to_owned());
        }
        (Err(_), Err(_)) => {}
    }
    // The serde path's DynamicObject is the codec's old answer: the same object.
    let codec_again = codec.decode(stored).ok();
    let serde = kp.decode::<DynamicObject>(stored).ok();
    (codec_again != serde).then(|| "the codec and the serde path differ".to_owned())
}

#[test]
fn every_golden_case_decodes_to_a_value_tree_and_dynamic_object_equal_to_its_json() {
    let n = assert_every(None, compare_tree);
    eprintln!("{n} cases as a value tree and the codec's DynamicObject: all equal");
}

#[test]
fn a_type_refusing_a_value_names_the_kind_and_path() {
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct Strict {
        metadata: StrictMeta,
    }
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct StrictMeta {
        name: u32,
    }
    let kp = KubeProtobuf::k8s_1_31();
    let stored = kp
        .encode_value(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
        .unwrap();
    let err = kp.decode::<Strict>(&stored).unwrap_err().to_string();
    assert!(
        err.contains("ConfigMap") && err.contains("metadata.name"),
        "{err}"
    );
}

#[test]
fn a_truncated_envelope_names_the_kind_it_had_read() {
    let kp = KubeProtobuf::k8s_1_31();
    let stored = kp
        .encode_value(&serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}))
        .unwrap();
    // Cut inside raw's length varint: typeMeta is complete, raw is not.
    let mut cut = stored[..22].to_vec();
    cut.push(0x80);
    let err = kp.decode_to_json(&cut).unwrap_err().to_string();
    assert!(
        err.contains("\"ConfigMap\"") && err.contains("\"v1\""),
        "{err}"
    );
    assert!(err.contains("unexpected end of data in varint"), "{err}");
    let err = kp.decode::<Value>(&cut).unwrap_err().to_string();
    assert!(err.contains("\"ConfigMap\""), "{err}");
    // Nothing read yet: no kind to name.
    let err = kp.decode_to_json(b"k8s\0\x0a").unwrap_err().to_string();
    assert_eq!(
        err,
        "malformed runtime.Unknown envelope: unexpected end of data in varint"
    );
}

fn envelope(kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = vec![0x0a, 2, b'v', b'1', 0x12, kind.len() as u8];
    tm.extend_from_slice(kind.as_bytes());
    let mut out = PROTOBUF_MAGIC.to_vec();
    out.push(0x0a);
    out.push(tm.len() as u8);
    out.extend_from_slice(&tm);
    out.push(0x12);
    let mut n = raw.len();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(raw);
    out
}

proptest! {
    #[test]
    fn random_object_bytes_never_panic_and_agree_with_the_json_path(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        kind in prop::sample::select(vec!["Pod", "ConfigMap", "Secret", "Service", "Node", "Endpoints"]),
    ) {
        let stored = envelope(kind, &body);
        let kp = KubeProtobuf::k8s_1_31();
        let direct = kp.decode::<Value>(&stored);
        let _ = kp.decode::<DynamicObject>(&stored);
        if let Ok(json) = kp.decode_to_json(&stored) {
            if let Ok(want) = serde_json::from_slice::<Value>(&json) {
                prop_assert_eq!(direct.ok(), Some(want));
            }
        }
    }

    #[test]
    fn random_object_bytes_decode_to_the_same_value_tree_as_through_the_text(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        kind in prop::sample::select(vec!["Pod", "ConfigMap", "Secret", "Service", "Node", "Endpoints"]),
    ) {
        let stored = envelope(kind, &body);
        let kp = KubeProtobuf::k8s_1_31();
        let tree = kp.decode_to_value(&stored);
        match kp.decode_to_json(&stored) {
            Ok(json) => {
                if let Ok(want) = serde_json::from_slice::<Value>(&json) {
                    prop_assert_eq!(tree.ok(), Some(want));
                }
            }
            Err(_) => prop_assert!(tree.is_err()),
        }
        prop_assert_eq!(
            kp.decode_dynamic(&stored).ok(),
            kp.decode::<DynamicObject>(&stored).ok()
        );
    }

    #[test]
    fn random_bytes_after_the_magic_never_panic_the_deserializer(
        body in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let mut b = PROTOBUF_MAGIC.to_vec();
        b.extend_from_slice(&body);
        let _ = KubeProtobuf::k8s_1_31().decode::<Value>(&b);
    }
}
