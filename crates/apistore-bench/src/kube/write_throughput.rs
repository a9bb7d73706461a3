//! kube's `RunBenchmarkWriteThroughput` (k8s.io/apiserver v0.37.2,
//! pkg/storage/testing/store_benchmarks.go; its cacher benchmark runs it over the
//! cacher with a watch-latency tracker), ported to both sides over each side's cache
//! of the section's 10,000 Pods: [`CALLERS`] writers (kube's parallelism) go round
//! the Pods, each write a guaranteed update setting an annotation (`Patch`) or a
//! delete and a create of the same Pod (`DeleteCreate`), while the background load
//! reads: none, or [`BACKGROUND_WATCHERS`] watchers of every Pod (kube's `Watcher`).
//! Reported as kube reports it: writes/s, watch-events/s of the background watchers,
//! and the p99 watch latency.
//!
//! Where the port differs, and why: kube's tracker reads each write's timestamp where
//! the watch cache processes the event (a hook inside its cacher, not reachable from
//! outside the package); here one more watcher of every Pod on each side reads it, on
//! Added and Modified events (a Deleted event carries the object's last state, whose
//! timestamp is its creation's). The watchers start at the revision the writers'
//! Pods were listed at, so their events are the writes' (kube's start unset and also
//! receive the cached Pods as initial events, some of which its counter counts). The
//! list loads (Lister, ListerExactRV, ListerNotOlderThan, WatchList) are not ported.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apistore_protobuf::{LazyCodec, LazyObject, MediaType};
use apistore_storage::{
    ApiObject, DeleteOptions, ListOptions, ResourceVersionMatch, Shared, Storage, UpdateOptions,
    WatchEvent,
};
use futures::StreamExt as _;
use serde_json::json;

use super::RESOURCE;
use super::cache::PodCache;
use crate::bench::Bench;
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};
use crate::gobench::GoArm;
use crate::side_by_side::{Collector, Side, SideBySide, Spec, spec};
use crate::stats::Unit;

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

/// The rows: each traffic under each background load.
const RUNS: [(Traffic, usize); 4] = [
    (Traffic::Patch, 0),
    (Traffic::Patch, BACKGROUND_WATCHERS),
    (Traffic::DeleteCreate, 0),
    (Traffic::DeleteCreate, BACKGROUND_WATCHERS),
];

