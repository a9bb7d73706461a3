//! The command, black-box, against a real etcd: where kube's layout puts objects, which
//! encryption providers and encodings it picks for them, and a rewrite that works on
//! the stored bytes.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::process::Command;

use apistore::layers::value::EncryptionConfig;
use bytes::Bytes;
use common::*;

#[tokio::test]
async fn group_resources_are_encrypted_under_their_own_configuration_entry() {
    let f = Fixture::new("cli-group-encryption");
    let config = f.file("enc.yaml", &encryption_config(&[("key1", KEY1)]));
    let deployment = f.file("d1.json", DEPLOYMENT);
    let widget = f.file("w1.json", WIDGET);
    let config = config.to_str().unwrap();
    f.ok(&[
        "--encryption-config",
        config,
        "create",
        "deployments/default/d1",
        "-f",
        deployment.to_str().unwrap(),
    ]);
    f.ok(&[
        "--encryption-config",
        config,
        "create",
        "example.com/widgets/default/w1",
        "-f",
        widget.to_str().unwrap(),
    ]);

    let (stored, _) = f.raw("deployments/default/d1").await;
    assert!(
        starts_with(&stored, b"k8s:enc:aesgcm:v1:key1:"),
        "deployment stored in plaintext: {:?}",
        String::from_utf8_lossy(&stored)
    );
    let (stored, _) = f.raw("example.com/widgets/default/w1").await;
    assert!(
        starts_with(&stored, b"k8s:enc:aesgcm:v1:key1:"),
        "widget stored in plaintext: {:?}",
        String::from_utf8_lossy(&stored)
    );

    // Read back through the same configuration: the objects as written.
    let read: serde_json::Value = serde_json::from_str(&f.ok(&[
        "--encryption-config",
        config,
        "-o",
        "json",
        "get",
        "deployments/default/d1",
    ]))
    .unwrap();
    assert_eq!(read["spec"]["replicas"], 2);
    assert_eq!(
        read["spec"]["template"]["spec"]["containers"][0]["image"],
        "nginx"
    );
    let read: serde_json::Value = serde_json::from_str(&f.ok(&[
        "--encryption-config",
        config,
        "-o",
        "json",
        "get",
        "example.com/widgets/default/w1",
    ]))
    .unwrap();
    assert_eq!(read["spec"]["size"], 3);
}

