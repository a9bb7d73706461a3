//! Offline forensics and recovery, black-box, against a real etcd of each test's own
//! (the snapshot is saved from it, and compaction must not touch other tests' data):
//! objects written through the command (encrypted, protobuf and JSON), updated,
//! deleted and compacted; a snapshot saved through etcd's maintenance API; then
//! `--snapshot` reads compared object by object with what the command and etcd
//! answered online before the save, `history`, `analyze`, a restore round trip, and
//! damaged files.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use common::*;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

fn cm(name: &str, generation: &str, app: &str) -> String {
    cm_in("default", name, generation, app)
}

fn cm_in(namespace: &str, name: &str, generation: &str, app: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{namespace}","uid":"uid-{name}","creationTimestamp":"2026-01-0{generation}T00:00:00Z","labels":{{"app":"{app}"}},"managedFields":[{{"manager":"writer-{generation}","operation":"Update","apiVersion":"v1","time":"2026-01-0{generation}T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:data":{{}}}}}}]}},"data":{{"generation":"{generation}"}}}}"#
    )
}

fn secret(name: &str, password: &str) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{name}","namespace":"default","uid":"uid-{name}"}},"type":"Opaque","data":{{"password":"{password}"}}}}"#
    )
}

/// `text` written at `key` by `update` (the key must exist).
fn update(f: &Fixture, key: &str, text: &str) {
    let file = f.file(&format!("{}.update.json", key.replace('/', "_")), text);
    f.ok(&["update", key, "-f", file.to_str().unwrap()]);
}

/// Saves a snapshot of `f`'s etcd through the maintenance API (etcd appends its
/// sha256, as `etcdctl snapshot save` writes it).
async fn save_snapshot(f: &Fixture, name: &str) -> PathBuf {
    let mut client = f.client().await;
    let mut stream = client.snapshot().await.unwrap();
    let mut bytes = Vec::new();
    while let Some(message) = stream.message().await.unwrap() {
        bytes.extend_from_slice(message.blob());
    }
    let path = f.dir.path().join(name);
    std::fs::write(&path, &bytes).unwrap();
    path
}

/// `args` run with `--snapshot FILE` in place of etcd.
fn offline(f: &Fixture, snapshot: &Path, args: &[&str]) -> String {
    let mut with = vec!["--snapshot", snapshot.to_str().unwrap()];
    with.extend_from_slice(args);
    f.ok(&with)
}

struct Written {
    snapshot: PathBuf,
    compacted: i64,
    /// The command's `-o json` answers before the snapshot, per key.
    online: Vec<(String, Value)>,
    /// cm1's revisions, oldest first.
    cm1_revisions: Vec<i64>,
}

