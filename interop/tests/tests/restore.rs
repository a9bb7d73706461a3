//! A restore round trip read back by kube-apiserver's own storage layer (the reference
//! harness): Secrets written by the harness (encrypted with aesgcm key1, in each media
//! type), a snapshot saved through etcd's maintenance API, the Secrets deleted by the
//! harness, the keys rotated (key2 writes, key1 still reads), `apistore restore` from the
//! snapshot, and a harness with the rotated configuration reading every Secret back as
//! it read it before the delete (uid, creationTimestamp and every field; only the
//! resourceVersion is new), stored under key2, the cluster's write key of today.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use apistore_interop::{
    EncryptionFile, Interop, ReferenceOptions, aesgcm_secrets, per_media_type,
    reference_kube_version,
};
use serde_json::{Value, json};

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaSB0aGluayBzbyB0b28=";
const KEY2: &str = "dGhpcyBpcyBhbm90aGVyIDMyIGJ5dGUga2V5ISEhISE=";

/// The `apistore` command the workspace build made beside this test binary
/// (`target/<profile>/apistore`; `cargo xtask interop` builds every test binary of the
/// workspace first, which builds it for apistore-cli's own tests).
fn apistore_binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .unwrap_or_else(|| panic!("{} has no target directory", exe.display()));
    let binary = profile_dir.join(format!("apistore{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.is_file(),
        "{} is missing: build it with `cargo build -p apistore-cli` (cargo xtask interop's \
         workspace build makes it)",
        binary.display()
    );
    binary
}

/// `object` without its resourceVersion, which a restore is bound to change.
fn without_resource_version(mut object: Value) -> Value {
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.remove("resourceVersion");
    }
    object
}

async fn restored_objects_read_back_identical_through_kube(media_type: &str) {
    let before_rotation = EncryptionFile::new(&aesgcm_secrets(&[("key1", KEY1)]));
    let options = ReferenceOptions::new("secrets", "v1/Secret")
        .encrypted(before_rotation.path())
        .media_type(media_type);
    let mut it = Interop::start(&options).await;
    let names = ["s1", "s2"];
    let mut before = Vec::new();
    for name in names {
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"),
                "labels": {"app": "web"}, "creationTimestamp": "2026-01-02T03:04:05Z"},
            "type": "Opaque", "data": {"password": "aHVudGVyMg=="}});
        let key = it.go_key("ns", name);
        it.go.create(&key, &secret).await.unwrap();
        before.push(it.go.get(&key, "").await.unwrap());
    }

    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("backup.db");
    let mut raw = it.raw().await;
    let mut stream = raw.snapshot().await.unwrap();
    let mut bytes = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        bytes.extend_from_slice(message.blob());
    }
    std::fs::write(&snapshot, &bytes).unwrap();

    for name in names {
        let key = it.go_key("ns", name);
        it.go.delete(&key, Value::Null).await.unwrap();
    }
    // The rotation: key2 writes, key1 still reads.
    let rotated = EncryptionFile::new(&aesgcm_secrets(&[("key2", KEY2), ("key1", KEY1)]));
    let out = Command::new(apistore_binary())
        .args(["--endpoints", &it.etcd.endpoint()])
        .args(["--kube-version", &reference_kube_version().to_string()])
        .args(["--storage-media-type", media_type])
        .arg("--encryption-config")
        .arg(rotated.path())
        .args(["restore", "secrets/ns", "--from-snapshot"])
        .arg(&snapshot)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "restore failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let mut go = it.another_go(&options.clone().encrypted(rotated.path()));
    for (name, before) in names.iter().zip(before) {
        let after = go.get(&it.go_key("ns", name), "").await.unwrap();
        assert_eq!(
            without_resource_version(after),
            without_resource_version(before),
            "{name} read back by kube's storage layer after the restore"
        );
        let stored = it.raw_get(&it.etcd_key("ns", name)).await.unwrap();
        assert!(
            stored.starts_with(b"k8s:enc:aesgcm:v1:key2:"),
            "{name} is not under the write key: {:?}",
            String::from_utf8_lossy(&stored[..stored.len().min(30)])
        );
    }
}

per_media_type!(restored_objects_read_back_identical_through_kube);
