//! A value written by a newer kube than the one apistore is told of loses nothing: a
//! read leaves out (and reports) the fields its schema does not know, and an update
//! carries them into the bytes it writes, on a real etcd and on the in-memory store.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use apistore::{
    ApiStore, DynamicObject, GetOptions, KubeProtobuf, KubeVersion, PartialRead, Storage,
    UpdateOptions,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use serde_json::{Value, json};

/// A Pod as kube-apiserver 1.37 stores it, with pod-level resources (PodSpec field
/// 40, added in 1.32) and status.observedGeneration (1.33).
fn pod_137() -> Vec<u8> {
    KubeProtobuf::for_version(KubeVersion::V1_37)
        .encode_value(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "demo", "uid": "u-1",
                         "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {
                "containers": [{"name": "app", "image": "nginx"}],
                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
            },
            "status": {"phase": "Running", "observedGeneration": 3},
        }))
        .unwrap()
}

/// What kube-apiserver 1.37 would serve for stored bytes.
fn as_137(stored: &[u8]) -> Value {
    serde_json::from_slice(
        &KubeProtobuf::for_version(KubeVersion::V1_37)
            .decode_to_json(stored)
            .unwrap(),
    )
    .unwrap()
}

type Reads = Arc<Mutex<Vec<PartialRead>>>;

fn recorder() -> (Reads, apistore::UnknownFieldsObserver) {
    let reads: Reads = Arc::default();
    let sink = Arc::clone(&reads);
    (
        reads,
        Arc::new(move |read: &PartialRead| sink.lock().unwrap().push(read.clone())),
    )
}

async fn etcd(prefix: &str) -> etcd_client::Client {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    let _ = prefix;
    etcd_client::Client::connect(endpoint.split(',').collect::<Vec<_>>(), None)
        .await
        .unwrap()
}

async fn raw(client: &mut etcd_client::Client, key: &str) -> (Vec<u8>, i64) {
    let response = client.get(key, None).await.unwrap();
    let kv = response.kvs().first().expect("the key is stored");
    (kv.value().to_vec(), kv.mod_revision())
}

