//! A real kube-apiserver and apistore on one etcd 3.6: what kube-apiserver writes,
//! apistore reads, lists, watches, updates and re-encrypts, and kube-apiserver then
//! serves every object with every field intact.
//!
//! Per kube minor (1.37 and 1.31, each its own test): kube-apiserver (built from the Go
//! module proxy, see `interop/kube-apiserver`) starts on a fresh etcd with an
//! EncryptionConfiguration encrypting secrets with AES-GCM. Through its REST API the test
//! creates a namespace, a Pod with the minor's newer fields, a Deployment, a Service, a
//! Secret, a CustomResourceDefinition and one of its custom resources, and on 1.37 one
//! object of every resource kube serves by default that 1.31 did not have (the test
//! checks that list against the server's discovery). What kube serves for each object
//! is the record. Then apistore:
//!
//! 1. reads each object with the `apistore` command (`get -o json`), lists and watches
//!    it with the library: each must equal what kube serves at the version apistore
//!    read (the storage version), field for field;
//! 2. re-encrypts the secrets under a new write key (`apistore encryption rewrite
//!    secrets`, on the stored bytes): kube must serve them unchanged but for the
//!    resourceVersion;
//! 3. updates each object with the command (`get -o json`, a label added, `update -f`)
//!    and again with the library (`guaranteed_update` over `DynamicObject`, another
//!    label): kube must then serve the record with exactly those labels added and a new
//!    resourceVersion, nothing else changed (generation and managedFields are kube's to
//!    change, and apistore leaves them alone, so they must not differ either).
//!
//! Every difference found is collected, and the test fails listing them all.
//!
//! The `apistore` command is the one the workspace build made next to this test binary
//! (`target/<profile>/apistore`), or `$APISTORE_CLI_BIN`.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

// The root of a test crate resolves modules beside it, in tests/: point into its own
// directory instead.
#[path = "kube_apiserver/cli.rs"]
mod cli;
#[path = "kube_apiserver/compare.rs"]
mod compare;
#[path = "kube_apiserver/objects.rs"]
mod objects;

use std::collections::BTreeMap;
use std::time::Duration;

use apistore::{
    ApiStore, DynamicObject, KubeVersion, ListOptions, Storage, UpdateOptions, WatchEvent,
};
use apistore_interop::kube_apiserver::{KubeApiServer, KubeClient, kube_apiserver_binary};
use apistore_interop::{EncryptionFile, etcd_version, to_json};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use futures::StreamExt;
use serde_json::{Value, json};

