//! `--metrics-out` with a `kms` (apiVersion v2) provider, black-box, against a real
//! etcd and the KMS v2 test plugin served over gRPC on a unix socket: kube's
//! `apiserver_envelope_encryption_*` families in the text exposition, with the
//! priming health check the command runs while loading its configuration.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use apistore::layers::value::kms_v2::{KmsService, key_id_hash};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use apistore_testing::kms::{KmsPluginServer, TestKmsPlugin};

const E: &str = "apiserver_envelope_encryption";

struct Fixture {
    endpoint: String,
    prefix: String,
    plugin: Arc<TestKmsPlugin>,
    _server: KmsPluginServer,
    config: PathBuf,
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let plugin = Arc::new(TestKmsPlugin::new());
        let server = KmsPluginServer::serve(
            Arc::clone(&plugin) as Arc<dyn KmsService>,
            dir.path().join("kms.sock"),
        )
        .unwrap();
        let config = dir.path().join("enc.yaml");
        std::fs::write(
            &config,
            format!(
                "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: {}\n          timeout: 5s\n      - identity: {{}}\n",
                server.endpoint()
            ),
        )
        .unwrap();
        Self {
            endpoint: shared_endpoint().unwrap_or_else(|err| panic!("{err}")),
            prefix: unique_prefix("cli-kms-metrics"),
            plugin,
            _server: server,
            config,
            dir,
        }
    }

    /// Runs the command and returns its `--metrics-out` exposition.
    fn metrics_of(&self, args: &[&str], run: &str) -> String {
        let out_file = self.dir.path().join(format!("{run}.prom"));
        let out = Command::new(env!("CARGO_BIN_EXE_apistore"))
            .args(["--endpoints", &self.endpoint, "--prefix", &self.prefix])
            .arg("--encryption-config")
            .arg(&self.config)
            .arg("--metrics-out")
            .arg(&out_file)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "apistore {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&out_file).unwrap()
    }

    fn secret_file(&self) -> PathBuf {
        let path = self.dir.path().join("s1.json");
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s1", "namespace": "default"},
            "data": {"password": "aHVudGVyMg=="},
        });
        std::fs::write(&path, body.to_string()).unwrap();
        path
    }
}

/// The value of the sample `family{labels}`, if exposed.
fn sample(text: &str, family: &str, labels: &str) -> Option<f64> {
    let head = if labels.is_empty() {
        format!("{family} ")
    } else {
        format!("{family}{{{labels}}} ")
    };
    text.lines()
        .find_map(|l| l.strip_prefix(&head))
        .map(|v| v.parse().unwrap())
}

fn calls(text: &str, method: &str, code: &str) -> Option<f64> {
    sample(
        text,
        &format!("{E}_kms_operations_latency_seconds_count"),
        &format!(
            r#"grpc_status_code="{code}",method_name="/v2.KeyManagementService/{method}",provider_name="vault""#
        ),
    )
}

fn key_id_used(text: &str, kind: &str, hash: &str) -> Option<f64> {
    sample(
        text,
        &format!("{E}_key_id_hash_total"),
        &format!(
            r#"apiserver_id_hash="",key_id_hash="{hash}",provider_name="vault",transformation_type="{kind}""#
        ),
    )
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn metrics_out_has_kubes_envelope_families_for_a_kms_v2_provider() {
    let f = Fixture::new();
    let key1 = key_id_hash("key-1");
    let secret = f.secret_file();

    // A write: the priming check (Status, Encrypt of the DEK seed) and one value
    // sealed under key-1.
    let text = f.metrics_of(
        &["create", "secrets/default/s1", "-f", path_str(&secret)],
        "create",
    );
    for family in [
        "dek_cache_fill_percent",
        "dek_source_cache_size",
        "key_id_hash_total",
        "key_id_hash_last_timestamp_seconds",
        "key_id_hash_status_last_timestamp_seconds",
        "kms_operations_latency_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {E}_{family} ")),
            "{family} missing:\n{text}"
        );
    }
    assert_eq!(key_id_used(&text, "to_storage", &key1), Some(1.0));
    assert_eq!(key_id_used(&text, "from_storage", &key1), None);
    assert_eq!(calls(&text, "Status", "OK"), Some(1.0));
    assert_eq!(calls(&text, "Encrypt", "OK"), Some(1.0));
    assert_eq!(calls(&text, "Decrypt", "OK"), None);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let status = sample(
        &text,
        &format!("{E}_key_id_hash_status_last_timestamp_seconds"),
        &format!(r#"apiserver_id_hash="",key_id_hash="{key1}",provider_name="vault""#),
    )
    .unwrap();
    assert!(status <= now && status > now - 60.0, "{status}");
    assert_eq!(
        sample(
            &text,
            &format!("{E}_dek_source_cache_size"),
            r#"provider_name="vault""#
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, &format!("{E}_dek_cache_fill_percent"), ""),
        Some(0.0)
    );

    // A read in another process: its own DEK seed differs, so the value's DEK source
    // is decrypted by the plugin once and cached.
    let text = f.metrics_of(&["get", "secrets/default/s1"], "get");
    assert_eq!(key_id_used(&text, "from_storage", &key1), Some(1.0));
    assert_eq!(calls(&text, "Decrypt", "OK"), Some(1.0));
    assert_eq!(
        sample(
            &text,
            &format!("{E}_dek_source_cache_size"),
            r#"provider_name="vault""#
        ),
        Some(2.0)
    );

    // After a rotation the old value is still read under its own key id, and the
    // health check reports the new one.
    assert_eq!(f.plugin.rotate(), "key-2");
    let key2 = key_id_hash("key-2");
    let text = f.metrics_of(&["get", "secrets/default/s1"], "rotated");
    assert_eq!(key_id_used(&text, "from_storage", &key1), Some(1.0));
    assert_eq!(key_id_used(&text, "from_storage", &key2), None);
    assert!(
        sample(
            &text,
            &format!("{E}_key_id_hash_status_last_timestamp_seconds"),
            &format!(r#"apiserver_id_hash="",key_id_hash="{key2}",provider_name="vault""#),
        )
        .is_some(),
        "{text}"
    );

    // An empty key id from Status is counted under kube's error code (the command
    // lists an unencrypted resource: with no DEK from the plugin, secrets cannot be
    // read).
    f.plugin.set_status_key_id(Some(String::new()));
    let text = f.metrics_of(&["list", "configmaps"], "empty-key-id");
    assert_eq!(
        sample(
            &text,
            &format!("{E}_invalid_key_id_from_status_total"),
            r#"error="empty",provider_name="vault""#
        ),
        Some(1.0)
    );
}
