//! The command with a `kms` (apiVersion v2) provider, black-box, against a real etcd and
//! the KMS v2 test plugin served over gRPC on a unix socket in a temp dir: kube's
//! envelope in etcd, reads, a key id rotation picked up by `encryption rewrite`, and
//! plugin failures (unhealthy, too slow, socket gone) that say which provider and
//! socket failed and write nothing.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::Duration;

use apistore::layers::value::kms_v2::{EncryptedDekSourceType, EncryptedObject, KmsService};
use apistore_testing::kms::{KmsOperation, KmsPluginServer, TestKmsPlugin};
use common::Fixture;

const ENVELOPE_PREFIX: &[u8] = b"k8s:enc:kms:v2:vault:";
const PASSWORD: &str = "hunter2-the-plaintext";

/// One test's plugin and command line: the common fixture, every command run with an
/// `--encryption-config` whose `secrets` go to the plugin.
struct KmsFixture {
    base: Fixture,
    plugin: Arc<TestKmsPlugin>,
    server: Option<KmsPluginServer>,
    socket: PathBuf,
}

impl KmsFixture {
    fn new(name: &str, timeout: &str) -> Self {
        let mut base = Fixture::new(name);
        let socket = base.dir.path().join("kms.sock");
        let plugin = Arc::new(TestKmsPlugin::new());
        let server =
            KmsPluginServer::serve(Arc::clone(&plugin) as Arc<dyn KmsService>, &socket).unwrap();
        let config = base.file(
            "enc.yaml",
            &format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: {}\n          timeout: {timeout}\n      - identity: {{}}\n",
                server.endpoint()
            ),
        );
        base.global = vec!["--encryption-config".into(), config.into_os_string()];
        Self {
            base,
            plugin,
            server: Some(server),
            socket,
        }
    }

    /// Creates the secret `name` (its password [`PASSWORD`]) through the command.
    fn create(&self, name: &str) -> Output {
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"password": base64(PASSWORD.as_bytes())},
        });
        let file = self.base.file(&format!("{name}.json"), &body.to_string());
        self.base.run(&[
            "create",
            &format!("secrets/default/{name}"),
            "-f",
            file.to_str().unwrap(),
        ])
    }

    /// The envelope stored under a key, checked to be kube's KMS v2 layout.
    async fn envelope(&self, key: &str) -> (EncryptedObject, i64) {
        let (stored, revision) = self.base.raw(key).await;
        let body = stored.strip_prefix(ENVELOPE_PREFIX).unwrap_or_else(|| {
            panic!(
                "{key} is not a KMS v2 value of provider vault: {:?}",
                String::from_utf8_lossy(&stored)
            )
        });
        assert!(
            !stored
                .windows(PASSWORD.len())
                .any(|w| w == PASSWORD.as_bytes()),
            "plaintext in etcd at {key}"
        );
        (EncryptedObject::decode(body).unwrap(), revision)
    }

    fn password(&self, name: &str) -> String {
        let read: serde_json::Value = serde_json::from_str(&self.base.ok(&[
            "-o",
            "json",
            "get",
            &format!("secrets/default/{name}"),
        ]))
        .unwrap();
        read["data"]["password"].as_str().unwrap().to_owned()
    }

    fn socket(&self) -> &Path {
        &self.socket
    }
}

