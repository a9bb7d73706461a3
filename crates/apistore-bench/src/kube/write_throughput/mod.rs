//! kube's `RunBenchmarkWriteThroughput` (k8s.io/apiserver v0.37.2,
//! pkg/storage/testing/store_benchmarks.go; its cacher benchmark runs it over the
//! cacher with a watch-latency tracker), ported to both sides over each side's cache
//! of the section's 10,000 Pods: [`CALLERS`] writers (kube's parallelism) go round
//! the Pods, each write a guaranteed update setting an annotation (`Patch`) or a
//! delete and a create of the same Pod (`DeleteCreate`), while the background load
//! reads: none, [`BACKGROUND_WATCHERS`] watchers of every Pod (kube's `Watcher`),
//! one lister of every Pod every [`LIST_EVERY`] (kube's `Lister` at no
//! resourceVersion, `ListerExactRV` and `ListerNotOlderThan` at the newest write's
//! revision), or one watch-list of every Pod after another (kube's `WatchList`).
//! Reported as kube reports it: writes/s, watch-events/s of the background watchers,
//! list-calls/s and list-objs/s of the lister or watch-lister, and the p99 watch
//! latency; the report's notes add what each side's cache ended early (watch-lists
//! before the end of their initial events, watchers before the end of the run).
//!
//! Where the port differs, and why: kube's tracker reads each write's timestamp where
//! the watch cache processes the event (a hook inside its cacher, not reachable from
//! outside the package); here one more watcher of every Pod on each side reads it, on
//! Added and Modified events (a Deleted event carries the object's last state, whose
//! timestamp is its creation's). The watchers start at the revision the writers'
//! Pods were listed at, so their events are the writes' (kube's start unset and also
//! receive the cached Pods as initial events, some of which its counter counts).
//! kube's `WatchList` load (one watch of every Pod with `sendInitialEvents` after
//! another, each read to the bookmark that ends its initial events) needs an etcd
//! that answers progress requests (3.4.31+, 3.5.13+): on an older one (Debian's
//! 3.4.23, the bench's etcd until 2026-12-03) apistore's cache refuses that watch, as
//! kube's own check of the storage feature has kube's refused, and those rows are
//! left out with a note. On such an etcd the `Lister`'s consistent lists go to etcd
//! on both sides; on a newer one (`cargo xtask bench` runs on etcd 3.7) both caches
//! serve them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apistore_protobuf::{LazyCodec, MediaType};
use serde_json::json;

use super::cache::not_served_note;
use crate::bench::Bench;
use crate::error::Result;
use crate::gobench::GoArm;
use crate::side_by_side::{Collector, Side, SideBySide, Spec, spec};
use crate::stats::Unit;

mod apistore_side;

/// Every row's name starts with this (`--only "kube write"`).
pub(super) const NAME: &str = "kube write throughput";
/// Concurrent writers (kube's `Parallelism=25`).
const CALLERS: usize = 25;
/// Watchers of kube's `Watcher` background load.
const BACKGROUND_WATCHERS: usize = 10;
/// The annotation carrying a write's wall-clock time in Unix nanoseconds (kube's).
pub(super) const STAMP: &str = "watch-latency-timestamp";
/// The annotation a `Patch` sets (kube's).
const PATCHED: &str = "updated-by-benchmark";
/// How often kube's background lister lists (a Go ticker: ticks missed while a list
/// runs are dropped, not caught up).
const LIST_EVERY: Duration = Duration::from_millis(10);
/// How long the last writes' events get to arrive before the watchers stop.
const SETTLE: Duration = Duration::from_millis(100);

/// kube's kinds of write traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Traffic {
    Patch,
    DeleteCreate,
}

impl Traffic {
    fn name(self) -> &'static str {
        match self {
            Self::Patch => "Patch",
            Self::DeleteCreate => "DeleteCreate",
        }
    }

    /// How the Go arm's protocol spells it.
    fn wire(self) -> &'static str {
        match self {
            Self::Patch => "patch",
            Self::DeleteCreate => "deleteCreate",
        }
    }
}

/// Where kube's background lister lists from: no resourceVersion (a consistent
/// list), or the newest write's revision matched exactly or as a floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListAt {
    Unset,
    Exact,
    NotOlderThan,
}

/// kube's background loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Background {
    None,
    Watcher,
    Lister(ListAt),
    /// kube's `WatchList`: one watch-list of every Pod after another.
    WatchList,
}

