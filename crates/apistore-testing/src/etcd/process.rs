//! One etcd member as an operating-system process: its command line, free ports, a
//! watchdog that kills it when the test process goes away, and the `/health` probe.
//!
//! Nothing here knows whether the member is alone or part of a cluster: a cluster
//! fixture builds one [`MemberSpec`] per member, joins their
//! [`MemberSpec::initial_cluster_entry`]s, and launches each with [`launch`].

use std::ffi::OsString;
use std::fs::{self, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use super::EtcdOptions;
use super::error::{FixtureError, Result};

/// How many lines of etcd's log an error message carries.
const LOG_TAIL_LINES: usize = 40;
/// How long a graceful stop may take before the member is killed.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often startup polls the process and `/health`.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Starts etcd with a watchdog, without `unsafe` (no `pre_exec`, no prctl).
///
/// `sh` duplicates its stdin (a pipe whose only writer is the test process) to fd 3,
/// forks a subshell that blocks reading it, then `exec`s etcd, so etcd keeps the pid
/// the test process knows. The subshell ignores terminal signals and waits for one of:
/// - the line `detach`: the fixture is stopping etcd itself; the watchdog just exits;
/// - end of file without `detach`: the test process is gone (exited, panicked with
///   abort, was killed), and statics such as the shared etcd are never dropped; the
///   watchdog kills etcd and removes `$1`, the member's temporary directory.
const WATCHDOG_SCRIPT: &str = r#"
cleanup_dir=$1
shift
etcd_pid=$$
exec 3<&0
(
  trap '' HUP INT QUIT TERM
  while read -r line; do
    if [ "$line" = detach ]; then exit 0; fi
  done
  kill -KILL "$etcd_pid" 2>/dev/null
  # Wait until etcd is gone; an unreaped zombie counts as gone.
  tries=0
  while [ "$tries" -lt 20 ]; do
    if [ -r "/proc/$etcd_pid/stat" ]; then
      read -r stat <"/proc/$etcd_pid/stat" || break
      state=${stat##*) }
      case $state in Z*|X*) break ;; esac
    elif ! kill -0 "$etcd_pid" 2>/dev/null; then
      break
    fi
    sleep 0.5
    tries=$((tries + 1))
  done
  rm -rf "$cleanup_dir"
) <&3 3<&- >/dev/null 2>&1 &
exec "$@" </dev/null 3<&-
"#;

/// What one member of an etcd cluster listens on and where it keeps its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberSpec {
    /// `--name`, unique within the cluster.
    pub(crate) name: String,
    /// The loopback port of the client URL.
    pub(crate) client_port: u16,
    /// The loopback port of the peer URL.
    pub(crate) peer_port: u16,
    /// `--data-dir`.
    pub(crate) data_dir: PathBuf,
}

impl MemberSpec {
    /// The client URL, e.g. `http://127.0.0.1:23791`.
    pub(crate) fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// The peer URL, e.g. `http://127.0.0.1:23801`.
    pub(crate) fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// This member's entry in `--initial-cluster`: `name=peer-url`.
    pub(crate) fn initial_cluster_entry(&self) -> String {
        format!("{}={}", self.name, self.peer_url())
    }

    /// etcd's command line for this member of the cluster `initial_cluster`
    /// (comma-separated [`Self::initial_cluster_entry`]s, this member's included).
    pub(crate) fn args(
        &self,
        binary: &Path,
        initial_cluster: &str,
        cluster_token: &str,
        options: &EtcdOptions,
    ) -> Vec<OsString> {
        let mut data_dir = OsString::from("--data-dir=");
        data_dir.push(&self.data_dir);
        let mut args: Vec<OsString> = vec![
            format!("--name={}", self.name).into(),
            data_dir,
            format!("--listen-client-urls={}", self.client_url()).into(),
            format!("--advertise-client-urls={}", self.client_url()).into(),
            format!("--listen-peer-urls={}", self.peer_url()).into(),
            format!("--initial-advertise-peer-urls={}", self.peer_url()).into(),
            format!("--initial-cluster={initial_cluster}").into(),
            "--initial-cluster-state=new".into(),
            format!("--initial-cluster-token={cluster_token}").into(),
        ];
        if let Some(interval) = options.progress_notify_interval {
            args.push(format!("{}={}", progress_notify_flag(binary), go_duration(interval)).into());
        }
        args.extend(options.extra_args.iter().map(OsString::from));
        args
    }
}

