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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use apistore::{
    ApiStore, DynamicObject, KubeVersion, ListOptions, Storage, UpdateOptions, WatchEvent,
};
use apistore_interop::kube_apiserver::{KubeApiServer, KubeClient, kube_apiserver_binary};
use apistore_interop::{EncryptionFile, etcd_version, to_json};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures::StreamExt;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_1_37_serves_every_field_apistore_read_updated_and_reencrypted() {
    run(37).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_1_31_serves_every_field_apistore_read_updated_and_reencrypted() {
    run(31).await;
}

const NAMESPACE: &str = "interop";
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

/// One object: where kube serves it, where apistore finds it, what it is.
#[derive(Debug, Clone)]
struct Case {
    /// The REST collection (`/api/v1/namespaces/interop/pods`).
    collection: String,
    /// apistore's resource (`pods`, `deployments.apps`, `deviceclasses.resource.k8s.io`).
    resource: String,
    /// apistore's key, relative to `/registry` (`pods/interop/p1`).
    key: String,
    /// The object to create.
    object: Value,
}

impl Case {
    /// `api_version` and `plural` place it in the REST API; `key_prefix` is kube's
    /// registry prefix for it (`services/specs`).
    fn new(plural: &str, key_prefix: &str, namespaced: bool, object: Value) -> Self {
        let api_version = object["apiVersion"].as_str().unwrap().to_owned();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let (root, group) = match api_version.split_once('/') {
            Some((group, _)) => (format!("/apis/{api_version}"), group.to_owned()),
            None => (format!("/api/{api_version}"), String::new()),
        };
        let (collection, key) = if namespaced {
            (
                format!("{root}/namespaces/{NAMESPACE}/{plural}"),
                format!("{key_prefix}/{NAMESPACE}/{name}"),
            )
        } else {
            (format!("{root}/{plural}"), format!("{key_prefix}/{name}"))
        };
        let resource = if group.is_empty() {
            plural.to_owned()
        } else {
            format!("{plural}.{group}")
        };
        Self {
            collection,
            resource,
            key,
            object,
        }
    }

    fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap()
    }

    /// Where kube serves the object.
    fn path(&self) -> String {
        format!("{}/{}", self.collection, self.name())
    }

    /// Where kube serves the object at another version of its group.
    fn path_at(&self, api_version: &str) -> String {
        let root = |version: &str| {
            if version.contains('/') {
                format!("/apis/{version}/")
            } else {
                format!("/api/{version}/")
            }
        };
        let own = self.object["apiVersion"].as_str().unwrap();
        self.path().replacen(&root(own), &root(api_version), 1)
    }

    /// The prefix apistore lists it under: its key without the name.
    fn list_prefix(&self) -> &str {
        self.key.rsplit_once('/').unwrap().0
    }
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.resource, self.key)
    }
}

/// The CRD, created (and established) before the others.
fn widget_crd() -> Case {
    Case::new(
        "customresourcedefinitions",
        "apiextensions.k8s.io/customresourcedefinitions",
        false,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "color": {"type": "string"},
                            "ports": {"type": "array", "items": {"type": "integer"}}
                        }}}
                    }}
                }]
            }
        }),
    )
}

/// The Pod: on 1.32 and later with pod-level resources (PodLevelResources, on by
/// default since 1.34), on 1.33 and later with `seLinuxChangePolicy`.
fn pod(minor: u32) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": NAMESPACE, "labels": {"app": "interop"},
                     "annotations": {"note": "created by kube-apiserver"}},
        "spec": {
            "containers": [{
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "env": [{"name": "GREETING", "value": "hello"}]
            }],
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000},
            "terminationGracePeriodSeconds": 5
        }
    });
    if minor >= 32 {
        pod["spec"]["resources"] = json!({
            "requests": {"cpu": "200m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"}
        });
    }
    if minor >= 33 {
        pod["spec"]["securityContext"]["seLinuxChangePolicy"] = json!("MountOption");
    }
    pod
}

