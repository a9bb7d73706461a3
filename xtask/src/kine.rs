//! `cargo xtask test --backend kine-sqlite|kine-postgres` (and `cargo xtask kine`, the
//! first): the etcd3 backend's suites and the command's tests against kine
//! (k3s-io/kine), the etcd shim k3s runs kube-apiserver on, over SQLite or PostgreSQL.
//!
//! kine is built like the etcd lines of [`crate::etcd_versions`]: a Go module of a few
//! lines over kine's own `pkg/app`, in `interop/kine/`, whose `go.mod` pins the release.
//! The binary goes to `target/tools/kine-<release>/kine` with the release recorded
//! beside it, and is built again only when the pin moves. Its SQLite driver
//! (mattn/go-sqlite3) is C, so the build needs cgo and a C compiler; its PostgreSQL
//! driver (jackc/pgx) is Go, in the same binary. PostgreSQL itself is Debian's, a
//! throwaway cluster per run ([`crate::postgres`]).
//!
//! kine answers only what kube-apiserver sends (its four transaction shapes, ranges
//! without sorts or `Serializable`, no `DeleteRange`, no lease keep-alive through the
//! lease API, ...). The tests that need what kine does not have are skipped by name
//! ([`NOT_APPLICABLE`]), each printed with its reason before the run; every other test
//! of the selected binaries runs and must pass.

mod not_applicable;

use std::ffi::OsStr;
use std::fmt;
use std::fs;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use apistore_testing::etcd::ETCD_ENDPOINTS_ENV;

use crate::error::{Result, XtaskError};
use crate::go::Go;
use crate::postgres::PostgresServer;
use crate::provision;
use crate::run::first_output_line;
use crate::test_build::{WorkspaceBuild, run_all};
use crate::watchdog::Watchdog;

pub(crate) use not_applicable::NOT_APPLICABLE;
use not_applicable::{print_not_applicable, skip_args};

/// kine's Go module, relative to the workspace root.
pub(crate) const MODULE_DIR: &str = "interop/kine";
/// The module whose version `interop/kine/go.mod` pins.
const KINE_MODULE: &str = "github.com/k3s-io/kine";
/// How long kine may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The database kine keeps its table in, on PostgreSQL (kine creates it).
const POSTGRES_DATABASE: &str = "kine";

/// The packages whose test binaries run against kine: the etcd3 backend's suites (its
/// own and `apistore-testing`'s conformance suite, run from its `tests/`) and the
/// command's.
pub(crate) const PACKAGES: [&str; 2] = ["apistore-etcd3", "apistore-cli"];

/// The database kine stores its key space in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Datastore {
    /// A SQLite file (k3s's default), in [`Datastore::run_dir`].
    Sqlite,
    /// A throwaway PostgreSQL cluster of Debian's PostgreSQL.
    Postgres,
}

impl Datastore {
    /// The `--backend` value naming kine over this datastore.
    pub(crate) fn backend_name(self) -> &'static str {
        match self {
            Self::Sqlite => "kine-sqlite",
            Self::Postgres => "kine-postgres",
        }
    }

    /// Where a run's logs (and SQLite's file) go, relative to the workspace root;
    /// emptied at the start of each run and kept after it. (`target/kine` for SQLite
    /// is where `cargo xtask kine` has always put them.)
    fn run_dir(self) -> &'static str {
        match self {
            Self::Sqlite => "target/kine",
            Self::Postgres => "target/kine-postgres",
        }
    }
}

impl fmt::Display for Datastore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
        })
    }
}