/// A row's workload name.
fn row_name(traffic: Traffic, watchers: usize) -> String {
    let background = if watchers == 0 { "None" } else { "Watcher" };
    format!("{NAME} Traffic={} Background={background}", traffic.name())
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
fn specs(watchers: usize) -> Vec<Spec> {
    let mut specs = vec![spec("writes/s", Unit::PerSec, true, None)];
    if watchers > 0 {
        specs.push(spec("watch-events/s", Unit::PerSec, true, None));
    }
    specs.push(spec("watch latency p99", Unit::Seconds, false, None));
    specs.push(spec("client CPU/write", Unit::CpuSeconds, false, None));
    specs
}

/// One run's counts, as both sides report them.
struct Measured {
    writes: u64,
    events: u64,
    seconds: f64,
    latencies: Vec<f64>,
    cpu_seconds: f64,
}

impl Measured {
    fn figures(mut self, watchers: usize) -> Vec<f64> {
        self.latencies.sort_by(f64::total_cmp);
        let seconds = self.seconds.max(1e-9);
        let mut figures = vec![self.writes as f64 / seconds];
        if watchers > 0 {
            figures.push(self.events as f64 / seconds);
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
            .filter(|&(traffic, watchers)| self.settings.selected(&row_name(traffic, watchers)))
            .collect();
        if runs.is_empty() {
            return Ok(());
        }
        println!("  {NAME}: {CALLERS} writers over each side's cache");
        let mut collectors: Vec<_> = runs
            .iter()
            .map(|&(_, watchers)| Collector::new(&specs(watchers)))
            .collect();
        let run = self.settings.run;
        for _ in 0..self.settings.rounds {
            if self.runs(Side::Apistore) {
                let (cache, _) = self
                    .filled_pod_cache(LazyCodec::new(MediaType::Protobuf))
                    .await?;
                for (&(traffic, watchers), collector) in runs.iter().zip(&mut collectors) {
                    let measured = self.apistore_writes(&cache, traffic, watchers, run).await?;
                    collector.push(Side::Apistore, measured.figures(watchers));
                }
            }
            if self.runs(Side::Kube) {
                self.filled_kube_cache(go).await?;
                for (&(traffic, watchers), collector) in runs.iter().zip(&mut collectors) {
                    let answer = Self::ask(
                        go,
                        &json!({
                            "op": "writeThroughput", "traffic": traffic.wire(),
                            "watchers": watchers, "callers": CALLERS,
                            "seconds": run.as_secs_f64(),
                        }),
                    )?;
                    let measured = Measured {
                        writes: answer.objects,
                        events: answer.calls,
                        seconds: answer.seconds,
                        latencies: answer.latencies,
                        cpu_seconds: answer.cpu_seconds,
                    };
                    collector.push(Side::Kube, measured.figures(watchers));
                }
                Self::ask(go, &json!({"op": "cacheStop"}))?;
            }
        }
        for (&(traffic, watchers), collector) in runs.iter().zip(collectors) {
            out.rows.push(collector.row(row_name(traffic, watchers)));
        }
        Ok(())
    }

    /// One run on apistore's side, as interop/gobench's `writeThroughput` runs it on
    /// kube's.
    async fn apistore_writes(
        &self,
        cache: &PodCache<LazyObject>,
        traffic: Traffic,
        watchers: usize,
        run: Duration,
    ) -> Result<Measured> {
        let list = cache
            .list(
                RESOURCE,
                &ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan),
            )
            .await?;
        if list.items.is_empty() {
            return Err(BenchError::Invalid("no Pods in the cache".to_owned()));
        }
        let since = ListOptions::prefix().at(
            list.metadata.resource_version.clone(),
            ResourceVersionMatch::Unset,
        );
        let pods = Arc::new(list.items);
        let events = Arc::new(AtomicU64::new(0));
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::with_capacity(watchers + 1);
        for watcher in 0..=watchers {
            let mut stream = cache.watch(RESOURCE, &since).await?;
            let (events, latencies) = (Arc::clone(&events), Arc::clone(&latencies));
            // Watcher 0 tracks latency; the others are the background load.
            readers.push(tokio::spawn(async move {
                while let Some(event) = stream.next().await {
                    if watcher > 0 {
                        events.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let WatchEvent::Added(pod) | WatchEvent::Modified(pod) = event
                        && let Some(delay) = pod
                            .metadata()
                            .annotations
                            .get(STAMP)
                            .and_then(|s| delay_since(s))
                        && let Ok(mut latencies) = latencies.lock()
                    {
                        latencies.push(delay);
                    }
                }
            }));
        }
        let writes = Arc::new(AtomicU64::new(0));
        let index = Arc::new(AtomicU64::new(0));
        let op = {
            let (cache, writes) = (cache.clone(), Arc::clone(&writes));
            driver::op(move |_, _| {
                let (cache, pods, writes) = (cache.clone(), Arc::clone(&pods), Arc::clone(&writes));
                let i = ((index.fetch_add(1, Ordering::Relaxed) + 1) % pods.len() as u64) as usize;
                async move {
                    let pod = &pods[i];
                    let key = format!("{RESOURCE}/{}/{}", pod.namespace(), pod.name());
                    match traffic {
                        Traffic::Patch => {
                            cache
                                .guaranteed_update(&key, UpdateOptions::default(), |mut pod, _| {
                                    let annotations = pod.annotations_mut();
                                    annotations.insert(PATCHED.to_owned(), i.to_string());
                                    annotations.insert(STAMP.to_owned(), unix_nanos().to_string());
                                    Ok(pod.into())
                                })
                                .await?;
                            writes.fetch_add(1, Ordering::Relaxed);
                        }
                        Traffic::DeleteCreate => {
                            match cache.delete(&key, DeleteOptions::default()).await {
                                Ok(_) => {
                                    writes.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(error) if error.is_not_found() => {}
                                Err(error) => return Err(error.into()),
                            }
                            let mut pod: Shared<LazyObject> = pod.clone();
                            pod.set_resource_version(String::new());
                            pod.annotations_mut()
                                .insert(STAMP.to_owned(), unix_nanos().to_string());
                            match cache.create(&key, pod, 0).await {
                                Ok(_) => {
                                    writes.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(error) if error.is_exists() => {}
                                Err(error) => return Err(error.into()),
                            }
                        }
                    }
                    Ok(())
                }
            })
        };
        let sample = driver::drive(&self.cpu, CALLERS, Plan::For(run), &op, None).await?;
        tokio::time::sleep(SETTLE).await;
        for reader in &readers {
            reader.abort();
        }
        let latencies = latencies
            .lock()
            .map(|mut held| std::mem::take(&mut *held))
            .map_err(|_| BenchError::Invalid("a latency watcher panicked".to_owned()))?;
        Ok(Measured {
            writes: writes.load(Ordering::Relaxed),
            events: events.load(Ordering::Relaxed),
            seconds: sample.elapsed.as_secs_f64(),
            latencies,
            cpu_seconds: sample.client_cpu.as_secs_f64(),
        })
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
            row_name(Traffic::DeleteCreate, BACKGROUND_WATCHERS),
            "kube write throughput Traffic=DeleteCreate Background=Watcher"
        );
        assert_eq!(
            row_name(Traffic::Patch, 0),
            "kube write throughput Traffic=Patch Background=None"
        );
        let figures = Measured {
            writes: 10,
            events: 40,
            seconds: 2.0,
            latencies: vec![0.3, 0.1, 0.2],
            cpu_seconds: 1.0,
        };
        assert_eq!(
            figures.figures(BACKGROUND_WATCHERS),
            vec![5.0, 20.0, 0.2, 0.1]
        );
    }
}
