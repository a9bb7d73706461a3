//! The Go reference harness (`interop/reference`) as a child process: one JSON request
//! per line in, one answer per line out.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::{Failure, Listed};

/// Environment variable naming the harness binary (`cargo xtask interop` sets it).
pub const REFERENCE_BIN_ENV: &str = "APISTORE_REFERENCE_BIN";

/// The harness binary from [`REFERENCE_BIN_ENV`].
///
/// # Panics
/// When it is unset or names no file: the differential tests never skip, they say how
/// to get the harness.
pub fn reference_binary() -> PathBuf {
    let Some(path) = std::env::var_os(REFERENCE_BIN_ENV).filter(|p| !p.is_empty()) else {
        panic!(
            "{REFERENCE_BIN_ENV} is not set: run `cargo xtask interop`, which builds the Go \
             reference harness (interop/reference) into target/tools/apistore-reference and runs \
             these tests with it"
        );
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "{REFERENCE_BIN_ENV}={} does not exist: run `cargo xtask interop`, which builds it",
        path.display()
    );
    path
}

/// How to start a harness: the flags of `apistore-reference`.
#[derive(Debug, Clone)]
pub struct ReferenceOptions {
    /// `-resource`: the group resource (`configmaps`, `deployments.apps`).
    pub resource: String,
    /// `-kind`: `[group/]version/Kind`.
    pub kind: String,
    /// `-media-type`: `json` or `protobuf`.
    pub media_type: String,
    /// `-encryption-config`, if any.
    pub encryption_config: Option<PathBuf>,
    /// `-prefix`.
    pub prefix: String,
    /// `-resource-prefix` (`/services/endpoints`); [`crate::Interop`] fills in the one
    /// kube-apiserver's registry uses when this is `None`.
    pub resource_prefix: Option<String>,
    /// `-kms-relay`: the socket the harness listens on for its `kms` provider, and
    /// the plugin's socket it relays to (see `interop/reference/kmsrelay.go`).
    pub kms_relay: Option<(PathBuf, PathBuf)>,
}

impl ReferenceOptions {
    /// JSON storage of `resource` as `kind`, under `/registry`, unencrypted.
    pub fn new(resource: &str, kind: &str) -> Self {
        Self {
            resource: resource.to_owned(),
            kind: kind.to_owned(),
            media_type: "json".to_owned(),
            encryption_config: None,
            prefix: "/registry".to_owned(),
            resource_prefix: None,
            kms_relay: None,
        }
    }

    /// With the harness relaying KMS v2 calls from `listen` to the plugin on `plugin`.
    pub fn kms_relay(mut self, listen: impl Into<PathBuf>, plugin: impl Into<PathBuf>) -> Self {
        self.kms_relay = Some((listen.into(), plugin.into()));
        self
    }

    /// With an EncryptionConfiguration file.
    pub fn encrypted(mut self, path: impl Into<PathBuf>) -> Self {
        self.encryption_config = Some(path.into());
        self
    }

    /// With a storage media type (`json`, `protobuf`).
    pub fn media_type(mut self, media_type: &str) -> Self {
        media_type.clone_into(&mut self.media_type);
        self
    }
}