/// Every object, in creation order (the CRD first, created apart).
fn cases(minor: u32) -> Vec<Case> {
    let mut cases = vec![
        Case::new(
            "namespaces",
            "namespaces",
            false,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
        Case::new("pods", "pods", true, pod(minor)),
        Case::new(
            "deployments",
            "deployments",
            true,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d1", "namespace": NAMESPACE},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "d1"}},
                    "template": {
                        "metadata": {"labels": {"app": "d1"}},
                        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                    }
                }
            }),
        ),
        Case::new(
            "services",
            "services/specs",
            true,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "svc1", "namespace": NAMESPACE},
                "spec": {"selector": {"app": "d1"}, "ports": [{"port": 80, "targetPort": 8080}]}
            }),
        ),
        Case::new(
            "secrets",
            "secrets",
            true,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s1", "namespace": NAMESPACE},
                "type": "Opaque",
                "data": {"password": "aHVudGVyMg=="}
            }),
        ),
        widget_crd(),
        Case::new(
            "widgets",
            "example.com/widgets",
            true,
            json!({
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w1", "namespace": NAMESPACE},
                "spec": {"size": 3, "color": "blue", "ports": [80, 443]}
            }),
        ),
    ];
    if minor >= 34 {
        cases.extend(added_after_1_31());
    }
    cases
}

/// One object of each resource kube 1.37 serves by default that 1.31 did not.
fn added_after_1_31() -> Vec<Case> {
    let device_request = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    ]}});
    vec![
        Case::new(
            "deviceclasses",
            "deviceclasses",
            false,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
            }),
        ),
        Case::new(
            "resourceclaims",
            "resourceclaims",
            true,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "claim1", "namespace": NAMESPACE},
                "spec": device_request
            }),
        ),
        Case::new(
            "resourceclaimtemplates",
            "resourceclaimtemplates",
            true,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "template1", "namespace": NAMESPACE},
                "spec": {"spec": device_request}
            }),
        ),
        Case::new(
            "resourceslices",
            "resourceslices",
            false,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "node1-gpu.example.com"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": "node1",
                    "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu0", "attributes": {"model": {"string": "a100"}},
                                 "capacity": {"memory": {"value": "40Gi"}}}]
                }
            }),
        ),
        Case::new(
            "servicecidrs",
            "servicecidrs",
            false,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "ServiceCIDR",
                "metadata": {"name": "extra"},
                "spec": {"cidrs": ["10.1.0.0/24"]}
            }),
        ),
        Case::new(
            "ipaddresses",
            "ipaddresses",
            false,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IPAddress",
                "metadata": {"name": "10.1.0.10"},
                "spec": {"parentRef": {"group": "", "resource": "services", "namespace": NAMESPACE, "name": "svc1"}}
            }),
        ),
        Case::new(
            "devicetaintrules",
            "devicetaintrules",
            false,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": "broken-gpus"},
                "spec": {
                    "deviceSelector": {"driver": "gpu.example.com", "pool": "node1"},
                    "taint": {"key": "example.com/broken", "value": "true", "effect": "NoSchedule"}
                }
            }),
        ),
        Case::new(
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicies",
            false,
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "label-gadgets"},
                "spec": {
                    // Gadgets do not exist: the policy mutates nothing this test writes.
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["example.com"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["gadgets"]
                    }]},
                    "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                        "expression": "Object{metadata: Object.metadata{labels: {\"mutated\": \"true\"}}}"
                    }}],
                    "reinvocationPolicy": "Never"
                }
            }),
        ),
        Case::new(
            "mutatingadmissionpolicybindings",
            "mutatingadmissionpolicybindings",
            false,
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": {"name": "label-gadgets"},
                "spec": {"policyName": "label-gadgets"}
            }),
        ),
        Case::new(
            "clustertrustbundles",
            "clustertrustbundles",
            false,
            json!({
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "ClusterTrustBundle",
                "metadata": {"name": "example-roots"},
                "spec": {"trustBundle": ca_pem()}
            }),
        ),
        Case::new(
            "podcertificaterequests",
            "podcertificaterequests",
            true,
            json!({
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "PodCertificateRequest",
                "metadata": {"name": "p1-cert", "namespace": NAMESPACE},
                "spec": {
                    "signerName": "example.com/pod-identity",
                    "podName": "p1", "podUID": "00000000-0000-0000-0000-000000000001",
                    "serviceAccountName": "default",
                    "serviceAccountUID": "00000000-0000-0000-0000-000000000002",
                    "nodeName": "node1", "nodeUID": "00000000-0000-0000-0000-000000000003",
                    "maxExpirationSeconds": 86400,
                    "stubPKCS10Request": stub_csr(),
                    "unverifiedUserAnnotations": {"example.com/purpose": "interop"}
                }
            }),
        ),
        Case::new(
            "storageversionmigrations",
            "storageversionmigrations",
            false,
            json!({
                "apiVersion": "storagemigration.k8s.io/v1",
                "kind": "StorageVersionMigration",
                "metadata": {"name": "secrets"},
                "spec": {"resource": {"group": "", "resource": "secrets"}}
            }),
        ),
        Case::new(
            "volumeattributesclasses",
            "volumeattributesclasses",
            false,
            json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttributesClass",
                "metadata": {"name": "gold"},
                "driverName": "csi.example.com",
                "parameters": {"iops": "3000"}
            }),
        ),
    ]
}

