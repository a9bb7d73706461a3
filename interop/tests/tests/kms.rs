//! KMS v2 envelope encryption across the sides: one EncryptionConfiguration file with a
//! `kms` (apiVersion v2) provider, read by kube's own config loader in the reference
//! harness (which dials the plugin with kube's gRPC client) and by apistore's, both
//! talking to the Rust KMS v2 test plugin over gRPC on a unix socket in a temp dir.
//! Values written by one side are read by the other, before and after the plugin's key
//! id rotates, and both write kube's `k8s:enc:kms:v2:<name>:` envelope.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::Arc;

use apistore::layers::value::kms_v2::{EncryptedDekSourceType, EncryptedObject, KmsService};
use apistore::{DynamicObject, Etcd3Store, GetOptions, RewriteOptions, Storage, rewrite_stale};
use apistore_interop::{
    EncryptionFile, Failure, Interop, Reference, ReferenceOptions, dynamic, per_media_type, secret,
    summary, to_json,
};
use apistore_testing::kms::{KmsPluginServer, TestKmsPlugin};
use serde_json::Value;

const ENVELOPE_PREFIX: &[u8] = b"k8s:enc:kms:v2:vault:";

/// The test plugin on a socket in a temp dir, and apistore's configuration naming it
/// first for secrets.
struct Plugin {
    plugin: Arc<TestKmsPlugin>,
    _server: KmsPluginServer,
    dir: tempfile::TempDir,
    socket: PathBuf,
    api_file: EncryptionFile,
}

/// A configuration with one `kms` provider, `vault`, at `endpoint`, then identity.
fn kms_config(endpoint: &str) -> EncryptionFile {
    EncryptionFile::new(&format!(
        "  - resources: [secrets]
    providers:
      - kms:
          apiVersion: v2
          name: vault
          endpoint: {endpoint}
          timeout: 5s
      - identity: {{}}
"
    ))
}

impl Plugin {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("kms.sock");
        let plugin = Arc::new(TestKmsPlugin::new());
        let server =
            KmsPluginServer::serve(Arc::clone(&plugin) as Arc<dyn KmsService>, &socket).unwrap();
        let api_file = kms_config(&server.endpoint());
        Self {
            plugin,
            _server: server,
            dir,
            socket,
            api_file,
        }
    }

    /// The options of reference harness `n`: the same configuration, its `kms`
    /// endpoint the harness's own relay to the plugin (kmsrelay.go says why), and the
    /// file, which must outlive the harness.
    fn go_options(&self, media_type: &str, n: usize) -> (ReferenceOptions, EncryptionFile) {
        let relay = self.dir.path().join(format!("relay-{n}.sock"));
        let file = kms_config(&format!("unix://{}", relay.display()));
        let options = ReferenceOptions::new("secrets", "v1/Secret")
            .encrypted(file.path())
            .media_type(media_type)
            .kms_relay(relay, &self.socket);
        (options, file)
    }
}

/// The envelope stored under an object's etcd key, checked to be kube's KMS v2 layout
/// with the plugin's annotations, a seed as DEK source, and no plaintext.
async fn envelope(t: &Interop, name: &str) -> EncryptedObject {
    let stored = t.raw_get(&t.etcd_key("ns", name)).await.unwrap();
    assert!(
        stored.starts_with(ENVELOPE_PREFIX),
        "{name}: {:?}",
        String::from_utf8_lossy(&stored[..stored.len().min(40)])
    );
    assert!(
        !stored
            .windows(7)
            .any(|w| w == b"hunter2" || w == b"aHVudGV"),
        "{name}: plaintext in etcd"
    );
    let object = EncryptedObject::decode(&stored[ENVELOPE_PREFIX.len()..]).unwrap();
    assert_eq!(
        object.encrypted_dek_source_type,
        EncryptedDekSourceType::HkdfSha256XnonceAesGcmSeed,
        "{name}"
    );
    assert_eq!(
        object
            .annotations
            .get("kms.apistore.test")
            .map(Vec::as_slice),
        Some(&b"local"[..]),
        "{name}"
    );
    object
}

/// apistore's key of a secret in `ns` (kube's registry keeps secrets under `secrets`).
fn api_key(name: &str) -> String {
    format!("secrets/ns/{name}")
}

/// The reference's key of a secret in `ns`.
fn go_key(name: &str) -> String {
    format!("/secrets/ns/{name}")
}

async fn api_get(store: &Etcd3Store<DynamicObject>, name: &str) -> Value {
    store
        .get(&api_key(name), &GetOptions::default())
        .await
        .map(|o| to_json(&o))
        .unwrap_or_else(|e| panic!("apistore get {name}: {:?}", Failure::from_error(&e)))
}

