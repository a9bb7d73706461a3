//! Every error names its fix, black-box against a real etcd: an undecodable value
//! (`--force`, `--skip-undecodable`), an encrypted value without its key (which key,
//! which file, the rewrite), a key whose secret does not open the value, a read, list
//! or watch at a compacted revision (etcd's compacted revision, and what to read
//! instead), a watch that ends on an unreadable value (its key named once), and
//! `--resource` with a name kube does not know. Each message keeps the store's own
//! words first.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::ffi::OsString;

use common::*;

/// The one line of stderr of a command that must fail with `code`.
fn error_line(f: &Fixture, args: &[&str], code: i32) -> String {
    let out = f.run(args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "apistore {args:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "apistore {args:?}: {stderr}");
    stderr
}

fn says_all(line: &str, parts: &[&str]) {
    for part in parts {
        assert!(line.contains(part), "{part:?} missing from: {line}");
    }
}

#[tokio::test]
async fn an_undecodable_value_names_the_flag_that_goes_past_or_removes_it() {
    let f = Fixture::new("cli-fix-undecodable");
    f.create("configmaps/default/cm1", CM1);
    f.put_raw("configmaps/default/bad", b"\x00\x01 not an object".to_vec())
        .await;
    let removes = "`apistore delete configmaps/default/bad --force` removes it";

    let get = error_line(&f, &["get", "configmaps/default/bad"], 1);
    says_all(
        &get,
        &[
            "InternalError: unable to decode value",
            "cannot be decoded",
            removes,
        ],
    );
    // kube 1.37 lists go past unreadable values and name them all at the end.
    f.put_raw(
        "configmaps/default/bad2",
        b"\x00\x02 not one either".to_vec(),
    )
    .await;
    let list = error_line(&f, &["list", "configmaps"], 1);
    says_all(
        &list,
        &[
            "StorageReadError: failed to read one or more configmaps from the storage",
            "object not decodable",
            "(and 1 more)",
            "--skip-undecodable",
            removes,
            "1 more cannot be read, the same way: configmaps/default/bad2",
        ],
    );
    // kube 1.31 lists stop at the first, with the store's internal error.
    let list = error_line(&f, &["--kube-version", "1.31", "list", "configmaps"], 1);
    says_all(
        &list,
        &[
            "InternalError: unable to decode value",
            "--skip-undecodable",
            removes,
        ],
    );
    f.ok(&["delete", "configmaps/default/bad2", "--force"]);
    let delete = error_line(&f, &["delete", "configmaps/default/bad"], 1);
    says_all(&delete, &["unable to decode value", removes]);
    // The fixes named work.
    f.ok(&["list", "configmaps", "--skip-undecodable"]);
    f.ok(&["delete", "configmaps/default/bad", "--force"]);
    f.ok(&["list", "configmaps"]);
}

#[tokio::test]
async fn an_encrypted_value_names_the_key_it_needs_and_the_file_that_lacks_it() {
    let mut f = Fixture::new("cli-fix-encrypted");
    put_encrypted(&f, &[("key1", KEY1)], "secrets/default/s1", b"{}").await;

    // No configuration at all: pass one (a command-line mistake, exit 2).
    let none = error_line(&f, &["get", "secrets/default/s1"], 2);
    says_all(&none, &["aesgcm:key1", "--encryption-config"]);

    // After a rotation that dropped the old key: which key, which file, what it has.
    let rotated = f.file("rotated.yaml", &encryption_config(&[("key2", KEY2)]));
    f.global = vec![OsString::from("--encryption-config"), rotated.into()];
    for (args, error) in [
        (
            &["get", "secrets/default/s1"][..],
            "InternalError: unable to transform value",
        ),
        (
            &["list", "secrets"][..],
            "StorageReadError: failed to read one or more secrets from the storage",
        ),
    ] {
        let line = error_line(&f, args, 1);
        says_all(
            &line,
            &[
                error,
                "secrets/default/s1 is encrypted with aesgcm:key1",
                "rotated.yaml does not have for secrets (it has aesgcm:key2)",
                "encryption rewrite secrets",
            ],
        );
    }
    let delete = error_line(&f, &["delete", "secrets/default/s1"], 1);
    says_all(&delete, &["aesgcm:key1", "--force` deletes it unread"]);

    // A key of the right name with another secret: the file has it, and it does not
    // open the value.
    let wrong = f.file("wrong.yaml", &encryption_config(&[("key1", KEY2)]));
    f.global = vec![OsString::from("--encryption-config"), wrong.into()];
    let line = error_line(&f, &["get", "secrets/default/s1"], 1);
    says_all(
        &line,
        &[
            "encrypted with aesgcm:key1, which",
            "wrong.yaml has, but it does not decrypt the value",
        ],
    );

    // With both keys, the value reads again, as the fix said.
    let both = f.file(
        "both.yaml",
        &encryption_config(&[("key2", KEY2), ("key1", KEY1)]),
    );
    f.global = vec![OsString::from("--encryption-config"), both.into()];
    f.ok(&["get", "secrets/default/s1"]);
}

#[tokio::test]
async fn reads_at_a_compacted_revision_name_etcds_compacted_revision() {
    let (_etcd, f) = Fixture::own_etcd("cli-fix-compacted");
    f.create("configmaps/default/cm1", CM1);
    let first = f.raw("configmaps/default/cm1").await.1;
    // Two updates: a watch from `first` starts at the revision after it, which must be
    // compacted too.
    for version in ["v2", "v3"] {
        let updated = CM1.replace("v1\"}", &format!("{version}\"}}"));
        let file = f.file(&format!("cm1-{version}.json"), &updated);
        f.ok(&[
            "update",
            "configmaps/default/cm1",
            "-f",
            file.to_str().unwrap(),
        ]);
    }
    let compacted = f.raw("configmaps/default/cm1").await.1;
    f.client().await.compact(compacted, None).await.unwrap();
    let up_to = format!("etcd has compacted its history up to revision {compacted}");
    let rv = first.to_string();

    let get = error_line(
        &f,
        &["get", "configmaps/default/cm1", "--rv", &rv, "--exact"],
        1,
    );
    says_all(
        &get,
        &[
            "Expired: The resourceVersion for the provided list is too old",
            &up_to,
            "without --exact",
        ],
    );
    let list = error_line(
        &f,
        &["list", "configmaps", "--rv", &rv, "--rv-match", "exact"],
        1,
    );
    says_all(&list, &["Expired", &up_to, "without --rv"]);

    let out = f.run(&["watch", "configmaps", "--rv", &rv, "--timeout", "10"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    says_all(
        &stderr,
        &[
            "Expired: The resourceVersion for the provided watch is too old",
            &up_to,
            "--from-now",
        ],
    );
    // The ERROR event itself is printed as kube sends it.
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"code\":410"));
}

#[tokio::test]
async fn a_watch_ending_on_an_unreadable_value_names_its_key_once_and_the_flag() {
    let f = Fixture::new("cli-fix-watch");
    f.put_raw("configmaps/default/bad", b"\x00\x01 not an object".to_vec())
        .await;
    let out = f.run(&["watch", "configmaps", "--timeout", "10", "-o", "table"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    says_all(
        &stderr,
        &[
            "InternalError",
            "unable to decode value",
            "--skip-undecodable",
        ],
    );
    assert_eq!(stderr.matches("(key ").count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("(key \"{}/configmaps/default/bad\")", f.prefix)));
    // The table has its header, then the ERROR row.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0], "TYPE\tNAME\tNAMESPACE\tRESOURCEVERSION\tKIND",
        "{stdout}"
    );
    assert!(lines[1].starts_with("ERROR\t"), "{stdout}");
}

#[tokio::test]
async fn an_unknown_resource_flag_names_the_closest_resource() {
    let f = Fixture::new("cli-fix-resource");
    let line = error_line(
        &f,
        &["--resource", "confgmaps", "get", "configmaps/default/cm1"],
        2,
    );
    says_all(&line, &["--resource confgmaps", "configmaps"]);
    // Short names and singulars are resolved, as kubectl resolves them.
    f.create("configmaps/default/cm1", CM1);
    f.ok(&["--resource", "cm", "get", "configmaps/default/cm1"]);
}