/// Writes configmaps (protobuf), secrets (AES-GCM) and widgets (JSON); updates,
/// deletes, compacts; saves a snapshot.
async fn write_and_save(f: &mut Fixture) -> Written {
    let config = f.file("enc.yaml", &encryption_config(&[("key1", KEY1)]));
    f.global = vec![
        OsString::from("--encryption-config"),
        config.into_os_string(),
    ];
    let mut cm1_revisions = Vec::new();
    f.create("configmaps/default/cm1", &cm("cm1", "1", "web"));
    cm1_revisions.push(f.raw("configmaps/default/cm1").await.1);
    f.create("configmaps/default/cm2", &cm("cm2", "1", "db"));
    f.create("configmaps/default/gone", &cm("gone", "1", "web"));
    f.create("secrets/default/s1", &secret("s1", "c2VjcmV0MQ=="));
    f.create("example.com/widgets/default/w1", WIDGET);
    update(f, "configmaps/default/cm1", &cm("cm1", "2", "web"));
    cm1_revisions.push(f.raw("configmaps/default/cm1").await.1);
    f.ok(&["delete", "configmaps/default/gone"]);
    let compacted = f.raw("configmaps/default/cm1").await.1;
    f.client()
        .await
        .compact(
            compacted,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        )
        .await
        .unwrap();
    update(f, "configmaps/default/cm1", &cm("cm1", "3", "web"));
    cm1_revisions.push(f.raw("configmaps/default/cm1").await.1);
    update(f, "secrets/default/s1", &secret("s1", "c2VjcmV0Mg=="));
    f.create("configmaps/other/cm3", &cm_in("other", "cm3", "1", "web"));
    let mut online = Vec::new();
    for key in [
        "configmaps/default/cm1",
        "configmaps/default/cm2",
        "configmaps/other/cm3",
        "secrets/default/s1",
        "example.com/widgets/default/w1",
    ] {
        online.push((key.to_owned(), json(&f.ok(&["-o", "json", "get", key]))));
    }
    let snapshot = save_snapshot(f, "backup.db").await;
    Written {
        snapshot,
        compacted,
        online,
        cm1_revisions,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn snapshot_reads_match_what_etcd_answered() {
    let (_etcd, mut f) = Fixture::own_etcd("snapshot-reads");
    let w = write_and_save(&mut f).await;
    let s = &w.snapshot;

    // Object by object: get, as online.
    for (key, online) in &w.online {
        let read = json(&offline(&f, s, &["-o", "json", "get", key]));
        assert_eq!(&read, online, "{key}");
    }
    // The stored bytes, as etcd holds them.
    for (key, _) in &w.online {
        let (stored, _) = f.raw(key).await;
        let raw = offline(&f, s, &["get", key, "--raw"]);
        // Printable UTF-8 (a JSON value) as it is, anything else escaped.
        let shown = match std::str::from_utf8(&stored) {
            Ok(text)
                if !text
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t') =>
            {
                format!("{}\n", text.trim_end_matches('\n'))
            }
            _ => format!("{}\n", stored.escape_ascii()),
        };
        assert_eq!(raw, shown, "{key}");
    }
    let secret = f.raw("secrets/default/s1").await.0;
    assert!(starts_with(&secret, b"k8s:enc:aesgcm:v1:key1:"));
    let cm = f.raw("configmaps/default/cm1").await.0;
    assert!(starts_with(&cm, b"k8s\0"), "configmaps are protobuf");

    // A past revision, as online with --exact.
    let at = w.cm1_revisions[1].to_string();
    let past = json(&offline(
        &f,
        s,
        &["-o", "json", "get", "configmaps/default/cm1", "--rv", &at],
    ));
    let online_past = json(&f.ok(&[
        "-o",
        "json",
        "get",
        "configmaps/default/cm1",
        "--rv",
        &at,
        "--exact",
    ]));
    assert_eq!(past, online_past);
    assert_eq!(past["data"]["generation"], "2");

    // Below the compaction: gone, exit 1, saying so.
    let before = (w.compacted - 1).to_string();
    let mut args = vec!["--snapshot", s.to_str().unwrap()];
    args.extend(["get", "configmaps/default/cm1", "--rv", &before]);
    fails_with(&f, &args, 1, "compacted");
    // A deleted object is not found.
    let mut args = vec!["--snapshot", s.to_str().unwrap()];
    args.extend(["get", "configmaps/default/gone"]);
    fails_with(&f, &args, 1, "NotFound");

    // keys, count and list with selectors and paging, as online.
    for args in [
        vec!["-o", "json", "keys"],
        vec!["-o", "json", "keys", "configmaps"],
        vec!["count", "configmaps"],
        vec!["count", "configmaps/default"],
        vec!["-o", "json", "list", "configmaps"],
        vec!["-o", "json", "list", "configmaps", "-l", "app=web"],
        vec![
            "-o",
            "json",
            "list",
            "configmaps",
            "--field-selector",
            "metadata.namespace=other",
        ],
        vec!["-o", "json", "list", "configmaps", "--limit", "1", "--all"],
    ] {
        assert_eq!(offline(&f, s, &args), f.ok(&args), "{args:?}");
    }
    let page = json(&offline(
        &f,
        s,
        &["-o", "json", "list", "configmaps", "--limit", "1"],
    ));
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    assert!(!page["metadata"]["continue"].as_str().unwrap().is_empty());

    // Without the key, an encrypted value says what to pass.
    let plain = Fixture {
        endpoint: f.endpoint.clone(),
        prefix: f.prefix.clone(),
        dir: tempfile::tempdir().unwrap(),
        global: Vec::new(),
    };
    let mut args = vec!["--snapshot", s.to_str().unwrap()];
    args.extend(["get", "secrets/default/s1"]);
    fails_with(&plain, &args, 2, "--encryption-config");

    // Writes are refused.
    let mut args = vec!["--snapshot", s.to_str().unwrap()];
    args.extend(["delete", "configmaps/default/cm1"]);
    fails_with(&f, &args, 2, "read-only");
}

#[tokio::test(flavor = "multi_thread")]
async fn history_online_and_offline() {
    let (_etcd, mut f) = Fixture::own_etcd("snapshot-history");
    let w = write_and_save(&mut f).await;
    let s = &w.snapshot;

    let offline_history = json(&offline(
        &f,
        s,
        &["-o", "json", "history", "configmaps/default/cm1"],
    ));
    let online_history = json(&f.ok(&["-o", "json", "history", "configmaps/default/cm1"]));
    let revisions = |history: &Value| -> Vec<(i64, String)> {
        history
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["revision"].as_i64().unwrap(),
                    e["type"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    };
    // Compacted at cm1's second revision: that one and the third remain.
    let want = vec![
        (w.cm1_revisions[1], "MODIFIED".to_owned()),
        (w.cm1_revisions[2], "MODIFIED".to_owned()),
    ];
    assert_eq!(revisions(&offline_history), want);
    assert_eq!(revisions(&online_history), want);
    assert_eq!(offline_history, online_history);
    let last = &offline_history[1];
    assert_eq!(last["object"]["data"]["generation"], "3");
    assert_eq!(last["manager"], "writer-3");
    assert_eq!(last["operation"], "Update");
    let diff = last["diff"].as_str().unwrap();
    assert!(
        diff.contains("-  generation: '2'") || diff.contains("-  generation: \"2\""),
        "{diff}"
    );
    assert!(!diff.contains("resourceVersion"), "{diff}");

    // The default output: where history ends, then each revision with its diff.
    let text = offline(&f, s, &["history", "configmaps/default/cm1"]);
    assert!(text.starts_with("# history before revision"), "{text}");
    assert!(
        text.contains(&format!(
            "revision {} Modified by writer-3 (Update)",
            w.cm1_revisions[2]
        )),
        "{text}"
    );
    assert!(text.contains("\n@@ -"), "{text}");

    // A deleted object: its creation and deletion, from the snapshot.
    let gone = json(&offline(
        &f,
        s,
        &["-o", "json", "history", "configmaps/default/gone"],
    ));
    let kinds: Vec<&str> = gone
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["ADDED", "DELETED"]);
    assert_eq!(gone[1]["object"]["metadata"]["name"], "gone");

    // An encrypted object reads through its key.
    let s1 = json(&offline(
        &f,
        s,
        &["-o", "json", "history", "secrets/default/s1"],
    ));
    let last = s1.as_array().unwrap().last().unwrap();
    assert_eq!(last["object"]["data"]["password"], "c2VjcmV0Mg==");
}

#[tokio::test(flavor = "multi_thread")]
async fn analyze_counts_bytes_encodings_and_flags_plaintext_secrets() {
    let (_etcd, mut f) = Fixture::own_etcd("snapshot-analyze");
    let w = write_and_save(&mut f).await;
    // A secret written in plaintext behind the configuration's back.
    f.put_raw(
        "secrets/default/leaked",
        secret("leaked", "cGxhaW4=").into_bytes(),
    )
    .await;
    let s = save_snapshot(&f, "with-leak.db").await;
    let _ = w;

    let report = json(&offline(&f, &s, &["-o", "json", "analyze"]));
    let row = |resource: &str| -> Value {
        report["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == resource)
            .cloned()
            .unwrap_or_else(|| panic!("no {resource} in {report}"))
    };
    let cms = row("configmaps");
    assert_eq!(cms["count"], 3);
    assert_eq!(cms["encodings"]["protobuf"], 3);
    assert_eq!(cms["encryption"]["identity"], 3);
    assert!(cms["revisionBytes"].as_u64().unwrap() > cms["bytes"].as_u64().unwrap());
    assert!(cms["managedFieldsShare"].as_f64().unwrap() > 0.0);
    let secrets = row("secrets");
    assert_eq!(secrets["count"], 2);
    assert_eq!(secrets["encryption"]["aesgcm:key1"], 1);
    assert_eq!(secrets["encryption"]["identity"], 1);
    assert_eq!(secrets["plaintextUnderEncryption"], 1);
    assert_eq!(row("widgets.example.com")["encodings"]["json"], 1);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(
        findings[0]
            .as_str()
            .unwrap()
            .contains("secrets/default/leaked")
    );
    assert!(!report["largest"].as_array().unwrap().is_empty());

    // Online: the same counts, without the bytes of past revisions.
    let online = json(&f.ok(&["-o", "json", "analyze"]));
    assert_eq!(online["findings"], report["findings"]);
    let online_cms = online["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "configmaps")
        .cloned()
        .unwrap();
    assert_eq!(online_cms["count"], 3);
    assert_eq!(online_cms["bytes"], cms["bytes"]);
    assert_eq!(online_cms["revisionBytes"], Value::Null);

    // By namespace, and the table.
    let by_ns = json(&offline(
        &f,
        &s,
        &["-o", "json", "analyze", "configmaps", "--by", "namespace"],
    ));
    let namespaces: Vec<&str> = by_ns["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["namespace"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["default", "other"]);
    let table = offline(&f, &s, &["analyze"]);
    assert!(table.starts_with("RESOURCE"), "{table}");
    assert!(table.contains("FINDING:"), "{table}");
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_round_trip_with_the_current_write_key() {
    let (_etcd, mut f) = Fixture::own_etcd("snapshot-restore");
    let w = write_and_save(&mut f).await;
    let s = w.snapshot.to_str().unwrap().to_owned();
    let before: Vec<(String, Value)> = w.online.clone();

    // The cluster rotated its keys since the backup: key2 writes, key1 still reads.
    let rotated = f.file(
        "rotated.yaml",
        &encryption_config(&[("key2", KEY2), ("key1", KEY1)]),
    );
    f.global = vec![
        OsString::from("--encryption-config"),
        rotated.into_os_string(),
    ];
    f.ok(&["delete", "secrets/default/s1"]);
    f.ok(&["delete", "configmaps/default/cm1"]);
    f.ok(&["delete", "configmaps/default/cm2"]);

    // A dry run writes nothing.
    let dry = f.ok(&[
        "restore",
        "secrets/default/s1",
        "configmaps/default",
        "--from-snapshot",
        &s,
        "--dry-run",
    ]);
    assert!(dry.contains("would restore secrets/default/s1"), "{dry}");
    assert!(
        dry.contains("3 would be restored, 0 would be skipped, 0 failed"),
        "{dry}"
    );
    assert!(f.stored("secrets/default/s1").await.is_none());

    let out = f.ok(&[
        "restore",
        "secrets/default/s1",
        "configmaps/default",
        "--from-snapshot",
        &s,
    ]);
    assert!(out.contains("3 restored, 0 skipped, 0 failed"), "{out}");
    for (key, was) in &before {
        let mut now = json(&f.ok(&["-o", "json", "get", key]));
        let mut was = was.clone();
        // Everything kept but the resourceVersion, which is the restore's write.
        for object in [&mut now, &mut was] {
            object["metadata"]
                .as_object_mut()
                .unwrap()
                .remove("resourceVersion");
        }
        assert_eq!(now, was, "{key}");
    }
    let (stored, _) = f.raw("secrets/default/s1").await;
    assert!(
        starts_with(&stored, b"k8s:enc:aesgcm:v1:key2:"),
        "restored under the current write key"
    );

    // Create-only: an existing object is AlreadyExists, and --overwrite replaces it.
    update(&f, "configmaps/default/cm2", &cm("cm2", "5", "db"));
    let out = f.run(&["restore", "configmaps/default/cm2", "--from-snapshot", &s]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with("AlreadyExists:"), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("skipped configmaps/default/cm2"));
    f.ok(&[
        "restore",
        "configmaps/default/cm2",
        "--from-snapshot",
        &s,
        "--overwrite",
    ]);
    let cm2 = json(&f.ok(&["-o", "json", "get", "configmaps/default/cm2"]));
    assert_eq!(cm2["data"]["generation"], "1");

    // A key the snapshot does not hold fails, and nothing else is written.
    f.ok(&["delete", "configmaps/other/cm3"]);
    let out = f.run(&[
        "restore",
        "configmaps/other/cm3",
        "configmaps/nowhere/x",
        "--from-snapshot",
        &s,
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        f.stored("configmaps/other/cm3").await.is_none(),
        "nothing half-done"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn damaged_files_are_clear_errors() {
    let (_etcd, mut f) = Fixture::own_etcd("snapshot-damage");
    let w = write_and_save(&mut f).await;
    let bytes = std::fs::read(&w.snapshot).unwrap();

    let truncated = f.dir.path().join("truncated.db");
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let not_bolt = f.file("not-bolt.db", "this is not a bbolt file, just text\n");
    let empty = f.file("empty.db", "");
    let mut corrupt = bytes.clone();
    // Past the two meta pages and the freelist: the B+tree pages.
    let start = 4 * 4096;
    for byte in &mut corrupt[start..start + 4096] {
        *byte = 0xa5;
    }
    let corrupt_path = f.dir.path().join("corrupt.db");
    std::fs::write(&corrupt_path, &corrupt).unwrap();
    let missing = f.dir.path().join("missing.db");

    for (path, says) in [
        (&truncated, "truncated.db"),
        (&not_bolt, "not-bolt.db"),
        (&empty, "empty.db"),
        (&missing, "missing.db"),
    ] {
        let args = ["--snapshot", path.to_str().unwrap(), "count", "configmaps"];
        fails_with(&f, &args, 1, says);
        let args = [
            "restore",
            "configmaps/default/cm1",
            "--from-snapshot",
            path.to_str().unwrap(),
        ];
        fails_with(&f, &args, 1, says);
    }
    // A damaged page is an error or, if the damage missed what is read, an answer; never
    // a panic or a hang.
    let out = f.run(&[
        "--snapshot",
        corrupt_path.to_str().unwrap(),
        "-o",
        "json",
        "list",
        "configmaps",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{stderr}");
    if out.status.code() == Some(1) {
        assert!(stderr.contains("corrupt.db"), "{stderr}");
    }
    // A restore from a damaged file writes nothing.
    f.ok(&["delete", "configmaps/default/cm2"]);
    let out = f.run(&[
        "restore",
        "configmaps/default",
        "--from-snapshot",
        truncated.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(f.stored("configmaps/default/cm2").await.is_none());
}

/// A restore never writes an object without fields its kube version's schema does not
/// know: a kube 1.37 Pod (pod-level resources) is refused when restored as kube 1.31,
/// and restored whole as 1.37.
#[tokio::test(flavor = "multi_thread")]
async fn a_restore_keeps_or_refuses_fields_of_a_newer_kube() {
    use apistore::{KubeProtobuf, KubeVersion};
    let (_etcd, f) = Fixture::own_etcd("snapshot-restore-newer");
    let kube_137 = KubeProtobuf::for_version(KubeVersion::V1_37);
    let pod = kube_137
        .encode_value(&serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p1", "namespace": "demo", "uid": "u-1",
                         "creationTimestamp": "2026-11-30T10:00:00Z"},
            "spec": {
                "containers": [{"name": "app", "image": "nginx"}],
                "resources": {"limits": {"cpu": "2"}},
            },
        }))
        .unwrap();
    f.put_raw("pods/demo/p1", pod).await;
    let snapshot = save_snapshot(&f, "newer.db").await;
    let s = snapshot.to_string_lossy().into_owned();
    f.ok(&["delete", "pods/demo/p1"]);

    let out = f.run(&[
        "--kube-version",
        "1.31",
        "restore",
        "pods/demo/p1",
        "--from-snapshot",
        &s,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("restoring it would drop them"), "{said}");
    assert!(said.contains("spec.resources"), "{said}");
    assert!(f.stored("pods/demo/p1").await.is_none(), "nothing written");

    let out = f.run(&["restore", "pods/demo/p1", "--from-snapshot", &s]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (stored, _) = f.stored("pods/demo/p1").await.unwrap();
    let restored: Value =
        serde_json::from_slice(&kube_137.decode_to_json(&stored).unwrap()).unwrap();
    assert_eq!(restored["spec"]["resources"]["limits"]["cpu"], "2");
}