impl Background {
    /// kube's sub-benchmark name.
    fn name(self) -> &'static str {
        match self {
            Self::None => "None",
            Self::Watcher => "Watcher",
            Self::Lister(ListAt::Unset) => "Lister",
            Self::Lister(ListAt::Exact) => "ListerExactRV",
            Self::Lister(ListAt::NotOlderThan) => "ListerNotOlderThan",
            Self::WatchList => "WatchList",
        }
    }

    /// The background watchers besides the latency tracker.
    fn watchers(self) -> usize {
        match self {
            Self::Watcher => BACKGROUND_WATCHERS,
            Self::None | Self::Lister(_) | Self::WatchList => 0,
        }
    }

    /// How the Go arm's protocol spells the list load ("" for none).
    fn lister_wire(self) -> &'static str {
        match self {
            Self::None | Self::Watcher => "",
            Self::Lister(ListAt::Unset) => "unset",
            Self::Lister(ListAt::Exact) => "exact",
            Self::Lister(ListAt::NotOlderThan) => "notOlderThan",
            Self::WatchList => "watchList",
        }
    }

    /// Whether the load lists (kube reports list-calls/s and list-objs/s for it).
    fn lists(self) -> bool {
        matches!(self, Self::Lister(_) | Self::WatchList)
    }
}

/// The rows: each traffic under each background load, in kube's order of loads.
const RUNS: [(Traffic, Background); 12] = [
    (Traffic::Patch, Background::None),
    (Traffic::Patch, Background::Watcher),
    (Traffic::Patch, Background::Lister(ListAt::Unset)),
    (Traffic::Patch, Background::Lister(ListAt::Exact)),
    (Traffic::Patch, Background::Lister(ListAt::NotOlderThan)),
    (Traffic::Patch, Background::WatchList),
    (Traffic::DeleteCreate, Background::None),
    (Traffic::DeleteCreate, Background::Watcher),
    (Traffic::DeleteCreate, Background::Lister(ListAt::Unset)),
    (Traffic::DeleteCreate, Background::Lister(ListAt::Exact)),
    (
        Traffic::DeleteCreate,
        Background::Lister(ListAt::NotOlderThan),
    ),
    (Traffic::DeleteCreate, Background::WatchList),
];

/// A row's workload name.
fn row_name(traffic: Traffic, background: Background) -> String {
    format!(
        "{NAME} Traffic={} Background={}",
        traffic.name(),
        background.name()
    )
}

/// The p99 of sorted latencies as kube's tracker takes it (the element at
/// `len * 99 / 100 - 1`); kube reports nothing below 100 latencies, this the same
/// element of what there is (0 for none).
pub(super) fn p99(sorted: &[f64]) -> f64 {
    let index = (sorted.len() * 99 / 100).saturating_sub(1);
    sorted.get(index).copied().unwrap_or(0.0)
}

/// Nanoseconds since the Unix epoch, the stamp's unit.
pub(super) fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Seconds from `stamp` (Unix nanoseconds, as written) to now.
pub(super) fn delay_since(stamp: &str) -> Option<f64> {
    let written = stamp.parse::<u128>().ok()?;
    Some(unix_nanos().saturating_sub(written) as f64 / 1e9)
}

/// The figures of a row, in [`Collector`] order.
fn specs(background: Background) -> Vec<Spec> {
    let mut specs = vec![spec("writes/s", Unit::PerSec, true, None)];
    if background == Background::Watcher {
        specs.push(spec("watch-events/s", Unit::PerSec, true, None));
    }
    if background.lists() {
        specs.push(spec("list-calls/s", Unit::PerSec, true, None));
        specs.push(spec("list-objs/s", Unit::PerSec, true, None));
    }
    specs.push(spec("watch latency p99", Unit::Seconds, false, None));
    specs.push(spec("client CPU/write", Unit::CpuSeconds, false, None));
    specs
}

/// One run's counts, as both sides report them.
struct Measured {
    writes: u64,
    events: u64,
    list_calls: u64,
    list_objects: u64,
    seconds: f64,
    latencies: Vec<f64>,
    cpu_seconds: f64,
    /// Watch-lists the cache ended before the end of their initial events (counted
    /// in `list_calls` too, as kube counts them).
    watch_lists_cut: u64,
    /// Watchers (background and the latency tracker) the cache ended before the run.
    watchers_cut: u64,
    /// Whether the latency tracker was one of them: its p99 is then of the events it
    /// received before.
    tracker_cut: bool,
}

