//! A real etcd for tests: never a mock.
//!
//! [`EtcdServer::start`] runs the etcd binary found by [`etcd_binary`] on free loopback
//! ports with a temporary data directory, and returns once it answers `/health`. Tests
//! that need their own etcd (to stop, kill or restart it, or to pass it flags) start
//! one; every other test shares one etcd per test process through [`shared_endpoint`]
//! and keeps to its own keys under [`unique_prefix`].
//!
//! No etcd outlives the process that started it: each runs under a small `sh`
//! watchdog that kills it and removes its directory when the test process exits,
//! however it exits, since statics such as the shared etcd are never dropped.
//!
//! ```no_run
//! use apistore_testing::etcd::{EtcdOptions, EtcdServer, FixtureError};
//!
//! # fn main() -> Result<(), FixtureError> {
//! let mut etcd = EtcdServer::start(EtcdOptions::default())?;
//! let endpoint = etcd.endpoint(); // e.g. "http://127.0.0.1:41237"
//! etcd.restart()?; // same ports, same data
//! # let _ = endpoint;
//! # Ok(())
//! # }
//! ```
//!
//! The environment steers it:
//! - `APISTORE_ETCD_BIN`: the etcd binary to run (else `etcd` on `PATH`, else
//!   `/usr/bin/etcd`, `/usr/local/bin/etcd`);
//! - `APISTORE_ETCD_ENDPOINTS`: an etcd that is already running (`cargo xtask test`
//!   starts one); [`shared_endpoint`] returns it instead of starting its own.
//!
//! This follows the role of kube-apiserver's `pkg/storage/etcd3/testserver`, which runs
//! an embedded etcd; we run the real binary instead.

#[cfg(feature = "cluster")]
mod cluster;
mod error;
mod process;
mod shared;

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

#[cfg(feature = "cluster")]
pub use self::cluster::{ClusterError, ClusterResult, EtcdCluster, MemberStatus};
pub use self::error::{FixtureError, Result};
use self::process::{LaunchError, LaunchSpec, MemberSpec, Running};
pub use self::shared::{shared_endpoint, unique_prefix};

/// Environment variable naming the etcd binary to run.
pub const ETCD_BIN_ENV: &str = "APISTORE_ETCD_BIN";
/// Environment variable naming a running etcd's client URLs, comma separated.
pub const ETCD_ENDPOINTS_ENV: &str = "APISTORE_ETCD_ENDPOINTS";
/// Where [`etcd_binary`] looks after `PATH`.
pub const WELL_KNOWN_ETCD_LOCATIONS: [&str; 2] = ["/usr/bin/etcd", "/usr/local/bin/etcd"];

/// How many port pairs [`EtcdServer::start`] tries before giving up.
const PORT_ATTEMPTS: usize = 5;
/// The `--initial-cluster-token` of single-member servers.
const CLUSTER_TOKEN: &str = "apistore-test";

/// Finds the etcd binary to run.
///
/// In order: `$APISTORE_ETCD_BIN` (which must then be an executable file), `etcd` on
/// `PATH`, then [`WELL_KNOWN_ETCD_LOCATIONS`]. The error says how to get one.
pub fn etcd_binary() -> Result<PathBuf> {
    find_etcd(
        env::var_os(ETCD_BIN_ENV),
        env::var_os("PATH"),
        &WELL_KNOWN_ETCD_LOCATIONS,
    )
}

/// [`etcd_binary`] with its environment passed in, so it can be tested.
fn find_etcd(
    etcd_bin: Option<OsString>,
    path: Option<OsString>,
    well_known: &[&str],
) -> Result<PathBuf> {
    if let Some(value) = etcd_bin.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(FixtureError::BadEtcdBin { path })
        };
    }
    let on_path = path
        .map(|paths| env::split_paths(&paths).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|dir| dir.join("etcd"))
        .find(|candidate| is_executable(candidate));
    on_path
        .or_else(|| {
            well_known
                .iter()
                .map(PathBuf::from)
                .find(|candidate| is_executable(candidate))
        })
        .ok_or(FixtureError::EtcdNotFound)
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file())
}

/// How to run an [`EtcdServer`]. `Default` gives a plain single-member etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdOptions {
    /// `--name` of the member; `"apistore-test"` by default.
    pub name: String,
    /// `--experimental-watch-progress-notify-interval`: how often etcd sends progress
    /// notifications to watches that ask for them (etcd's default is 10 minutes).
    pub progress_notify_interval: Option<Duration>,
    /// More flags, passed to etcd after the fixture's own (a later flag wins).
    pub extra_args: Vec<String>,
    /// How long to wait for `/health` after each start; 60 seconds by default (etcd is
    /// up in about a second, but a 2-core machine running a soak or several builds can
    /// hold a start up for many; a member that exits fails at once whatever this says).
    pub startup_timeout: Duration,
    /// Serve clients over TLS ([`EtcdServer`] only, not clusters): the client URL is
    /// `https://`, the certificate flags (`--cert-file`, `--key-file`,
    /// `--trusted-ca-file`, `--client-cert-auth`) come in [`Self::extra_args`], and
    /// `/health` is probed over plain HTTP on a metrics listener
    /// (`--listen-metrics-urls`) on a third loopback port. Off by default.
    pub client_tls: bool,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        Self {
            name: "apistore-test".to_owned(),
            progress_notify_interval: None,
            extra_args: Vec::new(),
            startup_timeout: Duration::from_secs(60),
            client_tls: false,
        }
    }
}

