//! KMS v2 rotation end to end, through the facade, a real etcd and the KMS v2 test
//! plugin served over gRPC on a unix socket: values move from a local AES-GCM key to
//! the `kms` provider, then from the plugin's first key id to its second, each by a
//! rewrite of the stale values; every value is kube's envelope, reads back, and the
//! plugin is called per DEK, not per value.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use apistore::layers::value::kms_v2::{EncryptedObject, KmsService};
use apistore::{
    ApiStore, DynamicObject, GetOptions, ListOptions, RewriteOptions, RewriteSummary, Storage,
    rewrite_stale,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use apistore_testing::kms::{KmsPluginServer, TestKmsPlugin};

const AESGCM: &str = "      - aesgcm:\n          keys:\n            - name: key1\n              secret: c2VjcmV0IGlzIHNlY3VyZSwgaSB0aGluayBzbyB0b28=\n";
const SECRETS: usize = 6;

fn write_config(dir: &Path, name: &str, providers: &[String]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n{}",
            providers.concat()
        ),
    )
    .unwrap();
    path
}

fn kms(endpoint: &str) -> String {
    format!(
        "      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: {endpoint}\n          timeout: 5s\n"
    )
}

async fn api(prefix: &str, config: &Path) -> ApiStore {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(prefix)
        .encryption_config_file(config)
        .build()
        .await
        .unwrap()
}

fn secret(name: &str) -> DynamicObject {
    DynamicObject::new("v1", "Secret", name)
        .within("default")
        .with("data", serde_json::json!({"password": "aHVudGVyMg=="}))
}

async fn rewrite(api: &ApiStore) -> RewriteSummary {
    let summary = rewrite_stale(
        &api.dynamic_store("secrets").unwrap(),
        "secrets",
        &RewriteOptions {
            concurrency: 3,
            ..RewriteOptions::default()
        },
        |_, _| {},
    )
    .await
    .unwrap();
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    summary
}

/// Every stored value, checked to be kube's KMS v2 envelope of provider `vault`.
async fn envelopes(api: &ApiStore) -> Vec<(EncryptedObject, i64)> {
    let store = api.dynamic_store("secrets").unwrap();
    let mut raw = etcd_client::Client::connect(api.client().endpoints(), None)
        .await
        .unwrap();
    let mut out = Vec::new();
    for i in 0..SECRETS {
        let key = store.prepare_key(&format!("secrets/default/s{i}")).unwrap();
        let got = raw.get(key.as_str(), None).await.unwrap();
        let kv = &got.kvs()[0];
        let body = kv
            .value()
            .strip_prefix(b"k8s:enc:kms:v2:vault:")
            .unwrap_or_else(|| panic!("s{i} is not a KMS v2 value: {:?}", kv.value()));
        out.push((EncryptedObject::decode(body).unwrap(), kv.mod_revision()));
    }
    out
}

async fn read_all(api: &ApiStore) {
    let store = api.dynamic_store("secrets").unwrap();
    let list = store
        .list(
            "secrets",
            &ListOptions {
                recursive: true,
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(list.items.len(), SECRETS);
    for item in &list.items {
        assert_eq!(item.data["data"]["password"], "aHVudGVyMg==");
    }
}

#[tokio::test]
async fn move_to_kms_v2_then_rotate_the_key_id_and_rewrite_everything() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = Arc::new(TestKmsPlugin::new());
    let server = KmsPluginServer::serve(
        Arc::clone(&plugin) as Arc<dyn KmsService>,
        dir.path().join("kms.sock"),
    )
    .unwrap();
    let prefix = unique_prefix("kms-rotation");

    // Written under a local AES-GCM key first.
    let local = write_config(dir.path(), "local.yaml", &[AESGCM.to_owned()]);
    let before = api(&prefix, &local).await;
    let store = before.dynamic_store("secrets").unwrap();
    for i in 0..SECRETS {
        let name = format!("s{i}");
        store
            .create(&format!("secrets/default/{name}"), secret(&name), 0)
            .await
            .unwrap();
    }
    assert_eq!(plugin.encrypt_calls(), 0);

    // kms first, aesgcm still readable: reads are stale, the rewrite moves all to kms.
    let to_kms = write_config(
        dir.path(),
        "kms.yaml",
        &[kms(&server.endpoint()), AESGCM.to_owned()],
    );
    let api = api(&prefix, &to_kms).await;
    let s0 = api
        .dynamic_store("secrets")
        .unwrap()
        .get("secrets/default/s0", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(s0.data["data"]["password"], "aHVudGVyMg==");
    let summary = rewrite(&api).await;
    assert_eq!(
        (summary.scanned, summary.rewritten),
        (SECRETS as u64, SECRETS as u64)
    );
    let first = envelopes(&api).await;
    for (object, _) in &first {
        assert_eq!(object.key_id, "key-1");
        // One DEK seed for every write of this process, encrypted once by the plugin.
        assert_eq!(object.encrypted_dek_source, first[0].0.encrypted_dek_source);
    }
    assert_eq!(plugin.encrypt_calls(), 1);
    assert_eq!((rewrite(&api).await.rewritten), 0);

    // The plugin moves to a new key id; the health check (on the caller's schedule
    // here, kube's every minute otherwise) sees it and seeds a new DEK.
    assert_eq!(plugin.rotate(), "key-2");
    let config = api.encryption_config().unwrap();
    let envelope = config.kms_providers().next().unwrap();
    envelope.check().unwrap();
    assert_eq!(envelope.current_key_id().as_deref(), Some("key-2"));
    assert_eq!(plugin.encrypt_calls(), 2);

    let decrypts = plugin.decrypt_calls();
    let summary = rewrite(&api).await;
    assert_eq!(
        (summary.scanned, summary.rewritten),
        (SECRETS as u64, SECRETS as u64)
    );
    // The old DEK was this process's own: no plugin call to read the old values.
    assert_eq!(plugin.decrypt_calls(), decrypts);
    let second = envelopes(&api).await;
    for ((old, old_revision), (new, revision)) in first.iter().zip(&second) {
        assert_eq!(new.key_id, "key-2");
        assert_ne!(new.encrypted_dek_source, old.encrypted_dek_source);
        assert!(revision > old_revision);
    }
    assert_eq!(rewrite(&api).await.rewritten, 0);
    read_all(&api).await;

    // A fresh process with kms only (the local key gone): one Decrypt for the one DEK
    // every value shares, then the cache serves the rest.
    let kms_only = write_config(dir.path(), "kms-only.yaml", &[kms(&server.endpoint())]);
    let fresh = self::api(&prefix, &kms_only).await;
    let decrypts = plugin.decrypt_calls();
    read_all(&fresh).await;
    // The fresh process seeded its own DEK, so the stored one is read through the
    // plugin exactly once.
    assert_eq!(plugin.decrypt_calls(), decrypts + 1);
    let envelope = fresh
        .encryption_config()
        .unwrap()
        .kms_providers()
        .next()
        .unwrap();
    assert_eq!(
        envelope.cached_dek_sources(),
        2,
        "its own DEK and the stored one"
    );
    assert_eq!(
        rewrite(&fresh).await.rewritten,
        0,
        "same key id: nothing stale"
    );
}
