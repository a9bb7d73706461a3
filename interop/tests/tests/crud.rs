//! Create, get, update and delete written by one side and read by the other.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore::{DeleteOptions, GetOptions, Preconditions, Storage, UpdateOptions};
use apistore_interop::{Interop, ReferenceOptions, configmap, dynamic, summary, to_json};
use serde_json::json;

fn configmaps(media_type: &str) -> ReferenceOptions {
    ReferenceOptions::new("configmaps", "v1/ConfigMap").media_type(media_type)
}

async fn go_writes_apistore_reads_updates_and_deletes(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let created =
        t.go.create("/configmaps/default/a", &configmap("default", "a"))
            .await
            .unwrap();
    let rv = created["metadata"]["resourceVersion"].as_str().unwrap();

    // apistore reads what kube wrote, with the same resourceVersion.
    let read = t
        .store
        .get("configmaps/default/a", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(summary(&to_json(&read)), summary(&created));
    // ...also at the resourceVersion kube returned.
    let at = GetOptions {
        resource_version: rv.to_owned(),
        ..GetOptions::default()
    };
    let read = t.store.get("configmaps/default/a", &at).await.unwrap();
    assert_eq!(read.metadata.resource_version, rv);

    // apistore updates it; kube reads the update.
    let updated = t
        .store
        .guaranteed_update(
            "configmaps/default/a",
            UpdateOptions {
                preconditions: Some(Preconditions::uid("uid-a")),
                ..UpdateOptions::default()
            },
            |mut current, _| {
                current
                    .metadata
                    .labels
                    .insert("by".into(), "apistore".into());
                Ok(current.into())
            },
        )
        .await
        .unwrap();
    assert_ne!(updated.metadata.resource_version, rv);
    let go_read = t.go.get("/configmaps/default/a", "").await.unwrap();
    assert_eq!(summary(&go_read), summary(&to_json(&updated)));
    assert_eq!(go_read["metadata"]["labels"]["by"], "apistore");

    // apistore deletes it under a resourceVersion precondition; kube sees it gone.
    let deleted = t
        .store
        .delete(
            "configmaps/default/a",
            DeleteOptions {
                preconditions: Some(Preconditions::resource_version(
                    updated.metadata.resource_version.clone(),
                )),
                ..DeleteOptions::default()
            },
        )
        .await
        .unwrap();
    assert_ne!(
        deleted.metadata.resource_version,
        updated.metadata.resource_version
    );
    let gone = t.go.get("/configmaps/default/a", "").await.unwrap_err();
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
}

async fn apistore_writes_go_reads_updates_and_deletes(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let created = t
        .store
        .create(
            "configmaps/default/b",
            dynamic(&configmap("default", "b")),
            0,
        )
        .await
        .unwrap();
    let created = to_json(&created);
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();

    let read = t.go.get("/configmaps/default/b", "").await.unwrap();
    assert_eq!(summary(&read), summary(&created));
    let read = t.go.get("/configmaps/default/b", &rv).await.unwrap();
    assert_eq!(read["metadata"]["resourceVersion"], rv.as_str());

    // kube updates with preconditions on uid and resourceVersion; apistore reads it.
    let updated =
        t.go.update_labels(
            "/configmaps/default/b",
            json!({"by": "kube"}),
            json!({"uid": "uid-b", "resourceVersion": rv}),
        )
        .await
        .unwrap();
    let read = t
        .store
        .get("configmaps/default/b", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(summary(&to_json(&read)), summary(&updated));
    assert_eq!(read.metadata.labels["by"], "kube");

    // kube deletes; the object it returns is the last state at the deletion's revision,
    // and apistore sees it gone.
    let deleted =
        t.go.delete("/configmaps/default/b", json!({"uid": "uid-b"}))
            .await
            .unwrap();
    assert_eq!(deleted["metadata"]["labels"]["by"], "kube");
    let err = t
        .store
        .get("configmaps/default/b", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert_eq!(t.go.count("/configmaps").await.unwrap(), 0);
    assert_eq!(t.store.count("configmaps").await.unwrap(), 0);
}

/// A guaranteed update that changes nothing writes nothing on the side that wrote the
/// value; over the other side's bytes, it writes once when the encodings differ (both
/// compare the stored bytes with their own encoding, as kube's store does).
async fn no_op_updates_over_each_others_bytes(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let by_go =
        t.go.create("/configmaps/default/g", &configmap("default", "g"))
            .await
            .unwrap();
    let by_api = to_json(
        &t.store
            .create(
                "configmaps/default/r",
                dynamic(&configmap("default", "r")),
                0,
            )
            .await
            .unwrap(),
    );

    // Each side over its own bytes: no write.
    let again = t.go.touch("/configmaps/default/g").await.unwrap();
    assert_eq!(
        again["metadata"]["resourceVersion"],
        by_go["metadata"]["resourceVersion"]
    );
    let again = t
        .store
        .guaranteed_update("configmaps/default/r", UpdateOptions::default(), |c, _| {
            Ok(c.into())
        })
        .await
        .unwrap();
    assert_eq!(
        json!(again.metadata.resource_version),
        by_api["metadata"]["resourceVersion"]
    );

    // Across: record whether the other side's bytes equal this side's encoding.
    let go_over_api = t.go.touch("/configmaps/default/r").await.unwrap();
    let api_over_go = t
        .store
        .guaranteed_update("configmaps/default/g", UpdateOptions::default(), |c, _| {
            Ok(c.into())
        })
        .await
        .unwrap();
    let kube_wrote =
        go_over_api["metadata"]["resourceVersion"] != by_api["metadata"]["resourceVersion"];
    let apistore_wrote =
        json!(api_over_go.metadata.resource_version) != by_go["metadata"]["resourceVersion"];
    eprintln!(
        "{media_type}: no-op update by kube over apistore's bytes wrote: {kube_wrote}; by apistore over kube's bytes wrote: {apistore_wrote}"
    );
    if media_type == "protobuf" {
        // The same bytes on both sides: nothing to write either way.
        assert!(!kube_wrote && !apistore_wrote);
    }
    // Whatever happened, a second round changes nothing on either side.
    let rv_r = go_over_api["metadata"]["resourceVersion"].clone();
    let again = t.go.touch("/configmaps/default/r").await.unwrap();
    assert_eq!(again["metadata"]["resourceVersion"], rv_r);
    let rv_g = api_over_go.metadata.resource_version.clone();
    let again = t
        .store
        .guaranteed_update("configmaps/default/g", UpdateOptions::default(), |c, _| {
            Ok(c.into())
        })
        .await
        .unwrap();
    assert_eq!(again.metadata.resource_version, rv_g);
}

/// The stored bytes of the same object, written by each side: byte for byte the same
/// in protobuf; in JSON, the same object in another field order (a difference kept).
async fn stored_bytes_of_each_side(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    t.go.create("/configmaps/default/same", &configmap("default", "same"))
        .await
        .unwrap();
    let by_go = t
        .raw_get("/registry/configmaps/default/same")
        .await
        .unwrap();
    t.go.delete("/configmaps/default/same", json!(null))
        .await
        .unwrap();
    t.store
        .create(
            "configmaps/default/same",
            dynamic(&configmap("default", "same")),
            0,
        )
        .await
        .unwrap();
    let by_api = t
        .raw_get("/registry/configmaps/default/same")
        .await
        .unwrap();
    eprintln!("kube:     {:?}", String::from_utf8_lossy(&by_go));
    eprintln!("apistore: {:?}", String::from_utf8_lossy(&by_api));
    if media_type == "protobuf" {
        assert!(by_go.starts_with(b"k8s\0"));
        assert_eq!(by_api, by_go, "protobuf bytes differ");
    } else {
        let a: serde_json::Value = serde_json::from_slice(&by_go).unwrap();
        let b: serde_json::Value = serde_json::from_slice(&by_api).unwrap();
        assert_eq!(summary(&a), summary(&b));
        eprintln!("json bytes equal: {}", by_go == by_api);
    }
}

apistore_interop::per_media_type!(
    go_writes_apistore_reads_updates_and_deletes,
    apistore_writes_go_reads_updates_and_deletes,
    no_op_updates_over_each_others_bytes,
    stored_bytes_of_each_side
);

fn deployment(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "apps", "uid": format!("uid-{name}"), "labels": {"app": name}},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"containerPort": 80, "protocol": "TCP"}]}]},
            },
        },
    })
}

