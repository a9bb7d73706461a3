//! A throwaway PostgreSQL cluster for `cargo xtask test --backend kine-postgres`: kine
//! stores its data in it.
//!
//! The server is Debian's (`apt-get install postgresql`: `initdb` and `postgres` in
//! `/usr/lib/postgresql/<major>/bin`, or `initdb` on `PATH`). A run makes a new
//! cluster in a temporary directory (`initdb`, trust authentication, user
//! `postgres`), serves it on a free port of 127.0.0.1 only (its Unix socket in the same
//! directory, never the system's), and on drop stops it and removes the directory.
//!
//! PostgreSQL refuses to run as root. Run as root (CI's containers are), xtask runs
//! `initdb` and `postgres` as the `postgres` account Debian's package creates, through
//! `setpriv`; without that account it fails, saying what to do.

use std::fs;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::{Result, XtaskError};
use crate::run::{first_output_line, run_step};
use crate::watchdog::Watchdog;

/// Where Debian installs each PostgreSQL major's programs: `<this>/<major>/bin`.
const DEBIAN_LIB_DIR: &str = "/usr/lib/postgresql";
/// The account a root xtask runs PostgreSQL as.
const SERVICE_ACCOUNT: &str = "postgres";
/// The superuser `initdb` makes; kine connects as it.
const SUPERUSER: &str = "postgres";
/// The server's `max_connections`: more than kine opens
/// ([`crate::kine`] caps its pool below this).
pub(crate) const MAX_CONNECTIONS: u32 = 200;
/// How long the server may take to accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running throwaway cluster.
pub(crate) struct PostgresServer {
    port: u16,
    /// The cluster's directory (data, socket), removed on drop.
    dir: PathBuf,
    server: Option<Watchdog>,
    version: String,
}

/// Who runs PostgreSQL's programs: this process's user, or (as root) an account of
/// its own, by uid and gid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RunAs {
    Me,
    Account { uid: u32, gid: u32 },
}

impl RunAs {
    /// A command running `program` as this user.
    fn command(self, program: &Path) -> Command {
        match self {
            Self::Me => Command::new(program),
            Self::Account { uid, gid } => {
                let mut command = Command::new("setpriv");
                command
                    .arg(format!("--reuid={uid}"))
                    .arg(format!("--regid={gid}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(program);
                command
            }
        }
    }
}

impl PostgresServer {
    /// Makes a new cluster in a new temporary directory and starts it; its log goes to
    /// `log` (kept after the run, unlike the cluster).
    pub(crate) fn start(log: &Path) -> Result<Self> {
        let bin = bin_dir()?;
        let run_as = run_as()?;
        let stamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "apistore-kine-postgres-{}-{stamp}",
            std::process::id()
        ));
        let mut server = Self {
            port: 0,
            dir,
            server: None,
            version: version(&bin),
        };
        let mut last_error = String::new();
        // A port found free may be taken before PostgreSQL binds it: try a few. The
        // watchdog of a failed try removed the cluster with it, so each try makes one.
        for _ in 0..5 {
            let data = init_cluster(&server.dir, &bin, run_as)?;
            let port = crate::kine::free_port()?;
            let postgres = run_as.command(&bin.join("postgres"));
            let mut args: Vec<std::ffi::OsString> =
                postgres.get_args().map(ToOwned::to_owned).collect();
            args.extend(["-D".into(), data.clone().into_os_string()]);
            for setting in [
                format!("listen_addresses={}", Ipv4Addr::LOCALHOST),
                format!("port={port}"),
                format!("unix_socket_directories={}", server.dir.display()),
                "fsync=off".to_owned(),
                "synchronous_commit=off".to_owned(),
                "full_page_writes=off".to_owned(),
                format!("max_connections={MAX_CONNECTIONS}"),
            ] {
                args.extend(["-c".into(), setting.into()]);
            }
            server.server = Some(Watchdog::spawn(
                Path::new(postgres.get_program()),
                args,
                &server.dir,
                log,
                // Fast shutdown: TERM would wait for kine's connections to close.
                "INT",
                // The cluster goes with the server, even if xtask is interrupted.
                Some(&server.dir),
            )?);
            server.port = port;
            match server.wait_ready(&bin) {
                Ok(()) => {
                    println!(
                        "xtask: {} is up at 127.0.0.1:{port} (data in {}, its log: {})",
                        server.version,
                        server.dir.display(),
                        log.display()
                    );
                    return Ok(server);
                }
                Err(error) => {
                    last_error = error;
                    if let Some(mut watchdog) = server.server.take() {
                        watchdog.stop();
                    }
                }
            }
        }
        Err(XtaskError::ToolMissing(format!(
            "PostgreSQL did not start: {last_error}; its log: {}",
            log.display()
        )))
    }