#[tokio::test]
async fn writes_use_kube_apiservers_encoding_and_reads_take_either() {
    let f = Fixture::new("cli-encodings");
    f.create("deployments/default/d1", DEPLOYMENT);
    f.create("example.com/widgets/default/w1", WIDGET);
    let (stored, _) = f.raw("deployments/default/d1").await;
    assert!(
        starts_with(&stored, b"k8s\0"),
        "a built-in is written as protobuf"
    );
    let (stored, _) = f.raw("example.com/widgets/default/w1").await;
    assert!(
        starts_with(&stored, b"{"),
        "a custom resource is written as JSON"
    );

    // The override, as kube-apiserver's --storage-media-type.
    let d2 = f.file("d2.json", &DEPLOYMENT.replace("\"d1\"", "\"d2\""));
    f.ok(&[
        "--storage-media-type",
        "json",
        "create",
        "deployments/default/d2",
        "-f",
        d2.to_str().unwrap(),
    ]);
    let (stored, _) = f.raw("deployments/default/d2").await;
    assert!(
        starts_with(&stored, b"{"),
        "--storage-media-type json writes JSON"
    );

    // A prefix mixing both lists fine.
    let list: serde_json::Value =
        serde_json::from_str(&f.ok(&["-o", "json", "list", "deployments/default"])).unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["d1", "d2"]);

    // A key of no resource is a clear error (a command-line mistake: exit 2), and
    // --resource places it.
    let out = f.run(&["get", "widgets/default/w1"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--resource"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

/// `encryption rewrite secrets -o json` with the configuration file `config` and
/// `flags`: its exit code, its summary and its stderr.
fn rewrite(f: &Fixture, config: &str, flags: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let command = [
        "--encryption-config",
        config,
        "-o",
        "json",
        "encryption",
        "rewrite",
        "secrets",
    ];
    let out = f.run(&[&command[..], flags].concat());
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let summary = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no summary ({e}); stderr: {stderr}"));
    (out.status.code(), summary, stderr)
}

#[tokio::test]
async fn rewrite_touches_only_stale_values_and_never_decodes() {
    let f = Fixture::new("cli-rewrite");
    let old = f.file("old.yaml", &encryption_config(&[("key1", KEY1)]));
    let rotated = f.file(
        "rotated.yaml",
        &encryption_config(&[("key2", KEY2), ("key1", KEY1)]),
    );
    let (old, rotated) = (old.to_str().unwrap(), rotated.to_str().unwrap());
    // Go's field order (kind first), which apistore's own encoder does not produce, and
    // bytes no codec can read: neither may be re-encoded.
    let go_order = br#"{"kind":"Secret","apiVersion":"v1","metadata":{"name":"s1","namespace":"default"},"data":{"k":"dg=="}}"#;
    put_encrypted(&f, &[("key1", KEY1)], "secrets/default/s1", go_order).await;
    put_encrypted(
        &f,
        &[("key1", KEY1)],
        "secrets/default/opaque",
        b"\x00\x01 not an object",
    )
    .await;
    put_encrypted(&f, &[("key2", KEY2)], "secrets/default/current", go_order).await;
    let before = [
        f.raw("secrets/default/s1").await,
        f.raw("secrets/default/opaque").await,
        f.raw("secrets/default/current").await,
    ];

    // Under the old configuration key1 is the write key: nothing is stale... except the
    // value under key2, which it cannot read at all.
    let (code, summary, _) = rewrite(&f, old, &[]);
    assert_eq!(
        summary,
        serde_json::json!({"scanned": 3, "rewritten": 0, "skipped": 0, "failed": 1})
    );
    assert_eq!(code, Some(1));
    // With --skip-undecodable that value is named and skipped, and the run succeeds.
    let (code, summary, stderr) = rewrite(&f, old, &["--skip-undecodable"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        summary,
        serde_json::json!({"scanned": 3, "rewritten": 0, "skipped": 1, "failed": 0})
    );
    assert!(
        stderr.contains("skipped secrets/default/current"),
        "{stderr}"
    );
    assert_eq!(
        f.raw("secrets/default/s1").await,
        before[0],
        "a current value was written"
    );
    assert_eq!(
        f.raw("secrets/default/opaque").await,
        before[1],
        "a current value was written"
    );

    // A dry run after rotation names the stale ones and writes nothing.
    let (code, summary, stderr) = rewrite(&f, rotated, &["--dry-run"]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        summary,
        serde_json::json!({"scanned": 3, "rewritten": 2, "skipped": 0, "failed": 0,
                           "dryRun": true, "wouldRewrite": 2})
    );
    // Without -o json, the summary says "would", not that anything was rewritten.
    let out = f.run(&[
        "--encryption-config",
        rotated,
        "encryption",
        "rewrite",
        "secrets",
        "--dry-run",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "scanned: 3\nwould rewrite: 2\nskipped: 0\nfailed: 0\n"
    );
    assert!(
        stderr.contains("would rewrite secrets/default/s1"),
        "{stderr}"
    );
    assert!(
        stderr.contains("would rewrite secrets/default/opaque"),
        "{stderr}"
    );
    assert!(!stderr.contains("secrets/default/current"), "{stderr}");
    for (key, was) in ["s1", "opaque", "current"].iter().zip(&before) {
        assert_eq!(
            &f.raw(&format!("secrets/default/{key}")).await,
            was,
            "dry run wrote {key}"
        );
    }

    // The rewrite: the two stale values move to key2 with their plaintext byte for
    // byte; the current one keeps its mod revision.
    let (code, summary, stderr) = rewrite(&f, rotated, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(
        summary,
        serde_json::json!({"scanned": 3, "rewritten": 2, "skipped": 0, "failed": 0})
    );
    assert_eq!(f.raw("secrets/default/current").await, before[2]);
    let config = EncryptionConfig::parse(&encryption_config(&[("key2", KEY2)])).unwrap();
    for (key, plain) in [
        ("s1", &go_order[..]),
        ("opaque", &b"\x00\x01 not an object"[..]),
    ] {
        let (stored, revision) = f.raw(&format!("secrets/default/{key}")).await;
        assert!(starts_with(&stored, b"k8s:enc:aesgcm:v1:key2:"), "{key}");
        assert!(revision > before[2].1, "{key} was not written");
        let full = format!("{}/secrets/default/{key}", f.prefix);
        let read = config
            .transformer_for("secrets")
            .transform_from_storage(Bytes::from(stored), full.as_bytes())
            .unwrap();
        assert_eq!(&read.data[..], plain, "{key}: the plaintext changed");
    }
    // And again: nothing left to do.
    let (code, summary, stderr) = rewrite(&f, rotated, &[]);
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(summary["rewritten"], 0);
}

#[tokio::test]
async fn rewrite_without_an_encryption_config_refuses_up_front() {
    let f = Fixture::new("cli-rewrite-no-config");
    let out = f.run(&["encryption", "rewrite", "secrets"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--encryption-config"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn a_missing_or_unparsable_file_is_a_command_line_mistake() {
    let f = Fixture::new("cli-exit-file");
    let missing = f.dir.path().join("missing.json");
    fails_with(
        &f,
        &[
            "create",
            "configmaps/default/cm1",
            "-f",
            missing.to_str().unwrap(),
        ],
        2,
        "cannot read",
    );
    let garbage = f.file("garbage.yaml", "- just\n- a list\n");
    fails_with(
        &f,
        &[
            "create",
            "configmaps/default/cm1",
            "-f",
            garbage.to_str().unwrap(),
        ],
        2,
        "is not a JSON or YAML object",
    );
}

#[tokio::test]
async fn a_bad_selector_is_a_command_line_mistake() {
    let f = Fixture::new("cli-exit-selector");
    fails_with(
        &f,
        &["list", "configmaps/default", "-l", "app in (web"],
        2,
        "--selector",
    );
    fails_with(
        &f,
        &[
            "list",
            "configmaps/default",
            "--field-selector",
            "metadata.name",
        ],
        2,
        "--field-selector",
    );
}

#[tokio::test]
async fn flags_that_do_not_go_together_are_a_command_line_mistake() {
    let f = Fixture::new("cli-exit-flags");
    let out = Command::new(env!("CARGO_BIN_EXE_apistore"))
        .args(["--endpoints", &f.endpoint, "--prefix", &f.prefix])
        .args(["--user", "root", "get", "configmaps/default/cm1"])
        .env_remove("APISTORE_PASSWORD")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--user needs a password"), "{stderr}");
}

#[tokio::test]
async fn a_storage_error_exits_1_with_its_reason() {
    let f = Fixture::new("cli-exit-storage");
    fails_with(&f, &["get", "configmaps/default/absent"], 1, "NotFound");
    let cm = f.file(
        "cm1.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1","namespace":"default"}}"#,
    );
    let cm = cm.to_str().unwrap();
    f.ok(&["create", "configmaps/default/cm1", "-f", cm]);
    fails_with(
        &f,
        &["create", "configmaps/default/cm1", "-f", cm],
        1,
        "AlreadyExists",
    );
}

#[tokio::test]
async fn keys_lists_metadata_and_encoding_without_decrypting() {
    let f = Fixture::new("cli-keys");
    f.create("configmaps/default/cm1", CM1);
    f.create("example.com/widgets/default/w1", WIDGET);
    put_encrypted(&f, &[("key1", KEY1)], "secrets/default/s1", b"{}").await;
    let (_, cm_rev) = f.raw("configmaps/default/cm1").await;

    let keys: serde_json::Value = serde_json::from_str(&f.ok(&["-o", "json", "keys"])).unwrap();
    let rows = keys.as_array().unwrap();
    let by_key = |key: &str| rows.iter().find(|r| r["key"] == key).unwrap().clone();
    assert_eq!(rows.len(), 3, "{keys}");
    let row = by_key("configmaps/default/cm1");
    assert_eq!(row["encoding"], "protobuf");
    assert_eq!(row["modRevision"], cm_rev);
    assert_eq!(row["createRevision"], cm_rev);
    assert_eq!(row["version"], 1);
    assert_eq!(row["lease"], 0);
    assert!(row["size"].as_u64().unwrap() > 0);
    assert_eq!(by_key("example.com/widgets/default/w1")["encoding"], "json");
    assert_eq!(by_key("secrets/default/s1")["encoding"], "aesgcm:key1");

    // A prefix narrows it; the default is a table.
    let table = f.ok(&["keys", "secrets"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(lines[0].starts_with("KEY"), "{table}");
    assert!(
        lines[0].contains("MOD_REV") && lines[0].contains("ENCODING"),
        "{table}"
    );
    assert!(lines[1].starts_with("secrets/default/s1"), "{table}");
    assert!(lines[1].ends_with("aesgcm:key1"), "{table}");
    assert_eq!(
        f.ok(&["-o", "name", "keys", "configmaps"]),
        "configmaps/default/cm1\n"
    );
}

#[tokio::test]
async fn get_raw_prints_the_stored_bytes_and_exact_reads_an_old_revision() {
    let f = Fixture::new("cli-get-raw");
    f.put_raw(
        "secrets/default/s1",
        b"k8s:enc:aesgcm:v1:key1:\x00\x01\n".to_vec(),
    )
    .await;
    assert_eq!(
        f.ok(&["get", "secrets/default/s1", "--raw"]),
        "k8s:enc:aesgcm:v1:key1:\\x00\\x01\\n\n"
    );
    let out = f.dir.path().join("value.bin");
    f.ok(&[
        "get",
        "secrets/default/s1",
        "--raw-out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read(&out).unwrap(),
        b"k8s:enc:aesgcm:v1:key1:\x00\x01\n"
    );

    f.create("configmaps/default/cm1", CM1);
    let (_, first) = f.raw("configmaps/default/cm1").await;
    let v2 = f.file("cm2.json", &CM1.replace("\"v1\"}", "\"v2\"}"));
    f.ok(&[
        "update",
        "configmaps/default/cm1",
        "-f",
        v2.to_str().unwrap(),
    ]);
    let first = first.to_string();
    let old: serde_json::Value = serde_json::from_str(&f.ok(&[
        "-o",
        "json",
        "get",
        "configmaps/default/cm1",
        "--rv",
        &first,
        "--exact",
    ]))
    .unwrap();
    assert_eq!(old["data"]["k"], "v1");
    assert_eq!(old["metadata"]["resourceVersion"], first.as_str());
    let now: serde_json::Value =
        serde_json::from_str(&f.ok(&["-o", "json", "get", "configmaps/default/cm1"])).unwrap();
    assert_eq!(now["data"]["k"], "v2");
    // --exact needs --rv: a command-line mistake.
    let out = f.run(&["get", "configmaps/default/cm1", "--exact"]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test]
async fn writes_refuse_objects_that_do_not_match_their_key() {
    let f = Fixture::new("cli-write-checks");
    let cases = [
        ("other-name", CM1.replace("\"cm1\"", "\"cm2\""), "name"),
        (
            "other-ns",
            CM1.replace("\"default\"", "\"kube-system\""),
            "namespace",
        ),
        ("no-kind", CM1.replace(r#""kind":"ConfigMap","#, ""), "kind"),
        (
            "no-api-version",
            CM1.replace(r#""apiVersion":"v1","#, ""),
            "apiVersion",
        ),
    ];
    for (name, text, says) in &cases {
        let file = f.file(&format!("{name}.json"), text);
        let file = file.to_str().unwrap();
        fails_with(
            &f,
            &["create", "configmaps/default/cm1", "-f", file],
            2,
            says,
        );
        fails_with(
            &f,
            &["update", "configmaps/default/cm1", "-f", file],
            2,
            says,
        );
    }
    let client = f.client().await;
    let mut client = client;
    let stored = client
        .get(
            format!("{}/", f.prefix),
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    assert!(stored.kvs().is_empty(), "a refused object was written");

    // A namespaced key fills an empty namespace, as kube's registry does.
    let no_ns = f.file(
        "no-ns.json",
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm1"}}"#,
    );
    let created: serde_json::Value = serde_json::from_str(&f.ok(&[
        "-o",
        "json",
        "create",
        "configmaps/default/cm1",
        "-f",
        no_ns.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(created["metadata"]["namespace"], "default");
}

#[tokio::test]
async fn dry_runs_say_what_would_be_written_and_write_nothing() {
    let f = Fixture::new("cli-dry-run");
    let cm = f.file("cm1.json", CM1);
    let cm = cm.to_str().unwrap();
    let out = f.run(&[
        "-o",
        "json",
        "create",
        "configmaps/default/cm1",
        "-f",
        cm,
        "--dry-run",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let would: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(would["data"]["k"], "v1");
    assert!(String::from_utf8_lossy(&out.stderr).contains("would create configmaps/default/cm1"));
    fails_with(&f, &["get", "configmaps/default/cm1"], 1, "NotFound");

    f.ok(&["create", "configmaps/default/cm1", "-f", cm]);
    let before = f.raw("configmaps/default/cm1").await;
    fails_with(
        &f,
        &["create", "configmaps/default/cm1", "-f", cm, "--dry-run"],
        1,
        "AlreadyExists",
    );
    let v2 = f.file("cm2.json", &CM1.replace("\"v1\"}", "\"v2\"}"));
    let v2 = v2.to_str().unwrap();
    let out = f.run(&[
        "-o",
        "json",
        "update",
        "configmaps/default/cm1",
        "-f",
        v2,
        "--dry-run",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let would: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(would["data"]["k"], "v2");
    fails_with(
        &f,
        &[
            "update",
            "configmaps/default/cm1",
            "-f",
            v2,
            "--dry-run",
            "--precondition-rv",
            "1",
        ],
        1,
        "Precondition failed",
    );
    let out = f.run(&[
        "-o",
        "json",
        "delete",
        "configmaps/default/cm1",
        "--dry-run",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let would: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(would["data"]["k"], "v1");
    assert!(String::from_utf8_lossy(&out.stderr).contains("would delete configmaps/default/cm1"));
    assert_eq!(
        f.raw("configmaps/default/cm1").await,
        before,
        "a dry run wrote"
    );
}

#[tokio::test]
async fn every_command_honours_the_output_format() {
    let f = Fixture::new("cli-output");
    for name in ["cm1", "cm2", "cm3"] {
        f.create(
            &format!("configmaps/default/{name}"),
            &CM1.replace("\"cm1\"", &format!("\"{name}\"")),
        );
    }
    assert_eq!(
        f.ok(&["count", "configmaps"]),
        "3\n",
        "the bare number stays"
    );
    let count: serde_json::Value =
        serde_json::from_str(&f.ok(&["-o", "json", "count", "configmaps"])).unwrap();
    assert_eq!(count, serde_json::json!({"count": 3}));
    assert_eq!(
        f.ok(&["-o", "name", "list", "configmaps"]),
        "configmap/cm1\nconfigmap/cm2\nconfigmap/cm3\n"
    );
    assert_eq!(
        f.ok(&["-o", "name", "get", "configmaps/default/cm2"]),
        "configmap/cm2\n"
    );

    let out = f.run(&["-o", "table", "list", "configmaps", "--limit", "2"]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(
        lines[0].contains("KIND") && lines[0].ends_with("AGE"),
        "{table}"
    );
    assert!(lines[1].contains("ConfigMap"), "{table}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("continue: "), "{stderr}");
    assert!(stderr.contains("remaining: 1"), "{stderr}");

    let events = f.ok(&["-o", "table", "watch", "configmaps", "--max-events", "3"]);
    let lines: Vec<&str> = events.lines().collect();
    // The header, then a row per event.
    assert_eq!(lines.len(), 4, "{events}");
    assert_eq!(lines[0], "TYPE\tNAME\tNAMESPACE\tRESOURCEVERSION\tKIND");
    assert!(lines[1].starts_with("ADDED\tcm1\tdefault\t"), "{events}");
    assert!(lines[1].ends_with("\tConfigMap"), "{events}");
    let events = f.ok(&["-o", "name", "watch", "configmaps", "--max-events", "1"]);
    assert_eq!(events, "configmap/cm1\n");
}

#[tokio::test]
async fn a_field_the_resource_does_not_support_is_a_bad_request() {
    let f = Fixture::new("cli-field-support");
    fails_with(
        &f,
        &[
            "list",
            "configmaps",
            "--field-selector",
            "spec.nodeName=node-1",
        ],
        1,
        "BadRequest: field label not supported: spec.nodeName",
    );
    fails_with(
        &f,
        &[
            "watch",
            "configmaps",
            "--field-selector",
            "spec.nodeName=node-1",
        ],
        1,
        "metadata.name, metadata.namespace",
    );
    // A pod's supported fields select.
    for (name, node) in [("p1", "node-1"), ("p2", "node-2")] {
        let pod = format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"{name}","namespace":"default"}},"spec":{{"nodeName":"{node}","containers":[{{"name":"c","image":"nginx"}}]}}}}"#
        );
        f.create(&format!("pods/default/{name}"), &pod);
    }
    assert_eq!(
        f.ok(&[
            "-o",
            "name",
            "list",
            "pods",
            "--field-selector",
            "spec.nodeName=node-2"
        ]),
        "pod/p2\n"
    );
    assert_eq!(
        f.ok(&[
            "-o",
            "name",
            "list",
            "pods",
            "--field-selector",
            "metadata.namespace=default,spec.nodeName!=node-2"
        ]),
        "pod/p1\n"
    );
}

#[tokio::test]
async fn values_that_cannot_be_read_are_explained_skipped_and_force_deleted() {
    let f = Fixture::new("cli-undecodable");
    f.create("configmaps/default/cm1", CM1);
    f.put_raw("configmaps/default/bad", b"\x00\x01 not an object".to_vec())
        .await;
    put_encrypted(&f, &[("key1", KEY1)], "secrets/default/s1", b"{}").await;

    // An encrypted value read without the configuration says to pass it.
    fails_with(&f, &["get", "secrets/default/s1"], 2, "--encryption-config");
    fails_with(&f, &["list", "secrets"], 2, "aesgcm:key1");

    // A list fails on the bad value, or goes past it and names it.
    let out = f.run(&["list", "configmaps"]);
    assert_eq!(out.status.code(), Some(1));
    let out = f.run(&["-o", "name", "list", "configmaps", "--skip-undecodable"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "configmap/cm1\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("skipped configmaps/default/bad"),
        "{stderr}"
    );

    // delete --force is kube's unsafe deletion: a readable value is refused (dry run
    // too) and stays.
    fails_with(
        &f,
        &["delete", "configmaps/default/cm1", "--force"],
        1,
        "decodable from storage; delete it without --force",
    );
    fails_with(
        &f,
        &["delete", "configmaps/default/cm1", "--force", "--dry-run"],
        1,
        "without --force",
    );
    f.ok(&["get", "configmaps/default/cm1"]);
    // delete --force removes the unreadable one unread; a plain delete cannot.
    assert_eq!(
        f.run(&["delete", "configmaps/default/bad"]).status.code(),
        Some(1)
    );
    let out = f.run(&["delete", "configmaps/default/bad", "--force", "--dry-run"]);
    assert!(out.status.success());
    f.raw("configmaps/default/bad").await;
    let out = f.run(&["delete", "configmaps/default/bad", "--force"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("deleted configmaps/default/bad"));
    assert_eq!(
        f.ok(&["-o", "name", "list", "configmaps"]),
        "configmap/cm1\n"
    );
    fails_with(
        &f,
        &["delete", "configmaps/default/bad", "--force"],
        1,
        "NotFound",
    );
}

#[tokio::test]
async fn an_empty_list_of_a_resource_kube_does_not_know_warns() {
    let f = Fixture::new("cli-unknown-resource");
    f.create("example.com/widgets/default/w1", WIDGET);
    // A misspelt plural: nothing under it at all.
    let out = f.run(&["-o", "json", "list", "example.com/widget"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(list["items"], serde_json::json!([]));
    assert!(stderr.starts_with("warning: "), "{stderr}");
    assert!(stderr.contains("widget.example.com"), "{stderr}");
    assert!(stderr.contains("no keys under"), "{stderr}");
    // The same with --skip-undecodable.
    let out = f.run(&["list", "example.com/widget", "--skip-undecodable"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: "));
    // A custom resource with keys, even one namespace of it with none, and an empty
    // built-in say nothing.
    for prefix in [
        "example.com/widgets",
        "example.com/widgets/other",
        "configmaps",
    ] {
        let out = f.run(&["list", prefix]);
        assert!(out.status.success());
        assert!(
            out.stderr.is_empty(),
            "{prefix}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[tokio::test]
async fn a_list_cut_short_prints_its_continue_token_for_every_format() {
    let f = Fixture::new("cli-continue-every-format");
    for name in ["cm1", "cm2", "cm3"] {
        f.create(
            &format!("configmaps/default/{name}"),
            &CM1.replace("\"cm1\"", &format!("\"{name}\"")),
        );
    }
    for format in ["json", "yaml", "name", "table"] {
        let out = f.run(&["-o", format, "list", "configmaps", "--limit", "2"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "-o {format}: {stderr}");
        let tokens: Vec<&str> = stderr
            .lines()
            .filter_map(|line| line.strip_prefix("continue: "))
            .collect();
        assert_eq!(tokens.len(), 1, "-o {format}: {stderr}");
        assert!(!tokens[0].is_empty(), "-o {format}: {stderr}");
        assert!(stderr.contains("remaining: 1"), "-o {format}: {stderr}");
        // The token from stderr gives the rest.
        let rest = f.ok(&[
            "-o",
            "name",
            "list",
            "configmaps",
            "--limit",
            "2",
            "--continue",
            tokens[0],
        ]);
        assert_eq!(rest, "configmap/cm3\n", "-o {format}");
    }
    // A whole list says nothing on stderr; --all follows the tokens to the end.
    let out = f.run(&["-o", "name", "list", "configmaps", "--limit", "1", "--all"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "configmap/cm1\nconfigmap/cm2\nconfigmap/cm3\n"
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = f.run(&["-o", "json", "list", "configmaps"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn keys_pasted_from_etcdctl_and_kubectl_names_reach_their_resource() {
    let f = Fixture::new("cli-pasted-keys");
    f.create("configmaps/default/cm1", CM1);
    f.create("deployments/default/d1", DEPLOYMENT);
    let full = format!("{}/configmaps/default/cm1", f.prefix);
    let name = |args: &[&str]| f.ok(&[&["-o", "name"], args].concat());

    // The store prefix as etcdctl prints it, for every command taking a key.
    assert_eq!(name(&["get", &full]), "configmap/cm1\n");
    assert_eq!(
        name(&["list", &format!("{}/configmaps", f.prefix)]),
        "configmap/cm1\n"
    );
    assert_eq!(
        f.ok(&["count", &format!("{}/configmaps/default", f.prefix)]),
        "1\n"
    );
    assert_eq!(
        f.ok(&["-o", "name", "keys", &format!("{}/configmaps", f.prefix)]),
        f.ok(&["-o", "name", "keys", "configmaps"]),
    );
    assert_eq!(
        f.ok(&["-o", "name", "keys", &format!("{}/configmaps", f.prefix)]),
        "configmaps/default/cm1\n"
    );
    assert_eq!(
        f.ok(&["-o", "name", "keys", &f.prefix]),
        f.ok(&["-o", "name", "keys"]),
    );

    // kubectl's short names and singulars.
    for key in ["cm/default/cm1", "configmap/default/cm1"] {
        assert_eq!(name(&["get", key]), "configmap/cm1\n", "{key}");
    }
    assert_eq!(name(&["list", "cm"]), "configmap/cm1\n");
    assert_eq!(name(&["get", "deploy/default/d1"]), "deployment.apps/d1\n");
    assert_eq!(
        name(&["get", "deployment.apps/default/d1"]),
        "deployment.apps/d1\n"
    );
    assert_eq!(
        name(&["get", "deployment/default/d1"]),
        "deployment.apps/d1\n"
    );
    let file = f.file("cm2.json", &CM1.replace("\"cm1\"", "\"cm2\""));
    f.ok(&["create", "cm/default/cm2", "-f", file.to_str().unwrap()]);
    assert!(f.stored("configmaps/default/cm2").await.is_some());
    f.ok(&["delete", &format!("{}/configmaps/default/cm2", f.prefix)]);
    assert!(f.stored("configmaps/default/cm2").await.is_none());

    // A near miss names the resource meant, with the key spelt so.
    fails_with(
        &f,
        &["get", "configmapz/default/cm1"],
        2,
        "did you mean \"configmaps\" (configmaps/default/cm1)?",
    );
    // Nothing close: the --resource advice as before.
    fails_with(
        &f,
        &["get", "zzzzzzzzzzzz/default/cm1"],
        2,
        "--resource GROUP_RESOURCE",
    );
}

#[tokio::test]
async fn get_raw_prints_a_json_value_as_it_is_for_jq() {
    let f = Fixture::new("cli-get-raw-json");
    f.create("example.com/widgets/default/w1", WIDGET);
    let (stored, _) = f.raw("example.com/widgets/default/w1").await;
    let raw = f.ok(&["get", "example.com/widgets/default/w1", "--raw"]);
    assert!(!raw.contains("\\\""), "no escaped quotes: {raw}");
    assert_eq!(raw.trim_end().as_bytes(), stored.trim_ascii_end());
    let value: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(value["spec"]["size"], 3);
    // Text with a control character, and bytes that are not UTF-8: escaped, one line.
    f.put_raw(
        "example.com/widgets/default/w2",
        b"{\"a\":\"\x1b[31m\"}".to_vec(),
    )
    .await;
    assert_eq!(
        f.ok(&["get", "example.com/widgets/default/w2", "--raw"]),
        "{\\\"a\\\":\\\"\\x1b[31m\\\"}\n"
    );
    f.put_raw("example.com/widgets/default/w3", b"\xff\xfe{}".to_vec())
        .await;
    assert_eq!(
        f.ok(&["get", "example.com/widgets/default/w3", "--raw"]),
        "\\xff\\xfe{}\n"
    );
}

#[tokio::test]
async fn rv_match_is_taken_in_any_case() {
    let f = Fixture::new("cli-rv-match-case");
    f.create("configmaps/default/cm1", CM1);
    let (_, revision) = f.raw("configmaps/default/cm1").await;
    let revision = revision.to_string();
    for spelling in ["Exact", "exact", "EXACT"] {
        let list: serde_json::Value = serde_json::from_str(&f.ok(&[
            "-o",
            "json",
            "list",
            "configmaps",
            "--rv",
            &revision,
            "--rv-match",
            spelling,
        ]))
        .unwrap();
        assert_eq!(list["metadata"]["resourceVersion"], revision.as_str());
        assert_eq!(list["items"].as_array().unwrap().len(), 1, "{spelling}");
    }
    for spelling in ["NotOlderThan", "notolderthan", "notOlderThan"] {
        let out = f.ok(&[
            "-o",
            "name",
            "list",
            "configmaps",
            "--rv",
            &revision,
            "--rv-match",
            spelling,
        ]);
        assert_eq!(out, "configmap/cm1\n", "{spelling}");
    }
    let out = f.run(&["list", "configmaps", "--rv", "1", "--rv-match", "newest"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Exact") && stderr.contains("NotOlderThan"),
        "{stderr}"
    );
}

#[tokio::test]
async fn decode_prints_a_stored_value_from_a_file_or_stdin() {
    let f = Fixture::new("cli-decode");
    f.create("configmaps/default/cm1", CM1);
    let (protobuf, _) = f.raw("configmaps/default/cm1").await;
    assert!(starts_with(&protobuf, b"k8s\0"));
    let file = f.dir.path().join("cm1.bin");
    std::fs::write(&file, &protobuf).unwrap();
    let read: serde_json::Value =
        serde_json::from_str(&f.ok(&["-o", "json", "decode", file.to_str().unwrap()])).unwrap();
    assert_eq!(read["metadata"]["name"], "cm1");
    assert_eq!(read["data"]["k"], "v1");

    // From stdin, JSON.
    let decode_stdin = |args: &[&str], input: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_apistore"))
            .args(["--prefix", &f.prefix])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), input).unwrap();
        child.wait_with_output().unwrap()
    };
    let out = decode_stdin(&["-o", "json", "decode", "-"], WIDGET.as_bytes());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let read: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(read["spec"]["size"], 3);

    // A ciphertext: the configuration's key, and the etcd key as authenticated data,
    // with or without the prefix.
    let secret = br#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s1","namespace":"default"},"data":{"a":"Yg=="}}"#;
    put_encrypted(&f, &[("key1", KEY1)], "secrets/default/s1", secret).await;
    let (sealed, _) = f.raw("secrets/default/s1").await;
    let config = f.file("enc.yaml", &encryption_config(&[("key1", KEY1)]));
    let config = config.to_str().unwrap();
    let full = format!("{}/secrets/default/s1", f.prefix);
    for key in [full.as_str(), "secrets/default/s1"] {
        let args = [
            "--encryption-config",
            config,
            "-o",
            "json",
            "decode",
            "--etcd-key",
            key,
        ];
        let out = decode_stdin(&args, &sealed);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let read: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(read["metadata"]["name"], "s1", "{key}");
    }
    let sealed_file = f.dir.path().join("s1.bin");
    std::fs::write(&sealed_file, &sealed).unwrap();
    let sealed_file = sealed_file.to_str().unwrap();
    fails_with(
        &f,
        &["--encryption-config", config, "decode", sealed_file],
        2,
        "the value is encrypted (aesgcm:key1): pass --etcd-key KEY",
    );
    fails_with(
        &f,
        &["decode", sealed_file, "--etcd-key", "secrets/default/s1"],
        2,
        "pass --encryption-config FILE",
    );
    fails_with(
        &f,
        &[
            "--encryption-config",
            config,
            "decode",
            sealed_file,
            "--etcd-key",
            "secrets/default/other",
        ],
        2,
        "cannot decrypt the value (aesgcm:key1)",
    );
    let garbage = f.file("garbage.bin", "not an object");
    fails_with(
        &f,
        &["decode", garbage.to_str().unwrap()],
        2,
        "cannot decode the value (unknown) as a kube object",
    );
}

#[tokio::test]
async fn a_namespace_flag_reads_and_lists_one_namespace_as_kubectl_does() {
    let f = Fixture::new("cli-namespace-flag");
    f.create("configmaps/default/cm1", CM1);
    f.create(
        "configmaps/other/cm2",
        &CM1.replace("\"cm1\"", "\"cm2\"")
            .replace("\"default\"", "\"other\""),
    );
    assert_eq!(
        f.ok(&["-o", "name", "list", "cm", "-n", "other"]),
        "configmap/cm2\n"
    );
    assert!(
        f.ok(&["get", "cm/cm1", "-n", "default"])
            .contains("name: cm1")
    );
    fails_with(&f, &["get", "cm/cm1", "-n", "other"], 1, "NotFound");
    fails_with(
        &f,
        &["get", "configmaps/default/cm1", "-n", "other"],
        2,
        "drop -n",
    );
}
