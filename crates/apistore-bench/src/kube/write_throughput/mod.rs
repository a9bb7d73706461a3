//! kube's `RunBenchmarkWriteThroughput` (k8s.io/apiserver v0.37.2,
//! pkg/storage/testing/store_benchmarks.go; its cacher benchmark runs it over the
//! cacher with a watch-latency tracker), ported to both sides over each side's cache
//! of the section's 10,000 Pods: [`CALLERS`] writers (kube's parallelism) go round
//! the Pods, each write a guaranteed update setting an annotation (`Patch`) or a
//! delete and a create of the same Pod (`DeleteCreate`), while the background load
//! reads: none, [`BACKGROUND_WATCHERS`] watchers of every Pod (kube's `Watcher`), or
//! one lister of every Pod every [`LIST_EVERY`] (kube's `Lister` at no
//! resourceVersion, `ListerExactRV` and `ListerNotOlderThan` at the newest write's
//! revision). Reported as kube reports it: writes/s, watch-events/s of the background
//! watchers, list-calls/s and list-objs/s of the lister, and the p99 watch latency.
//!
//! Where the port differs, and why: kube's tracker reads each write's timestamp where
//! the watch cache processes the event (a hook inside its cacher, not reachable from
//! outside the package); here one more watcher of every Pod on each side reads it, on
//! Added and Modified events (a Deleted event carries the object's last state, whose
//! timestamp is its creation's). The watchers start at the revision the writers'
//! Pods were listed at, so their events are the writes' (kube's start unset and also
//! receive the cached Pods as initial events, some of which its counter counts).
//! kube's `WatchList` load (a watch with `sendInitialEvents`, over and over) is not
//! ported yet. It needs an etcd that answers progress requests (3.4.31+, 3.5.13+):
//! on an older one (Debian's 3.4.23, the bench's etcd until 2026-12-03) apistore's
//! cache refuses that watch, as kube's own check of the storage feature has kube's
//! refused, and the row would compare two refusals. On such an etcd the `Lister`'s
//! consistent lists go to etcd on both sides; on a newer one (`cargo xtask bench`
//! runs on etcd 3.7) both caches serve them.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apistore_protobuf::{LazyCodec, MediaType};
use serde_json::json;

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
const STAMP: &str = "watch-latency-timestamp";
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

/// kube's background loads (its `WatchList` is not ported, see the module's docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Background {
    None,
    Watcher,
    Lister(ListAt),
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
        }
    }

    /// The background watchers besides the latency tracker.
    fn watchers(self) -> usize {
        match self {
            Self::Watcher => BACKGROUND_WATCHERS,
            Self::None | Self::Lister(_) => 0,
        }
    }

    /// How the Go arm's protocol spells the lister ("" for none).
    fn lister_wire(self) -> &'static str {
        match self {
            Self::None | Self::Watcher => "",
            Self::Lister(ListAt::Unset) => "unset",
            Self::Lister(ListAt::Exact) => "exact",
            Self::Lister(ListAt::NotOlderThan) => "notOlderThan",
        }
    }
}

/// The rows: each traffic under each background load, in kube's order of loads.
const RUNS: [(Traffic, Background); 10] = [
    (Traffic::Patch, Background::None),
    (Traffic::Patch, Background::Watcher),
    (Traffic::Patch, Background::Lister(ListAt::Unset)),
    (Traffic::Patch, Background::Lister(ListAt::Exact)),
    (Traffic::Patch, Background::Lister(ListAt::NotOlderThan)),
    (Traffic::DeleteCreate, Background::None),
    (Traffic::DeleteCreate, Background::Watcher),
    (Traffic::DeleteCreate, Background::Lister(ListAt::Unset)),
    (Traffic::DeleteCreate, Background::Lister(ListAt::Exact)),
    (
        Traffic::DeleteCreate,
        Background::Lister(ListAt::NotOlderThan),
    ),
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
fn p99(sorted: &[f64]) -> f64 {
    let index = (sorted.len() * 99 / 100).saturating_sub(1);
    sorted.get(index).copied().unwrap_or(0.0)
}

/// Nanoseconds since the Unix epoch, the stamp's unit.
fn unix_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// Seconds from `stamp` (Unix nanoseconds, as written) to now.
fn delay_since(stamp: &str) -> Option<f64> {
    let written = stamp.parse::<u128>().ok()?;
    Some(unix_nanos().saturating_sub(written) as f64 / 1e9)
}

/// The figures of a row, in [`Collector`] order.
fn specs(background: Background) -> Vec<Spec> {
    let mut specs = vec![spec("writes/s", Unit::PerSec, true, None)];
    match background {
        Background::None => {}
        Background::Watcher => specs.push(spec("watch-events/s", Unit::PerSec, true, None)),
        Background::Lister(_) => {
            specs.push(spec("list-calls/s", Unit::PerSec, true, None));
            specs.push(spec("list-objs/s", Unit::PerSec, true, None));
        }
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
}

impl Measured {
    fn figures(mut self, background: Background) -> Vec<f64> {
        self.latencies.sort_by(f64::total_cmp);
        let seconds = self.seconds.max(1e-9);
        let mut figures = vec![self.writes as f64 / seconds];
        match background {
            Background::None => {}
            Background::Watcher => figures.push(self.events as f64 / seconds),
            Background::Lister(_) => {
                figures.push(self.list_calls as f64 / seconds);
                figures.push(self.list_objects as f64 / seconds);
            }
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
        let runs: Vec<_> = RUNS
            .into_iter()
            .filter(|&(traffic, background)| self.settings.selected(&row_name(traffic, background)))
            .collect();
        if runs.is_empty() {
            return Ok(());
        }
        println!("  {NAME}: {CALLERS} writers over each side's cache");
        let mut collectors: Vec<_> = runs
            .iter()
            .map(|&(_, background)| Collector::new(&specs(background)))
            .collect();
        let run = self.settings.run;
        for _ in 0..self.settings.rounds {
            if self.runs(Side::Apistore) {
                let cache = self
                    .filled_pod_cache(LazyCodec::new(MediaType::Protobuf))
                    .await?
                    .cache;
                for (&(traffic, background), collector) in runs.iter().zip(&mut collectors) {
                    let measured = self
                        .apistore_writes(&cache, traffic, background, run)
                        .await?;
                    collector.push(Side::Apistore, measured.figures(background));
                }
            }
            if self.runs(Side::Kube) {
                self.filled_kube_cache(go).await?;
                for (&(traffic, background), collector) in runs.iter().zip(&mut collectors) {
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
                    };
                    collector.push(Side::Kube, measured.figures(background));
                }
                Self::ask(go, &json!({"op": "cacheStop"}))?;
            }
        }
        for (&(traffic, background), collector) in runs.iter().zip(collectors) {
            out.rows.push(collector.row(row_name(traffic, background)));
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
        };
        assert_eq!(
            figures().figures(Background::Watcher),
            vec![5.0, 20.0, 0.2, 0.1]
        );
        assert_eq!(figures().figures(Background::None), vec![5.0, 0.2, 0.1]);
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
