//! One build of every test binary and example, shared by every step that runs them.
//!
//! Cargo unifies dependency features over the packages a command selects, so
//! `cargo test -p a` after `cargo test --workspace` builds a second copy of each
//! dependency whose features differ, and every test binary links them all. Each
//! command here builds once over the whole workspace (`--all-features`), then runs
//! the binaries it needs itself, from each package's directory as cargo does. A clean
//! `.ci/run` built four copies of tokio and etcd-client that way before, and filled a
//! CI machine's disk.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::error::{Result, XtaskError};
use crate::run::{command_line, run_step_within};

/// A binary the workspace build produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Binary {
    /// The package's name.
    pub(crate) package: String,
    /// The target's name (`lib`'s is the crate's name, with underscores).
    pub(crate) target: String,
    /// The package's directory: test binaries run there, as under `cargo test`.
    pub(crate) package_dir: PathBuf,
    /// The file to run.
    pub(crate) executable: PathBuf,
}

/// Every test binary and example of one `cargo test --workspace --all-features
/// --no-run`.
#[derive(Debug, Default)]
pub(crate) struct WorkspaceBuild {
    /// Unit and integration test binaries, in cargo's order.
    pub(crate) tests: Vec<Binary>,
    /// Examples, built as programs (not test harnesses).
    pub(crate) examples: Vec<Binary>,
}

/// The arguments that select what the shared build covers; every cargo command of
/// xtask that builds tests uses these, so none builds another copy of a dependency.
pub(crate) const SELECTION: [&str; 2] = ["--workspace", "--all-features"];

impl WorkspaceBuild {
    /// Builds every test binary and example of the workspace; `command` is `cargo`
    /// with the environment the build needs (PROTOC).
    pub(crate) fn build(mut command: Command) -> Result<Self> {
        command
            .args([
                "test",
                "--no-run",
                "--message-format=json-render-diagnostics",
            ])
            .args(SELECTION)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        let line = command_line(&command);
        println!("==> {line}");
        let output = command.output().map_err(|source| XtaskError::Spawn {
            command: line.clone(),
            source,
        })?;
        if !output.status.success() {
            return Err(XtaskError::StepFailed {
                command: line,
                status: output.status,
            });
        }
        Ok(Self::from_messages(&String::from_utf8_lossy(
            &output.stdout,
        )))
    }

    /// The binaries named in cargo's JSON messages (one per line); other lines are
    /// skipped.
    fn from_messages(messages: &str) -> Self {
        let mut build = Self::default();
        for line in messages.lines() {
            let Ok(message) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            if message["reason"] != "compiler-artifact" {
                continue;
            }
            let Some(executable) = message["executable"].as_str() else {
                continue;
            };
            let (Some(package_id), Some(manifest), Some(target)) = (
                message["package_id"].as_str(),
                message["manifest_path"].as_str(),
                message["target"]["name"].as_str(),
            ) else {
                continue;
            };
            let package_dir = Path::new(manifest)
                .parent()
                .unwrap_or_else(|| Path::new("."))
                .to_path_buf();
            let binary = Binary {
                package: package_name(package_id, &package_dir),
                target: target.to_owned(),
                package_dir,
                executable: PathBuf::from(executable),
            };
            let is_example = message["target"]["kind"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|kind| kind == "example"));
            if message["profile"]["test"] == true {
                build.tests.push(binary);
            } else if is_example {
                build.examples.push(binary);
            }
        }
        build
    }

    /// The test binaries of these packages.
    pub(crate) fn tests_of<'a>(&'a self, packages: &'a [&str]) -> impl Iterator<Item = &'a Binary> {
        self.tests
            .iter()
            .filter(move |binary| packages.contains(&binary.package.as_str()))
    }

    /// The test binaries of every package but these.
    pub(crate) fn tests_except<'a>(
        &'a self,
        packages: &'a [&str],
    ) -> impl Iterator<Item = &'a Binary> {
        self.tests
            .iter()
            .filter(move |binary| !packages.contains(&binary.package.as_str()))
    }

    /// The example called `name`.
    pub(crate) fn example(&self, name: &str) -> Option<&Binary> {
        self.examples.iter().find(|binary| binary.target == name)
    }
}

