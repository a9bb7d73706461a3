//! The sizes of a run: full (`cargo xtask bench`; about an hour on 2 cores, 3,301 s
//! on 2026-12-04) or quick (`--quick`). Quick runs are shorter, not different: the
//! same workloads, fewer rounds and shorter timed runs, so their figures are noisier.

use std::time::Duration;

/// How long and how often each workload runs.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Whether this is the `--quick` run.
    pub(crate) quick: bool,
    /// Rounds of A then B per workload (at least three).
    pub(crate) rounds: usize,
    /// The length of one timed run of a create, get or update workload.
    pub(crate) run: Duration,
    /// An untimed run of each arm before the rounds.
    pub(crate) warmup: Duration,
    /// Deletes per caller in one timed delete run, by caller count (1, 16).
    pub(crate) deletes_per_caller: [u64; 2],
    /// Objects in the list workload.
    pub(crate) list_objects: u64,
    /// The page size of the paged list.
    pub(crate) list_page: i64,
    /// Timed lists per arm per round.
    pub(crate) list_repeats: u64,
    /// Writes the watcher sees per run.
    pub(crate) watch_writes: u64,
    /// Concurrent writers feeding the watcher.
    pub(crate) watch_writers: usize,
    /// Idle watches opened per run.
    pub(crate) idle_watches: usize,
    /// The object pool that get and update read.
    pub(crate) pool_size: u64,
    /// Only the workloads whose names contain one of these (`--only`), for profiling.
    pub(crate) only: Vec<String>,
    /// Whether to run only arm A or only arm B (`--arm`), for profiling.
    pub(crate) single_arm: Option<usize>,
}

impl Settings {
    /// The full run.
    pub(crate) fn full() -> Self {
        Self {
            quick: false,
            rounds: 7,
            run: Duration::from_secs(2),
            warmup: Duration::from_secs(1),
            deletes_per_caller: [1_500, 200],
            list_objects: 10_000,
            list_page: 500,
            list_repeats: 3,
            watch_writes: 20_000,
            watch_writers: 16,
            idle_watches: 1_000,
            pool_size: 1_024,
            only: Vec::new(),
            single_arm: None,
        }
    }

    /// The quick run.
    pub(crate) fn quick() -> Self {
        Self {
            quick: true,
            rounds: 3,
            run: Duration::from_millis(600),
            warmup: Duration::from_millis(200),
            deletes_per_caller: [300, 40],
            list_repeats: 1,
            watch_writes: 4_000,
            ..Self::full()
        }
    }

    /// Whether a workload is selected by `--only`.
    pub(crate) fn selected(&self, workload: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| workload.contains(o.as_str()))
    }

    /// One line saying how the figures were taken.
    pub(crate) fn describe(&self) -> String {
        format!(
            "per workload, an untimed warm-up of each arm ({warmup:?}), then {rounds} rounds of arm A then arm B; \
             create/get/update runs last {run:?} each, delete runs remove {d1} (1 caller) or 16 × {d16} pre-created objects, \
             lists repeat {reps}× per round; CPU time of the bench process from its CPU clock \
             (threads that exited included) and of etcd from /proc/<pid>/task/*/schedstat; memory from a counting global allocator in the bench binary",
            warmup = self.warmup,
            rounds = self.rounds,
            run = self.run,
            d1 = self.deletes_per_caller[0],
            d16 = self.deletes_per_caller[1],
            reps = self.list_repeats,
        )
    }
}