/// A grouped resource (deployments.apps, key prefix `deployments`) both ways, with the
/// stored bytes compared.
async fn deployments_both_ways(media_type: &str) {
    let options =
        ReferenceOptions::new("deployments.apps", "apps/v1/Deployment").media_type(media_type);
    let mut t = Interop::start(&options).await;
    assert_eq!(t.key_prefix, "deployments");
    let by_go =
        t.go.create(&t.go_key("apps", "web"), &deployment("web"))
            .await
            .unwrap();
    let read = t
        .store
        .get(&t.key("apps", "web"), &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(summary(&to_json(&read)), summary(&by_go));
    let go_bytes = t.raw_get(&t.etcd_key("apps", "web")).await.unwrap();

    let by_api = to_json(
        &t.store
            .create(&t.key("apps", "api"), dynamic(&deployment("api")), 0)
            .await
            .unwrap(),
    );
    let read = t.go.get(&t.go_key("apps", "api"), "").await.unwrap();
    assert_eq!(summary(&read), summary(&by_api));
    assert_eq!(
        read["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx:1.27"
    );

    // The same object from both sides, stored side by side.
    t.go.delete(&t.go_key("apps", "web"), json!(null))
        .await
        .unwrap();
    t.store
        .create(&t.key("apps", "web"), dynamic(&deployment("web")), 0)
        .await
        .unwrap();
    let api_bytes = t.raw_get(&t.etcd_key("apps", "web")).await.unwrap();
    if media_type == "protobuf" {
        assert!(go_bytes.starts_with(b"k8s\0"));
        assert_eq!(api_bytes, go_bytes, "protobuf bytes of a Deployment differ");
    } else {
        eprintln!("deployment json bytes equal: {}", api_bytes == go_bytes);
    }
    // kube updates apistore's object; apistore reads the update.
    let updated =
        t.go.update_labels(
            &t.go_key("apps", "web"),
            json!({"tier": "front"}),
            json!(null),
        )
        .await
        .unwrap();
    let read = t
        .store
        .get(&t.key("apps", "web"), &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(summary(&to_json(&read)), summary(&updated));
}

/// kube replaces apistore's object wholesale (as a PUT does) and apistore replaces
/// kube's; each reads the other's replacement.
async fn replacements_both_ways(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let created = t
        .store
        .create(
            "configmaps/default/r",
            dynamic(&configmap("default", "r")),
            0,
        )
        .await
        .unwrap();
    let mut replacement = configmap("default", "r");
    replacement["data"] = json!({"replaced": "by kube"});
    let replaced =
        t.go.replace(
            "/configmaps/default/r",
            &replacement,
            json!({"resourceVersion": created.metadata.resource_version}),
        )
        .await
        .unwrap();
    let read = t
        .store
        .get("configmaps/default/r", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(summary(&to_json(&read)), summary(&replaced));
    assert_eq!(read.data["data"], json!({"replaced": "by kube"}));

    let mut again = dynamic(&configmap("default", "r"));
    again
        .data
        .insert("data".into(), json!({"replaced": "by apistore"}));
    let replaced = t
        .store
        .guaranteed_update(
            "configmaps/default/r",
            UpdateOptions {
                preconditions: Some(Preconditions::resource_version(
                    read.metadata.resource_version.clone(),
                )),
                ..UpdateOptions::default()
            },
            move |_, _| Ok(again.clone().into()),
        )
        .await
        .unwrap();
    let read = t.go.get("/configmaps/default/r", "").await.unwrap();
    assert_eq!(summary(&read), summary(&to_json(&replaced)));
    assert_eq!(read["data"], json!({"replaced": "by apistore"}));
    // A stale resourceVersion precondition on a replacement: the same 409 on both.
    let go =
        t.go.replace(
            "/configmaps/default/r",
            &replacement,
            json!({"resourceVersion": created.metadata.resource_version}),
        )
        .await
        .unwrap_err();
    assert_eq!((go.code, go.reason.as_str()), (409, "Conflict"));
}

/// A guaranteed update with ignoreNotFound creates the object; the other side reads it.
async fn update_creates_when_ignoring_not_found(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let by_go =
        t.go.request(
            json!({"op": "update", "key": "/configmaps/a/new-go", "ignoreNotFound": true,
            "object": configmap("a", "new-go")}),
        )
        .await
        .unwrap();
    let read = t
        .store
        .get("configmaps/a/new-go", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(summary(&to_json(&read)), summary(&by_go["object"]));
    let fresh = dynamic(&configmap("a", "new-api"));
    let by_api = t
        .store
        .guaranteed_update(
            "configmaps/a/new-api",
            UpdateOptions {
                ignore_not_found: true,
                ..UpdateOptions::default()
            },
            move |_, meta| {
                assert_eq!(meta.resource_version, 0);
                Ok(fresh.clone().into())
            },
        )
        .await
        .unwrap();
    let read = t.go.get("/configmaps/a/new-api", "").await.unwrap();
    assert_eq!(summary(&read), summary(&to_json(&by_api)));
    assert_eq!(t.go.count("/configmaps").await.unwrap(), 2);
    assert_eq!(t.store.count("configmaps").await.unwrap(), 2);
}

apistore_interop::per_media_type!(
    deployments_both_ways,
    replacements_both_ways,
    update_creates_when_ignoring_not_found
);
