//! The `apistore` command as the tests run it: on the test's etcd, with apistore's
//! encryption configuration and the kube version under test.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The `apistore` command the workspace build made.
pub(crate) fn apistore_command() -> PathBuf {
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
pub(crate) struct Cli {
    pub(crate) binary: PathBuf,
    pub(crate) endpoint: String,
    /// `--kube-version`: `1.37`.
    pub(crate) kube_version: String,
    pub(crate) encryption: PathBuf,
    pub(crate) dir: tempfile::TempDir,
}

impl Cli {
    /// Runs it; its stdout, or why it failed (exit status and stderr).
    pub(crate) async fn run(&self, args: &[&str]) -> Result<String, String> {
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
    pub(crate) async fn get(&self, key: &str) -> Result<Value, String> {
        let out = self.run(&["get", key, "-o", "json"]).await?;
        serde_json::from_str(&out)
            .map_err(|err| format!("`apistore get {key}` printed no JSON object ({err}): {out}"))
    }

    /// `apistore get -o json`, a label added, `apistore update -f`.
    pub(crate) async fn add_label(&self, key: &str, label: &str) -> Result<Value, String> {
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