/// A package's name from its id: `path+file:///dir#name@version`, or
/// `path+file:///dir#version` when the name is the directory's (cargo's package id
/// spec), or the older `name version (source)`.
fn package_name(package_id: &str, package_dir: &Path) -> String {
    if let Some((_, fragment)) = package_id.rsplit_once('#') {
        if let Some((name, _version)) = fragment.split_once('@') {
            return name.to_owned();
        }
        if let Some(dir_name) = package_dir.file_name() {
            return dir_name.to_string_lossy().into_owned();
        }
    }
    package_id
        .split_whitespace()
        .next()
        .unwrap_or(package_id)
        .to_owned()
}

/// How long one test binary may run. The longest take under a minute here (two cores);
/// a binary past this has hung, and is killed so that the rest still run.
const TEST_BINARY_LIMIT: Duration = Duration::from_secs(15 * 60);

/// Runs each binary from its package's directory with these environment variables
/// and arguments, going on after a failure; fails at the end naming every binary
/// that failed.
pub(crate) fn run_all<'a>(
    binaries: impl IntoIterator<Item = &'a Binary>,
    env: &[(&str, &OsStr)],
    args: &[&str],
) -> Result<()> {
    let mut failed = Vec::new();
    let mut ran_any = false;
    for binary in binaries {
        ran_any = true;
        let mut command = Command::new(&binary.executable);
        command.current_dir(&binary.package_dir).args(args);
        for (key, value) in env {
            command.env(key, value);
        }
        println!("\n--- {} ({})", binary.target, binary.package);
        if let Err(error) = run_step_within(&mut command, TEST_BINARY_LIMIT) {
            eprintln!("xtask: {error}");
            failed.push(format!("{} ({})", binary.target, binary.package));
        }
    }
    if !ran_any {
        return Err(XtaskError::StepsFailed(vec![
            "the build produced no test binaries to run".to_owned(),
        ]));
    }
    if failed.is_empty() {
        Ok(())
    } else {
        Err(XtaskError::StepsFailed(failed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_binaries_and_examples_are_told_apart() {
        let messages = concat!(
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/apistore-etcd3#0.1.0","manifest_path":"/w/crates/apistore-etcd3/Cargo.toml","target":{"kind":["test"],"name":"faults"},"profile":{"test":true},"executable":"/w/target/debug/deps/faults-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/interop/tests#apistore-interop@0.1.0","manifest_path":"/w/interop/tests/Cargo.toml","target":{"kind":["lib"],"name":"apistore_interop"},"profile":{"test":true},"executable":"/w/target/debug/deps/apistore_interop-2"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"path+file:///w/crates/apistore#0.1.0","manifest_path":"/w/crates/apistore/Cargo.toml","target":{"kind":["example"],"name":"demo"},"profile":{"test":false},"executable":"/w/target/debug/examples/demo"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","package_id":"registry+https://github.com/rust-lang/crates.io-index#tokio@1.0.0","manifest_path":"/r/tokio/Cargo.toml","target":{"kind":["lib"],"name":"tokio"},"profile":{"test":false},"executable":null}"#,
            "\n",
            "Compiling is not JSON\n",
            r#"{"reason":"build-finished","success":true}"#,
        );
        let build = WorkspaceBuild::from_messages(messages);
        let tests: Vec<_> = build
            .tests
            .iter()
            .map(|binary| (binary.package.as_str(), binary.target.as_str()))
            .collect();
        assert_eq!(
            tests,
            [
                ("apistore-etcd3", "faults"),
                ("apistore-interop", "apistore_interop")
            ]
        );
        assert_eq!(
            build.tests[0].package_dir,
            Path::new("/w/crates/apistore-etcd3")
        );
        assert_eq!(
            build
                .example("demo")
                .map(|binary| binary.executable.clone()),
            Some(PathBuf::from("/w/target/debug/examples/demo"))
        );
        assert_eq!(build.tests_of(&["apistore-interop"]).count(), 1);
        assert_eq!(build.tests_except(&["apistore-interop"]).count(), 1);
    }

    #[test]
    fn running_nothing_is_a_failure() {
        assert!(run_all(std::iter::empty(), &[], &[]).is_err());
    }
}
