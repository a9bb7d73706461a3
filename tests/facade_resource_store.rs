//! One handle per resource whatever is behind it: `resource_store` and `typed` give a
//! `ResourceStore` over etcd, the watch cache or memory, with the same names (short
//! names, singulars), the same refusal of names the layout does not know, the same
//! check of an object against its key, and the same namespaced view.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use apistore::{
    ApiStore, DynamicObject, GetOptions, ListOptions, ResourceStore, Storage, StorageError,
    StoreExt, UpdateOptions,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn configmap(namespace: &str, name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([("k".to_owned(), "v".to_owned())])),
        ..ConfigMap::default()
    }
}

async fn etcd_api(prefix: &str) -> ApiStore {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(prefix)
        .watch_cache(["cm"])
        .build()
        .await
        .unwrap()
}

/// What every handle must do, whichever backend is behind it.
async fn exercise(store: &ResourceStore<ConfigMap>, backend: &str) {
    assert_eq!(store.resource_prefix(), "/configmaps", "{backend}");
    let default = store.namespaced("default");
    let created = default.create(configmap("default", "cm1")).await.unwrap();
    let read = default.get("cm1").await.unwrap();
    assert_eq!(
        created.metadata.resource_version,
        read.metadata.resource_version
    );
    assert_eq!(default.key("cm1"), "configmaps/default/cm1");

    // An object stored under another object's key is refused before any write.
    let err = store
        .create("configmaps/default/other", configmap("default", "cm2"), 0)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StorageError::BadRequest { .. }),
        "{backend}: {err}"
    );
    assert!(err.to_string().contains("\"cm2\""), "{backend}: {err}");
    assert!(err.to_string().contains("\"other\""), "{backend}: {err}");
    let err = store
        .create("configmaps/kube-system/cm3", configmap("default", "cm3"), 0)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("namespace"), "{backend}: {err}");
    let missing = store
        .get("configmaps/kube-system/cm3", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(missing.is_not_found(), "{backend}: {missing}");

    // An update may not rename the object either; the stored one is unchanged.
    let err = store
        .guaranteed_update(
            "configmaps/default/cm1",
            UpdateOptions::default(),
            |mut cm: ConfigMap, _| {
                cm.metadata.name = Some("renamed".into());
                Ok(cm.into())
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"renamed\""), "{backend}: {err}");
    assert_eq!(default.get("cm1").await.unwrap(), read);

    // Keys outside the resource are refused.
    let err = store
        .get("secrets/default/s1", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("outside the resource prefix"),
        "{backend}: {err}"
    );

    let listed = default.list(&ListOptions::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1, "{backend}");
    // The resource's prefix lists every object with the default options, as
    // kube-rs's ListParams::default() does.
    let all = store
        .list("configmaps", &ListOptions::default())
        .await
        .unwrap();
    assert_eq!(all.items.len(), 1, "{backend}");
}

#[tokio::test]
async fn every_backend_gives_the_same_handle() {
    let memory = ApiStore::in_memory();
    let store = memory.typed::<ConfigMap>().await.unwrap();
    assert!(matches!(store, ResourceStore::Memory(_)));
    exercise(&store, "memory").await;

    let prefix = unique_prefix("resource-store");
    let api = etcd_api(&prefix).await;
    // `cm` is cached (the builder named it by its short name).
    let cached = api.typed::<ConfigMap>().await.unwrap();
    assert!(cached.is_cached());
    exercise(&cached, "cached").await;

    let prefix = unique_prefix("resource-store-direct");
    let endpoint = shared_endpoint().unwrap();
    let direct_api = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(&prefix)
        .build()
        .await
        .unwrap();
    let direct = direct_api
        .resource_store::<ConfigMap>("configmap")
        .await
        .unwrap();
    assert!(matches!(direct, ResourceStore::Direct(_)));
    exercise(&direct, "etcd3").await;
}

#[tokio::test]
async fn names_are_resolved_or_refused_with_the_closest() {
    let api = ApiStore::in_memory();
    for name in ["deployments.apps", "deploy", "deployment.apps"] {
        let store = api.resource_store::<DynamicObject>(name).await.unwrap();
        assert_eq!(store.resource_prefix(), "/deployments", "{name}");
    }
    let typed = api.typed::<Deployment>().await.unwrap();
    assert_eq!(typed.resource_prefix(), "/deployments");
    let custom = api
        .resource_store::<DynamicObject>("widgets.example.com")
        .await
        .unwrap();
    assert_eq!(custom.resource_prefix(), "/example.com/widgets");

    for (name, closest) in [
        ("configmapz", "configmaps"),
        ("deploymnts.apps", "deployments.apps"),
    ] {
        let err = api.resource_store::<DynamicObject>(name).await.unwrap_err();
        assert!(
            matches!(err, StorageError::BadRequest { .. }),
            "{name}: {err}"
        );
        let message = err.to_string();
        assert!(
            message.contains(&format!("did you mean {closest:?}")),
            "{message}"
        );
    }
    // Nothing was written anywhere by the refusals.
    assert_eq!(api.kv().revision(), 1);
}
