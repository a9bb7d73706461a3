//! `cargo xtask soak-tests`: every test binary of one workspace build run again and
//! again while a busy loop per core loads the machine, to show that the suite does not
//! fail at random (a timing race shows up on a busy CI machine long before it shows up
//! on a quiet one).
//!
//! This module owns the load ([`Hogs`]), one run of one binary ([`run_once`]) and the
//! tally; `main.rs` provisions, builds and starts a fresh etcd for each round, as
//! `cargo xtask test` does for its one round.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::error::{Result, XtaskError};
use crate::test_build::Binary;

/// The longest the busy loops run, whatever happens to this process's main thread: they
/// are threads of this process, so they also end with it (Ctrl-C, a failure).
pub(crate) const HOG_LIMIT: Duration = Duration::from_secs(3 * 60 * 60);

/// The longest one run of one test binary may take before it is killed and counted as
/// failed (a hang is a failure worth seeing, not a reason to wait forever).
pub(crate) const RUN_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// Where the output of failed runs is kept, relative to the workspace root.
pub(crate) const LOG_DIR: &str = "target/soak-tests";

/// How many lines of a failed run's output are printed (all of it is in its log).
const TAIL_LINES: usize = 40;

/// One busy thread per core, spinning until dropped or until [`HOG_LIMIT`].
#[derive(Debug)]
pub(crate) struct Hogs {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Hogs {
    /// Starts one busy thread per core the machine reports (at least one), each ending
    /// after `limit` at the latest.
    pub(crate) fn start(limit: Duration) -> Self {
        let cores = thread::available_parallelism().map_or(1, usize::from);
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + limit;
        let threads = (0..cores)
            .filter_map(|index| {
                let stop = Arc::clone(&stop);
                let spawned = thread::Builder::new()
                    .name(format!("soak-hog-{index}"))
                    .spawn(move || spin(&stop, deadline));
                match spawned {
                    Ok(thread) => Some(thread),
                    Err(error) => {
                        eprintln!("xtask: could not start busy loop {index}: {error}");
                        None
                    }
                }
            })
            .collect();
        Self { stop, threads }
    }

    /// How many busy loops run.
    pub(crate) fn count(&self) -> usize {
        self.threads.len()
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            // A busy loop has nothing to report; a panic in one is not the suite's.
            let _ = thread.join();
        }
    }
}

/// Burns a core until told to stop or the deadline passes (checked every few
/// milliseconds of work, so stopping is prompt).
fn spin(stop: &AtomicBool, deadline: Instant) {
    let mut state = 1u64;
    while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
        for _ in 0..100_000 {
            state = std::hint::black_box(
                state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1),
            );
        }
    }
}

/// How one run of a test binary went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Passed,
    /// Failed (or was killed at [`RUN_TIMEOUT`]); its whole output is in this log.
    Failed(PathBuf),
}

/// Runs `binary` once from its package's directory with `env`, its output going to a
/// log file under `log_dir` (kept only if the run fails, and then its tail printed).
pub(crate) fn run_once(
    binary: &Binary,
    env: &[(&str, &std::ffi::OsStr)],
    log_dir: &Path,
    round: u32,
) -> Result<(Outcome, Duration)> {
    fs::create_dir_all(log_dir)
        .map_err(|e| XtaskError::io(format!("create {}", log_dir.display()), e))?;
    let log = log_dir.join(format!(
        "{}-{}-run{round}.log",
        binary.package, binary.target
    ));
    let file =
        File::create(&log).map_err(|e| XtaskError::io(format!("create {}", log.display()), e))?;
    let stderr = file
        .try_clone()
        .map_err(|e| XtaskError::io(format!("open {}", log.display()), e))?;
    let mut command = Command::new(&binary.executable);
    command
        .current_dir(&binary.package_dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr);
    let started = Instant::now();
    let mut child = command.spawn().map_err(|source| XtaskError::Spawn {
        command: binary.executable.display().to_string(),
        source,
    })?;
    let passed = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status.success(),
            Ok(None) if started.elapsed() > RUN_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                eprintln!(
                    "xtask: {} ({}) still running after {} s: killed",
                    binary.target,
                    binary.package,
                    RUN_TIMEOUT.as_secs()
                );
                break false;
            }
            Ok(None) => thread::sleep(Duration::from_millis(50)),
            Err(error) => {
                return Err(XtaskError::io(
                    format!("wait for {}", binary.executable.display()),
                    error,
                ));
            }
        }
    };
    let took = started.elapsed();
    if passed {
        // Only failures are worth keeping.
        let _ = fs::remove_file(&log);
        Ok((Outcome::Passed, took))
    } else {
        print_tail(&log);
        Ok((Outcome::Failed(log), took))
    }
}

