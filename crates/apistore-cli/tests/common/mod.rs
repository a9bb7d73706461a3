//! What the command's black-box tests share: a fixture with its own etcd prefix and
//! scratch folder, the command line (with global options of its own, such as a KMS
//! test's `--encryption-config`), raw etcd access and sample objects.

// Each test crate uses a part of this.
#![allow(dead_code)]
// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Output};

use apistore::layers::value::EncryptionConfig;
use apistore_testing::etcd::{EtcdOptions, EtcdServer, shared_endpoint, unique_prefix};
use bytes::Bytes;

pub(crate) const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaSB0aGluayBzbyB0b28=";
pub(crate) const KEY2: &str = "dGhpcyBpcyBhbm90aGVyIDMyIGJ5dGUga2V5ISEhISE=";

/// One test's etcd prefix, scratch folder and command line.
pub(crate) struct Fixture {
    pub(crate) endpoint: String,
    pub(crate) prefix: String,
    pub(crate) dir: tempfile::TempDir,
    /// Global options every command of this fixture gets after `--endpoints` and
    /// `--prefix` (none unless a test sets them).
    pub(crate) global: Vec<OsString>,
}

impl Fixture {
    pub(crate) fn new(name: &str) -> Self {
        Self {
            endpoint: shared_endpoint().unwrap_or_else(|err| panic!("{err}")),
            prefix: unique_prefix(name),
            dir: tempfile::tempdir().unwrap(),
            global: Vec::new(),
        }
    }

    /// A fixture over an etcd of its own (for a test that compacts, which would take
    /// revisions from every other test on a shared one), with the prefix `/{name}`.
    pub(crate) fn own_etcd(name: &str) -> (EtcdServer, Self) {
        let etcd = EtcdServer::start(EtcdOptions::default())
            .unwrap_or_else(|err| panic!("an etcd of the test's own is needed: {err}"));
        let fixture = Self {
            endpoint: etcd.endpoint(),
            prefix: format!("/{name}"),
            dir: tempfile::tempdir().unwrap(),
            global: Vec::new(),
        };
        (etcd, fixture)
    }

    pub(crate) fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_apistore"))
            .args(["--endpoints", &self.endpoint, "--prefix", &self.prefix])
            .args(&self.global)
            .args(args)
            .output()
            .unwrap()
    }

    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "apistore {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Creates `text` (JSON or YAML) at `key` through the command; returns its stdout.
    pub(crate) fn create(&self, key: &str, text: &str) -> String {
        let file = self.file(&format!("{}.json", key.replace('/', "_")), text);
        self.ok(&["create", key, "-f", file.to_str().unwrap()])
    }

    pub(crate) async fn client(&self) -> etcd_client::Client {
        etcd_client::Client::connect(self.endpoint.split(',').collect::<Vec<_>>(), None)
            .await
            .unwrap()
    }

    /// The stored bytes and mod revision under a key relative to the prefix.
    pub(crate) async fn raw(&self, key: &str) -> (Vec<u8>, i64) {
        self.stored(key)
            .await
            .unwrap_or_else(|| panic!("nothing at {}/{key}", self.prefix))
    }

    /// The stored bytes and mod revision under a key relative to the prefix, if any.
    pub(crate) async fn stored(&self, key: &str) -> Option<(Vec<u8>, i64)> {
        let full = format!("{}/{key}", self.prefix);
        let response = self.client().await.get(full, None).await.unwrap();
        response
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision()))
    }

    pub(crate) async fn put_raw(&self, key: &str, value: Vec<u8>) {
        let full = format!("{}/{key}", self.prefix);
        self.client().await.put(full, value, None).await.unwrap();
    }
}

pub(crate) fn encryption_config(keys: &[(&str, &str)]) -> String {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| {
            format!("            - name: {name}\n              secret: {secret}\n")
        })
        .collect();
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [deployments.apps, widgets.example.com, secrets]\n    providers:\n      - aesgcm:\n          keys:\n{keys}"
    )
}

pub(crate) const DEPLOYMENT: &str = r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d1","namespace":"default"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}"#;
pub(crate) const WIDGET: &str = r#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"default"},"spec":{"size":3}}"#;

pub(crate) fn starts_with(data: &[u8], prefix: &[u8]) -> bool {
    data.len() >= prefix.len() && &data[..prefix.len()] == prefix
}

pub(crate) async fn put_encrypted(f: &Fixture, keys: &[(&str, &str)], key: &str, plain: &[u8]) {
    let config = EncryptionConfig::parse(&encryption_config(keys)).unwrap();
    let full = format!("{}/{key}", f.prefix);
    let stored = config
        .transformer_for("secrets")
        .transform_to_storage(Bytes::copy_from_slice(plain), full.as_bytes())
        .unwrap();
    f.put_raw(key, stored.to_vec()).await;
}

/// Runs the command and checks its exit code and that it said why on one line of stderr.
pub(crate) fn fails_with(f: &Fixture, args: &[&str], code: i32, says: &str) {
    let out = f.run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "apistore {args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains(says), "apistore {args:?}: {stderr}");
    assert!(out.stdout.is_empty());
}

pub(crate) const CM1: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1","namespace":"default"},"data":{"k":"v1"}}"#;