/// The kine binary `interop/kine/go.mod` pins, built (with cgo) unless built before.
pub(crate) fn provision_kine(root: &Path, go: &Go) -> Result<PathBuf> {
    let module_dir = root.join(MODULE_DIR);
    let go_mod = module_dir.join("go.mod");
    let text = fs::read_to_string(&go_mod)
        .map_err(|e| XtaskError::io(format!("read {}", go_mod.display()), e))?;
    let release = pinned_release(&text).ok_or_else(|| {
        XtaskError::ToolMissing(format!(
            "{} pins no `{KINE_MODULE} v0.x.y`",
            go_mod.display()
        ))
    })?;
    let dir = root
        .join(provision::TOOLS_DIR)
        .join(format!("kine-{release}"));
    let binary = dir.join("kine");
    let record = dir.join("version");
    let recorded = fs::read_to_string(&record).unwrap_or_default();
    if binary.is_file() && recorded.trim() == release {
        println!("xtask: kine {release}: {} (built before)", binary.display());
        return Ok(binary);
    }
    println!(
        "xtask: building kine {release} from {} (cgo: SQLite is C; a few minutes the \
         first time)",
        module_dir.display()
    );
    fs::create_dir_all(&dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    // As kine's own release builds: paths trimmed, the version stamped in.
    let version_flag = format!("-X {KINE_MODULE}/pkg/version.Version=v{release}");
    go.build(
        &module_dir,
        &binary,
        &[("CGO_ENABLED", "1")],
        &["-trimpath", "-ldflags", &version_flag],
    )?;
    let reported = kine_version(&binary);
    if !reported.contains(&format!("v{release}")) {
        return Err(XtaskError::ToolMissing(format!(
            "{} was built from {} pinning {release} but says `{reported}`",
            binary.display(),
            go_mod.display()
        )));
    }
    fs::write(&record, format!("{release}\n"))
        .map_err(|e| XtaskError::io(format!("write {}", record.display()), e))?;
    println!("xtask: kine {release}: {}", binary.display());
    Ok(binary)
}

/// The release `go.mod` pins for [`KINE_MODULE`], without its `v`: `0.17.5` from
/// `require github.com/k3s-io/kine v0.17.5` (or the same line inside a block).
fn pinned_release(go_mod: &str) -> Option<&str> {
    go_mod.lines().find_map(|line| {
        let line = line.split("//").next().unwrap_or_default().trim();
        let line = line.strip_prefix("require").map_or(line, str::trim_start);
        let mut words = line.split_whitespace();
        if words.next() != Some(KINE_MODULE) {
            return None;
        }
        let release = words.next()?.strip_prefix('v')?;
        let numeric = release.split('.').count() == 3
            && release
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        numeric.then_some(release)
    })
}

/// `kine --version`'s first line, e.g. `kine version v0.17.5`.
pub(crate) fn kine_version(binary: &Path) -> String {
    first_output_line(binary, &["--version"]).unwrap_or_else(|| "version unknown".to_owned())
}

/// A running kine on a free loopback port, under a [`Watchdog`].
pub(crate) struct KineServer {
    endpoint: String,
    log: PathBuf,
    watchdog: Option<Watchdog>,
}

impl KineServer {
    /// Starts `binary` with `datastore_args` (`--endpoint=` a SQLite URL or a
    /// `postgres://` one, and the pool's limits), its log in `dir`.
    pub(crate) fn start(binary: &Path, dir: &Path, datastore_args: &[String]) -> Result<Self> {
        let log = dir.join("kine.log");
        let mut last_error = String::new();
        // A port found free may be taken before kine binds it: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let watchdog = Watchdog::spawn(
                binary,
                [
                    format!("--listen-address={address}"),
                    // No metrics server: its default :8080 may be taken.
                    "--metrics-bind-address=0".to_owned(),
                ]
                .iter()
                .chain(datastore_args),
                dir,
                &log,
                "TERM",
                None,
            )?;
            let mut server = Self {
                endpoint: format!("http://{address}"),
                log: log.clone(),
                watchdog: Some(watchdog),
            };
            match server.wait_listening(address) {
                Ok(()) => return Ok(server),
                Err(error) => {
                    last_error = error;
                    server.stop();
                }
            }
        }
        Err(XtaskError::ToolMissing(format!(
            "kine did not start: {last_error}; its log: {}",
            log.display()
        )))
    }

    fn wait_listening(&mut self, address: SocketAddr) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if let Some(status) = self.watchdog.as_mut().and_then(Watchdog::exited) {
                return Err(format!("it exited ({status})"));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "nothing listened on {address} after {START_TIMEOUT:?}"
        ))
    }

    /// The client URL, e.g. `http://127.0.0.1:41237`.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// kine's log file.
    pub(crate) fn log_path(&self) -> &Path {
        &self.log
    }

    /// Stops kine and waits for it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            watchdog.stop();
        }
    }
}