/// The flag that sets etcd's progress notification interval for `binary`: etcd 3.7
/// knows only `--watch-progress-notify-interval` (3.6 deprecated the experimental
/// name, 3.7 removed it), the lines before it the experimental one (3.6 both). Asked
/// of `binary --version` once per binary.
fn progress_notify_flag(binary: &Path) -> &'static str {
    static SEEN: Mutex<Vec<(PathBuf, &'static str)>> = Mutex::new(Vec::new());
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, flag)) = seen.iter().find(|(path, _)| path == binary) {
        return flag;
    }
    let reported = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    let flag = progress_notify_flag_of(&reported);
    seen.push((binary.to_path_buf(), flag));
    flag
}

/// [`progress_notify_flag`] from `etcd --version`'s output; the experimental flag when
/// it names no version (every etcd before 3.7 knows it).
fn progress_notify_flag_of(reported: &str) -> &'static str {
    let release = reported
        .lines()
        .find_map(|line| line.strip_prefix("etcd Version: "))
        .unwrap_or_default();
    let mut numbers = release.trim().split('.').map(str::parse::<u32>);
    match (numbers.next(), numbers.next()) {
        (Some(Ok(major)), Some(Ok(minor))) if (major, minor) >= (3, 7) => {
            "--watch-progress-notify-interval"
        }
        _ => "--experimental-watch-progress-notify-interval",
    }
}

/// The flags that move a member's client URLs to `https://` and open a plain-HTTP
/// metrics listener on `metrics_port`, where `/health` can be probed without TLS (etcd
/// serves `/health` there too). The certificate flags are the caller's.
pub(crate) fn tls_client_args(member: &MemberSpec, metrics_port: u16) -> Vec<OsString> {
    let client_url = format!("https://127.0.0.1:{}", member.client_port);
    vec![
        format!("--listen-client-urls={client_url}").into(),
        format!("--advertise-client-urls={client_url}").into(),
        format!("--listen-metrics-urls=http://127.0.0.1:{metrics_port}").into(),
    ]
}

/// The port to probe `/health` on: a plain-HTTP loopback metrics listener when the
/// arguments open one (the last such flag wins, as in etcd), else the client port.
pub(crate) fn health_port(member: &MemberSpec, args: &[OsString]) -> u16 {
    args.iter()
        .rev()
        .filter_map(|arg| arg.to_str())
        .find_map(|arg| arg.strip_prefix("--listen-metrics-urls=http://127.0.0.1:"))
        .and_then(|port| port.trim_end_matches('/').parse().ok())
        .unwrap_or(member.client_port)
}

/// A duration the way Go's `time.ParseDuration` (etcd's flag parser) reads it.
pub(crate) fn go_duration(duration: Duration) -> String {
    if duration.subsec_nanos() % 1_000_000 == 0 {
        format!("{}ms", duration.as_millis())
    } else {
        format!("{}ns", duration.as_nanos())
    }
}

/// `count` distinct loopback ports that were free a moment ago.
///
/// The listeners are held together so the ports differ, then dropped so etcd can bind
/// them. Another process may take one in between; callers retry with fresh ports when
/// etcd reports `address already in use`.
pub(crate) fn free_loopback_ports(count: usize) -> Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| FixtureError::io("bind a free loopback port for etcd", e))?;
    listeners
        .iter()
        .map(|listener| listener.local_addr().map(|addr| addr.port()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| FixtureError::io("read the port of a loopback listener", e))
}

/// A running member: the etcd child and the pipe that keeps its watchdog waiting.
#[derive(Debug)]
pub(crate) struct Running {
    child: Child,
    watchdog: Option<ChildStdin>,
}

impl Running {
    /// etcd's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still there (not exited).
    pub(crate) fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Tells the watchdog that the fixture handles etcd itself from now on.
    fn detach_watchdog(&mut self) {
        if let Some(mut pipe) = self.watchdog.take() {
            // If the watchdog is already gone there is nothing to tell it.
            let _ = pipe.write_all(b"detach\n");
        }
    }