use cli::{Cli, apistore_command};
use compare::{Findings, without_write};
use objects::{Case, SERVED_BY_1_31, cases};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_1_37_serves_every_field_apistore_read_updated_and_reencrypted() {
    run(37).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_1_31_serves_every_field_apistore_read_updated_and_reencrypted() {
    run(31).await;
}

/// The label the command adds.
const CLI_LABEL: &str = "apistore.test/command";
/// The label the library adds.
const LIBRARY_LABEL: &str = "apistore.test/library";

const KEY1: &str = "c2VjcmV0IGlzIHNlY3VyZSwgaSB0aGluayBzbyB0b28=";
const KEY2: &str = "dGhpcyBpcyBhbm90aGVyIDMyIGJ5dGUga2V5ISEhISE=";

/// Secrets under AES-GCM with `first` as the write key and `second` readable.
fn encryption(first: (&str, &str), second: (&str, &str)) -> EncryptionFile {
    EncryptionFile::new(&format!(
        "  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: {}
              secret: {}
            - name: {}
              secret: {}
      - identity: {{}}
",
        first.0, first.1, second.0, second.1
    ))
}

/// Reads, lists, watches, updates and re-encrypts every case's object with apistore,
/// checking what kube serves after each write.
async fn run(minor: u32) {
    let kube_binary = kube_apiserver_binary(minor);
    let etcd = EtcdServer::start(EtcdOptions::default())
        .unwrap_or_else(|err| panic!("cannot start etcd: {err}"));
    let endpoint = etcd.endpoint();
    eprintln!("kube 1.{minor} on {} at {endpoint}", etcd_version());
    // kube writes with key1 and reads key2; apistore writes with key2 and reads key1,
    // so its re-encryption is a rotation kube can follow.
    let kube_encryption = encryption(("key1", KEY1), ("key2", KEY2));
    let apistore_encryption = encryption(("key2", KEY2), ("key1", KEY1));
    let server = KubeApiServer::start(&kube_binary, &endpoint, kube_encryption.path()).await;
    let kube = server.client();
    let version = kube.get("/version").await;
    assert_eq!(
        version["minor"].as_str().map(|m| m.trim_end_matches('+')),
        Some(minor.to_string().as_str()),
        "{} is not kube 1.{minor}: {version}",
        kube_binary.display()
    );

    let cases = cases(minor);
    let mut findings = Findings::default();
    check_coverage(kube, minor, &cases).await;

    // kube creates everything; the CRD must be established before its resources.
    let rv_before = kube.get("/api/v1/namespaces/default").await["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    for case in &cases {
        let created = kube.create(&case.collection, &case.object).await;
        if case.resource == "customresourcedefinitions.apiextensions.k8s.io" {
            wait_established(kube, case).await;
        }
        if case.resource == "pods" && minor >= 32 {
            assert_eq!(
                created["spec"]["resources"], case.object["spec"]["resources"],
                "kube 1.{minor} did not keep the Pod's spec.resources (PodLevelResources off?): {created}"
            );
        }
    }
    let mut record = BTreeMap::new();
    for case in &cases {
        record.insert(case.key.clone(), kube.get(&case.path()).await);
    }
    let raw = etcd_client::Client::connect([endpoint.clone()], None)
        .await
        .unwrap();
    for case in &cases {
        let stored = raw_value(&raw, &case.key).await;
        assert!(
            stored.is_some(),
            "{case}: kube stored nothing at /registry/{}",
            case.key
        );
    }
    let secret = cases.iter().find(|c| c.resource == "secrets").unwrap();
    let stored = raw_value(&raw, &secret.key).await.unwrap();
    assert!(
        stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"),
        "kube stored the secret unencrypted: {:?}",
        String::from_utf8_lossy(&stored[..stored.len().min(40)])
    );

    let cli = Cli {
        binary: apistore_command(),
        endpoint: endpoint.clone(),
        kube_version: format!("1.{minor}"),
        encryption: apistore_encryption.path().to_path_buf(),
        dir: tempfile::tempdir().unwrap(),
    };
    let kube_version = KubeVersion::from_minor(minor)
        .unwrap_or_else(|| panic!("apistore knows no kube 1.{minor}"));
    let api = ApiStore::builder()
        .endpoints([endpoint.clone()])
        .kube_version(kube_version)
        .encryption_config_file(apistore_encryption.path())
        .build()
        .await
        .unwrap_or_else(|err| panic!("cannot build apistore: {err}"));

    // 1. Reads: the command's get, the library's list and watch.
    for case in &cases {
        let kube_view = &record[&case.key];
        match cli.get(&case.key).await {
            Ok(seen) => {
                compare_read(kube, &mut findings, case, "apistore get", kube_view, &seen).await
            }
            Err(err) => findings.note(case, "apistore get", err),
        }
        let store = api.dynamic_store(&case.resource).unwrap();
        let listed = store
            .list(case.list_prefix(), &ListOptions::prefix())
            .await
            .map(|list| {
                list.items
                    .iter()
                    .find(|item| item.metadata.name == case.name())
                    .map(to_json)
            });
        match listed {
            Ok(Some(seen)) => {
                compare_read(kube, &mut findings, case, "library list", kube_view, &seen).await
            }
            Ok(None) => findings.note(case, "library list", "the object is not in the list"),
            Err(err) => findings.note(case, "library list", err),
        }
        match watch_until(&api, case, &rv_before, kube_view).await {
            Ok(seen) => {
                compare_read(kube, &mut findings, case, "library watch", kube_view, &seen).await
            }
            Err(err) => findings.note(case, "library watch", err),
        }
    }

    // 2. Re-encryption of the secrets under apistore's write key, key2.
    match cli.run(&["encryption", "rewrite", "secrets"]).await {
        Ok(summary) => eprintln!("apistore encryption rewrite secrets: {}", summary.trim()),
        Err(err) => findings.note(secret, "apistore encryption rewrite", err),
    }
    let stored = raw_value(&raw, &secret.key).await.unwrap();
    if !stored.starts_with(b"k8s:enc:aesgcm:v1:key2:") {
        findings.note(
            secret,
            "apistore encryption rewrite",
            format!(
                "the stored value does not start with k8s:enc:aesgcm:v1:key2: but {:?}",
                String::from_utf8_lossy(&stored[..stored.len().min(40)])
            ),
        );
    }
    let served = kube.get(&secret.path()).await;
    check_write(
        &mut findings,
        secret,
        "apistore encryption rewrite",
        &record[&secret.key],
        &served,
        &[],
    );
    record.insert(secret.key.clone(), served);

    // 3. Updates: the command, then the library, each adding a label.
    for case in &cases {
        let before = &record[&case.key];
        if let Err(err) = cli.add_label(&case.key, CLI_LABEL).await {
            findings.note(case, "apistore update", err);
            continue;
        }
        let served = kube.get(&case.path()).await;
        check_write(
            &mut findings,
            case,
            "apistore update",
            before,
            &served,
            &[CLI_LABEL],
        );
        let updated = api
            .dynamic_store(&case.resource)
            .unwrap()
            .guaranteed_update(
                &case.key,
                UpdateOptions::default(),
                |mut object: DynamicObject, _| {
                    object
                        .metadata
                        .labels
                        .insert(LIBRARY_LABEL.into(), "updated".into());
                    Ok(object.into())
                },
            )
            .await;
        if let Err(err) = updated {
            findings.note(case, "library guaranteed_update", err);
            continue;
        }
        let served_again = kube.get(&case.path()).await;
        check_write(
            &mut findings,
            case,
            "library guaranteed_update",
            &served,
            &served_again,
            &[LIBRARY_LABEL],
        );
        record.insert(case.key.clone(), served_again);
    }

    // Finally kube lists every collection: a value it could not decode fails the list.
    for case in &cases {
        if let Err(err) = kube.request("GET", &case.collection, None).await {
            findings.note(case, "kube list", err);
        }
    }

    assert!(
        findings.0.is_empty(),
        "kube 1.{minor}: {} differences between kube-apiserver and apistore:\n  {}",
        findings.0.len(),
        findings.0.join("\n  ")
    );
    eprintln!(
        "kube 1.{minor}: {} objects read, listed, watched, updated twice; secrets re-encrypted; \
         kube-apiserver serves every field",
        cases.len()
    );
}

/// Compares what apistore read with what kube serves, at the version apistore read
/// (the storage version): kube's record when that is the version kube serves by
/// default, else kube's answer at that version. When kube no longer serves the stored
/// version (CustomResourceDefinitions are stored as apiextensions.k8s.io/v1beta1, unserved
/// since 1.22), only `metadata` can be compared, and a note says so; the writes below
/// still check every field, through kube's own served version.
async fn compare_read(
    kube: &KubeClient,
    findings: &mut Findings,
    case: &Case,
    step: &str,
    record: &Value,
    seen: &Value,
) {
    let stored_version = seen["apiVersion"].as_str().unwrap_or_default();
    if seen["apiVersion"] == record["apiVersion"] {
        findings.compare(case, step, record, seen);
        return;
    }
    match kube
        .request("GET", &case.path_at(stored_version), None)
        .await
    {
        Ok(at_stored) => findings.compare(
            case,
            &format!("{step} (at {stored_version})"),
            &at_stored,
            seen,
        ),
        Err(err) if err.code == 404 => {
            eprintln!(
                "note: {case}: {step}: stored as {stored_version}, which kube does not serve \
                 (it serves {}): metadata compared only",
                record["apiVersion"]
            );
            findings.compare(
                case,
                &format!("{step} (metadata; stored as {stored_version})"),
                &json!({"metadata": record["metadata"]}),
                &json!({"metadata": seen["metadata"]}),
            );
        }
        Err(err) => findings.note(case, step, format!("kube at {stored_version}: {err}")),
    }
}

/// What kube serves after a write by apistore that added `labels`: `before` with
/// exactly those labels and a new resourceVersion.
fn check_write(
    findings: &mut Findings,
    case: &Case,
    step: &str,
    before: &Value,
    served: &Value,
    labels: &[&str],
) {
    for label in labels {
        if served["metadata"]["labels"][label] != "updated" {
            findings.note(case, step, format!("kube does not serve the label {label}"));
        }
    }
    if served["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"] {
        findings.note(
            case,
            step,
            "the resourceVersion did not change: nothing was written",
        );
    }
    findings.compare(
        case,
        &format!("kube after {step}"),
        &without_write(before, labels),
        &without_write(served, labels),
    );
}

/// The object as apistore's watch of its key from `resource_version` delivers it,
/// once it reaches the resourceVersion kube served.
async fn watch_until(
    api: &ApiStore,
    case: &Case,
    resource_version: &str,
    kube_view: &Value,
) -> Result<Value, String> {
    let target = kube_view["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    let store = api.dynamic_store(&case.resource).unwrap();
    let options = ListOptions {
        resource_version: resource_version.to_owned(),
        ..ListOptions::default()
    };
    let mut stream = store
        .watch(&case.key, &options)
        .await
        .map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut last = None;
    while let Ok(Some(event)) = tokio::time::timeout_at(deadline, stream.next()).await {
        match event {
            WatchEvent::Error(status) => {
                return Err(format!(
                    "an error event: {}",
                    serde_json::to_string(&status).unwrap_or_default()
                ));
            }
            other => {
                if let Some(object) = other.object() {
                    let seen = to_json(object);
                    if seen["metadata"]["resourceVersion"] == target {
                        return Ok(seen);
                    }
                    last = Some(seen["metadata"]["resourceVersion"].clone());
                }
            }
        }
    }
    Err(format!(
        "no event with resourceVersion {target} within 10 s (last seen: {last:?})"
    ))
}

/// Waits until kube says the CRD is established.
async fn wait_established(kube: &KubeClient, crd: &Case) {
    // A condition polled, not a time waited: 60 s bounds it for a loaded machine.
    for _ in 0..600 {
        let served = kube.get(&crd.path()).await;
        let established = served["status"]["conditions"]
            .as_array()
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
        if established {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{crd} was not established within 60 s");
}

/// The stored bytes under `/registry/<key>`.
async fn raw_value(raw: &etcd_client::Client, key: &str) -> Option<Vec<u8>> {
    let mut raw = raw.clone();
    let response = raw
        .get(format!("/registry/{key}"), None)
        .await
        .unwrap_or_else(|err| panic!("raw get {key}: {err}"));
    response.kvs().first().map(|kv| kv.value().to_vec())
}

/// Every resource this kube serves by default and stores that 1.31 did not have must
/// have a case: a resource added in a later minor is tested the day it appears.
///
/// On 1.31 itself, the server's list must be [`SERVED_BY_1_31`].
async fn check_coverage(kube: &KubeClient, minor: u32, cases: &[Case]) {
    let served = stored_resources(kube).await;
    if minor == 31 {
        assert_eq!(served, SERVED_BY_1_31, "kube 1.31's stored resources");
        return;
    }
    let covered: Vec<String> = cases
        .iter()
        .map(|case| {
            let (plural, group) = case
                .resource
                .split_once('.')
                .unwrap_or((&case.resource, ""));
            format!("{group}/{plural}")
        })
        .collect();
    let missing: Vec<&String> = served
        .iter()
        .filter(|resource| !SERVED_BY_1_31.contains(&resource.as_str()))
        .filter(|resource| !covered.contains(resource))
        .collect();
    assert!(
        missing.is_empty(),
        "kube serves resources 1.31 did not have and this test creates none of: {missing:?}"
    );
}

/// `<group>/<resource>` for every resource the server's discovery lists with `create`
/// (so stored), without subresources, at the group's preferred version.
async fn stored_resources(kube: &KubeClient) -> Vec<String> {
    let mut versions = vec![(String::new(), "/api/v1".to_owned())];
    let groups = kube.get("/apis").await;
    for group in groups["groups"].as_array().into_iter().flatten() {
        let name = group["name"].as_str().unwrap_or_default().to_owned();
        for version in group["versions"].as_array().into_iter().flatten() {
            let gv = version["groupVersion"].as_str().unwrap_or_default();
            versions.push((name.clone(), format!("/apis/{gv}")));
        }
    }
    let mut resources = Vec::new();
    for (group, path) in versions {
        let list = kube.get(&path).await;
        for resource in list["resources"].as_array().into_iter().flatten() {
            let name = resource["name"].as_str().unwrap_or_default();
            let creatable = resource["verbs"]
                .as_array()
                .is_some_and(|verbs| verbs.iter().any(|v| v == "create"));
            let listable = resource["verbs"]
                .as_array()
                .is_some_and(|verbs| verbs.iter().any(|v| v == "list"));
            if !name.contains('/') && creatable && listable {
                let entry = format!("{group}/{name}");
                if !resources.contains(&entry) {
                    resources.push(entry);
                }
            }
        }
    }
    resources.sort();
    resources
}
