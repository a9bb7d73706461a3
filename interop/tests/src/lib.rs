//! Differential tests: apistore beside k8s.io/apiserver v0.31.1's own etcd3 storage
//! (the Go harness in `interop/reference`), both on one real etcd.
//!
//! Each test starts its own etcd (compactions would otherwise reach other tests'
//! revisions), a reference harness for one resource and an [`ApiStore`] on the same
//! endpoint, then writes with one side and reads, updates, continues or watches with
//! the other. Failures are compared as kube-apiserver answers them: the HTTP code, the
//! reason, and the continue token of a 410.
//!
//! The harness binary comes from `APISTORE_REFERENCE_BIN` (`cargo xtask interop` builds
//! it and sets it); without it the tests fail, saying so, rather than skip.

pub mod kube_apiserver;
mod reference;

use std::path::{Path, PathBuf};
use std::time::Duration;

use apistore::{ApiStore, DynamicObject, Etcd3Store, MediaType, Status, StorageError, WatchEvent};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use futures::StreamExt;
use serde_json::{Value, json};

use reference::text;
pub use reference::{REFERENCE_BIN_ENV, Reference, ReferenceOptions, reference_binary};

/// A failure as kube-apiserver would answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status code.
    pub code: u16,
    /// The Status reason (`NotFound`, `Expired`...; empty when kube gives none).
    pub reason: String,
    /// The message, for the record (not compared: the sides word some differently).
    pub message: String,
    /// `metadata.continue` of the Status (a 410 on a continued list carries one).
    pub continue_token: String,
}

impl Failure {
    /// From a `metav1.Status` as JSON.
    pub fn from_status(status: &Value) -> Self {
        Self {
            code: u16::try_from(status["code"].as_u64().unwrap_or_default()).unwrap_or_default(),
            reason: text(&status["reason"]),
            message: text(&status["message"]),
            continue_token: text(&status["metadata"]["continue"]),
        }
    }

    /// From apistore's error, through [`StorageError::status`].
    pub fn from_error(err: &StorageError) -> Self {
        Self::from_apistore_status(&err.status())
    }

    /// From a Status apistore made (a watch's error event).
    pub fn from_apistore_status(status: &Status) -> Self {
        Self::from_status(&serde_json::to_value(status).unwrap_or_default())
    }

    /// What is compared across the sides: code, reason, continue token.
    pub fn essence(&self) -> (u16, &str, &str) {
        (self.code, &self.reason, &self.continue_token)
    }
}

/// One page of a list, from either side.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listed {
    /// The items, as JSON.
    pub items: Vec<Value>,
    /// The list's resourceVersion.
    pub resource_version: String,
    /// The continue token; empty on the last page.
    pub continue_token: String,
    /// `remainingItemCount`.
    pub remaining_item_count: Option<i64>,
}

impl Listed {
    /// The items' names, in order.
    pub fn names(&self) -> Vec<String> {
        self.items
            .iter()
            .map(|i| text(&i["metadata"]["name"]))
            .collect()
    }

    /// From apistore's list.
    pub fn from_apistore(list: &apistore::ObjectList<DynamicObject>) -> Self {
        Self {
            items: list.items.iter().map(to_json).collect(),
            resource_version: list.metadata.resource_version.clone(),
            continue_token: list.metadata.continue_token.clone(),
            remaining_item_count: list.metadata.remaining_item_count,
        }
    }

    /// What must agree between the sides about a page: the items' summaries, the
    /// resourceVersion, the continue token and the remaining item count.
    pub fn essence(&self) -> (Vec<Value>, &str, &str, Option<i64>) {
        (
            self.summaries(),
            &self.resource_version,
            &self.continue_token,
            self.remaining_item_count,
        )
    }

    /// The items as [`summary`] sees them.
    pub fn summaries(&self) -> Vec<Value> {
        self.items.iter().map(summary).collect()
    }
}

/// An object as JSON.
pub fn to_json(object: &DynamicObject) -> Value {
    serde_json::to_value(object).unwrap_or_default()
}

