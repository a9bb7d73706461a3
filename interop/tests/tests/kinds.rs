//! Built-in kinds beyond ConfigMap, each under its kube key prefix and storage version
//! (from apistore's layout table), written by one side and read by the other; in
//! protobuf the stored bytes must be the same.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore::{GetOptions, Storage, StorageLayout};
use apistore_interop::{Interop, ReferenceOptions, dynamic, summary, to_json};
use serde_json::{Value, json};

/// A resource and the body of one object (everything but apiVersion, kind, metadata).
fn cases() -> Vec<(&'static str, Value)> {
    vec![
        (
            "pods",
            json!({"spec": {
                "containers": [{"name": "c", "image": "busybox:1.36", "command": ["sleep", "3600"],
                    "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
                "restartPolicy": "Always"}}),
        ),
        (
            "services",
            json!({"spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
                "selector": {"app": "web"}, "type": "ClusterIP", "clusterIP": "10.0.0.10"}}),
        ),
        (
            "nodes",
            json!({"spec": {"podCIDR": "10.244.0.0/24"},
                "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}}),
        ),
        (
            "namespaces",
            json!({"spec": {"finalizers": ["kubernetes"]}}),
        ),
        (
            "persistentvolumeclaims",
            json!({"spec": {"accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "leases.coordination.k8s.io",
            json!({"spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}}),
        ),
        (
            "clusterroles.rbac.authorization.k8s.io",
            json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}),
        ),
        (
            "jobs.batch",
            json!({"spec": {"backoffLimit": 2, "template": {"spec": {
                "containers": [{"name": "c", "image": "busybox:1.36"}], "restartPolicy": "Never"}}}}),
        ),
        (
            "statefulsets.apps",
            json!({"spec": {"serviceName": "db", "replicas": 1,
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}},
                    "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}}),
        ),
        (
            "ingresses.networking.k8s.io",
            json!({"spec": {"rules": [{"host": "example.com", "http": {"paths": [{"path": "/",
                "pathType": "Prefix", "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}}]}}),
        ),
        (
            "horizontalpodautoscalers.autoscaling",
            json!({"spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 5}}),
        ),
    ]
}

/// `summary` without the resourceVersion, to compare two writes of one object.
fn content(object: &Value) -> Value {
    let mut s = summary(object);
    s["resourceVersion"] = Value::Null;
    s
}

/// Drops the zero values Go's encoding/json writes for fields without omitempty.
fn zeroless(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, zeroless(v)))
                .filter(|(_, v)| {
                    !(v.is_null()
                        || *v == json!("")
                        || *v == json!(0)
                        || *v == json!(false)
                        || *v == json!({})
                        || *v == json!([]))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(zeroless).collect()),
        other => other,
    }
}

async fn built_in_kinds_both_ways(media_type: &str) {
    let layout = StorageLayout::default();
    for (resource, body) in cases() {
        let row = layout.resource(resource);
        let built_in = row.built_in.expect("a built-in");
        let kind = format!("{}/{}", built_in.api_version, built_in.kind);
        let namespace = if built_in.namespaced { "ns" } else { "" };
        let mut object = body;
        object["apiVersion"] = json!(built_in.api_version);
        object["kind"] = json!(built_in.kind);
        object["metadata"] = json!({"name": "x", "uid": "uid-x", "labels": {"app": "web"}});
        if built_in.namespaced {
            object["metadata"]["namespace"] = json!(namespace);
        }

        let options = ReferenceOptions::new(resource, &kind).media_type(media_type);
        let mut t = Interop::start(&options).await;
        assert_eq!(t.key_prefix, row.key_prefix);
        let key = row.key(namespace, "x");
        let go_key = format!("/{key}");
        let etcd_key = format!("/registry/{key}");

        let by_go =
            t.go.create(&go_key, &object)
                .await
                .unwrap_or_else(|e| panic!("{resource}: {e:?}"));
        let read = t
            .store
            .get(&key, &GetOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{resource}: {e}"));
        assert_eq!(summary(&to_json(&read)), summary(&by_go), "{resource}");
        let go_bytes = t.raw_get(&etcd_key).await.unwrap();
        t.go.delete(&go_key, json!(null)).await.unwrap();

        let by_api = t
            .store
            .create(&key, dynamic(&object), 0)
            .await
            .unwrap_or_else(|e| panic!("{resource}: {e}"));
        let api_bytes = t.raw_get(&etcd_key).await.unwrap();
        // kube's typed view of both writes is the same object.
        let go_read = t.go.get(&go_key, "").await.unwrap();
        assert_eq!(content(&go_read), content(&by_go), "{resource}");
        assert_eq!(
            go_read["metadata"]["resourceVersion"],
            json!(by_api.metadata.resource_version)
        );
        // apistore's dynamic view of both writes: the same, but for the zero values Go
        // writes for fields without omitempty, which only kube's JSON bytes carry (in
        // protobuf both sides write them alike).
        let api_read = to_json(&t.store.get(&key, &GetOptions::default()).await.unwrap());
        let api_read_of_go = to_json(&read);
        if media_type == "protobuf" {
            assert_eq!(content(&api_read), content(&api_read_of_go), "{resource}");
        } else {
            assert_eq!(
                zeroless(content(&api_read)),
                zeroless(content(&api_read_of_go)),
                "{resource}"
            );
        }
        if media_type == "protobuf" {
            assert_eq!(
                api_bytes,
                go_bytes,
                "{resource}: protobuf bytes differ\nkube:     {:?}\napistore: {:?}",
                String::from_utf8_lossy(&go_bytes),
                String::from_utf8_lossy(&api_bytes)
            );
        }
        eprintln!(
            "{media_type} {resource} at {etcd_key} as {kind}: bytes equal {}",
            api_bytes == go_bytes
        );
    }
}

/// A quantity in a non-canonical spelling ("0.5" CPU): kube's typed decode turns it into
/// "500m" before storing; apistore stores the object as given. Recorded.
async fn non_canonical_quantity(media_type: &str) {
    let options = ReferenceOptions::new("pods", "v1/Pod").media_type(media_type);
    let mut t = Interop::start(&options).await;
    let pod = |name: &str| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ns"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "0.5"}}}]}})
    };
    let by_go = t.go.create("/pods/ns/go", &pod("go")).await.unwrap();
    t.store
        .create("pods/ns/api", dynamic(&pod("api")), 0)
        .await
        .unwrap();
    let go_read = t.go.get("/pods/ns/api", "").await.unwrap();
    let api_read = t
        .store
        .get("pods/ns/go", &GetOptions::default())
        .await
        .unwrap();
    let cpu = |v: &Value| v["spec"]["containers"][0]["resources"]["requests"]["cpu"].clone();
    eprintln!(
        "{media_type}: kube wrote {}, apistore read it as {}; apistore wrote 0.5, kube read it as {}",
        cpu(&by_go),
        cpu(&to_json(&api_read)),
        cpu(&go_read)
    );
    // Whatever was stored, kube reads a quantity it can use, and apistore reads kube's.
    assert_eq!(cpu(&go_read), json!("500m"));
    assert_eq!(cpu(&to_json(&api_read)), json!("500m"));
}

apistore_interop::per_media_type!(built_in_kinds_both_ways, non_canonical_quantity);