/// A CA certificate (PEM) for the ClusterTrustBundle.
fn ca_pem() -> String {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "apistore-interop-bundle");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
        .self_signed(&KeyPair::generate().unwrap())
        .unwrap()
        .pem()
}

/// A PKCS#10 request (DER, base64 as JSON carries bytes) for a fresh ECDSA P-256 key:
/// the PodCertificateRequest's stub, whose signature kube checks.
fn stub_csr() -> String {
    let params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let request = params
        .serialize_request(&KeyPair::generate().unwrap())
        .unwrap();
    BASE64.encode(request.der())
}

/// Differences found, each one line naming the object and the step.
#[derive(Debug, Default)]
struct Findings(Vec<String>);

impl Findings {
    fn note(&mut self, case: &Case, step: &str, what: impl std::fmt::Display) {
        self.0.push(format!("{case}: {step}: {what}"));
    }

    /// Records every difference between what kube served and `seen`.
    fn compare(&mut self, case: &Case, step: &str, kube: &Value, seen: &Value) {
        let mut found = Vec::new();
        differences("", kube, seen, &mut found);
        for difference in found {
            self.note(case, step, difference);
        }
    }
}

/// The differences between `kube` and `other`, one per path, as
/// `.spec.resources: kube has {...}, apistore has (absent)`.
fn differences(path: &str, kube: &Value, other: &Value, out: &mut Vec<String>) {
    match (kube, other) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for key in keys {
                let absent = Value::Null;
                match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => differences(&format!("{path}.{key}"), x, y, out),
                    (x, y) => out.push(format!(
                        "{path}.{key}: kube has {}, apistore has {}",
                        shown(x.unwrap_or(&absent), x.is_none()),
                        shown(y.unwrap_or(&absent), y.is_none())
                    )),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                differences(&format!("{path}[{i}]"), x, y, out);
            }
        }
        (a, b) if a != b => out.push(format!(
            "{path}: kube has {}, apistore has {}",
            shown(a, false),
            shown(b, false)
        )),
        _ => {}
    }
}

fn shown(value: &Value, absent: bool) -> String {
    if absent {
        return "(absent)".to_owned();
    }
    let text = value.to_string();
    if text.len() > 160 {
        format!("{}...", &text[..160])
    } else {
        text
    }
}

/// `object` without its resourceVersion and without these labels (and without the
/// labels map when nothing else is in it): what must stay the same across a write
/// that only added these labels.
fn without_write(object: &Value, labels: &[&str]) -> Value {
    let mut object = object.clone();
    let metadata = object["metadata"].as_object_mut().unwrap();
    metadata.remove("resourceVersion");
    if let Some(map) = metadata.get_mut("labels").and_then(Value::as_object_mut) {
        for label in labels {
            map.remove(*label);
        }
        if map.is_empty() {
            metadata.remove("labels");
        }
    }
    object
}

/// The `apistore` command the workspace build made.
fn apistore_command() -> PathBuf {
    if let Some(path) = std::env::var_os("APISTORE_CLI_BIN").filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> -> target/<profile>/apistore
    let path = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("apistore"))
        .unwrap();
    assert!(
        path.is_file(),
        "no `apistore` command at {}: build it first (`cargo build -p apistore-cli`; \
         `cargo xtask interop` builds it with the tests) or set APISTORE_CLI_BIN",
        path.display()
    );
    path
}

