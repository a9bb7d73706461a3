//! Interoperability with independently produced values (`tests/vectors/` at the
//! workspace root; see its README).
//!
//! - `kube_vectors.json` was written by `make_vectors.py` with Python's `cryptography`
//!   and PyNaCl in kube-apiserver's layout; every value must read back here, with
//!   kube's staleness.
//! - `rust_vectors.json` is what this crate writes; `make_vectors.py check` decrypts it.
//!   Set `APISTORE_VECTORS_OUT=<path>` to write a fresh one from
//!   `rust_vectors_for_python`.

// Helpers of a test crate (outside `#[test]` fns, where clippy.toml already allows
// it): a panic here is a failed test, which is what we want.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

use apistore_value::EncryptionConfig;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde_json::{Value, json};

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

fn b64(text: &Value) -> Vec<u8> {
    STANDARD.decode(text.as_str().unwrap()).unwrap()
}

/// Reads every vector of a file with this crate; returns how many were read.
fn read_all(file: &str) -> usize {
    let text = std::fs::read_to_string(vectors_dir().join(file)).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut count = 0;
    for suite in doc["suites"].as_array().unwrap() {
        let config = EncryptionConfig::parse(&suite["config"].to_string()).unwrap();
        for v in suite["vectors"].as_array().unwrap() {
            let name = v["name"].as_str().unwrap();
            let etcd_key = v["etcd_key"].as_str().unwrap().as_bytes();
            let stored = Bytes::from(b64(&v["stored_b64"]));
            let t = config.transformer_for(v["resource"].as_str().unwrap());
            let read = t
                .transform_from_storage(stored.clone(), etcd_key)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(read.data, b64(&v["plaintext_b64"]), "{name}: plaintext");
            assert_eq!(read.stale, v["stale"].as_bool().unwrap(), "{name}: stale");
            if stored.starts_with(b"k8s:enc:aesgcm:") {
                let moved = t.transform_from_storage(stored, b"/registry/secrets/other/x");
                assert!(
                    moved.is_err(),
                    "{name}: GCM value read under another etcd key"
                );
            }
            count += 1;
        }
    }
    count
}

#[test]
fn kube_layout_vectors_from_python_decrypt() {
    assert_eq!(read_all("kube_vectors.json"), 70);
}

#[test]
fn committed_rust_vectors_still_decrypt() {
    assert!(read_all("rust_vectors.json") > 0);
}

/// A test key of `size` bytes, base64.
fn secret(seed: u8, size: usize) -> String {
    let bytes: Vec<u8> = (0..size)
        .map(|i| seed.wrapping_mul(31).wrapping_add(i as u8))
        .collect();
    STANDARD.encode(bytes)
}

fn keyed(provider: &str, name: &str, seed: u8, size: usize) -> Value {
    json!({ provider: { "keys": [{ "name": name, "secret": secret(seed, size) }] } })
}

/// One configuration whose resources each write with a different provider and key size.
fn rust_config() -> Value {
    let entry = |resources: &[&str], providers: Vec<Value>| json!({ "resources": resources, "providers": providers });
    json!({
        "kind": "EncryptionConfiguration",
        "apiVersion": "apiserver.config.k8s.io/v1",
        "resources": [
            entry(&["secrets"], vec![keyed("aesgcm", "gcm32", 1, 32), json!({"identity": {}})]),
            entry(&["configmaps"], vec![keyed("aesgcm", "gcm16", 2, 16)]),
            entry(&["deployments.apps"], vec![keyed("aesgcm", "gcm24", 3, 24)]),
            entry(&["*.batch"], vec![keyed("aescbc", "cbc32", 4, 32)]),
            entry(&["pods"], vec![keyed("aescbc", "cbc16", 5, 16)]),
            entry(&["services"], vec![keyed("aescbc", "cbc24", 6, 24)]),
            entry(&["*."], vec![keyed("secretbox", "box", 7, 32), keyed("aesgcm", "old", 8, 32)]),
            entry(&["*.*"], vec![json!({"identity": {}})]),
        ],
    })
}

/// Writes values with this crate for `make_vectors.py check` to decrypt; writes the
/// file only when `APISTORE_VECTORS_OUT` names one. Always checks they read back.
#[test]
fn rust_vectors_for_python() {
    let config_json = rust_config();
    let config = EncryptionConfig::parse(&config_json.to_string()).unwrap();
    let plaintexts: [(&str, Vec<u8>); 5] = [
        ("empty", Vec::new()),
        ("short", b"pandas are the best".to_vec()),
        ("block", b"0123456789abcdef".to_vec()),
        (
            "json",
            br#"{"kind":"Secret","apiVersion":"v1","data":{"k":"dg=="}}"#.to_vec(),
        ),
        ("large", (0..=255u8).cycle().take(1000).collect()),
    ];
    let mut vectors = Vec::new();
    for resource in [
        "secrets",
        "configmaps",
        "deployments.apps",
        "jobs.batch",
        "pods",
        "services",
        "events",
        "leases.coordination.k8s.io",
    ] {
        let t = config.transformer_for(resource);
        for (text_name, plain) in &plaintexts {
            let etcd_key = format!("/registry/{resource}/default/{text_name}");
            let stored = t
                .transform_to_storage(Bytes::from(plain.clone()), etcd_key.as_bytes())
                .unwrap();
            let read = t
                .transform_from_storage(stored.clone(), etcd_key.as_bytes())
                .unwrap();
            assert_eq!(&read.data[..], &plain[..]);
            assert!(!read.stale);
            vectors.push(json!({
                "name": format!("{resource}/{text_name}"),
                "resource": resource,
                "etcd_key": etcd_key,
                "plaintext_b64": STANDARD.encode(plain),
                "stored_b64": STANDARD.encode(&stored),
                "stale": false,
            }));
        }
    }
    let doc = json!({
        "generator": "crates/apistore-value/tests/vectors.rs rust_vectors_for_python (apistore-value)",
        "suites": [{ "config": config_json, "vectors": vectors }],
    });
    if let Some(out) = std::env::var_os("APISTORE_VECTORS_OUT") {
        let text = serde_json::to_string_pretty(&doc).unwrap() + "\n";
        std::fs::write(out, text).unwrap();
    }
}
