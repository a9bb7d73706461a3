//! Where and how a run happened, so that a reader can rerun it: the command, the date,
//! the machine (cores from `nproc`, CPU model, memory), etcd's version, the toolchain
//! and the commit.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::process::Command;

use crate::settings::Settings;

/// The facts printed above the tables.
#[derive(Debug, Clone)]
pub(crate) struct RunInfo {
    command: String,
    date: String,
    cores: String,
    cpu_model: String,
    memory: String,
    etcd_version: String,
    rustc: String,
    commit: String,
    settings: String,
}

impl RunInfo {
    /// Gathers the facts; anything that cannot be found reads `unknown`.
    pub(crate) fn gather(etcd_binary: &Path, settings: &Settings) -> Self {
        let command = if settings.quick {
            "cargo xtask bench --quick"
        } else {
            "cargo xtask bench"
        };
        Self {
            command: command.to_owned(),
            date: first_line("date", &["-u", "+%Y-%m-%d %H:%M UTC"]),
            cores: first_line("nproc", &[]),
            cpu_model: cpu_model(),
            memory: memory(),
            etcd_version: first_line(&etcd_binary.display().to_string(), &["--version"]),
            rustc: first_line("rustc", &["--version"]),
            commit: first_line("git", &["rev-parse", "--short", "HEAD"]),
            settings: settings.describe(),
        }
    }

    /// The run details as a markdown list.
    pub(crate) fn write_markdown(&self, out: &mut String) {
        let _ = writeln!(out, "## Latest run\n");
        let _ = writeln!(
            out,
            "- command: `{}` (from the workspace root)",
            self.command
        );
        let _ = writeln!(out, "- date: {}", self.date);
        let _ = writeln!(
            out,
            "- machine: {} cores (`nproc`), {}, {} memory; etcd, the bench and its callers share these cores",
            self.cores, self.cpu_model, self.memory
        );
        let _ = writeln!(
            out,
            "- etcd: {} (`etcd --version`), a single member started by the bench with default flags, data on the local disk",
            self.etcd_version
        );
        let _ = writeln!(out, "- toolchain: {}, release profile", self.rustc);
        let _ = writeln!(
            out,
            "- commit: {} (plus any uncommitted changes in the tree)",
            self.commit
        );
        let _ = writeln!(out, "- method: {}", self.settings);
    }
}

/// The first line a command prints, or `unknown`.
fn first_line(program: &str, args: &[&str]) -> String {
    Command::new(program)
        .args(args)
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.lines().next().map(str::trim).map(str::to_owned))
        .filter(|line| !line.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned())
}

fn memory() -> String {
    fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("MemTotal:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<u64>().ok())
        })
        .map_or_else(
            || "unknown".to_owned(),
            |kib| format!("{:.0} GiB", kib as f64 / (1024.0 * 1024.0)),
        )
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` gives them.
pub(crate) fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "unknown".to_owned())
}