/// The `apistore` command on one etcd with one encryption configuration.
struct Cli {
    binary: PathBuf,
    endpoint: String,
    /// `--kube-version`: `1.37`.
    kube_version: String,
    encryption: PathBuf,
    dir: tempfile::TempDir,
}

impl Cli {
    /// Runs it; its stdout, or why it failed (exit status and stderr).
    async fn run(&self, args: &[&str]) -> Result<String, String> {
        let output = tokio::process::Command::new(&self.binary)
            .arg("--endpoints")
            .arg(&self.endpoint)
            .arg("--kube-version")
            .arg(&self.kube_version)
            .arg("--encryption-config")
            .arg(&self.encryption)
            .args(args)
            .output()
            .await
            .unwrap_or_else(|err| panic!("run {}: {err}", self.binary.display()));
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !stderr.trim().is_empty() {
            eprintln!("apistore {}: stderr: {}", args.join(" "), stderr.trim());
        }
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "`apistore {}` failed ({}): {}",
                args.join(" "),
                output.status,
                stderr.trim()
            ))
        }
    }

    /// `apistore get <key> -o json`.
    async fn get(&self, key: &str) -> Result<Value, String> {
        let out = self.run(&["get", key, "-o", "json"]).await?;
        serde_json::from_str(&out)
            .map_err(|err| format!("`apistore get {key}` printed no JSON object ({err}): {out}"))
    }

    /// `apistore get -o json`, a label added, `apistore update -f`.
    async fn add_label(&self, key: &str, label: &str) -> Result<Value, String> {
        let mut object = self.get(key).await?;
        object["metadata"]["labels"][label] = json!("updated");
        let file = self.dir.path().join("object.json");
        std::fs::write(&file, object.to_string()).unwrap();
        let out = self
            .run(&["update", key, "-f", file.to_str().unwrap(), "-o", "json"])
            .await?;
        serde_json::from_str(&out)
            .map_err(|err| format!("`apistore update {key}` printed no JSON object ({err}): {out}"))
    }
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
        let store = api.dynamic_store(&case.resource);
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
    let store = api.dynamic_store(&case.resource);
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
    for _ in 0..100 {
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
    panic!("{crd} was not established within 10 s");
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

/// The resources kube 1.31 serves by default and stores, as `<group>/<resource>`
/// (`/pods` for the core group): what its discovery lists with `create` and `list`
/// (the 1.31 test checks this list against the server).
const SERVED_BY_1_31: &[&str] = &[
    "/configmaps",
    "/endpoints",
    "/events",
    "/limitranges",
    "/namespaces",
    "/nodes",
    "/persistentvolumeclaims",
    "/persistentvolumes",
    "/pods",
    "/podtemplates",
    "/replicationcontrollers",
    "/resourcequotas",
    "/secrets",
    "/serviceaccounts",
    "/services",
    "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingadmissionpolicies",
    "admissionregistration.k8s.io/validatingadmissionpolicybindings",
    "admissionregistration.k8s.io/validatingwebhookconfigurations",
    "apiextensions.k8s.io/customresourcedefinitions",
    "apiregistration.k8s.io/apiservices",
    "apps/controllerrevisions",
    "apps/daemonsets",
    "apps/deployments",
    "apps/replicasets",
    "apps/statefulsets",
    "autoscaling/horizontalpodautoscalers",
    "batch/cronjobs",
    "batch/jobs",
    "certificates.k8s.io/certificatesigningrequests",
    "coordination.k8s.io/leases",
    "discovery.k8s.io/endpointslices",
    "events.k8s.io/events",
    "flowcontrol.apiserver.k8s.io/flowschemas",
    "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations",
    "networking.k8s.io/ingressclasses",
    "networking.k8s.io/ingresses",
    "networking.k8s.io/networkpolicies",
    "node.k8s.io/runtimeclasses",
    "policy/poddisruptionbudgets",
    "rbac.authorization.k8s.io/clusterrolebindings",
    "rbac.authorization.k8s.io/clusterroles",
    "rbac.authorization.k8s.io/rolebindings",
    "rbac.authorization.k8s.io/roles",
    "scheduling.k8s.io/priorityclasses",
    "storage.k8s.io/csidrivers",
    "storage.k8s.io/csinodes",
    "storage.k8s.io/csistoragecapacities",
    "storage.k8s.io/storageclasses",
    "storage.k8s.io/volumeattachments",
];

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