/// What must agree between the sides about an object: identity, resourceVersion,
/// labels and content (`data`, `spec`...), without the encoding's incidentals (field
/// order, and the `null`s and `{}`s Go's encoding/json writes for zero-valued fields
/// without `omitempty`, such as `creationTimestamp: null` or `strategy: {}`).
pub fn summary(object: &Value) -> Value {
    let metadata = &object["metadata"];
    let mut content = serde_json::Map::new();
    if let Some(fields) = object.as_object() {
        for (field, value) in fields {
            if !matches!(field.as_str(), "apiVersion" | "kind" | "metadata") {
                content.insert(field.clone(), value.clone());
            }
        }
    }
    json!({
        "name": metadata["name"],
        "namespace": metadata["namespace"],
        "uid": metadata["uid"],
        "resourceVersion": metadata["resourceVersion"],
        "labels": metadata.get("labels").cloned().unwrap_or_else(|| json!({})),
        "content": prune(Value::Object(content)),
    })
}

/// Drops `null` and empty-object fields, recursively.
fn prune(value: Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (k, prune(v)))
                .filter(|(_, v)| !v.is_null() && v.as_object().is_none_or(|o| !o.is_empty()))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(prune).collect()),
        other => other,
    }
}

/// The storage media types every encoding-sensitive test runs with.
pub const MEDIA_TYPES: [&str; 2] = ["json", "protobuf"];

/// Runs an `async fn(&str)` test once per media type, as `<name>::json` and
/// `<name>::protobuf`.
#[macro_export]
macro_rules! per_media_type {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn json() {
                super::$name("json").await;
            }
            #[tokio::test]
            async fn protobuf() {
                super::$name("protobuf").await;
            }
        }
    )*};
}

/// One etcd with both sides on it.
#[derive(Debug)]
pub struct Interop {
    /// The etcd both sides use.
    pub etcd: EtcdServer,
    /// The reference harness for the resource.
    pub go: Reference,
    /// apistore's connection.
    pub api: ApiStore,
    /// apistore's store for the resource.
    pub store: Etcd3Store<DynamicObject>,
    /// The resource (`configmaps`).
    pub resource: String,
    /// The resource's key prefix as kube-apiserver's registry sets it, without the
    /// leading `/` (`configmaps`, `services/endpoints`).
    pub key_prefix: String,
    /// The storage media type both sides write (`json`, `protobuf`).
    pub media_type: String,
}

impl Interop {
    /// A fresh etcd, the reference harness with `options`, and apistore configured to
    /// match (same resource, same encryption file).
    ///
    /// # Panics
    /// When etcd, the harness or apistore cannot start.
    pub async fn start(options: &ReferenceOptions) -> Self {
        let etcd = EtcdServer::start(EtcdOptions::default())
            .unwrap_or_else(|err| panic!("cannot start etcd: {err}"));
        let endpoint = etcd.endpoint();
        let api = api_store(
            &endpoint,
            options.encryption_config.as_deref(),
            &options.media_type,
        )
        .await;
        let key_prefix = api.resource_layout(&options.resource).key_prefix;
        let mut options = options.clone();
        options
            .resource_prefix
            .get_or_insert_with(|| format!("/{key_prefix}"));
        let go = Reference::start(&endpoint, &options);
        let store = api
            .dynamic_store(&options.resource)
            .unwrap_or_else(|err| panic!("{err}"));
        Self {
            etcd,
            go,
            api,
            store,
            resource: options.resource.clone(),
            key_prefix,
            media_type: options.media_type,
        }
    }

    /// apistore's key of an object (`services/endpoints/ns/name`).
    pub fn key(&self, namespace: &str, name: &str) -> String {
        format!("{}/{namespace}/{name}", self.key_prefix)
    }

    /// The reference's key of an object, as kube's registry passes it
    /// (`/services/endpoints/ns/name`).
    pub fn go_key(&self, namespace: &str, name: &str) -> String {
        format!("/{}", self.key(namespace, name))
    }

    /// The etcd key of an object.
    pub fn etcd_key(&self, namespace: &str, name: &str) -> String {
        format!("/registry{}", self.go_key(namespace, name))
    }