/// What the caches ended early over a row's rounds, on one side.
#[derive(Debug, Default, Clone, Copy)]
struct Cut {
    watch_lists: u64,
    list_calls: u64,
    watchers: u64,
    tracker_rounds: usize,
}

impl Cut {
    fn add(&mut self, measured: &Measured) {
        self.watch_lists += measured.watch_lists_cut;
        self.list_calls += measured.list_calls;
        self.watchers += measured.watchers_cut;
        self.tracker_rounds += usize::from(measured.tracker_cut);
    }

    /// What a note says of one side ("" when nothing was cut).
    fn describe(&self, side: &str, watchers: usize, rounds: usize) -> String {
        let mut parts = Vec::new();
        if self.watch_lists > 0 {
            parts.push(format!(
                "{} of its {} watch-lists ended by its cache before their initial events did",
                self.watch_lists, self.list_calls
            ));
        }
        if self.watchers > 0 {
            parts.push(format!(
                "{} of its {} watchers ended by its cache before the run did{}",
                self.watchers,
                (watchers + 1) * rounds,
                if self.tracker_rounds > 0 {
                    format!(
                        ", the latency tracker in {} of {rounds} rounds (its p99 is of the \
                         events it had received)",
                        self.tracker_rounds
                    )
                } else {
                    String::new()
                }
            ));
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!("{side}: {}", parts.join("; "))
        }
    }
}

impl Measured {
    fn figures(mut self, background: Background) -> Vec<f64> {
        self.latencies.sort_by(f64::total_cmp);
        let seconds = self.seconds.max(1e-9);
        let mut figures = vec![self.writes as f64 / seconds];
        if background == Background::Watcher {
            figures.push(self.events as f64 / seconds);
        }
        if background.lists() {
            figures.push(self.list_calls as f64 / seconds);
            figures.push(self.list_objects as f64 / seconds);
        }
        figures.push(p99(&self.latencies));
        figures.push(self.cpu_seconds / self.writes.max(1) as f64);
        figures
    }
}

