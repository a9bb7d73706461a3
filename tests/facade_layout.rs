//! The facade puts objects where kube-apiserver keeps them and encodes them as it does:
//! typed and dynamic stores for a GroupResource, protobuf for built-ins, JSON for custom
//! resources, either read back, and hostile bytes refused with the key and the kind.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use apistore::{
    ApiStore, DynamicObject, GetOptions, ListOptions, MediaType, Storage, StoreExt, UpdateOptions,
    WatchEvent,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

async fn api(prefix: &str) -> ApiStore {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(prefix)
        .build()
        .await
        .unwrap()
}

/// The bytes stored under a key relative to `prefix`.
async fn raw(prefix: &str, key: &str) -> Vec<u8> {
    let endpoint = shared_endpoint().unwrap();
    let mut client = etcd_client::Client::connect(endpoint.split(',').collect::<Vec<_>>(), None)
        .await
        .unwrap();
    let response = client.get(format!("{prefix}/{key}"), None).await.unwrap();
    response
        .kvs()
        .first()
        .map(|kv| kv.value().to_vec())
        .unwrap_or_default()
}

#[tokio::test]
async fn typed_stores_write_protobuf_where_kube_apiserver_keeps_the_resource() {
    let prefix = unique_prefix("layout-typed");
    let api = api(&prefix).await;
    let configmaps = api.store::<ConfigMap>("configmaps").unwrap();
    let key = api.resource_layout("configmaps").key("default", "cm1");
    assert_eq!(key, "configmaps/default/cm1");
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some("cm1".into()),
            namespace: Some("default".into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "mode".to_owned(),
            "fast & <safe>".to_owned(),
        )])),
        ..ConfigMap::default()
    };
    let created = configmaps.create(&key, cm.clone(), 0).await.unwrap();
    let stored = raw(&prefix, &key).await;
    assert!(
        stored.starts_with(b"k8s\0"),
        "stored: {:?}",
        String::from_utf8_lossy(&stored)
    );
    let (api_version, kind) = apistore::KubeProtobuf::type_meta(&stored).unwrap();
    assert_eq!((api_version.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    // What kube-apiserver would serve for these bytes, as JSON.
    let json: serde_json::Value = serde_json::from_slice(
        &apistore::KubeProtobuf::k8s_1_31()
            .decode_to_json(&stored)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["data"]["mode"], "fast & <safe>");
    assert_eq!(json["metadata"]["name"], "cm1");

    let read = configmaps.get(&key, &GetOptions::default()).await.unwrap();
    assert_eq!(read, created);
    assert_eq!(read.data, cm.data);
    // A no-op update writes nothing: the protobuf encoding is stable.
    let same = configmaps
        .guaranteed_update(&key, UpdateOptions::default(), |cm, _| Ok(cm.into()))
        .await
        .unwrap();
    assert_eq!(
        same.metadata.resource_version,
        created.metadata.resource_version
    );
}

#[tokio::test]
async fn dynamic_stores_of_a_group_resource_use_kubes_key_prefix_and_refuse_others() {
    let prefix = unique_prefix("layout-dynamic");
    let api = api(&prefix).await;
    let deployments = api.dynamic_store("deployments.apps").unwrap();
    let deployment: DynamicObject = serde_json::from_str(
        r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d1","namespace":"default"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}"#,
    )
    .unwrap();
    // kube-apiserver keeps Deployments at /registry/deployments/..., not deployments.apps.
    let err = deployments
        .create("deployments.apps/default/d1", deployment.clone(), 0)
        .await
        .unwrap_err();
    assert_eq!(err.kind(), apistore::ErrorKind::InvalidKey, "{err}");
    assert!(
        err.to_string().contains("deployments.apps/default/d1"),
        "{err}"
    );
    let key = api.resource_layout("deployments.apps").key("default", "d1");
    assert_eq!(key, "deployments/default/d1");
    deployments.create(&key, deployment, 0).await.unwrap();
    assert!(raw(&prefix, &key).await.starts_with(b"k8s\0"));

    // Custom resources: <group>/<plural>, JSON.
    let widgets = api.dynamic_store("widgets.example.com").unwrap();
    let key = api
        .resource_layout("widgets.example.com")
        .key("default", "w1");
    let widget = DynamicObject::new("example.com/v1", "Widget", "w1")
        .within("default")
        .with("spec", serde_json::json!({"size": 1}));
    widgets.create(&key, widget, 0).await.unwrap();
    let stored = raw(&prefix, "example.com/widgets/default/w1").await;
    assert!(
        stored.starts_with(b"{"),
        "{:?}",
        String::from_utf8_lossy(&stored)
    );
}

#[tokio::test]
async fn a_prefix_mixing_json_and_protobuf_lists_and_watches() {
    let prefix = unique_prefix("layout-mixed");
    let protobuf = api(&prefix).await;
    let endpoint = shared_endpoint().unwrap();
    let json = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(&prefix)
        .storage_media_type(MediaType::Json)
        .build()
        .await
        .unwrap();
    let cm = |name: &str| {
        DynamicObject::new("v1", "ConfigMap", name)
            .within("default")
            .with("data", serde_json::json!({"k": name}))
    };
    let by_protobuf = protobuf.dynamic_store("configmaps").unwrap();
    let by_json = json.dynamic_store("configmaps").unwrap();
    let first = by_protobuf
        .create("configmaps/default/a", cm("a"), 0)
        .await
        .unwrap();
    by_json
        .create("configmaps/default/b", cm("b"), 0)
        .await
        .unwrap();
    assert!(
        raw(&prefix, "configmaps/default/a")
            .await
            .starts_with(b"k8s\0")
    );
    assert!(raw(&prefix, "configmaps/default/b").await.starts_with(b"{"));

    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    for store in [&by_protobuf, &by_json] {
        let list = store.list("configmaps/default", &options).await.unwrap();
        let data: Vec<&serde_json::Value> =
            list.items.iter().map(|i| &i.data["data"]["k"]).collect();
        assert_eq!(data, ["a", "b"]);
    }

    let watch_options = ListOptions {
        resource_version: first.metadata.resource_version.clone(),
        recursive: true,
        ..ListOptions::default()
    };
    let mut events = by_protobuf
        .watch("configmaps/default", &watch_options)
        .await
        .unwrap();
    by_protobuf
        .create("configmaps/default/c", cm("c"), 0)
        .await
        .unwrap();
    let mut names = Vec::new();
    while names.len() < 2 {
        match tokio::time::timeout(std::time::Duration::from_secs(10), events.next()).await {
            Ok(Some(WatchEvent::Added(obj))) => names.push(obj.metadata.name),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, ["b", "c"]);
}

#[tokio::test]
async fn corrupt_protobuf_and_unknown_kinds_are_errors_naming_the_key_and_the_kind() {
    let prefix = unique_prefix("layout-hostile");
    let api = api(&prefix).await;
    let endpoint = shared_endpoint().unwrap();
    let mut client = etcd_client::Client::connect(endpoint.split(',').collect::<Vec<_>>(), None)
        .await
        .unwrap();
    // A valid envelope naming a kind kube has never had.
    let unknown = b"k8s\0\x0a\x0e\x0a\x02v1\x12\x08Gizmo123\x12\x00".to_vec();
    // A Pod envelope whose object claims a 3-byte name and holds 2.
    let truncated =
        b"k8s\0\x0a\x09\x0a\x02v1\x12\x03Pod\x12\x06\x0a\x05\x0a\x03ab\x1a\x00\x22\x00".to_vec();
    client
        .put(format!("{prefix}/pods/default/unknown"), unknown, None)
        .await
        .unwrap();
    client
        .put(format!("{prefix}/pods/default/truncated"), truncated, None)
        .await
        .unwrap();
    let pods = api.dynamic_store("pods").unwrap();
    for (key, kind) in [
        ("pods/default/unknown", "Gizmo123"),
        ("pods/default/truncated", "Pod"),
    ] {
        let err = pods.get(key, &GetOptions::default()).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains(key), "{text}");
        assert!(text.contains(kind), "{text}");
        assert_eq!(err.status().code, 500, "{text}");
    }
}

#[tokio::test]
async fn namespaced_and_cluster_views_build_kubes_keys_from_names() {
    use apistore::StoreExt;
    let prefix = unique_prefix("layout-scoped");
    let api = api(&prefix).await;
    let services = api.dynamic_store("services").unwrap();
    let default = services.namespaced("default");
    assert_eq!(default.key("web"), "services/specs/default/web");
    let svc = DynamicObject::new("v1", "Service", "web").within("default");
    let created = default.create(svc.clone()).await.unwrap();
    assert_eq!(services.key_of(&created), "services/specs/default/web");
    // As kube's store does, create answers with what a read returns: the object
    // decoded from the protobuf it wrote (creationTimestamp: null, empty spec and status).
    assert_eq!(default.get("web").await.unwrap(), created);
    assert_eq!(created.data["spec"], serde_json::json!({}));
    assert!(!raw(&prefix, "services/specs/default/web").await.is_empty());
    // An object of another namespace is refused, as kube-apiserver refuses it.
    let err = services.namespaced("other").create(svc).await.unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    let updated = default
        .update("web", |mut s, _| {
            s.metadata.labels.insert("tier".into(), "front".into());
            Ok(s.into())
        })
        .await
        .unwrap();
    assert_eq!(updated.metadata.labels["tier"], "front");
    assert_eq!(
        default
            .list(&ListOptions::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    default.delete("web").await.unwrap();
    assert!(default.get("web").await.unwrap_err().is_not_found());

    let nodes = api.dynamic_store("nodes").unwrap();
    let cluster = nodes.cluster();
    assert_eq!(cluster.key("n1"), "minions/n1");
    cluster
        .create(DynamicObject::new("v1", "Node", "n1"))
        .await
        .unwrap();
    assert_eq!(
        cluster
            .list(&ListOptions::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
}

/// `store` and `dynamic_store` take kube's names, short names and singulars, and refuse
/// a name the kube version does not know rather than make a prefix kube never reads.
#[tokio::test]
async fn stores_are_made_for_known_resources_only() {
    let prefix = unique_prefix("layout-names");
    let api = api(&prefix).await;
    let in_memory = ApiStore::in_memory();
    for name in ["configmaps", "configmap", "cm"] {
        let store = api.store::<ConfigMap>(name).unwrap();
        let memory = in_memory.store::<ConfigMap>(name).unwrap();
        assert_eq!(store.resource_key_prefix(), "configmaps", "{name}");
        assert_eq!(memory.resource_key_prefix(), "configmaps", "{name}");
    }
    // A typo: no store at all, and the error names what was probably meant.
    for err in [
        api.store::<ConfigMap>("confgmaps").err().unwrap(),
        api.dynamic_store("confgmaps").err().unwrap(),
        in_memory.dynamic_store("confgmaps").err().unwrap(),
    ] {
        assert!(err.is_bad_request(), "{err}");
        let message = err.to_string();
        assert!(
            message.contains("confgmaps") && message.contains("configmaps"),
            "{message}"
        );
    }
    // A name with a group kube does not own is a custom resource, at <group>/<plural>.
    let widgets = api.dynamic_store("widgets.example.com").unwrap();
    assert_eq!(widgets.resource_key_prefix(), "example.com/widgets");
    // A kube group's unknown resource is a typo, not a custom resource.
    assert!(api.dynamic_store("deploymnts.apps").is_err());
}
