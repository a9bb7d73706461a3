//! The fixture's error: every message says what went wrong and what to do about it.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use super::{ETCD_BIN_ENV, WELL_KNOWN_ETCD_LOCATIONS};

/// `Result` with [`FixtureError`] as its default error.
pub type Result<T, E = FixtureError> = std::result::Result<T, E>;

/// Why a real etcd could not be found, started, stopped or restarted.
///
/// `Debug` prints the same text as `Display`, so a test that
/// returns `Result<(), FixtureError>` fails with a readable message and etcd's log tail.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// No etcd binary was found anywhere the fixture looks.
    #[error(
        "no etcd binary found (looked at ${ETCD_BIN_ENV}, `etcd` on PATH, {locations}). \
         Get one with `apt-get install etcd-server` (as root, Debian or Ubuntu), or set \
         {ETCD_BIN_ENV} to the path of an etcd (v3.4 or newer) binary, or run the tests \
         through `cargo xtask test`, which provisions etcd",
        locations = WELL_KNOWN_ETCD_LOCATIONS.join(", ")
    )]
    EtcdNotFound,

    /// `APISTORE_ETCD_BIN` names something that is not an executable file.
    #[error(
        "{ETCD_BIN_ENV} is set to {path}, which is not an executable file; point it at an \
         etcd (v3.4 or newer) binary, or unset it to search PATH"
    )]
    BadEtcdBin {
        /// The value of `APISTORE_ETCD_BIN`.
        path: PathBuf,
    },

    /// An operating-system call the fixture needs failed.
    #[error("could not {action}: {source}")]
    Io {
        /// What the fixture was doing, as a verb phrase ("create a temporary directory").
        action: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },

    /// etcd kept failing to bind its ports, which other processes took in between.
    #[error(
        "etcd could not bind free loopback ports in {attempts} attempts (another process \
         took them each time); last lines of {log}:\n{log_tail}"
    )]
    PortsTaken {
        /// How many port pairs were tried.
        attempts: usize,
        /// etcd's log file.
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },

    /// etcd exited before it became healthy.
    #[error(
        "etcd for {endpoint} exited during startup ({status}); last lines of {log}:\n{log_tail}"
    )]
    Exited {
        /// The client URL etcd was to serve.
        endpoint: String,
        /// How it exited.
        status: String,
        /// etcd's log file.
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },

    /// etcd ran but did not answer `/health` with `"health":"true"` in time.
    #[error(
        "etcd at {endpoint} did not become healthy within {waited:?} (it was killed); \
         last lines of {log}:\n{log_tail}"
    )]
    NotHealthy {
        /// The client URL that was probed.
        endpoint: String,
        /// How long the fixture waited.
        waited: Duration,
        /// etcd's log file.
        log: PathBuf,
        /// The last lines of that log.
        log_tail: String,
    },

    /// The shared etcd of this process failed to start on first use; later callers get
    /// the same failure without trying again.
    #[error("the shared etcd of this test process could not be started: {message}")]
    SharedUnavailable {
        /// The error of the first attempt, as text.
        message: String,
    },
}

impl FixtureError {
    pub(crate) fn io(action: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            action: action.into(),
            source,
        }
    }
}

impl fmt::Debug for FixtureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The Display text already names the cause; Debug is what a failing test
        // prints, and escaped newlines would make etcd's log tail unreadable.
        fmt::Display::fmt(self, f)
    }
}