impl Bench {
    /// The rows: per round and side, a filled cache and the four runs on it.
    pub(super) async fn write_throughput(
        &self,
        go: &mut GoArm,
        out: &mut SideBySide,
    ) -> Result<()> {
        let mut runs: Vec<_> = RUNS
            .into_iter()
            .filter(|&(traffic, background)| self.settings.selected(&row_name(traffic, background)))
            .collect();
        if runs
            .iter()
            .any(|&(_, background)| background == Background::WatchList)
            && !self.etcd_answers_progress_requests().await?
        {
            runs.retain(|&(_, background)| background != Background::WatchList);
            out.notes.push(not_served_note(
                &format!("{NAME} Background=WatchList"),
                "a watch-list",
            ));
        }
        if runs.is_empty() {
            return Ok(());
        }
        println!("  {NAME}: {CALLERS} writers over each side's cache");
        let mut collectors: Vec<_> = runs
            .iter()
            .map(|&(_, background)| Collector::new(&specs(background)))
            .collect();
        // Per row, what each side's cache ended early: [apistore, kube].
        let mut cuts = vec![[Cut::default(); 2]; runs.len()];
        let run = self.settings.run;
        for _ in 0..self.settings.rounds {
            if self.runs(Side::Apistore) {
                let cache = self
                    .filled_pod_cache(LazyCodec::new(MediaType::Protobuf))
                    .await?
                    .cache;
                for ((&(traffic, background), collector), cut) in
                    runs.iter().zip(&mut collectors).zip(&mut cuts)
                {
                    let measured = self
                        .apistore_writes(&cache, traffic, background, run)
                        .await?;
                    cut[0].add(&measured);
                    collector.push(Side::Apistore, measured.figures(background));
                }
            }
            if self.runs(Side::Kube) {
                self.filled_kube_cache(go).await?;
                for ((&(traffic, background), collector), cut) in
                    runs.iter().zip(&mut collectors).zip(&mut cuts)
                {
                    let answer = Self::ask(
                        go,
                        &json!({
                            "op": "writeThroughput", "traffic": traffic.wire(),
                            "watchers": background.watchers(),
                            "lister": background.lister_wire(),
                            "callers": CALLERS, "seconds": run.as_secs_f64(),
                        }),
                    )?;
                    let measured = Measured {
                        writes: answer.objects,
                        events: answer.calls,
                        list_calls: answer.list_calls,
                        list_objects: answer.list_objects,
                        seconds: answer.seconds,
                        latencies: answer.latencies,
                        cpu_seconds: answer.cpu_seconds,
                        watch_lists_cut: answer.watch_lists_cut,
                        watchers_cut: answer.watchers_cut,
                        tracker_cut: answer.tracker_cut,
                    };
                    cut[1].add(&measured);
                    collector.push(Side::Kube, measured.figures(background));
                }
                Self::ask(go, &json!({"op": "cacheStop"}))?;
            }
        }
        let rounds = self.settings.rounds;
        for ((&(traffic, background), collector), [apistore, kube]) in
            runs.iter().zip(collectors).zip(cuts)
        {
            let name = row_name(traffic, background);
            let said: Vec<_> = [
                apistore.describe("apistore", background.watchers(), rounds),
                kube.describe("kube", background.watchers(), rounds),
            ]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect();
            if !said.is_empty() {
                out.notes.push(format!("{name}: {}", said.join(". ")));
            }
            out.rows.push(collector.row(name));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p99_is_the_element_kube_takes() {
        let latencies: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(p99(&latencies), 99.0);
        let latencies: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(p99(&latencies), 990.0);
        assert_eq!(p99(&[0.5]), 0.5);
        assert_eq!(p99(&[]), 0.0);
    }

    #[test]
    fn a_note_says_what_a_cache_ended_early() {
        assert_eq!(Cut::default().describe("kube", 10, 7), "");
        let cut = Cut {
            watch_lists: 3,
            list_calls: 4,
            watchers: 2,
            tracker_rounds: 1,
        };
        assert_eq!(
            cut.describe("kube", 10, 7),
            "kube: 3 of its 4 watch-lists ended by its cache before their initial events \
             did; 2 of its 77 watchers ended by its cache before the run did, the latency \
             tracker in 1 of 7 rounds (its p99 is of the events it had received)"
        );
        let mut summed = Cut::default();
        for cut_short in [true, false, true] {
            summed.add(&Measured {
                writes: 1,
                events: 0,
                list_calls: 2,
                list_objects: 0,
                seconds: 1.0,
                latencies: Vec::new(),
                cpu_seconds: 0.0,
                watch_lists_cut: u64::from(cut_short),
                watchers_cut: 1,
                tracker_cut: cut_short,
            });
        }
        assert_eq!(
            (
                summed.watch_lists,
                summed.list_calls,
                summed.watchers,
                summed.tracker_rounds
            ),
            (2, 6, 3, 2)
        );
    }

    #[test]
    fn a_stamp_gives_the_delay_since_it_was_written() {
        let written = (unix_nanos() - 2_000_000_000).to_string();
        let delay = delay_since(&written).unwrap_or(0.0);
        assert!((2.0..3.0).contains(&delay), "{delay}");
        assert_eq!(delay_since("not a time"), None);
    }

    #[test]
    fn rows_are_named_as_kube_names_its_sub_benchmarks() {
        assert_eq!(
            row_name(Traffic::DeleteCreate, Background::Watcher),
            "kube write throughput Traffic=DeleteCreate Background=Watcher"
        );
        assert_eq!(
            row_name(Traffic::Patch, Background::None),
            "kube write throughput Traffic=Patch Background=None"
        );
        assert_eq!(
            row_name(Traffic::Patch, Background::Lister(ListAt::Exact)),
            "kube write throughput Traffic=Patch Background=ListerExactRV"
        );
        let figures = || Measured {
            writes: 10,
            events: 40,
            list_calls: 6,
            list_objects: 60_000,
            seconds: 2.0,
            latencies: vec![0.3, 0.1, 0.2],
            cpu_seconds: 1.0,
            watch_lists_cut: 0,
            watchers_cut: 0,
            tracker_cut: false,
        };
        assert_eq!(
            figures().figures(Background::Watcher),
            vec![5.0, 20.0, 0.2, 0.1]
        );
        assert_eq!(figures().figures(Background::None), vec![5.0, 0.2, 0.1]);
        assert_eq!(
            figures().figures(Background::WatchList),
            vec![5.0, 3.0, 30_000.0, 0.2, 0.1]
        );
        assert_eq!(
            row_name(Traffic::Patch, Background::WatchList),
            "kube write throughput Traffic=Patch Background=WatchList"
        );
        assert_eq!(
            figures().figures(Background::Lister(ListAt::Unset)),
            vec![5.0, 3.0, 30_000.0, 0.2, 0.1]
        );
        for (_, background) in RUNS {
            assert_eq!(
                specs(background).len(),
                figures().figures(background).len(),
                "{}",
                background.name()
            );
        }
    }
}
