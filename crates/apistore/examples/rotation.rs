//! Encryption at rest with key rotation: write under key1, put key2 first, rewrite
//! everything, drop key1.
//!
//! Run with `APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore --example rotation`.

use apistore::layers::value::EncryptionConfig;
use apistore::{ApiStore, DynamicObject, GetOptions, RewriteOptions, Storage, rewrite_stale};

const KEY1: &str = "a2V5LW9uZS1rZXktb25lLWtleS1vbmUta2V5LW9uZSE="; // 32 bytes, base64
const KEY2: &str = "a2V5LXR3by1rZXktdHdvLWtleS10d28ta2V5LXR3byE="; // 32 bytes, base64

fn config(keys: &[(&str, &str)]) -> Result<EncryptionConfig, Box<dyn std::error::Error>> {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| {
            format!("            - name: {name}\n              secret: {secret}\n")
        })
        .collect();
    Ok(EncryptionConfig::parse(&format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - aesgcm:\n          keys:\n{keys}"
    ))?)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoints =
        std::env::var("APISTORE_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    let prefix = format!("/examples-{}", std::process::id());
    let connect = |keys: &[(&str, &str)]| {
        let builder = ApiStore::builder()
            .endpoints(endpoints.split(','))
            .prefix(&prefix);
        let config = config(keys);
        async move {
            Ok::<_, Box<dyn std::error::Error>>(builder.encryption_config(config?).build().await?)
        }
    };

    let v1 = connect(&[("key1", KEY1)]).await?;
    let secrets = v1.dynamic_store("secrets")?;
    for name in ["db", "api", "tls"] {
        let secret = DynamicObject::new("v1", "Secret", name)
            .within("default")
            .with("data", serde_json::json!({"value": "c2VjcmV0"}));
        secrets
            .create(&format!("secrets/default/{name}"), secret, 0)
            .await?;
    }
    println!("wrote 3 secrets under key1");

    let v2 = connect(&[("key2", KEY2), ("key1", KEY1)]).await?;
    let summary = rewrite_stale(
        &v2.dynamic_store("secrets")?,
        "secrets",
        &RewriteOptions {
            concurrency: 4,
            ..RewriteOptions::default()
        },
        |_, _| {},
    )
    .await?;
    println!(
        "key2 first: scanned {}, rewritten {}, failed {}",
        summary.scanned,
        summary.rewritten,
        summary.failed.len()
    );

    let v3 = connect(&[("key2", KEY2)]).await?;
    let db = v3
        .dynamic_store("secrets")?
        .get("secrets/default/db", &GetOptions::default())
        .await?;
    println!("key1 removed, still reads: {}", db.data["data"]);
    Ok(())
}