/// A loopback port nothing listens on right now.
pub(crate) fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| XtaskError::io("find a free loopback port".to_owned(), e))?;
    listener
        .local_addr()
        .map(|address| address.port())
        .map_err(|e| XtaskError::io("find a free loopback port".to_owned(), e))
}

/// `cargo xtask test --backend kine-sqlite|kine-postgres` (`cargo xtask kine`: SQLite):
/// builds kine (unless built before) and every test binary (the build `cargo xtask
/// test` makes), then runs [`PACKAGES`]' binaries against a fresh kine over
/// `datastore`.
pub(crate) fn command(root: &Path, datastore: Datastore) -> Result<()> {
    let go = Go::find(&format!(
        "cargo xtask test --backend {}",
        datastore.backend_name()
    ))?;
    let cargo = crate::cargo();
    let protoc = provision::protoc(root)?;
    let binary = provision_kine(root, &go)?;
    let build = WorkspaceBuild::build(crate::cargo_command(&cargo, root, &protoc))?;
    run_suites(root, &binary, &build, datastore)?;
    println!(
        "xtask: the etcd3 backend's and the command's tests passed on kine over {datastore} \
         ({} not applicable, listed above)",
        NOT_APPLICABLE.len()
    );
    Ok(())
}

/// Runs [`PACKAGES`]' test binaries of `build` against a fresh kine from `binary` over
/// a fresh `datastore`, each without its [`NOT_APPLICABLE`] tests; then stops kine
/// (and PostgreSQL, whose cluster goes with it).
pub(crate) fn run_suites(
    root: &Path,
    binary: &Path,
    build: &WorkspaceBuild,
    datastore: Datastore,
) -> Result<()> {
    let dir = root.join(datastore.run_dir());
    if dir.exists() {
        fs::remove_dir_all(&dir)
            .map_err(|e| XtaskError::io(format!("empty {}", dir.display()), e))?;
    }
    fs::create_dir_all(&dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    // Declared before kine, so dropped after it: kine's connections close first.
    let postgres;
    let datastore_args = match datastore {
        Datastore::Sqlite => vec![format!(
            "--endpoint=sqlite://{}?_journal=WAL&cache=shared&_busy_timeout=30000",
            dir.join("state.db").display()
        )],
        Datastore::Postgres => {
            postgres = PostgresServer::start(&dir.join("postgres.log"))?;
            vec![
                format!("--endpoint={}", postgres.kine_endpoint(POSTGRES_DATABASE)),
                // kine's pool is unbounded by default: the tests' bursts of concurrent
                // writes (large_list's) opened more connections than the server takes
                // (`sorry, too many clients already`, 1 run of 6). Past this cap kine's
                // queries wait for a connection instead.
                format!(
                    "--datastore-max-open-connections={}",
                    crate::postgres::MAX_CONNECTIONS / 2
                ),
            ]
        }
    };
    let mut server = KineServer::start(binary, &dir, &datastore_args)?;
    println!(
        "xtask: {} over {datastore} is up at {} (its log: {})",
        kine_version(binary),
        server.endpoint(),
        server.log_path().display()
    );
    print_not_applicable();
    let env = [(ETCD_ENDPOINTS_ENV, OsStr::new(server.endpoint()))];
    let mut failed = Vec::new();
    for test in build.tests_of(&PACKAGES) {
        let args = skip_args(&test.target);
        if let Err(error) = run_all([test], &env, &args) {
            eprintln!("xtask: {error}");
            failed.push(format!(
                "{} ({}) on kine over {datastore}",
                test.target, test.package
            ));
        }
    }
    server.stop();
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
    fn the_pin_is_read_from_go_mod() {
        let block = "module x\n\ngo 1.26.5\n\nrequire (\n\tgithub.com/k3s-io/kine v0.17.5\n\
                     \tgithub.com/sirupsen/logrus v1.10.2\n)\n";
        assert_eq!(pinned_release(block), Some("0.17.5"));
        assert_eq!(
            pinned_release("require github.com/k3s-io/kine v0.17.4 // pinned\n"),
            Some("0.17.4")
        );
        assert_eq!(pinned_release("module x\n"), None);
        assert_eq!(
            pinned_release("require github.com/k3s-io/kine v0.18.0-rc1\n"),
            None
        );
    }
}
