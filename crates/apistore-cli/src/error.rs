//! Why a command failed, and what that means for its exit code.
//!
//! Exit code 2 for a command line that cannot be carried out (as clap's own usage
//! errors): a file named on it that cannot be read or is not an object, a selector or
//! flag value that does not parse, flags that do not go together, a key outside kube's
//! layout. Exit code 1 for everything that went wrong past the command line: the store
//! refused or failed the request, etcd could not be reached, the output could not be
//! written. The message starts with kube-apiserver's reason for the error.

use std::path::PathBuf;

use apistore::{BuildError, ConnectError, SelectorError, StorageError};

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The store refused or failed the request.
    #[error("{0}")]
    Storage(#[from] StorageError),
    /// etcd could not be reached, or the configuration is unusable.
    #[error("{0}")]
    Connect(#[from] BuildError),
    /// The TLS files named on the command line are unusable.
    #[error("{0}")]
    Tls(ConnectError),
    /// A file named on the command line (`-f`) cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    ReadFile {
        /// The file (`-` for stdin).
        path: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// A `-f` file is neither a JSON nor a YAML object.
    #[error("{} is not a JSON or YAML object: {message}", path.display())]
    NotAnObject {
        /// The file (`-` for stdin).
        path: PathBuf,
        /// The parser's complaint.
        message: String,
    },
    /// A `-f` object kube's registry would refuse for its key (no apiVersion or kind,
    /// another name or namespace).
    #[error("{0}")]
    BadObject(String),
    /// A label or field selector does not parse.
    #[error("invalid {flag}: {source}")]
    Selector {
        /// The flag that carried it.
        flag: &'static str,
        /// What is wrong with it.
        source: SelectorError,
    },
    /// A flag's value does not parse (`--rv-match`, `--storage-media-type`).
    #[error("invalid {flag}: {message}")]
    FlagValue {
        /// The flag.
        flag: &'static str,
        /// What is wrong with its value.
        message: String,
    },
    /// A key that kube's storage layout does not place, without `--resource`.
    #[error("{0}")]
    Key(String),
    /// The flags ask for something that cannot be done (a missing companion flag, two
    /// that exclude each other).
    #[error("{0}")]
    Usage(String),
    /// Some of the values a rewrite visited could not be rewritten.
    #[error("{failed} of {scanned} values under {prefix:?} could not be rewritten")]
    RewriteFailed {
        /// How many failed.
        failed: usize,
        /// How many were visited.
        scanned: u64,
        /// The key prefix rewritten.
        prefix: String,
    },
    /// The result could not be printed.
    #[error("{0}")]
    Output(String),
    /// A restore left keys unrestored: some failed, some exist (without --overwrite).
    #[error("restore incomplete: {failed} failed, {skipped} skipped")]
    RestoreIncomplete {
        /// Keys that could not be read or written.
        failed: usize,
        /// Keys not written (they exist, or another key failed).
        skipped: usize,
    },
    /// The `--snapshot` or `--from-snapshot` file cannot be read: what and where.
    #[error("{0}")]
    Snapshot(apistore_snapshot::SnapshotError),
    /// The command was stopped by SIGINT (Ctrl-C) before it ended.
    #[error("stopped by SIGINT")]
    Interrupted,
    /// A watch ended with an ERROR event: kube's status, whose message names the key.
    #[error("{}", .0.message)]
    WatchEnded(Box<apistore::Status>),
    /// An error and what to do about it (`explain.rs`): the error's own text first
    /// (without a closing full stop, which would end the line before the fix).
    #[error("{}; {fix}", error.to_string().trim_end_matches('.'))]
    WithFix {
        /// The error as the store or the command gave it.
        error: Box<Self>,
        /// What to do about it.
        fix: String,
    },
}

impl CliError {
    /// kube-apiserver's reason for this error.
    pub(crate) fn reason(&self) -> String {
        match self {
            Self::Storage(err) => err.status().reason,
            Self::Connect(BuildError::Connect(_)) => "ServiceUnavailable".to_owned(),
            Self::Connect(_) => "BadRequest".to_owned(),
            Self::RewriteFailed { .. } | Self::Output(_) | Self::Snapshot(_) => {
                "InternalError".to_owned()
            }
            Self::Interrupted => "Interrupted".to_owned(),
            Self::WatchEnded(status) => status.reason.clone(),
            Self::WithFix { error, .. } => error.reason(),
            Self::RestoreIncomplete { failed: 0, .. } => "AlreadyExists".to_owned(),
            Self::RestoreIncomplete { .. } => "InternalError".to_owned(),
            Self::Tls(_)
            | Self::ReadFile { .. }
            | Self::NotAnObject { .. }
            | Self::Selector { .. }
            | Self::FlagValue { .. }
            | Self::Key(_)
            | Self::Usage(_) => "BadRequest".to_owned(),
            Self::BadObject(_) => "Invalid".to_owned(),
        }
    }

    /// The process exit code: 2 for a mistake on the command line, 1 for a failure
    /// past it, 130 (128 + SIGINT, as a shell reports it) when interrupted.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            Self::Interrupted => 130,
            Self::WithFix { error, .. } => error.exit_code(),
            // The encryption configuration file named by --encryption-config.
            Self::Connect(BuildError::Encryption { .. })
            | Self::Tls(_)
            | Self::ReadFile { .. }
            | Self::NotAnObject { .. }
            | Self::BadObject(_)
            | Self::Selector { .. }
            | Self::FlagValue { .. }
            | Self::Key(_)
            | Self::Usage(_) => 2,
            Self::Storage(_)
            | Self::WatchEnded(_)
            | Self::Connect(_)
            | Self::RewriteFailed { .. }
            | Self::Output(_)
            | Self::Snapshot(_)
            | Self::RestoreIncomplete { .. } => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_mistakes_exit_2_and_failures_exit_1() {
        let usage = CliError::Usage("no".to_owned());
        let file = CliError::ReadFile {
            path: "x.json".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        let storage = CliError::Storage(StorageError::bad_request("/k", "no"));
        let output = CliError::Output("broken pipe".to_owned());
        assert_eq!(usage.exit_code(), 2);
        assert_eq!(file.exit_code(), 2);
        assert_eq!(file.reason(), "BadRequest");
        assert_eq!(storage.exit_code(), 1);
        assert_eq!(output.exit_code(), 1);
    }
}
