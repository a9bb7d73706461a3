//! The kube arm's process: `interop/gobench` (Go, k8s.io/apiserver v0.37.2's etcd3
//! store), started once per run against the bench's etcd and driven one request at a
//! time over its stdin and stdout, a JSON line each way. It times its own calls, as this
//! harness times its own, so that neither side's figures include the other's protocol.
//!
//! `cargo xtask bench` builds it and names it in [`GOBENCH_BIN_ENV`]; without that the
//! kube section is left out and the report says so.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;

use crate::error::{BenchError, Result};

/// The environment variable naming the Go arm's binary.
pub(crate) const GOBENCH_BIN_ENV: &str = "APISTORE_GOBENCH_BIN";

/// The Go arm's binary, if `cargo xtask bench` built one.
pub(crate) fn binary_from_env() -> Option<PathBuf> {
    std::env::var_os(GOBENCH_BIN_ENV)
        .map(PathBuf::from)
        .filter(|path| path.is_file())
}

/// One answer of the Go arm: what one timed run measured there.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct GoAnswer {
    ok: bool,
    #[serde(default)]
    error: String,
    /// Completed calls (a paged list counts once).
    #[serde(default)]
    pub(crate) ops: u64,
    /// From the first call's start to the last call's end.
    #[serde(default)]
    pub(crate) seconds: f64,
    /// Every call's latency in seconds, sorted.
    #[serde(default)]
    pub(crate) latencies: Vec<f64>,
    /// The Go process's CPU time during the run.
    #[serde(default)]
    pub(crate) cpu_seconds: f64,
    /// Items the lists returned.
    #[serde(default)]
    pub(crate) objects: u64,
    /// `GetList` calls made.
    #[serde(default)]
    pub(crate) calls: u64,
    /// Seconds to decode one stored value into a typed `v1.Pod`.
    #[serde(default)]
    pub(crate) decode_seconds: f64,
    /// Heap held per decoded `v1.Pod`.
    #[serde(default)]
    pub(crate) bytes_per_object: f64,
    /// `writeThroughput`'s background lister: its successful lists.
    #[serde(default)]
    pub(crate) list_calls: u64,
    /// `writeThroughput`'s background lister: the items its lists returned.
    #[serde(default)]
    pub(crate) list_objects: u64,
    /// Consistent lists kube's cacher served itself during a list run, without
    /// falling back to etcd (its `apiserver_watch_cache_consistent_read_total`).
    #[serde(default)]
    pub(crate) consistent_from_cache: u64,
    /// `writeThroughput`'s watch-lists the cacher ended before the end of their
    /// initial events (counted in `list_calls` too).
    #[serde(default)]
    pub(crate) watch_lists_cut: u64,
    /// `writeThroughput`'s watchers (background and latency tracker) the cacher ended
    /// before the run did.
    #[serde(default)]
    pub(crate) watchers_cut: u64,
    /// Whether the latency tracker was one of `watchers_cut`.
    #[serde(default)]
    pub(crate) tracker_cut: bool,
    /// `cacheWatchWait` after a `cacheWatch` with delays: Added events that carried
    /// their write's time.
    #[serde(default)]
    pub(crate) delays: u64,
    /// The median of those events' times from write to watcher, in seconds.
    #[serde(default)]
    pub(crate) delay_p50: f64,
    /// Their p99, the element kube's latency tracker takes, in seconds.
    #[serde(default)]
    pub(crate) delay_p99: f64,
}

impl GoAnswer {
    /// The latency at quantile `q` (0..=1), in seconds; 0 without calls.
    pub(crate) fn latency(&self, q: f64) -> f64 {
        let Some(last) = self.latencies.len().checked_sub(1) else {
            return 0.0;
        };
        let index = ((last as f64) * q).round() as usize;
        self.latencies[index.min(last)]
    }

    /// Calls per second.
    pub(crate) fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds.max(1e-9)
    }

    /// Reads one answer line; a refusal is an error naming what the Go side said.
    fn parse(line: &str) -> Result<Self> {
        let answer: Self = serde_json::from_str(line)?;
        if answer.ok {
            Ok(answer)
        } else {
            Err(BenchError::Invalid(format!("kube arm: {}", answer.error)))
        }
    }
}

/// The running Go arm.
pub(crate) struct GoArm {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl GoArm {
    /// Starts `binary` against the etcd at `endpoint`.
    pub(crate) fn start(binary: &Path, endpoint: &str) -> Result<Self> {
        let io = |what: &str, source| BenchError::Io {
            what: format!("{what} {}", binary.display()),
            source,
        };
        let mut child = Command::new(binary)
            .args(["-endpoints", endpoint])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| io("start", e))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(BenchError::Invalid(
                "the kube arm started without pipes".to_owned(),
            ));
        };
        Ok(Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// Sends one request and waits for its answer. Blocking: call it from
    /// `tokio::task::block_in_place`.
    pub(crate) fn call(&mut self, request: &Value) -> Result<GoAnswer> {
        let io = |what: &str, source| BenchError::Io {
            what: format!("{what} the kube arm"),
            source,
        };
        writeln!(self.stdin, "{request}").map_err(|e| io("write to", e))?;
        self.stdin.flush().map_err(|e| io("write to", e))?;
        let mut line = String::new();
        let read = self
            .stdout
            .read_line(&mut line)
            .map_err(|e| io("read from", e))?;
        if read == 0 {
            return Err(BenchError::Invalid(format!(
                "the kube arm exited before answering {request}"
            )));
        }
        GoAnswer::parse(&line)
    }
}

impl Drop for GoArm {
    fn drop(&mut self) {
        let _ = writeln!(self.stdin, "{{\"op\":\"quit\"}}");
        let _ = self.stdin.flush();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_and_refusals_are_errors() {
        let answer = GoAnswer::parse(
            r#"{"ok":true,"ops":4,"seconds":2,"latencies":[0.1,0.2,0.3,0.4],"cpuSeconds":0.5,"objects":40,"calls":8}"#,
        )
        .unwrap();
        assert_eq!(answer.ops_per_sec(), 2.0);
        assert_eq!(answer.latency(0.5), 0.3);
        assert_eq!(answer.latency(1.0), 0.4);
        assert_eq!((answer.objects, answer.calls), (40, 8));
        assert_eq!(answer.cpu_seconds, 0.5);
        let refused = GoAnswer::parse(r#"{"ok":false,"error":"etcd down"}"#).unwrap_err();
        assert!(refused.to_string().contains("etcd down"));
        assert_eq!(GoAnswer::default().latency(0.5), 0.0);
    }
}
