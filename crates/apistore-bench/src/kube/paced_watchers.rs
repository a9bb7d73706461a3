//! The kube section's paced watcher row: [`watchers`] watchers of one namespace on
//! each side's cache (apistore's `Cacher` of `LazyObject`s, kube's cacher of
//! `v1.Pod`s, each filled with the section's 10,000 Pods) while one raw etcd-client
//! writer creates Pods there at a steady [`PACE`], each Pod stamped with its write's
//! wall-clock time (kube's `watch-latency-timestamp` annotation).
//!
//! Why a second watcher row: at full write speed (`kube cache watchers`) kube's cacher
//! terminates its watchers, as it is built to when a watcher's buffer stays full, so
//! that row has no ratio. At a pace both caches keep up with, every watcher receives
//! every event on both sides, and the row compares what the fan-out costs:
//!
//! - `events/s per watcher`: the median over watchers of Pods over each watcher's time
//!   to its last one (both sides near the pace when they keep up);
//! - `watch latency p50` and `p99`: each Added event's time from its write (the stamp,
//!   taken just before the put) to the watcher reading it, over every event of every
//!   watcher, p99 as kube's latency tracker takes it;
//! - `client CPU/event`: the cache process's CPU time over the run per event its
//!   watchers received. The writer runs on a thread of its own with its own
//!   connection and runtime, and its CPU time is taken out of apistore's figure; on
//!   kube's side it runs in this process, outside the Go arm's.

use std::thread;
use std::time::{Duration, Instant};

use apistore_protobuf::{KubeProtobuf, LazyObject};
use apistore_storage::Shared;
use serde_json::json;

use super::cache::watchers;
use super::write_throughput::{STAMP, delay_since, p99, unix_nanos};
use super::{RESOURCE, node_of, pod_value};
use crate::bench::Bench;
use crate::cacher::{Events, median_rate, read_added};
use crate::error::{BenchError, Result};
use crate::gobench::GoArm;
use crate::object::ETCD_PREFIX;
use crate::pod::pod_name;
use crate::raw::Raw;
use crate::side_by_side::{Collector, Side, SideBySide, spec};
use crate::stats::Unit;

/// The row's name.
pub(super) const PACED: &str = "kube cache watchers, paced";
/// Pods the writer creates a second.
const PACE: u64 = 200;

/// Pods a run writes: five seconds at the pace (two in a quick run).
fn writes(quick: bool) -> u64 {
    if quick { 2 * PACE } else { 5 * PACE }
}

/// What one side's run measured.
struct Run {
    /// Per watcher that received every Pod, its time from the run's start to the last.
    finished: Vec<Duration>,
    /// The median and p99 of the delays from write to watcher, in seconds.
    delay_p50: f64,
    delay_p99: f64,
    /// Added events all watchers received.
    events: u64,
    /// Of those, the ones whose delay was measured (every one, unless a Pod lost
    /// its stamp on the way).
    measured: u64,
    /// The cache process's CPU time over the run, the writer's left out.
    cpu: Duration,
}

/// What the writer thread reports: its own CPU time and how long its writes took.
struct Writer {
    cpu: Duration,
    elapsed: Duration,
}

impl Bench {
    /// The paced watcher row: per round and side, a filled cache, its watchers of a
    /// fresh namespace, and the paced writer creating Pods there.
    pub(super) async fn cache_watchers_paced(
        &self,
        go: &mut GoArm,
        out: &mut SideBySide,
    ) -> Result<()> {
        let watchers = watchers(self.settings.quick);
        let writes = writes(self.settings.quick);
        let name =
            format!("{PACED}: {watchers} watchers, 1 writer at {PACE} Pods/s, {writes} Pods");
        println!("  {name}");
        let mut collector = Collector::new(&[
            spec("events/s per watcher", Unit::PerSec, true, None),
            spec("watch latency p50", Unit::Seconds, false, None),
            spec("watch latency p99", Unit::Seconds, false, Some(1.0)),
            spec("client CPU/event", Unit::CpuSeconds, false, Some(1.0)),
        ]);
        let mut completed: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        let mut paces = Vec::new();
        for side in self.apistore_then_kube() {
            let namespace = self.fresh_namespace("kube-paced");
            let (run, writer) = if side == Side::Apistore {
                self.apistore_paced_run(&namespace, watchers, writes)
                    .await?
            } else {
                self.kube_paced_run(go, &namespace, watchers, writes)
                    .await?
            };
            if run.measured != run.events {
                return Err(BenchError::Invalid(format!(
                    "{PACED}: {side:?}'s watchers received {} Pods, {} with the {STAMP} \
                     annotation their writer set",
                    run.events, run.measured
                )));
            }
            paces.push(writes as f64 / writer.elapsed.as_secs_f64().max(1e-9));
            completed[usize::from(side == Side::Kube)].push(run.finished.len());
            let cpu_per_event = run.cpu.as_secs_f64() / run.events.max(1) as f64;
            collector.push(
                side,
                vec![
                    median_rate(writes, watchers, &run.finished),
                    run.delay_p50,
                    run.delay_p99,
                    cpu_per_event,
                ],
            );
            self.clear_namespace(&namespace).await?;
        }
        out.rows.push(collector.row(name));
        let [apistore, kube] = completed.map(|counts| format!("{counts:?}"));
        let slowest = paces.iter().copied().fold(f64::INFINITY, f64::min);
        out.notes.push(format!(
            "{PACED}: watchers that received all {writes} Pods, of {watchers}, per round: \
             apistore {apistore}, kube {kube}; the writer's slowest run kept {slowest:.0} \
             Pods/s of the {PACE} asked"
        ));
        Ok(())
    }