#[tokio::test]
async fn an_update_with_kube_131_keeps_the_fields_of_a_137_pod_on_etcd() {
    let prefix = unique_prefix("kube-versions");
    let full_key = format!("{prefix}/pods/demo/p1");
    let mut client = etcd(&prefix).await;
    let original = pod_137();
    client
        .put(full_key.as_str(), original.clone(), None)
        .await
        .unwrap();
    let before = as_137(&original);

    let (reads, observer) = recorder();
    let endpoint = shared_endpoint().unwrap();
    let api = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(&prefix)
        .kube_version(KubeVersion::V1_31)
        .observe_unknown_fields(observer)
        .build()
        .await
        .unwrap();
    assert_eq!(api.kube_version(), KubeVersion::V1_31);
    let pods = api.dynamic_store("pods").unwrap();
    let key = "pods/demo/p1";

    // The read cannot show what 1.31 has no name for, and says so.
    let read = pods.get(key, &GetOptions::default()).await.unwrap();
    assert!(read.data["spec"].get("resources").is_none());
    {
        let reads = reads.lock().unwrap();
        let last = reads.last().expect("the partial read was reported");
        assert_eq!(last.object(), "Pod demo/p1");
        let paths: Vec<_> = last.fields.iter().map(|f| f.display_path()).collect();
        assert_eq!(paths, ["spec.resources", "status.observedGeneration"]);
    }

    // A no-op update writes nothing.
    let (_, rev_before) = raw(&mut client, &full_key).await;
    pods.guaranteed_update(key, UpdateOptions::default(), |pod, _| Ok(pod.into()))
        .await
        .unwrap();
    assert_eq!(raw(&mut client, &full_key).await.1, rev_before);

    // A label added through 1.31 leaves every 1.37 field in place.
    let updated = pods
        .guaranteed_update(key, UpdateOptions::default(), |mut pod, _| {
            pod.metadata.labels.insert("tier".into(), "gold".into());
            Ok(pod.into())
        })
        .await
        .unwrap();
    let (stored, rev) = raw(&mut client, &full_key).await;
    assert!(rev > rev_before);
    let mut after = as_137(&stored);
    assert_eq!(after["metadata"]["labels"], json!({"tier": "gold"}));
    after["metadata"].as_object_mut().unwrap().remove("labels");
    assert_eq!(after, before, "only the label changed");

    // The same through a caller's cached object (decoded, so without the fields).
    let options = UpdateOptions {
        cached_existing_object: Some(updated),
        ..UpdateOptions::default()
    };
    pods.guaranteed_update(key, options, |mut pod, _| {
        pod.metadata.labels.insert("zone".into(), "a".into());
        Ok(pod.into())
    })
    .await
    .unwrap();
    let (stored, _) = raw(&mut client, &full_key).await;
    let after = as_137(&stored);
    assert_eq!(after["spec"]["resources"], before["spec"]["resources"]);
    assert_eq!(after["status"], before["status"]);

    // Told the truth about the cluster, apistore shows everything and reports nothing.
    let reported = reads.lock().unwrap().len();
    let api_137 = ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(&prefix)
        .observe_unknown_fields(Arc::new({
            let reads = Arc::clone(&reads);
            move |read: &PartialRead| reads.lock().unwrap().push(read.clone())
        }))
        .build()
        .await
        .unwrap();
    assert_eq!(api_137.kube_version(), KubeVersion::LATEST);
    let read: DynamicObject = api_137
        .dynamic_store("pods")
        .unwrap()
        .get(key, &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(
        read.data["spec"]["resources"],
        json!({"limits": {"cpu": "2", "memory": "1Gi"}})
    );
    assert_eq!(reads.lock().unwrap().len(), reported);
}

#[tokio::test]
async fn a_change_that_leaves_an_unknown_field_no_place_is_refused() {
    // A container field of a kube newer than 1.31 (restartPolicyRules is 1.34's;
    // Container field 25), and a change that adds a container: the old first
    // container's field has no certain place in the new list.
    let stored = KubeProtobuf::for_version(KubeVersion::V1_37)
        .encode_value(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p2", "namespace": "demo"},
            "spec": {"containers": [{"name": "app", "image": "nginx",
                "restartPolicy": "Always",
                "restartPolicyRules": [{"action": "Restart",
                    "exitCodes": {"operator": "In", "values": [42]}}]}]},
        }))
        .unwrap();
    let api = ApiStore::in_memory().kube_version(KubeVersion::V1_31);
    api.kv().raw_put("/registry/pods/demo/p2", stored.clone());
    let pods = api.dynamic_store("pods").unwrap();
    let err = pods
        .guaranteed_update("pods/demo/p2", UpdateOptions::default(), |mut pod, _| {
            pod.data["spec"]["containers"]
                .as_array_mut()
                .unwrap()
                .push(json!({"name": "sidecar", "image": "busybox"}));
            Ok(pod.into())
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("spec.containers[0].restartPolicyRules")
            && err.contains("kube 1.34 or newer")
            && err.contains("--kube-version"),
        "{err}"
    );
    assert_eq!(
        api.kv().raw_get("/registry/pods/demo/p2").unwrap(),
        stored,
        "nothing written"
    );

    // A change elsewhere carries the field through.
    pods.guaranteed_update("pods/demo/p2", UpdateOptions::default(), |mut pod, _| {
        pod.metadata.labels.insert("a".into(), "b".into());
        Ok(pod.into())
    })
    .await
    .unwrap();
    let after = as_137(&api.kv().raw_get("/registry/pods/demo/p2").unwrap());
    assert_eq!(
        after["spec"]["containers"][0]["restartPolicyRules"][0]["exitCodes"]["values"],
        json!([42])
    );
}

#[tokio::test]
async fn a_lazy_store_of_kube_131_keeps_the_fields_of_a_137_pod() {
    let api = ApiStore::in_memory().kube_version(KubeVersion::V1_31);
    let full_key = "/registry/pods/demo/p1";
    let original = pod_137();
    api.kv().raw_put(full_key, original.clone());
    let before = as_137(&original);
    let pods = api.lazy_store("pods").unwrap();
    let key = "pods/demo/p1";

    // A label added without reading the body: the metadata is spliced into the stored
    // bytes, every 1.37 field stays where it was.
    pods.guaranteed_update(key, UpdateOptions::default(), |mut pod, _| {
        pod.metadata_mut()
            .labels
            .insert("tier".into(), "gold".into());
        Ok(pod.into())
    })
    .await
    .unwrap();
    let mut after = as_137(&api.kv().raw_get(full_key).unwrap());
    assert_eq!(after["metadata"]["labels"], json!({"tier": "gold"}));
    after["metadata"].as_object_mut().unwrap().remove("labels");
    assert_eq!(after, before, "only the label changed");

    // A change to the body, which 1.31's schema reads without the 1.37 fields: the
    // object is written whole and carries them over from the bytes it was read from.
    pods.guaranteed_update(key, UpdateOptions::default(), |mut pod, _| {
        let body = pod.body_mut().unwrap();
        assert!(
            body["spec"].get("resources").is_none(),
            "1.31 has no name for it"
        );
        body["spec"]["containers"][0]["image"] = json!("nginx:1.27");
        Ok(pod.into())
    })
    .await
    .unwrap();
    let after = as_137(&api.kv().raw_get(full_key).unwrap());
    assert_eq!(after["spec"]["containers"][0]["image"], "nginx:1.27");
    assert_eq!(after["spec"]["resources"], before["spec"]["resources"]);
    assert_eq!(after["status"], before["status"]);
}
