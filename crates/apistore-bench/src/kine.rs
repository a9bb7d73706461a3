//! The CRUD workloads on kine over SQLite (k3s-io/kine, the etcd shim k3s runs
//! kube-apiserver on): apistore against raw etcd-client, both talking to the same kine,
//! so the ratio is what apistore costs on kine, not what kine costs against etcd.
//!
//! `cargo xtask bench` builds kine (`interop/kine`, Go with cgo) and hands it over in
//! [`KINE_BIN_ENV`]; without it (no Go, `--no-go`) the section is left out with a note.
//! The harness starts kine itself, as it starts its etcd, so that kine's CPU is read
//! from its own process.

use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{BenchError, Result};

/// Environment variable naming the kine binary.
pub(crate) const KINE_BIN_ENV: &str = "APISTORE_KINE_BIN";

/// What `--only` matches to run this section.
pub(crate) const SELECTOR: &str = "kine";

/// How long kine may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The kine binary [`KINE_BIN_ENV`] names, if it is set.
pub(crate) fn binary_from_env() -> Option<PathBuf> {
    std::env::var_os(KINE_BIN_ENV)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// A kine over a new SQLite file in a directory of its own, on a free loopback port;
/// dropping it kills kine and removes the directory.
pub(crate) struct KineProcess {
    child: Child,
    dir: PathBuf,
    endpoint: String,
}

impl KineProcess {
    /// Starts `binary` and waits until it listens.
    pub(crate) fn start(binary: &Path) -> Result<Self> {
        let io = |what: String| move |source| BenchError::Io { what, source };
        let dir = std::env::temp_dir().join(format!("apistore-bench-kine-{}", std::process::id()));
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(io(format!("empty {}", dir.display())))?;
        }
        fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|listener| listener.local_addr())
            .map_err(io("find a free loopback port".to_owned()))?
            .port();
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let log = fs::File::create(dir.join("kine.log"))
            .map_err(io(format!("create {}", dir.join("kine.log").display())))?;
        let log_err = log
            .try_clone()
            .map_err(io("open kine's log twice".to_owned()))?;
        // The same SQLite settings as `cargo xtask test --backend kine-sqlite`.
        let child = Command::new(binary)
            .arg(format!("--listen-address={address}"))
            .arg(format!(
                "--endpoint=sqlite://{}?_journal=WAL&cache=shared&_busy_timeout=30000",
                dir.join("state.db").display()
            ))
            // No metrics server: its default :8080 may be taken.
            .arg("--metrics-bind-address=0")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(io(format!("start {}", binary.display())))?;
        let mut kine = Self {
            child,
            dir,
            endpoint: format!("http://{address}"),
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = kine.child.try_wait() {
                return Err(BenchError::Invalid(format!(
                    "kine exited ({status}); its log: {}",
                    kine.dir.join("kine.log").display()
                )));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(kine);
            }
            if started.elapsed() > START_TIMEOUT {
                return Err(BenchError::Invalid(format!(
                    "kine did not listen on {address} within {START_TIMEOUT:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// kine's process id, for its CPU time.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The client URL.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

impl Drop for KineProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_dir_all(&self.dir);
    }
}