/// A single-member etcd process owned by a test.
///
/// Dropping it kills etcd and removes its temporary directory (data and log).
#[derive(Debug)]
pub struct EtcdServer {
    binary: PathBuf,
    member: MemberSpec,
    args: Vec<OsString>,
    log: PathBuf,
    startup_timeout: Duration,
    /// The plain-HTTP metrics port `/health` is probed on when clients use TLS.
    metrics_port: Option<u16>,
    process: Option<Running>,
    // Declared last: dropped after the process is gone.
    dir: TempDir,
}

impl EtcdServer {
    /// Starts etcd and waits until it is healthy.
    ///
    /// Picks free loopback ports for the client and peer URLs (retrying with new ones
    /// if another process takes them first), keeps data and log in a fresh temporary
    /// directory, and fails with the tail of etcd's log if it does not come up within
    /// [`EtcdOptions::startup_timeout`].
    pub fn start(options: EtcdOptions) -> Result<Self> {
        Self::start_binary(etcd_binary()?, options)
    }

    /// [`Self::start`] with this etcd binary instead of the one [`etcd_binary`] finds
    /// (`cargo xtask test --etcd 3.6` runs one it built, whatever the environment says).
    pub fn start_binary(binary: PathBuf, options: EtcdOptions) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("apistore-etcd-")
            .tempdir()
            .map_err(|e| FixtureError::io("create a temporary directory for etcd", e))?;
        let log = dir.path().join("etcd.log");
        let data_dir = dir.path().join("data");

        for _ in 0..PORT_ATTEMPTS {
            let ports = process::free_loopback_ports(if options.client_tls { 3 } else { 2 })?;
            let member = MemberSpec {
                name: options.name.clone(),
                client_port: ports[0],
                peer_port: ports[1],
                data_dir: data_dir.clone(),
            };
            let mut args = member.args(
                &binary,
                &member.initial_cluster_entry(),
                CLUSTER_TOKEN,
                &options,
            );
            let metrics_port = options.client_tls.then(|| ports[2]);
            if let Some(metrics_port) = metrics_port {
                // Before the caller's flags, which still win.
                let at = args.len() - options.extra_args.len();
                args.splice(at..at, process::tls_client_args(&member, metrics_port));
            }
            // A failed attempt may have recorded its peer URL in the data directory.
            if data_dir.exists() {
                fs::remove_dir_all(&data_dir)
                    .map_err(|e| FixtureError::io(format!("remove {}", data_dir.display()), e))?;
            }
            let spec = LaunchSpec {
                binary: &binary,
                args: &args,
                member: &member,
                log: &log,
                cleanup_dir: dir.path(),
                startup_timeout: options.startup_timeout,
            };
            match process::launch(&spec) {
                Ok(running) => {
                    return Ok(Self {
                        binary,
                        member,
                        args,
                        log,
                        startup_timeout: options.startup_timeout,
                        metrics_port,
                        process: Some(running),
                        dir,
                    });
                }
                Err(LaunchError::PortTaken { .. }) => {}
                Err(LaunchError::Fatal(error)) => return Err(error),
            }
        }
        Err(FixtureError::PortsTaken {
            attempts: PORT_ATTEMPTS,
            log_tail: process::log_tail(&log),
            log,
        })
    }

    /// The client URL, e.g. `http://127.0.0.1:41237` (`https://` with
    /// [`EtcdOptions::client_tls`]).
    pub fn endpoint(&self) -> String {
        if self.metrics_port.is_some() {
            format!("https://127.0.0.1:{}", self.member.client_port)
        } else {
            self.member.client_url()
        }
    }

    /// The peer URL, e.g. `http://127.0.0.1:41238`.
    pub fn peer_url(&self) -> String {
        self.member.peer_url()
    }

    /// etcd's `--data-dir`. It survives [`Self::stop`], [`Self::kill`] and
    /// [`Self::restart`], and is removed on drop.
    pub fn data_dir(&self) -> &Path {
        &self.member.data_dir
    }

    /// The file etcd's output goes to (the test's own output stays quiet).
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The etcd binary this server runs.
    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// etcd's process id, or `None` after [`Self::stop`] or [`Self::kill`].
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(Running::pid)
    }

    /// Whether etcd answers `/health` with `"health":"true"` right now.
    pub fn is_healthy(&self) -> bool {
        process::probe_health(self.metrics_port.unwrap_or(self.member.client_port))
    }

    /// Stops etcd gracefully (SIGTERM, then SIGKILL after 10 seconds), keeping its data.
    /// Does nothing if it is not running.
    pub fn stop(&mut self) {
        if let Some(running) = self.process.take() {
            running.stop();
        }
    }

    /// Kills etcd at once (SIGKILL), as a crash would, keeping its data. Does nothing if
    /// it is not running.
    pub fn kill(&mut self) {
        if let Some(running) = self.process.take() {
            running.kill();
        }
    }

    /// Stops etcd if it runs, then starts it again on the same ports and data directory,
    /// and waits until it is healthy.
    ///
    /// Unlike [`Self::start`] it cannot move to other ports: clients hold the endpoint.
    pub fn restart(&mut self) -> Result<()> {
        self.stop();
        let spec = LaunchSpec {
            binary: &self.binary,
            args: &self.args,
            member: &self.member,
            log: &self.log,
            cleanup_dir: self.dir.path(),
            startup_timeout: self.startup_timeout,
        };
        match process::launch(&spec) {
            Ok(running) => {
                self.process = Some(running);
                Ok(())
            }
            Err(LaunchError::PortTaken { log_tail }) => Err(FixtureError::PortsTaken {
                attempts: 1,
                log: self.log.clone(),
                log_tail,
            }),
            Err(LaunchError::Fatal(error)) => Err(error),
        }
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests;