    async fn apistore_paced_run(
        &self,
        namespace: &str,
        watchers: usize,
        writes: u64,
    ) -> Result<(Run, Writer)> {
        let (_cache, streams) = self.namespace_watches(namespace, watchers).await?;
        let before = self.cpu.snapshot()?;
        let base = Instant::now();
        let readers: Vec<_> = streams
            .into_iter()
            .map(|events| {
                // Per watcher: the Pods it received, and each one's delay from its stamp.
                let received = (0u64, Vec::with_capacity(writes as usize));
                tokio::spawn(read_added(
                    Events::Cache(events),
                    writes,
                    base,
                    received,
                    |(pods, delays), pod: Shared<LazyObject>| {
                        *pods += 1;
                        let stamp = pod.metadata().annotations.get(STAMP);
                        delays.extend(stamp.and_then(|s| delay_since(s)));
                    },
                ))
            })
            .collect();
        let writer = self.paced_writer(namespace, writes).await?;
        let mut finished = Vec::with_capacity(watchers);
        let mut delays = Vec::with_capacity(watchers * writes as usize);
        let mut events = 0;
        for reader in readers {
            let (done, (received, measured)) = reader.await??;
            finished.extend(done);
            events += received;
            delays.extend(measured);
        }
        let used = self.cpu.snapshot()?.since(&before);
        delays.sort_by(f64::total_cmp);
        let run = Run {
            finished,
            delay_p50: delays.get(delays.len() / 2).copied().unwrap_or(0.0),
            delay_p99: p99(&delays),
            events,
            measured: delays.len() as u64,
            cpu: used.client.saturating_sub(writer.cpu),
        };
        Ok((run, writer))
    }

    async fn kube_paced_run(
        &self,
        go: &mut GoArm,
        namespace: &str,
        watchers: usize,
        writes: u64,
    ) -> Result<(Run, Writer)> {
        self.kube_namespace_watches(go, namespace, watchers, writes, true)
            .await?;
        let writer = self.paced_writer(namespace, writes).await?;
        let (answer, finished) = Self::kube_watches_done(go)?;
        // The Go arm takes the median and p99 of its delays as this side does (a
        // million of them would make a long answer line).
        let run = Run {
            finished,
            delay_p50: answer.delay_p50,
            delay_p99: answer.delay_p99,
            events: answer.objects,
            measured: answer.delays,
            cpu: Duration::from_secs_f64(answer.cpu_seconds.max(0.0)),
        };
        Ok((run, writer))
    }

    /// Creates `writes` stamped Pods in `namespace` at [`PACE`], from a thread with its
    /// own runtime and connection, so that its CPU time is its own to report.
    async fn paced_writer(&self, namespace: &str, writes: u64) -> Result<Writer> {
        let endpoint = self.endpoint.clone();
        let namespace = namespace.to_owned();
        let writer = thread::Builder::new()
            .name("paced-writer".to_owned())
            .spawn(move || paced_writes(&endpoint, &namespace, writes))
            .map_err(|source| BenchError::Io {
                what: "start the paced writer's thread".to_owned(),
                source,
            })?;
        tokio::task::spawn_blocking(move || writer.join())
            .await?
            .map_err(|_| BenchError::Invalid("the paced writer's thread panicked".to_owned()))?
    }
}

/// The writer thread's work: connect, then one put every `1 / PACE` seconds (a late
/// tick is caught up, so the run keeps its average pace), each Pod encoded and stamped
/// just before its put.
fn paced_writes(endpoint: &str, namespace: &str, writes: u64) -> Result<Writer> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|source| BenchError::Io {
            what: "build the paced writer's runtime".to_owned(),
            source,
        })?;
    let elapsed = runtime.block_on(async {
        let raw = Raw::connect(endpoint).await?;
        let mut kv = raw.kv();
        let kp = KubeProtobuf::k8s_1_31();
        let mut ticks = tokio::time::interval(Duration::from_secs(1) / PACE as u32);
        let started = Instant::now();
        for k in 0..writes {
            ticks.tick().await;
            let mut value = pod_value(k, namespace, &node_of(k));
            value["metadata"]["annotations"][STAMP] = json!(unix_nanos().to_string());
            let key = format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/{}", pod_name(k));
            kv.put(key, kp.encode_value(&value)?, None).await?;
        }
        Ok::<_, BenchError>(started.elapsed())
    })?;
    drop(runtime);
    Ok(Writer {
        cpu: crate::cpu::thread_cpu(),
        elapsed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_writes_whole_seconds_at_the_pace() {
        assert_eq!(writes(false), 1_000);
        assert_eq!(writes(true), 400);
    }
}
