//! CPU time of the bench process and of etcd, from `/proc` (no `libc`, no `unsafe`).
//!
//! Each thread's `/proc/<pid>/task/<tid>/schedstat` gives its time on a CPU in
//! nanoseconds; a run's CPU time is the sum over threads of what each used between the
//! two snapshots (a thread that started during the run counts from zero; one that
//! exited during the run is not counted, and etcd keeps its threads). The bench's own
//! process is read from its CPU clock instead (`CLOCK_PROCESS_CPUTIME_ID`), which
//! counts the threads that exited too: a large list is read back on threads that last
//! as long as its page. Where schedstat is missing, `utime + stime` of
//! `/proc/<pid>/stat` is used, in clock ticks of 10 ms.

use std::collections::HashMap;
use std::fs;
use std::process::Command;
use std::time::Duration;

use crate::error::{BenchError, Result};

/// Reads the CPU time of this process and of etcd.
#[derive(Debug, Clone)]
pub(crate) struct CpuMeter {
    etcd_pid: u32,
    tick: Duration,
}

/// CPU time used so far by the bench process and by etcd.
#[derive(Debug, Clone, Default)]
pub(crate) struct CpuSnapshot {
    client: Threads,
    etcd: Threads,
}

/// The CPU time of a process: per thread where known, and as a whole.
#[derive(Debug, Clone, Default)]
struct Threads {
    /// Nanoseconds on a CPU, by thread id (empty when schedstat is not available).
    by_tid: HashMap<u32, u64>,
    /// `utime + stime` of the whole process.
    total: Duration,
    /// The process's CPU clock, exited threads included (this process only).
    clock: Option<Duration>,
}

impl Threads {
    fn used_since(&self, earlier: &Self) -> Duration {
        if let (Some(now), Some(then)) = (self.clock, earlier.clock) {
            return now.saturating_sub(then);
        }
        if self.by_tid.is_empty() || earlier.by_tid.is_empty() {
            return self.total.saturating_sub(earlier.total);
        }
        let nanos = self
            .by_tid
            .iter()
            .map(|(tid, now)| now.saturating_sub(earlier.by_tid.get(tid).copied().unwrap_or(0)))
            .sum();
        Duration::from_nanos(nanos)
    }
}

/// CPU time used over an interval.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuUsed {
    /// By the bench process.
    pub(crate) client: Duration,
    /// By etcd.
    pub(crate) etcd: Duration,
}

impl CpuSnapshot {
    /// The CPU time used between `earlier` and `self`.
    pub(crate) fn since(&self, earlier: &Self) -> CpuUsed {
        CpuUsed {
            client: self.client.used_since(&earlier.client),
            etcd: self.etcd.used_since(&earlier.etcd),
        }
    }
}

impl CpuMeter {
    /// A meter for this process and the etcd with the given pid.
    pub(crate) fn new(etcd_pid: u32) -> Self {
        Self {
            etcd_pid,
            tick: clock_tick(),
        }
    }

    /// The CPU time used so far.
    pub(crate) fn snapshot(&self) -> Result<CpuSnapshot> {
        let mut client = self.threads("self")?;
        client.clock = cpu_clock(rustix::time::ClockId::ProcessCPUTime);
        Ok(CpuSnapshot {
            client,
            etcd: self.threads(&self.etcd_pid.to_string())?,
        })
    }

    fn threads(&self, pid: &str) -> Result<Threads> {
        let stat = format!("/proc/{pid}/stat");
        let text = fs::read_to_string(&stat).map_err(|source| BenchError::Io {
            what: format!("read {stat}"),
            source,
        })?;
        let ticks = parse_ticks(&text)
            .ok_or_else(|| BenchError::Invalid(format!("unexpected {stat}: {text}")))?;
        Ok(Threads {
            by_tid: thread_nanos(pid),
            total: self.tick * ticks,
            clock: None,
        })
    }
}

/// The calling thread's CPU time since it started (zero if the clock cannot be read).
pub(crate) fn thread_cpu() -> Duration {
    cpu_clock(rustix::time::ClockId::ThreadCPUTime).unwrap_or_default()
}

/// A CPU clock of this process or thread, `None` if it reads out of range.
fn cpu_clock(id: rustix::time::ClockId) -> Option<Duration> {
    let clock = rustix::time::clock_gettime(id);
    u64::try_from(clock.tv_sec)
        .ok()
        .zip(u32::try_from(clock.tv_nsec).ok())
        .map(|(secs, nanos)| Duration::new(secs, nanos))
}

/// Nanoseconds on a CPU of every thread of `pid`, from schedstat; empty if unreadable.
fn thread_nanos(pid: &str) -> HashMap<u32, u64> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return HashMap::new();
    };
    tasks
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let tid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let text = fs::read_to_string(entry.path().join("schedstat")).ok()?;
            let nanos: u64 = text.split_whitespace().next()?.parse().ok()?;
            Some((tid, nanos))
        })
        .collect()
}

/// The length of a clock tick, from `getconf CLK_TCK` (100 Hz if that fails).
fn clock_tick() -> Duration {
    let hz = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| text.trim().parse::<u32>().ok())
        .filter(|hz| *hz > 0)
        .unwrap_or(100);
    Duration::from_secs(1) / hz
}

/// Fields 14 and 15 (`utime`, `stime`) of a stat line. The command name (field 2) is
/// in parentheses and may hold spaces and parentheses itself, so fields are counted
/// after the last `)`.
fn parse_ticks(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    // After the name: state is field 3, so utime (14) is the 12th field from here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    u32::try_from(utime + stime).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_fields_fourteen_and_fifteen_after_the_name() {
        let line = "4242 (etcd (x) y) S 1 4242 4242 0 -1 4194560 9 0 0 0 120 35 0 0 20 0 9 0 1 2 3";
        assert_eq!(parse_ticks(line), Some(155));
        assert_eq!(parse_ticks("garbage"), None);
    }

    #[test]
    fn threads_that_appear_count_from_zero_and_known_ones_by_difference() {
        let earlier = Threads {
            by_tid: HashMap::from([(1, 100), (2, 50)]),
            total: Duration::ZERO,
            clock: None,
        };
        let later = Threads {
            by_tid: HashMap::from([(1, 180), (3, 30)]),
            total: Duration::ZERO,
            clock: None,
        };
        assert_eq!(later.used_since(&earlier), Duration::from_nanos(110));
    }

    #[test]
    fn this_process_is_measurable() {
        let meter = CpuMeter::new(std::process::id());
        let before = meter.snapshot().unwrap();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let used = meter.snapshot().unwrap().since(&before);
        assert!(used.client > Duration::ZERO);
    }

    #[test]
    fn this_thread_is_measurable() {
        let before = thread_cpu();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        assert!(thread_cpu() > before);
    }

    /// A thread that ran and exited between two snapshots counts.
    #[test]
    fn a_thread_that_exited_counts() {
        let meter = CpuMeter::new(std::process::id());
        let before = meter.snapshot().unwrap();
        let spent = std::thread::spawn(|| {
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < Duration::from_millis(200) {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        });
        spent.join().unwrap();
        let used = meter.snapshot().unwrap().since(&before);
        // At least most of its 200 ms busy loop (a loaded machine may deschedule it).
        assert!(used.client >= Duration::from_millis(20), "{used:?}");
    }
}