    /// Another reference harness on the same etcd, for the same resource prefix.
    pub fn another_go(&self, options: &ReferenceOptions) -> Reference {
        let mut options = options.clone();
        options
            .resource_prefix
            .get_or_insert_with(|| format!("/{}", self.key_prefix));
        Reference::start(&self.etcd.endpoint(), &options)
    }

    /// Another apistore store for the resource on the same etcd, with an encryption
    /// file, writing the same media type.
    pub async fn another_store(&self, encryption: Option<&Path>) -> Etcd3Store<DynamicObject> {
        api_store(&self.etcd.endpoint(), encryption, &self.media_type)
            .await
            .dynamic_store(&self.resource)
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// A plain etcd client, for raw reads, writes and compactions.
    ///
    /// # Panics
    /// When etcd does not answer.
    pub async fn raw(&self) -> etcd_client::Client {
        etcd_client::Client::connect([self.etcd.endpoint()], None)
            .await
            .unwrap_or_else(|err| panic!("cannot connect to etcd: {err}"))
    }

    /// The bytes stored under an etcd key.
    pub async fn raw_get(&self, etcd_key: &str) -> Option<Vec<u8>> {
        let mut raw = self.raw().await;
        let response = raw
            .get(etcd_key, None)
            .await
            .unwrap_or_else(|err| panic!("raw get {etcd_key}: {err}"));
        response.kvs().first().map(|kv| kv.value().to_vec())
    }

    /// Writes bytes under an etcd key, behind both sides' backs; the new revision.
    pub async fn raw_put(&self, etcd_key: &str, value: &[u8]) -> i64 {
        let mut raw = self.raw().await;
        let response = raw
            .put(etcd_key, value, None)
            .await
            .unwrap_or_else(|err| panic!("raw put {etcd_key}: {err}"));
        response.header().map(|h| h.revision()).unwrap_or_default()
    }

    /// etcd's current revision.
    pub async fn revision(&self) -> i64 {
        let mut raw = self.raw().await;
        let response = raw
            .get("compact_rev_key", None)
            .await
            .unwrap_or_else(|err| panic!("raw get: {err}"));
        response.header().map(|h| h.revision()).unwrap_or_default()
    }

    /// Compacts etcd's history up to its current revision.
    pub async fn compact(&self) -> i64 {
        let revision = self.revision().await;
        let mut raw = self.raw().await;
        raw.compact(
            revision,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        )
        .await
        .unwrap_or_else(|err| panic!("compact at {revision}: {err}"));
        revision
    }

    /// apistore's watch from `resource_version` on `key` (recursive): up to `events`
    /// events or what came within `timeout`, each as `(type, object)`.
    pub async fn api_watch(
        &self,
        key: &str,
        resource_version: &str,
        events: usize,
        timeout: Duration,
    ) -> Result<Vec<(String, Value)>, Failure> {
        api_watch(&self.store, key, resource_version, events, timeout).await
    }
}

/// A watch through an apistore store; see [`Interop::api_watch`].
pub async fn api_watch(
    store: &Etcd3Store<DynamicObject>,
    key: &str,
    resource_version: &str,
    events: usize,
    timeout: Duration,
) -> Result<Vec<(String, Value)>, Failure> {
    let options = apistore::ListOptions {
        resource_version: resource_version.to_owned(),
        recursive: true,
        ..apistore::ListOptions::default()
    };
    api_watch_with(store, key, &options, events, timeout).await
}

/// [`api_watch`] with any options (selectors, non-recursive).
pub async fn api_watch_with(
    store: &Etcd3Store<DynamicObject>,
    key: &str,
    options: &apistore::ListOptions,
    events: usize,
    timeout: Duration,
) -> Result<Vec<(String, Value)>, Failure> {
    use apistore::Storage as _;
    let mut stream = store
        .watch(key, options)
        .await
        .map_err(|err| Failure::from_error(&err))?;
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + timeout;
    while seen.len() < events {
        let Ok(Some(event)) = tokio::time::timeout_at(deadline, stream.next()).await else {
            break;
        };
        let entry = match &event {
            WatchEvent::Error(status) => (
                event.type_name().to_owned(),
                serde_json::to_value(status).unwrap_or_default(),
            ),
            other => (
                other.type_name().to_owned(),
                other.object().map(to_json).unwrap_or_default(),
            ),
        };
        let is_error = matches!(event, WatchEvent::Error(_));
        seen.push(entry);
        if is_error {
            break;
        }
    }
    Ok(seen)
}

/// Events as `(type, summary)`.
pub fn event_summaries(events: &[(String, Value)]) -> Vec<(String, Value)> {
    events
        .iter()
        .map(|(kind, object)| (kind.clone(), summary(object)))
        .collect()
}

/// Environment variable naming the kube version of the reference harness
/// (`APISTORE_REFERENCE_BIN`): `1.31` (k8s.io/apiserver v0.31.1, the default) or `1.37`.
pub const REFERENCE_KUBE_VERSION_ENV: &str = "APISTORE_REFERENCE_KUBE_VERSION";

/// The kube version the reference harness is of ([`REFERENCE_KUBE_VERSION_ENV`]).
pub fn reference_kube_version() -> apistore::KubeVersion {
    match std::env::var(REFERENCE_KUBE_VERSION_ENV) {
        Ok(text) => text
            .parse()
            .unwrap_or_else(|err| panic!("{REFERENCE_KUBE_VERSION_ENV}: {err}")),
        Err(_) => apistore::KubeVersion::V1_31,
    }
}

async fn api_store(endpoint: &str, encryption: Option<&Path>, media_type: &str) -> ApiStore {
    let media_type = match media_type {
        "json" => MediaType::Json,
        "protobuf" => MediaType::Protobuf,
        other => panic!("unknown media type {other}"),
    };
    // Compare with the kube version of the reference harness: its layout and schema
    // (1.31's JSON writes `creationTimestamp: null`, 1.34+'s leaves it out).
    let mut builder = ApiStore::builder()
        .endpoints([endpoint.to_owned()])
        .kube_version(reference_kube_version())
        .storage_media_type(media_type);
    if let Some(path) = encryption {
        builder = builder.encryption_config_file(path);
    }
    builder
        .build()
        .await
        .unwrap_or_else(|err| panic!("cannot build apistore: {err}"))
}

/// A ConfigMap named `name` in `namespace` with one data entry and a uid.
pub fn configmap(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}"), "labels": {"app": "interop"}},
        "data": {"greeting": format!("hello {name}")},
    })
}