    /// Waits until `pg_isready` says the server accepts connections.
    fn wait_ready(&mut self, bin: &Path) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if let Some(status) = self.server.as_mut().and_then(Watchdog::exited) {
                return Err(format!("it exited ({status})"));
            }
            let ready = Command::new(bin.join("pg_isready"))
                .args(["--host", "127.0.0.1", "--port", &self.port.to_string()])
                .args(["--username", SUPERUSER, "--timeout", "2"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success());
            if ready {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(200));
        }
        Err(format!(
            "nothing accepted connections on 127.0.0.1:{} after {START_TIMEOUT:?}",
            self.port
        ))
    }

    /// kine's `--endpoint` for a database `database` of this cluster (kine creates it).
    pub(crate) fn kine_endpoint(&self, database: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@127.0.0.1:{}/{database}?sslmode=disable",
            self.port
        )
    }
}

impl Drop for PostgresServer {
    fn drop(&mut self) {
        if let Some(mut watchdog) = self.server.take() {
            watchdog.stop();
        }
        // The watchdog removed it once PostgreSQL exited; this is for a cluster whose
        // server never started.
        match fs::remove_dir_all(&self.dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                eprintln!("xtask: could not remove {}: {error}", self.dir.display());
            }
            _ => {}
        }
    }
}

/// Makes `dir` (owned by the user PostgreSQL runs as) and a new cluster in
/// `dir/data`; returns the latter.
fn init_cluster(dir: &Path, bin: &Path, run_as: RunAs) -> Result<PathBuf> {
    fs::create_dir_all(dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    if let RunAs::Account { uid, gid } = run_as {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid))
            .map_err(|e| XtaskError::io(format!("chown {}", dir.display()), e))?;
    }
    let data = dir.join("data");
    // No fsync: the cluster lives for one run, and the tests are about what kine
    // answers, not about surviving a power cut.
    run_step(
        run_as
            .command(&bin.join("initdb"))
            .current_dir(dir)
            .arg("--pgdata")
            .arg(&data)
            .args(["--username", SUPERUSER, "--auth=trust", "--encoding=UTF8"])
            .args(["--locale=C", "--no-sync"])
            .stdin(Stdio::null())
            .stdout(Stdio::null()),
    )?;
    Ok(data)
}

/// The directory holding `initdb`, `postgres` and `pg_isready`: the one `initdb` on
/// `PATH` resolves to (Debian links only some programs into `/usr/local/bin` or
/// `/usr/bin`, so its link is followed), else Debian's newest major.
fn bin_dir() -> Result<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("initdb"))
            .find(|candidate| candidate.is_file())
            .and_then(|initdb| fs::canonicalize(initdb).ok())
            .and_then(|initdb| initdb.parent().map(Path::to_path_buf))
    });
    let debian = || {
        let mut majors: Vec<(u32, PathBuf)> = fs::read_dir(DEBIAN_LIB_DIR)
            .ok()?
            .filter_map(|entry| {
                let entry = entry.ok()?;
                let major = entry.file_name().to_str()?.parse().ok()?;
                Some((major, entry.path().join("bin")))
            })
            .collect();
        majors.sort();
        majors.pop().map(|(_, bin)| bin)
    };
    on_path
        .filter(|bin| has_programs(bin))
        .or_else(|| debian().filter(|bin| has_programs(bin)))
        .ok_or_else(|| {
            XtaskError::ToolMissing(
                "--backend kine-postgres needs PostgreSQL's server programs (initdb, \
                 postgres, pg_isready): `apt-get install postgresql` on Debian or Ubuntu \
                 (found neither initdb on PATH nor /usr/lib/postgresql/<major>/bin)"
                    .to_owned(),
            )
        })
}

fn has_programs(bin: &Path) -> bool {
    ["initdb", "postgres", "pg_isready"]
        .iter()
        .all(|program| bin.join(program).is_file())
}

/// This user, unless it is root, which PostgreSQL refuses: then [`SERVICE_ACCOUNT`].
fn run_as() -> Result<RunAs> {
    if !crate::provision::is_root() {
        return Ok(RunAs::Me);
    }
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id")
            .args([flag, SERVICE_ACCOUNT])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    match (id("-u"), id("-g")) {
        (Some(uid), Some(gid)) if uid != 0 => Ok(RunAs::Account { uid, gid }),
        _ => Err(XtaskError::ToolMissing(format!(
            "PostgreSQL refuses to run as root, and there is no `{SERVICE_ACCOUNT}` account \
             to run it as: run xtask as another user, or create the account (Debian's \
             postgresql package does: `apt-get install postgresql`)"
        ))),
    }
}

/// `postgres --version`'s first line.
fn version(bin: &Path) -> String {
    first_output_line(&bin.join("postgres"), &["--version"])
        .unwrap_or_else(|| "PostgreSQL (version unknown)".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_runs_programs_through_setpriv() {
        let program = Path::new("/usr/lib/postgresql/15/bin/initdb");
        let me = RunAs::Me.command(program);
        assert_eq!(me.get_program(), program.as_os_str());
        assert_eq!(me.get_args().count(), 0);
        let account = RunAs::Account { uid: 101, gid: 104 }.command(program);
        assert_eq!(account.get_program(), "setpriv");
        let args: Vec<_> = account.get_args().collect();
        assert_eq!(
            args,
            [
                "--reuid=101",
                "--regid=104",
                "--clear-groups",
                "--",
                "/usr/lib/postgresql/15/bin/initdb"
            ]
        );
    }
}
