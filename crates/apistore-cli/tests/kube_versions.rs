//! `--kube-version` (and `APISTORE_KUBE_VERSION`): the layout and schema of the chosen
//! kube; a value of a newer kube reads with a warning naming what is not shown, and a
//! `get -o json`, edit, `update -f` round trip keeps every field the output left out.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use apistore::{KubeProtobuf, KubeVersion};
use common::{DEPLOYMENT, Fixture, fails_with};
use serde_json::{Value, json};

fn as_137(stored: &[u8]) -> Value {
    serde_json::from_slice(
        &KubeProtobuf::for_version(KubeVersion::V1_37)
            .decode_to_json(stored)
            .unwrap(),
    )
    .unwrap()
}

/// A Pod as kube-apiserver 1.37 stores it, with pod-level resources.
fn pod_137() -> Vec<u8> {
    KubeProtobuf::for_version(KubeVersion::V1_37)
        .encode_value(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "demo", "uid": "u-1",
                         "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {
                "containers": [{"name": "app", "image": "nginx"}],
                "resources": {"limits": {"cpu": "2"}},
            },
        }))
        .unwrap()
}

#[tokio::test]
async fn a_137_pod_survives_get_edit_update_with_kube_131() {
    let f = Fixture::new("cli-kube-versions");
    f.put_raw("pods/demo/p1", pod_137()).await;
    let before = as_137(&f.raw("pods/demo/p1").await.0);

    let out = f.run(&[
        "--kube-version",
        "1.31",
        "get",
        "pods/demo/p1",
        "-o",
        "json",
    ]);
    assert!(out.status.success());
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(shown["spec"].get("resources").is_none());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.trim_end(),
        "warning: Pod demo/p1 holds fields the kube 1.31 schema does not know, not shown here: \
         spec.resources (from kube 1.32 or newer), status.observedGeneration (from kube 1.33 \
         or newer); updates keep them; --kube-version 1.33 shows them"
    );

    // The operator's round trip: the output, a label added, written back.
    let mut edited = shown;
    edited["metadata"]["labels"] = json!({"tier": "gold"});
    let file = f.file("p1.json", &edited.to_string());
    f.ok(&[
        "--kube-version",
        "1.31",
        "update",
        "pods/demo/p1",
        "-f",
        file.to_str().unwrap(),
    ]);
    let mut after = as_137(&f.raw("pods/demo/p1").await.0);
    assert_eq!(after["metadata"]["labels"], json!({"tier": "gold"}));
    after["metadata"].as_object_mut().unwrap().remove("labels");
    assert_eq!(after, before, "only the label changed");

    // The default (the newest kube) shows everything and warns of nothing.
    let out = f.run(&["get", "pods/demo/p1", "-o", "json"]);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["spec"]["resources"], json!({"limits": {"cpu": "2"}}));
}

#[tokio::test]
async fn each_kube_version_reads_as_that_kube_serves() {
    let f = Fixture::new("cli-kube-version-json");
    f.create("deployments/default/d1", DEPLOYMENT);
    let template_meta = |out: String| {
        let d: Value = serde_json::from_str(&out).unwrap();
        d["spec"]["template"]["metadata"].clone()
    };
    // kube 1.31-1.33 write the zero creationTimestamp as null, 1.34+ leave it out.
    let old = f.ok(&[
        "--kube-version",
        "1.33",
        "get",
        "deployments/default/d1",
        "-o",
        "json",
    ]);
    assert_eq!(
        template_meta(old),
        json!({"creationTimestamp": null, "labels": {"app": "web"}})
    );
    let new = f.ok(&["get", "deployments/default/d1", "-o", "json"]);
    assert_eq!(template_meta(new), json!({"labels": {"app": "web"}}));

    // The environment variable chooses too.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apistore"))
        .args(["--endpoints", &f.endpoint, "--prefix", &f.prefix])
        .args(["get", "deployments/default/d1", "-o", "json"])
        .env("APISTORE_KUBE_VERSION", "v1.31.14")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        template_meta(String::from_utf8(out.stdout).unwrap())["creationTimestamp"],
        Value::Null
    );
}

#[tokio::test]
async fn kinds_of_a_newer_kube_name_the_version_that_has_them() {
    let f = Fixture::new("cli-kube-version-kinds");
    let class = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]},
    });
    let file = f.file("class.json", &class.to_string());
    f.ok(&[
        "create",
        "deviceclasses/gpu.example.com",
        "-f",
        file.to_str().unwrap(),
    ]);
    // 1.37 stores DeviceClasses at resource.k8s.io/v1, as protobuf.
    let (stored, _) = f.raw("deviceclasses/gpu.example.com").await;
    assert_eq!(
        KubeProtobuf::type_meta(&stored).unwrap(),
        ("resource.k8s.io/v1".to_owned(), "DeviceClass".to_owned())
    );
    let got = f.ok(&["get", "deviceclasses/gpu.example.com", "-o", "json"]);
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["spec"], class["spec"]);

    fails_with(
        &f,
        &[
            "--kube-version",
            "1.31",
            "get",
            "deviceclasses/gpu.example.com",
        ],
        1,
        "kube 1.34 has it: choose --kube-version 1.34 or newer",
    );
    fails_with(
        &f,
        &[
            "--kube-version",
            "1.30",
            "get",
            "deviceclasses/gpu.example.com",
        ],
        2,
        "kube 1.30 is not one apistore knows: it has schemas and layouts for 1.31 to 1.37",
    );
    fails_with(
        &f,
        &[
            "--kube-version",
            "latest",
            "get",
            "deviceclasses/gpu.example.com",
        ],
        2,
        "\"latest\" is not a kube version",
    );
}