/// A Secret named `name` in `namespace`.
pub fn secret(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "uid": format!("uid-{name}")},
        "type": "Opaque",
        "data": {"password": "aHVudGVyMg=="},
    })
}

/// An object as apistore takes it.
///
/// # Panics
/// When `object` is not an API object.
pub fn dynamic(object: &Value) -> DynamicObject {
    serde_json::from_value(object.clone()).unwrap_or_else(|err| panic!("{object}: {err}"))
}

/// An EncryptionConfiguration file in a temporary directory.
#[derive(Debug)]
pub struct EncryptionFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

/// The `resources:` list of an EncryptionConfiguration that encrypts `secrets` with
/// `aesgcm` and the given keys, the first writing: for [`EncryptionFile::new`].
pub fn aesgcm_secrets(keys: &[(&str, &str)]) -> String {
    let keys: String = keys
        .iter()
        .map(|(name, secret)| {
            format!("            - name: {name}\n              secret: {secret}\n")
        })
        .collect();
    format!("  - resources: [secrets]\n    providers:\n      - aesgcm:\n          keys:\n{keys}")
}

impl EncryptionFile {
    /// Writes `resources` (the YAML list under `resources:`) into a file.
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn new(resources: &str) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
        let path = dir.path().join("encryption-config.yaml");
        let text = format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n{resources}"
        );
        std::fs::write(&path, text).unwrap_or_else(|err| panic!("write config: {err}"));
        Self { _dir: dir, path }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// The text of an etcd `--version`, for the record.
pub fn etcd_version() -> String {
    let Ok(binary) = apistore_testing::etcd::etcd_binary() else {
        return "unknown".to_owned();
    };
    std::process::Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::to_owned))
        .unwrap_or_default()
}
