//! Why an xtask command failed; each message says what to do next.

use std::io;
use std::process::ExitStatus;

use apistore_testing::etcd::FixtureError;

/// `Result` with [`XtaskError`] as its default error.
pub(crate) type Result<T, E = XtaskError> = std::result::Result<T, E>;

/// Why an xtask command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum XtaskError {
    /// A file-system call failed.
    #[error("could not {action}: {source}")]
    Io {
        action: String,
        #[source]
        source: io::Error,
    },
    /// `protoc-bin-vendored` ships no protoc for this platform.
    #[error("{0}; install protoc yourself and set PROTOC to its path")]
    Protoc(String),
    /// No etcd binary and no way to install one here.
    #[error("{0}")]
    EtcdMissing(String),
    /// `cargo fmt` or `cargo clippy` is missing.
    #[error("{0}")]
    ToolMissing(String),
    /// The etcd fixture failed.
    #[error(transparent)]
    Fixture(#[from] FixtureError),
    /// A command could not be started at all.
    #[error("could not run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },
    /// A command ran and failed.
    #[error("step failed: `{command}` ({status})")]
    StepFailed { command: String, status: ExitStatus },
    /// A command ran past its time limit and was killed.
    #[error("step timed out: `{command}` ran over {limit_secs} s and was killed ({threads})")]
    StepTimedOut {
        command: String,
        limit_secs: u64,
        /// Its threads when killed: name and what each waited in, from `/proc`.
        threads: String,
    },
    /// Go is needed (to build etcd 3.5 or 3.6, or the reference harness) and missing.
    #[error("{0}")]
    GoMissing(String),
    /// The differential tests exist but the reference harness they drive does not.
    #[error("{0}")]
    InteropIncomplete(String),
    /// Committed files generated from the Go reference differ from what it generates now.
    #[error("{0}")]
    GeneratedDiffers(String),
    /// Some steps of a run that goes on after a failure failed.
    #[error("failed: {}", .0.join("; "))]
    StepsFailed(Vec<String>),
    /// A generator's inputs could not be read or do not fit together.
    #[error("{0}")]
    Generate(String),
    /// `cargo xtask bench` before the bench crate exists.
    #[error("crates/apistore-bench does not exist yet, so there is nothing to benchmark")]
    NoBenchCrate,
}

impl XtaskError {
    pub(crate) fn msg(text: impl Into<String>) -> Self {
        Self::Generate(text.into())
    }

    pub(crate) fn io(action: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            action: action.into(),
            source,
        }
    }
}