/// The last [`TAIL_LINES`] lines of a failed run's log, where the harness names the
/// failed tests and their panics.
fn print_tail(log: &Path) {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(TAIL_LINES);
    eprintln!("    --- last lines of {}:", log.display());
    for line in &lines[from..] {
        eprintln!("    | {line}");
    }
}

/// Runs and failures per binary, in the order the binaries ran.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    rows: Vec<Row>,
}

#[derive(Debug)]
struct Row {
    label: String,
    runs: u32,
    failed: u32,
    time: Duration,
    logs: Vec<PathBuf>,
}

impl Tally {
    /// A row for each binary, none run yet.
    pub(crate) fn new<'a>(binaries: impl IntoIterator<Item = &'a Binary>) -> Self {
        Self {
            rows: binaries
                .into_iter()
                .map(|binary| Row {
                    label: format!("{} ({})", binary.target, binary.package),
                    runs: 0,
                    failed: 0,
                    time: Duration::ZERO,
                    logs: Vec::new(),
                })
                .collect(),
        }
    }

    /// Counts one run of the `index`th binary.
    pub(crate) fn record(&mut self, index: usize, outcome: Outcome, took: Duration) {
        let Some(row) = self.rows.get_mut(index) else {
            return;
        };
        row.runs += 1;
        row.time += took;
        if let Outcome::Failed(log) = outcome {
            row.failed += 1;
            row.logs.push(log);
        }
    }

    /// (runs passed, runs failed) over every binary.
    pub(crate) fn totals(&self) -> (u32, u32) {
        self.rows.iter().fold((0, 0), |(passed, failed), row| {
            (passed + row.runs - row.failed, failed + row.failed)
        })
    }

    /// The table of binaries and the closing `N passed, M failed` line (counting runs).
    pub(crate) fn summary(&self) -> String {
        let mut out = String::from("  runs  failed  mean s  binary\n");
        for row in &self.rows {
            let mean = if row.runs == 0 {
                0.0
            } else {
                row.time.as_secs_f64() / f64::from(row.runs)
            };
            out.push_str(&format!(
                "  {:>4}  {:>6}  {:>6.1}  {}\n",
                row.runs, row.failed, mean, row.label
            ));
            for log in &row.logs {
                out.push_str(&format!("                        log: {}\n", log.display()));
            }
        }
        let (passed, failed) = self.totals();
        out.push_str(&format!("{passed} passed, {failed} failed"));
        out
    }

    /// The binaries with a failed run, for the error.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.rows
            .iter()
            .filter(|row| row.failed > 0)
            .map(|row| format!("{} ({} of {} runs)", row.label, row.failed, row.runs))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binary(package: &str, target: &str) -> Binary {
        Binary {
            package: package.to_owned(),
            target: target.to_owned(),
            package_dir: PathBuf::from("/w"),
            executable: PathBuf::from("/w/t"),
        }
    }

    #[test]
    fn the_tally_counts_runs_per_binary_and_in_all() {
        let binaries = [binary("a", "one"), binary("b", "two")];
        let mut tally = Tally::new(&binaries);
        let second = Duration::from_secs(1);
        tally.record(0, Outcome::Passed, second);
        tally.record(0, Outcome::Failed(PathBuf::from("/l")), second);
        tally.record(1, Outcome::Passed, second);
        tally.record(7, Outcome::Passed, second);
        assert_eq!(tally.totals(), (2, 1));
        let summary = tally.summary();
        assert!(summary.ends_with("2 passed, 1 failed"), "{summary}");
        assert!(
            summary.contains("     2       1     1.0  one (a)"),
            "{summary}"
        );
        assert!(summary.contains("log: /l"), "{summary}");
        assert_eq!(tally.failures(), ["one (a) (1 of 2 runs)"]);
    }

    #[test]
    fn hogs_stop_when_dropped_and_at_their_limit() {
        let hogs = Hogs::start(Duration::from_secs(60));
        assert!(hogs.count() >= 1);
        let started = Instant::now();
        drop(hogs);
        assert!(started.elapsed() < Duration::from_secs(5));
        let hogs = Hogs::start(Duration::from_millis(10));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !hogs.threads.iter().all(JoinHandle::is_finished) {
            assert!(
                Instant::now() < deadline,
                "the busy loops outlived their limit"
            );
            thread::sleep(Duration::from_millis(10));
        }
    }
}