    /// SIGKILL, then reap.
    pub(crate) fn kill(mut self) {
        self.detach_watchdog();
        // Errors mean the process has already exited, which is what we want.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM and wait up to [`STOP_GRACE`] for a clean exit, then SIGKILL.
    pub(crate) fn stop(mut self) {
        self.detach_watchdog();
        // std can only send SIGKILL; the shell's `kill` builtin sends SIGTERM without
        // `unsafe` and without depending on a `kill` binary being installed.
        let term_sent = Command::new("sh")
            .args(["-c", "kill -TERM \"$1\"", "sh"])
            .arg(self.pid().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if term_sent {
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline {
                if !self.is_alive() {
                    return;
                }
                thread::sleep(POLL_INTERVAL);
            }
        }
        self.kill();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.watchdog.is_some() {
            self.detach_watchdog();
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Why [`launch`] failed.
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// etcd exited saying a port was taken: retry with fresh ports.
    PortTaken {
        /// The log lines of this attempt.
        log_tail: String,
    },
    /// Anything else.
    Fatal(FixtureError),
}

impl From<FixtureError> for LaunchError {
    fn from(error: FixtureError) -> Self {
        Self::Fatal(error)
    }
}

/// Where a member's files live and how long it may take to come up.
#[derive(Debug, Clone)]
pub(crate) struct LaunchSpec<'a> {
    /// The etcd binary.
    pub(crate) binary: &'a Path,
    /// Its arguments, from [`MemberSpec::args`].
    pub(crate) args: &'a [OsString],
    /// The member, for its client port and URL.
    pub(crate) member: &'a MemberSpec,
    /// The log file etcd's stdout and stderr are appended to.
    pub(crate) log: &'a Path,
    /// What the watchdog removes if the test process dies.
    pub(crate) cleanup_dir: &'a Path,
    /// How long to wait for `/health`.
    pub(crate) startup_timeout: Duration,
}

/// Spawns etcd under a watchdog and waits until it answers `/health`.
///
/// On failure the process is gone (killed and reaped) before this returns.
pub(crate) fn launch(spec: &LaunchSpec<'_>) -> Result<Running, LaunchError> {
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(spec.log)
        .map_err(|e| FixtureError::io(format!("open etcd's log {}", spec.log.display()), e))?;
    let log_start = log
        .seek(SeekFrom::End(0))
        .map_err(|e| FixtureError::io(format!("seek etcd's log {}", spec.log.display()), e))?;
    let mut header = format!("--- apistore fixture: {}", spec.binary.display());
    for arg in spec.args {
        header.push(' ');
        header.push_str(&arg.to_string_lossy());
    }
    header.push('\n');
    log.write_all(header.as_bytes())
        .map_err(|e| FixtureError::io(format!("write etcd's log {}", spec.log.display()), e))?;
    let stderr = log
        .try_clone()
        .map_err(|e| FixtureError::io("duplicate the handle of etcd's log", e))?;

    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WATCHDOG_SCRIPT)
        .arg("apistore-etcd-watchdog")
        .arg(spec.cleanup_dir)
        .arg(spec.binary)
        .args(spec.args)
        .stdin(Stdio::piped())
        .stdout(log)
        .stderr(stderr)
        .spawn()
        .map_err(|e| {
            FixtureError::io(
                format!("run `sh` to start etcd ({})", spec.binary.display()),
                e,
            )
        })?;
    let watchdog = child.stdin.take();
    let mut running = Running { child, watchdog };

    let endpoint = spec.member.client_url();
    let health_port = health_port(spec.member, spec.args);
    let started = Instant::now();
    loop {
        match running.child.try_wait() {
            Ok(None) => {}
            Ok(Some(status)) => {
                let attempt_log = read_from(spec.log, log_start);
                let log_tail = tail(&attempt_log, LOG_TAIL_LINES);
                running.kill();
                if attempt_log.contains("address already in use") {
                    return Err(LaunchError::PortTaken { log_tail });
                }
                return Err(FixtureError::Exited {
                    endpoint,
                    status: status.to_string(),
                    log: spec.log.to_path_buf(),
                    log_tail,
                }
                .into());
            }
            Err(e) => {
                running.kill();
                return Err(FixtureError::io("poll the etcd process", e).into());
            }
        }
        if probe_health(health_port) {
            return Ok(running);
        }
        if started.elapsed() >= spec.startup_timeout {
            running.kill();
            let log_tail = tail(&read_from(spec.log, log_start), LOG_TAIL_LINES);
            return Err(FixtureError::NotHealthy {
                endpoint,
                waited: spec.startup_timeout,
                log: spec.log.to_path_buf(),
                log_tail,
            }
            .into());
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Whether etcd on this loopback port answers `GET /health` with `"health":"true"`.
///
/// A raw HTTP/1.0 request, so the fixture needs no HTTP client and no etcd client.
pub(crate) fn probe_health(client_port: u16) -> bool {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, client_port));
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) else {
        return false;
    };
    let timeout = Some(Duration::from_secs(2));
    if stream.set_read_timeout(timeout).is_err() || stream.set_write_timeout(timeout).is_err() {
        return false;
    }
    if stream
        .write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut response = Vec::new();
    if stream.take(64 * 1024).read_to_end(&mut response).is_err() {
        return false;
    }
    let response = String::from_utf8_lossy(&response);
    response.contains(r#""health":"true""#)
}

/// The log from byte `offset` on, or an explanation when it cannot be read.
fn read_from(log: &Path, offset: u64) -> String {
    let read = || -> io::Result<String> {
        let mut file = fs::File::open(log)?;
        file.seek(SeekFrom::Start(offset))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    read().unwrap_or_else(|e| format!("(could not read {}: {e})", log.display()))
}

/// The last `lines` lines of `text`, indented for an error message.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    let start = all.len().saturating_sub(lines);
    let mut out = String::new();
    for line in &all[start..] {
        out.push_str("    ");
        out.push_str(line);
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("    (the log is empty)\n");
    }
    out
}

/// The tail of a whole log file, for errors that happen outside [`launch`].
pub(crate) fn log_tail(log: &Path) -> String {
    tail(&read_from(log, 0), LOG_TAIL_LINES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_progress_notify_flag_follows_the_etcd_line() {
        let experimental = "--experimental-watch-progress-notify-interval";
        let plain = "--watch-progress-notify-interval";
        for (reported, flag) in [
            (
                "etcd Version: 3.4.23\nGit SHA: Not provided\n",
                experimental,
            ),
            ("etcd Version: 3.5.35\n", experimental),
            ("etcd Version: 3.6.16\n", experimental),
            ("etcd Version: 3.7.3\nGo Version: go1.26.8\n", plain),
            ("etcd Version: 3.10.0\n", plain),
            ("etcd Version: 4.0.0\n", plain),
            ("", experimental),
            ("not etcd\n", experimental),
        ] {
            assert_eq!(progress_notify_flag_of(reported), flag, "{reported:?}");
        }
    }

    #[test]
    fn member_args_name_every_url_and_the_cluster() {
        let member = MemberSpec {
            name: "m1".into(),
            client_port: 1111,
            peer_port: 2222,
            data_dir: PathBuf::from("/tmp/x/data"),
        };
        let options = EtcdOptions {
            progress_notify_interval: Some(Duration::from_millis(1500)),
            extra_args: vec!["--snapshot-count=5".into()],
            ..EtcdOptions::default()
        };
        // A binary whose version cannot be read gets the flags of etcd before 3.7.
        let args: Vec<String> = member
            .args(
                Path::new("/nonexistent/etcd"),
                &member.initial_cluster_entry(),
                "tok",
                &options,
            )
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "--name=m1",
                "--data-dir=/tmp/x/data",
                "--listen-client-urls=http://127.0.0.1:1111",
                "--advertise-client-urls=http://127.0.0.1:1111",
                "--listen-peer-urls=http://127.0.0.1:2222",
                "--initial-advertise-peer-urls=http://127.0.0.1:2222",
                "--initial-cluster=m1=http://127.0.0.1:2222",
                "--initial-cluster-state=new",
                "--initial-cluster-token=tok",
                "--experimental-watch-progress-notify-interval=1500ms",
                "--snapshot-count=5",
            ]
        );
    }

    #[test]
    fn tls_clients_are_probed_on_the_metrics_listener() {
        let member = MemberSpec {
            name: "m1".into(),
            client_port: 1111,
            peer_port: 2222,
            data_dir: PathBuf::from("/tmp/x/data"),
        };
        let args = tls_client_args(&member, 3333);
        let args_text: Vec<String> = args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args_text,
            [
                "--listen-client-urls=https://127.0.0.1:1111",
                "--advertise-client-urls=https://127.0.0.1:1111",
                "--listen-metrics-urls=http://127.0.0.1:3333",
            ]
        );
        assert_eq!(health_port(&member, &args), 3333);
        assert_eq!(health_port(&member, &[]), 1111);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration(Duration::from_secs(5)), "5000ms");
        assert_eq!(go_duration(Duration::from_micros(1500)), "1500000ns");
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_loopback_ports(3).unwrap();
        assert_eq!(ports.len(), 3);
        assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
    }

    #[test]
    fn tail_keeps_the_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "    b\n    c\n");
        assert_eq!(tail("", 2), "    (the log is empty)\n");
    }

    #[test]
    fn nothing_listening_is_not_healthy() {
        let port = free_loopback_ports(1).unwrap()[0];
        assert!(!probe_health(port));
    }
}
