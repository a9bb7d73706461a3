//! Typed CRUD on a k8s-openapi `ConfigMap`: the same objects kube-apiserver stores,
//! with your compiler checking the fields.
//!
//! Run with `APISTORE_ENDPOINTS=http://127.0.0.1:2379 cargo run -p apistore --features k8s-openapi --example typed_configmap`
//! (`cargo xtask test` runs it against its test etcd).

use std::collections::BTreeMap;

use apistore::{ApiStore, DeleteOptions, GetOptions, Storage, UpdateOptions};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let endpoints =
        std::env::var("APISTORE_ENDPOINTS").unwrap_or_else(|_| "http://127.0.0.1:2379".into());
    let prefix = format!("/examples-{}", std::process::id());
    let api = ApiStore::builder()
        .endpoints(endpoints.split(','))
        .prefix(&prefix)
        .build()
        .await?;
    let configmaps = api.store::<ConfigMap>("configmaps")?;

    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("app-config".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("mode".to_owned(), "fast".to_owned())])),
        ..ConfigMap::default()
    };
    let key = "configmaps/default/app-config";
    let created = configmaps.create(key, cm, 0).await?;
    println!(
        "created at resourceVersion {:?}",
        created.metadata.resource_version
    );

    let updated = configmaps
        .guaranteed_update(key, UpdateOptions::default(), |mut cm, _| {
            cm.data
                .get_or_insert_with(BTreeMap::new)
                .insert("mode".into(), "safe".into());
            Ok(cm.into())
        })
        .await?;
    let read = configmaps.get(key, &GetOptions::default()).await?;
    assert_eq!(read, updated);
    println!(
        "updated: mode = {:?}",
        read.data.as_ref().and_then(|d| d.get("mode"))
    );

    let deleted = configmaps.delete(key, DeleteOptions::default()).await?;
    println!(
        "deleted at resourceVersion {:?}",
        deleted.metadata.resource_version
    );
    let err = configmaps
        .get(key, &GetOptions::default())
        .await
        .err()
        .ok_or("still there")?;
    assert!(err.is_not_found());
    Ok(())
}
