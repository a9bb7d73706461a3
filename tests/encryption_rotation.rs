//! Key rotation end to end, through the facade and a real etcd: write under key1,
//! configure key2 first with key1 second (reads are stale), rewrite, then drop key1 and
//! read everything back. Also: the bytes in etcd are ciphertext bound to their key.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore::layers::value::EncryptionConfig;
use apistore::{
    ApiStore, DynamicObject, GetOptions, ListOptions, RewriteOptions, Storage, rewrite_stale,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaSB0aGluayBzbyB0b28="; // 32 bytes
const KEY2: &str = "dGhpcyBpcyBhbm90aGVyIDMyIGJ5dGUga2V5ISEhISE="; // 32 bytes

fn config(keys: &[(&str, &str)]) -> EncryptionConfig {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| {
            format!("            - name: {name}\n              secret: {secret}\n")
        })
        .collect();
    let text = format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - aesgcm:\n          keys:\n{keys}"
    );
    EncryptionConfig::parse(&text).unwrap()
}

async fn api(prefix: &str, keys: &[(&str, &str)]) -> ApiStore {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(prefix)
        .encryption_config(config(keys))
        .build()
        .await
        .unwrap()
}

fn secret(name: &str) -> DynamicObject {
    DynamicObject::new("v1", "Secret", name)
        .within("default")
        .with("data", serde_json::json!({"password": "aHVudGVyMg=="}))
}

#[tokio::test]
async fn rotate_keys_and_rewrite_everything() {
    let prefix = unique_prefix("rotation");
    let first = api(&prefix, &[("key1", KEY1)]).await;
    let store = first.dynamic_store("secrets").unwrap();
    for i in 0..5 {
        store
            .create(
                &format!("secrets/default/s{i}"),
                secret(&format!("s{i}")),
                0,
            )
            .await
            .unwrap();
    }

    // The value in etcd is AES-GCM under key1, bound to its own key.
    let etcd_key = store.prepare_key("secrets/default/s0").unwrap();
    let mut raw = etcd_client::Client::connect(first.client().endpoints(), None)
        .await
        .unwrap();
    let stored = raw.get(etcd_key.as_str(), None).await.unwrap();
    let value = stored.kvs()[0].value().to_vec();
    assert!(value.starts_with(b"k8s:enc:aesgcm:v1:key1:"), "{value:?}");
    assert!(
        !value.windows(8).any(|w| w == b"password"),
        "plaintext in etcd"
    );
    // Copied under another key, the ciphertext does not decrypt.
    let other_key = store.prepare_key("secrets/default/copy").unwrap();
    raw.put(other_key.as_str(), value, None).await.unwrap();
    let err = store
        .get("secrets/default/copy", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_internal(), "{err}");
    assert_eq!(err.key(), other_key);
    raw.delete(other_key.as_str(), None).await.unwrap();

    // key2 first, key1 still readable: reads work, and a rewrite moves all to key2.
    let rotated = api(&prefix, &[("key2", KEY2), ("key1", KEY1)]).await;
    let store = rotated.dynamic_store("secrets").unwrap();
    let s0 = store
        .get("secrets/default/s0", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(s0.data["data"]["password"], "aHVudGVyMg==");
    let summary = rewrite_stale(
        &store,
        "secrets",
        &RewriteOptions {
            concurrency: 2,
            ..RewriteOptions::default()
        },
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!(summary.scanned, 5);
    assert_eq!(summary.rewritten, 5);
    assert!(summary.failed.is_empty(), "{:?}", summary.failed);
    // A second pass finds nothing stale.
    let again = rewrite_stale(
        &store,
        "secrets",
        &RewriteOptions {
            concurrency: 2,
            ..RewriteOptions::default()
        },
        |_, _| {},
    )
    .await
    .unwrap();
    assert_eq!((again.scanned, again.rewritten), (5, 0));

    // key1 gone: everything still reads.
    let only_key2 = api(&prefix, &[("key2", KEY2)]).await;
    let store = only_key2.dynamic_store("secrets").unwrap();
    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store.list("secrets", &options).await.unwrap();
    assert_eq!(list.items.len(), 5);
    let stored = raw.get(etcd_key.as_str(), None).await.unwrap();
    assert!(
        stored.kvs()[0]
            .value()
            .starts_with(b"k8s:enc:aesgcm:v1:key2:")
    );

    // And with key1 only, nothing reads: the rewrite really replaced the ciphertext.
    let only_key1 = api(&prefix, &[("key1", KEY1)]).await;
    let err = only_key1
        .dynamic_store("secrets")
        .unwrap()
        .get("secrets/default/s0", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_internal(), "{err}");
}

/// A store without the encryption configuration that wrote a value says which provider
/// and key the value needs, and where it is, after kube's own words.
#[tokio::test]
async fn reading_encrypted_data_without_its_configuration_names_the_key_it_needs() {
    let prefix = unique_prefix("rotation-no-config");
    let encrypted = api(&prefix, &[("key1", KEY1)]).await;
    encrypted
        .dynamic_store("secrets")
        .unwrap()
        .create("secrets/default/s1", secret("s1"), 0)
        .await
        .unwrap();
    let endpoint = shared_endpoint().unwrap();
    let plain = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let err = plain
        .dynamic_store("secrets")
        .unwrap()
        .get("secrets/default/s1", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_internal(), "{err}");
    let message = err.to_string();
    for part in [
        "identity transformer tried to read encrypted data",
        "encrypted with aesgcm:key1",
        &format!("{prefix}/secrets/default/s1"),
    ] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
}

/// kube 1.32+ labels every transformation with the resource of the value: the
/// facade's metrics say `secrets` for the secrets' reads and writes.
#[tokio::test]
async fn transformations_are_counted_under_their_resource() {
    let prefix = unique_prefix("transform-metrics");
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    let registry = apistore::prometheus::Registry::new();
    let api = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(&prefix)
        .encryption_config(config(&[("key1", KEY1)]))
        .metrics_registry(&registry)
        .unwrap()
        .build()
        .await
        .unwrap();
    let store = api.dynamic_store("secrets").unwrap();
    store
        .create("secrets/default/s0", secret("s0"), 0)
        .await
        .unwrap();
    store
        .get("secrets/default/s0", &GetOptions::default())
        .await
        .unwrap();
    let count = |transformation_type: &str, transformer_prefix: &str| {
        apistore_testing::metrics::counter(
            &registry,
            "apiserver_storage_transformation_operations_total",
            &[
                ("resource", "secrets"),
                ("transformation_type", transformation_type),
                ("transformer_prefix", transformer_prefix),
                ("status", "OK"),
            ],
        )
    };
    // The provider's prefix and the key's, each once per write and per read.
    assert_eq!(count("to_storage", "k8s:enc:aesgcm:v1:"), 1.0);
    assert_eq!(count("to_storage", "key1:"), 1.0);
    assert!(count("from_storage", "k8s:enc:aesgcm:v1:") >= 1.0);
}