/// A running reference harness.
#[derive(Debug)]
pub struct Reference {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Reference {
    /// Starts the harness against `endpoint`.
    ///
    /// # Panics
    /// When the binary is missing or does not start.
    pub fn start(endpoint: &str, options: &ReferenceOptions) -> Self {
        let mut command = Command::new(reference_binary());
        command
            .arg("-endpoints")
            .arg(endpoint)
            .arg("-prefix")
            .arg(&options.prefix)
            .arg("-resource")
            .arg(&options.resource)
            .arg("-kind")
            .arg(&options.kind)
            .arg("-media-type")
            .arg(&options.media_type);
        if let Some(prefix) = &options.resource_prefix {
            command.arg("-resource-prefix").arg(prefix);
        }
        if let Some(path) = &options.encryption_config {
            command.arg("-encryption-config").arg(path);
        }
        if let Some((listen, plugin)) = &options.kms_relay {
            let mut spec = listen.clone().into_os_string();
            spec.push("=");
            spec.push(plugin);
            command.arg("-kms-relay").arg(spec);
        }
        // The harness logs through klog on stderr; tests show it only when they fail.
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start the reference harness: {err}"));
        let stdin = child.stdin.take().unwrap_or_else(|| unreachable!());
        let stdout = BufReader::new(child.stdout.take().unwrap_or_else(|| unreachable!())).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one request and returns the raw answer.
    ///
    /// # Panics
    /// When the harness dies or answers something that is not JSON.
    pub async fn call(&mut self, request: Value) -> Value {
        let mut line = request.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .await
            .unwrap_or_else(|err| panic!("reference harness gone ({err}) on {request}"));
        self.stdin
            .flush()
            .await
            .unwrap_or_else(|err| panic!("reference harness gone ({err}) on {request}"));
        let answer = self
            .stdout
            .next_line()
            .await
            .unwrap_or_else(|err| panic!("reading the reference harness: {err}"));
        let Some(answer) = answer else {
            let status = self.child.try_wait();
            panic!("reference harness exited ({status:?}) on {request}");
        };
        serde_json::from_str(&answer)
            .unwrap_or_else(|err| panic!("reference harness answered {answer:?}: {err}"))
    }

    /// Sends one request; its object, or the failure.
    pub async fn request(&mut self, request: Value) -> Result<Value, Failure> {
        let answer = self.call(request).await;
        if answer["ok"] == json!(true) {
            Ok(answer)
        } else {
            Err(Failure::from_status(&answer["error"]))
        }
    }

    /// `create`.
    pub async fn create(&mut self, key: &str, object: &Value) -> Result<Value, Failure> {
        let answer = self
            .request(json!({"op": "create", "key": key, "object": object}))
            .await?;
        Ok(answer["object"].clone())
    }

    /// `create` with a TTL in seconds.
    pub async fn create_with_ttl(
        &mut self,
        key: &str,
        object: &Value,
        ttl: u64,
    ) -> Result<Value, Failure> {
        let answer = self
            .request(json!({"op": "create", "key": key, "object": object, "ttl": ttl}))
            .await?;
        Ok(answer["object"].clone())
    }

    /// `get` with a minimum resourceVersion (empty for none).
    pub async fn get(&mut self, key: &str, resource_version: &str) -> Result<Value, Failure> {
        let answer = self
            .request(json!({"op": "get", "key": key, "resourceVersion": resource_version}))
            .await?;
        Ok(answer["object"].clone())
    }

    /// A guaranteed update setting `labels`, under `preconditions` (`{"uid":..,
    /// "resourceVersion":..}` or null).
    pub async fn update_labels(
        &mut self,
        key: &str,
        labels: Value,
        preconditions: Value,
    ) -> Result<Value, Failure> {
        let answer = self
            .request(json!({"op": "update", "key": key, "labels": labels, "preconditions": preconditions}))
            .await?;
        Ok(answer["object"].clone())
    }

    /// A guaranteed update replacing the object with `object`, under `preconditions`.
    pub async fn replace(
        &mut self,
        key: &str,
        object: &Value,
        preconditions: Value,
    ) -> Result<Value, Failure> {
        let answer = self
            .request(json!({"op": "update", "key": key, "object": object, "preconditions": preconditions}))
            .await?;
        Ok(answer["object"].clone())
    }

    /// A guaranteed update that changes nothing (it writes only when the stored bytes
    /// are stale or differ from the current encoding).
    pub async fn touch(&mut self, key: &str) -> Result<Value, Failure> {
        let answer = self.request(json!({"op": "update", "key": key})).await?;
        Ok(answer["object"].clone())
    }

    /// `delete` under `preconditions` (or null).
    pub async fn delete(&mut self, key: &str, preconditions: Value) -> Result<Value, Failure> {
        let answer = self
            .request(json!({"op": "delete", "key": key, "preconditions": preconditions}))
            .await?;
        Ok(answer["object"].clone())
    }

    /// A recursive list; `extra` adds `limit`, `continue`, `resourceVersion`,
    /// `resourceVersionMatch`, `labelSelector`.
    pub async fn list(&mut self, key: &str, extra: Value) -> Result<Listed, Failure> {
        let mut request = json!({"op": "list", "key": key});
        merge(&mut request, extra);
        let answer = self.request(request).await?;
        Ok(Listed {
            items: answer["items"].as_array().cloned().unwrap_or_default(),
            resource_version: text(&answer["resourceVersion"]),
            continue_token: text(&answer["continue"]),
            remaining_item_count: answer["remainingItemCount"].as_i64(),
        })
    }

    /// A recursive watch from `resource_version`: up to `events` events, or what came
    /// within `timeout_millis`. Each event as `(type, object)`.
    pub async fn watch(
        &mut self,
        key: &str,
        resource_version: &str,
        events: usize,
        timeout_millis: u64,
    ) -> Result<Vec<(String, Value)>, Failure> {
        self.watch_with(key, resource_version, events, timeout_millis, json!({}))
            .await
    }

    /// [`Self::watch`] with more of the request (`labelSelector`, `recursive`).
    pub async fn watch_with(
        &mut self,
        key: &str,
        resource_version: &str,
        events: usize,
        timeout_millis: u64,
        extra: Value,
    ) -> Result<Vec<(String, Value)>, Failure> {
        let mut request = json!({
            "op": "watch", "key": key, "resourceVersion": resource_version,
            "events": events, "timeoutMillis": timeout_millis,
        });
        merge(&mut request, extra);
        let answer = self.request(request).await?;
        Ok(answer["events"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .map(|e| (text(&e["type"]), e["object"].clone()))
            .collect())
    }

    /// `count`.
    pub async fn count(&mut self, key: &str) -> Result<i64, Failure> {
        let answer = self.request(json!({"op": "count", "key": key})).await?;
        Ok(answer["count"].as_i64().unwrap_or_default())
    }
}

fn merge(into: &mut Value, extra: Value) {
    if let (Some(into), Value::Object(extra)) = (into.as_object_mut(), extra) {
        into.extend(extra);
    }
}

pub(crate) fn text(value: &Value) -> String {
    value.as_str().unwrap_or_default().to_owned()
}