fn base64(data: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// `encryption rewrite secrets`: how many values it scanned, rewrote and failed.
fn rewrite(f: &KmsFixture) -> (u64, u64, u64) {
    let summary: serde_json::Value =
        serde_json::from_str(
            &f.base
                .ok(&["-o", "json", "encryption", "rewrite", "secrets"]),
        )
        .unwrap();
    let count = |field: &str| {
        summary[field]
            .as_u64()
            .unwrap_or_else(|| panic!("{summary}"))
    };
    (count("scanned"), count("rewritten"), count("failed"))
}

#[tokio::test]
async fn kms_v2_values_are_kubes_envelope_and_a_rotated_key_id_is_rewrapped() {
    let f = KmsFixture::new("cli-kms-rotation", "5s");
    for name in ["s1", "s2"] {
        let out = f.create(name);
        assert!(
            out.status.success(),
            "create {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut before = Vec::new();
    for name in ["s1", "s2"] {
        let (object, revision) = f.envelope(&format!("secrets/default/{name}")).await;
        assert_eq!(object.key_id, "key-1");
        assert_eq!(
            object.encrypted_dek_source_type,
            EncryptedDekSourceType::HkdfSha256XnonceAesGcmSeed
        );
        assert_eq!(
            object
                .annotations
                .get("kms.apistore.test")
                .map(Vec::as_slice),
            Some(&b"local"[..])
        );
        before.push((object, revision));
    }
    assert_eq!(f.password("s1"), base64(PASSWORD.as_bytes()));

    // Nothing is stale while the key id stands.
    assert_eq!(rewrite(&f), (2, 0, 0));

    assert_eq!(f.plugin.rotate(), "key-2");
    assert_eq!(rewrite(&f), (2, 2, 0));
    let mut after = Vec::new();
    for (name, (old, old_revision)) in ["s1", "s2"].iter().zip(&before) {
        let (object, revision) = f.envelope(&format!("secrets/default/{name}")).await;
        assert_eq!(object.key_id, "key-2", "{name} was not re-wrapped");
        assert_ne!(object.encrypted_dek_source, old.encrypted_dek_source);
        assert!(revision > *old_revision, "{name} was not written");
        assert_eq!(f.password(name), base64(PASSWORD.as_bytes()));
        after.push(object);
    }
    // One process rewrote both: one DEK seed, encrypted once by the plugin.
    assert_eq!(after[0].encrypted_dek_source, after[1].encrypted_dek_source);
    assert_eq!(rewrite(&f), (2, 0, 0));
}

/// Checks that `line` names the provider, its socket and `why`.
fn names_the_plugin(f: &KmsFixture, line: &str, why: &str) {
    assert!(line.contains("vault"), "the provider is not named: {line}");
    assert!(
        line.contains(f.socket().to_str().unwrap()),
        "the socket is not named: {line}"
    );
    assert!(line.contains(why), "{line}");
}

/// Checks a failed command: exit 1, nothing on stdout, and its error (the last line of
/// stderr, after the warning of the failed health check at start) naming the
/// provider, the socket and `why`.
fn fails_naming_the_plugin(f: &KmsFixture, out: &Output, why: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(out.stdout.is_empty());
    let lines: Vec<&str> = stderr.lines().collect();
    let (error, warnings) = lines.split_last().expect("an error on stderr");
    assert!(error.starts_with("InternalError: "), "{stderr}");
    names_the_plugin(f, error, why);
    assert!(
        warnings.iter().all(|w| w.starts_with("Warning: ")),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_unhealthy_plugin_is_reported_and_used_while_it_still_encrypts() {
    let f = KmsFixture::new("cli-kms-unhealthy", "2s");
    f.plugin.set_healthz("unhealthy: key vault sealed");
    // As in kube-apiserver, a failed health check alone does not stop writes...
    let out = f.create("s1");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("Warning: kmsv2 Provider vault is not healthy"),
        "{stderr}"
    );
    names_the_plugin(
        &f,
        &stderr,
        "got unexpected healthz status: unhealthy: key vault sealed",
    );
    assert_eq!(f.envelope("secrets/default/s1").await.0.key_id, "key-1");

    // ...but a plugin that cannot encrypt stops them, before anything is written.
    f.plugin.fail(KmsOperation::Encrypt, "HSM offline");
    let out = f.create("s2");
    fails_naming_the_plugin(&f, &out, "HSM offline");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("got unexpected healthz status"), "{stderr}");
    assert_eq!(f.base.stored("secrets/default/s2").await, None);
}

#[tokio::test]
async fn plugin_failures_name_the_provider_and_socket_and_write_nothing() {
    let mut f = KmsFixture::new("cli-kms-failures", "500ms");
    let out = f.create("written");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    f.plugin.set_latency(Duration::from_millis(1500));
    let out = f.create("slow");
    fails_naming_the_plugin(&f, &out, "timed out after 500ms");
    assert_eq!(f.base.stored("secrets/default/slow").await, None);
    f.plugin.set_latency(Duration::ZERO);

    f.server.take().unwrap().stop();
    assert!(!f.socket().exists(), "the socket outlived its server");
    let out = f.create("gone");
    fails_naming_the_plugin(&f, &out, "does not exist");
    assert_eq!(f.base.stored("secrets/default/gone").await, None);
    // Reads need the plugin too (the DEK is only in the plugin's keeping).
    let out = f.base.run(&["get", "secrets/default/written"]);
    fails_naming_the_plugin(&f, &out, "does not exist");
    // What was written before stays as it was.
    let (object, _) = f.envelope("secrets/default/written").await;
    assert_eq!(object.key_id, "key-1");
}