async fn go_get(go: &mut Reference, name: &str) -> Value {
    go.get(&go_key(name), "")
        .await
        .unwrap_or_else(|f| panic!("kube get {name}: {f:?}"))
}

async fn api_create(store: &Etcd3Store<DynamicObject>, name: &str) -> Value {
    to_json(
        &store
            .create(&api_key(name), dynamic(&secret("ns", name)), 0)
            .await
            .unwrap(),
    )
}

async fn kms_v2_values_cross_the_sides_before_and_after_a_key_id_rotation(media_type: &str) {
    let p = Plugin::start();
    let (options, _go_file) = p.go_options(media_type, 0);
    let mut t = Interop::start(&options).await;
    // apistore reaches the plugin directly, on its own configuration.
    let store = t.another_store(Some(p.api_file.path())).await;
    let mut written = Vec::new();

    // Under key-1: kube writes, apistore reads; apistore writes, kube reads.
    let by_go =
        t.go.create(&go_key("go-1"), &secret("ns", "go-1"))
            .await
            .unwrap();
    assert_eq!(envelope(&t, "go-1").await.key_id, "key-1");
    assert_eq!(summary(&api_get(&store, "go-1").await), summary(&by_go));
    written.push(("go-1", by_go));
    let by_api = api_create(&store, "api-1").await;
    assert_eq!(envelope(&t, "api-1").await.key_id, "key-1");
    assert_eq!(summary(&go_get(&mut t.go, "api-1").await), summary(&by_api));
    written.push(("api-1", by_api));

    // The plugin moves to key-2. kube picks a new key id up on its next health check
    // (one minute on), apistore on its next due check; both pick it up at start, so
    // each side starts again beside the old ones, which keep writing under key-1.
    assert_eq!(p.plugin.rotate(), "key-2");
    let (options2, _go_file2) = p.go_options(media_type, 1);
    let mut go2 = t.another_go(&options2);
    let store2 = t.another_store(Some(p.api_file.path())).await;

    let by_go = go2
        .create(&go_key("go-2"), &secret("ns", "go-2"))
        .await
        .unwrap();
    assert_eq!(envelope(&t, "go-2").await.key_id, "key-2");
    written.push(("go-2", by_go));
    let by_api = api_create(&store2, "api-2").await;
    assert_eq!(envelope(&t, "api-2").await.key_id, "key-2");
    written.push(("api-2", by_api));
    // The old sides still write under the key id they primed with.
    let by_old_go =
        t.go.create(&go_key("old-go"), &secret("ns", "old-go"))
            .await
            .unwrap();
    assert_eq!(envelope(&t, "old-go").await.key_id, "key-1");
    written.push(("old-go", by_old_go));
    let by_old_api = api_create(&store, "old-api").await;
    assert_eq!(envelope(&t, "old-api").await.key_id, "key-1");
    written.push(("old-api", by_old_api));

    // Every side reads every value: its own and the other's, old key id and new.
    for (name, object) in &written {
        let want = summary(object);
        assert_eq!(
            summary(&go_get(&mut t.go, name).await),
            want,
            "kube (key-1) {name}"
        );
        assert_eq!(
            summary(&go_get(&mut go2, name).await),
            want,
            "kube (key-2) {name}"
        );
        assert_eq!(
            summary(&api_get(&store, name).await),
            want,
            "apistore (key-1) {name}"
        );
        assert_eq!(
            summary(&api_get(&store2, name).await),
            want,
            "apistore (key-2) {name}"
        );
    }

    // apistore on key-2 finds the key-1 values stale and re-wraps them, on their bytes;
    // kube on key-2 reads the result and writes the same envelope.
    let rewrite = rewrite_stale(&store2, "secrets", &RewriteOptions::default(), |_, _| {})
        .await
        .unwrap();
    assert!(rewrite.failed.is_empty(), "{:?}", rewrite.failed);
    assert_eq!(rewrite.rewritten, 4, "{rewrite:?}");
    for (name, object) in &written {
        assert_eq!(envelope(&t, name).await.key_id, "key-2", "{name}");
        let read = go_get(&mut go2, name).await;
        // The same object, at the revision of its rewrite.
        let mut want = summary(object);
        want["resourceVersion"] = summary(&read)["resourceVersion"].clone();
        assert_eq!(summary(&read), want, "{name}");
    }
}

per_media_type!(kms_v2_values_cross_the_sides_before_and_after_a_key_id_rotation);
