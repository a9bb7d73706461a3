//! Watches: one watcher over 20,000 writes (events per second, lag from write to
//! event), and the memory of 1,000 idle watches.
//!
//! The raw arm watches the way kube-apiserver's etcd3 watcher asks etcd to: from the
//! revision after the given resourceVersion, with the previous value, over the prefix
//! (for a recursive watch); every event's value is decoded into the same type.
//!
//! When the store's watch fails to start (it was a stub returning an error while this
//! was written), the section reports "not available" with the store's error and goes
//! on; it runs by itself once the store's watch works.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apistore_storage::{ListOptions, Storage, WatchEvent, WatchStream};
use etcd_client::WatchOptions;
use futures::StreamExt as _;

use crate::alloc::Window;
use crate::bench::Bench;
use crate::error::{BenchError, Result};
use crate::object::{
    BenchObject, etcd_key, etcd_namespace_prefix, object_name, store_key, store_namespace_key,
};
use crate::raw::decode;
use crate::report::col;
use crate::stats::{Comparison, Metric, Section, Unit};

/// How long one watch run may take before it counts as failed.
const WATCH_DEADLINE: Duration = Duration::from_secs(120);
/// How long idle watches settle before their memory is counted.
const IDLE_SETTLE: Duration = Duration::from_millis(500);

const ARMS: [&str; 2] = ["apistore", "raw"];

/// A watch being read: the store's or etcd-client's.
enum Events {
    Store(WatchStream<BenchObject>),
    Raw(Box<etcd_client::WatchStream>),
}

impl Events {
    /// The objects of the next batch of events (one store event, or one etcd response).
    async fn next(&mut self) -> Result<Vec<BenchObject>> {
        match self {
            Self::Store(stream) => match stream.next().await {
                Some(WatchEvent::Added(object) | WatchEvent::Modified(object)) => Ok(vec![object]),
                Some(WatchEvent::Deleted(_) | WatchEvent::Bookmark(_)) => Ok(Vec::new()),
                Some(WatchEvent::Error(status)) => Err(BenchError::Invalid(format!(
                    "the store's watch ended with an error event: {status:?}"
                ))),
                None => Err(BenchError::Invalid(
                    "the store's watch ended early".to_owned(),
                )),
            },
            Self::Raw(stream) => {
                let Some(response) = stream.message().await? else {
                    return Err(BenchError::Invalid("the raw watch ended early".to_owned()));
                };
                if response.canceled() {
                    return Err(BenchError::Invalid(format!(
                        "the raw watch was cancelled: {}",
                        response.cancel_reason()
                    )));
                }
                response
                    .events()
                    .iter()
                    .filter_map(|event| event.kv())
                    .map(|kv| decode(kv.value(), kv.mod_revision()))
                    .collect()
            }
        }
    }
}

/// One arm's figures in one throughput run.
#[derive(Debug, Clone, Copy)]
struct Round {
    events_per_sec: f64,
    lag_p50: f64,
    lag_p99: f64,
    client_cpu: f64,
    etcd_cpu: f64,
    replay_per_sec: f64,
    replay_cpu: f64,
}

impl Bench {
    /// The watch comparisons, or their "not available" lines.
    pub(crate) async fn watch_section(&self) -> Result<Vec<Comparison>> {
        let writes = self.settings.watch_writes;
        let throughput = format!("{writes} writes, 1 watcher");
        let idle = format!("{} idle watches", self.settings.idle_watches);
        if let Err(err) = self.probe_store_watch().await {
            let why = format!("store returned: {err}");
            println!("  watch: not available ({why})");
            return Ok(vec![
                Comparison::unavailable(Section::Watch, throughput, ARMS, why.clone()),
                Comparison::unavailable(Section::IdleWatch, idle, ARMS, why),
            ]);
        }
        let mut comparisons = Vec::new();
        if self.settings.selected("watch") {
            comparisons.push(match self.compare_watch(&throughput).await {
                Ok(comparison) => comparison,
                Err(err) => {
                    Comparison::unavailable(Section::Watch, throughput, ARMS, err.to_string())
                }
            });
        }
        if self.settings.selected("idle") {
            comparisons.push(match self.compare_idle(&idle).await {
                Ok(comparison) => comparison,
                Err(err) => {
                    Comparison::unavailable(Section::IdleWatch, idle, ARMS, err.to_string())
                }
            });
        }
        self.compact().await?;
        Ok(comparisons)
    }

    /// Starts and drops one store watch, to learn whether the store can watch at all.
    async fn probe_store_watch(&self) -> Result<()> {
        let options = ListOptions {
            resource_version: self.current_revision().await?.to_string(),
            recursive: true,
            ..ListOptions::default()
        };
        let stream = self
            .store
            .watch(&store_namespace_key("watch-probe"), &options)
            .await?;
        drop(stream);
        Ok(())
    }

    async fn compare_watch(&self, workload: &str) -> Result<Comparison> {
        println!("  watch, {workload}: apistore against raw");
        let selected = self.arms();
        let mut rounds: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for &arm in &selected {
                rounds[arm].push(self.watch_run(arm).await?);
            }
        }
        let metric = |name, unit, f: fn(&Round) -> f64| {
            Metric::new(
                name,
                unit,
                rounds[0].iter().map(f).collect(),
                rounds[1].iter().map(f).collect(),
            )
        };
        Ok(Comparison::new(
            Section::Watch,
            workload,
            ARMS,
            vec![
                metric(col::EVENTS, Unit::PerSec, |r| r.events_per_sec),
                metric(col::LAG_P50, Unit::Seconds, |r| r.lag_p50),
                metric(col::LAG_P99, Unit::Seconds, |r| r.lag_p99),
                metric("client CPU/event", Unit::CpuSeconds, |r| r.client_cpu),
                metric("etcd CPU/event", Unit::CpuSeconds, |r| r.etcd_cpu),
                metric(col::REPLAY, Unit::PerSec, |r| r.replay_per_sec),
                metric("replay client CPU/event", Unit::CpuSeconds, |r| {
                    r.replay_cpu
                }),
            ],
        ))
    }

    fn arms(&self) -> Vec<usize> {
        match self.settings.single_arm {
            Some(arm) => vec![arm],
            None => vec![0, 1],
        }
    }

    /// Opens a watch on a fresh namespace, has the writers create `watch_writes` objects
    /// in it, and reads until every one has been seen; then opens a second watch from
    /// the same revision and times the replay of the same events from etcd's history.
    async fn watch_run(&self, arm: usize) -> Result<Round> {
        let namespace = self.fresh_namespace("watch");
        let writes = self.settings.watch_writes;
        let writers = self.settings.watch_writers;
        let template = Self::template(&namespace);
        let mut batches: Vec<Vec<(String, Vec<u8>, usize)>> = vec![Vec::new(); writers];
        for index in 0..writes {
            let name = object_name('w', 0, index);
            let value = serde_json::to_vec(&template.named(name.clone()))?;
            let slot = usize::try_from(index).unwrap_or(usize::MAX);
            batches[slot % writers].push((etcd_key(&namespace, &name), value, slot));
        }
        let count = batches.iter().map(Vec::len).sum::<usize>();

        // Live: the watch starts before the first write.
        let revision = self.current_revision().await?;
        let mut events = self.open_watch(arm, &namespace, revision).await?;
        let sent: Arc<Vec<AtomicU64>> = Arc::new((0..count).map(|_| AtomicU64::new(0)).collect());
        let before = self.cpu.snapshot()?;
        let base = Instant::now();
        let mut tasks = Vec::with_capacity(writers);
        for batch in batches {
            let mut kv = self.raw.kv();
            let sent = Arc::clone(&sent);
            tasks.push(tokio::spawn(async move {
                for (key, value, slot) in batch {
                    sent[slot].store(nanos_since(base) + 1, Ordering::Release);
                    kv.put(key, value, None).await?;
                }
                Ok::<_, BenchError>(())
            }));
        }
        let mut lags = Vec::with_capacity(count);
        let last = read_all(
            &mut events,
            count,
            ARMS[arm],
            |slot, now| {
                let sent_at = sent[slot].load(Ordering::Acquire);
                if sent_at > 0 {
                    lags.push(now.saturating_sub(sent_at - 1));
                }
            },
            base,
        )
        .await?;
        let used = self.cpu.snapshot()?.since(&before);
        for task in tasks {
            task.await??;
        }
        drop(events);

        // Replay: everything is in etcd's history already; only the watch path is timed.
        let mut replay = self.open_watch(arm, &namespace, revision).await?;
        let replay_before = self.cpu.snapshot()?;
        let replay_base = Instant::now();
        let replay_last = read_all(&mut replay, count, ARMS[arm], |_, _| {}, replay_base).await?;
        let replay_used = self.cpu.snapshot()?.since(&replay_before);
        drop(replay);
        self.clear(&namespace).await?;

        lags.sort_unstable();
        let quantile = |q: f64| {
            let last = lags.len().saturating_sub(1);
            lags.get(((last as f64) * q).round() as usize)
                .map_or(0.0, |n| *n as f64 / 1e9)
        };
        let events = count as f64;
        Ok(Round {
            events_per_sec: events / (last as f64 / 1e9).max(1e-9),
            lag_p50: quantile(0.5),
            lag_p99: quantile(0.99),
            client_cpu: used.client.as_secs_f64() / events,
            etcd_cpu: used.etcd.as_secs_f64() / events,
            replay_per_sec: events / (replay_last as f64 / 1e9).max(1e-9),
            replay_cpu: replay_used.client.as_secs_f64() / events,
        })
    }

    /// A recursive watch of `namespace` from after `revision`: the store's, or the raw
    /// one kube-apiserver's watcher would ask etcd for.
    async fn open_watch(&self, arm: usize, namespace: &str, revision: i64) -> Result<Events> {
        if arm == 0 {
            let options = ListOptions {
                resource_version: revision.to_string(),
                recursive: true,
                ..ListOptions::default()
            };
            let stream = self
                .store
                .watch(&store_namespace_key(namespace), &options)
                .await?;
            Ok(Events::Store(stream))
        } else {
            let options = WatchOptions::new()
                .with_prefix()
                .with_prev_key()
                .with_start_revision(revision + 1);
            let stream = self
                .raw
                .watch_client()
                .watch(etcd_namespace_prefix(namespace), Some(options))
                .await?;
            Ok(Events::Raw(Box::new(stream)))
        }
    }

    async fn compare_idle(&self, workload: &str) -> Result<Comparison> {
        println!("  {workload}: apistore against raw");
        let selected = self.arms();
        let mut per_watch: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for &arm in &selected {
                per_watch[arm].push(self.idle_run(arm).await?);
            }
        }
        let [a, b] = per_watch;
        Ok(Comparison::new(
            Section::IdleWatch,
            workload,
            ARMS,
            vec![Metric::new(col::PER_WATCH, Unit::Bytes, a, b)],
        ))
    }

    /// Opens `idle_watches` watches on distinct keys nobody writes, lets them settle,
    /// and returns the bytes still allocated per watch.
    async fn idle_run(&self, arm: usize) -> Result<f64> {
        let namespace = self.fresh_namespace("idle");
        let n = self.settings.idle_watches;
        let revision = self.current_revision().await?;
        let keys: Vec<(String, String)> = (0..n as u64)
            .map(|i| {
                let name = object_name('i', 0, i);
                (store_key(&namespace, &name), etcd_key(&namespace, &name))
            })
            .collect();
        let mut store_watches = Vec::with_capacity(if arm == 0 { n } else { 0 });
        let mut raw_watches = Vec::with_capacity(if arm == 1 { n } else { 0 });
        let mut watch_client = self.raw.watch_client();
        let options = ListOptions {
            resource_version: revision.to_string(),
            ..ListOptions::default()
        };

        let window = Window::open();
        for (store_key, etcd_key) in &keys {
            if arm == 0 {
                store_watches.push(self.store.watch(store_key, &options).await?);
            } else {
                let options = WatchOptions::new()
                    .with_prev_key()
                    .with_start_revision(revision + 1);
                raw_watches.push(watch_client.watch(etcd_key.as_str(), Some(options)).await?);
            }
        }
        tokio::time::sleep(IDLE_SETTLE).await;
        let counted = window.close();
        drop(store_watches);
        drop(raw_watches);
        tokio::time::sleep(IDLE_SETTLE).await;
        Ok(counted.net as f64 / n as f64)
    }
}

/// Reads `events` until all `count` objects have been seen once, calling `seen` with
/// each new object's index and the nanoseconds since `base` when it arrived. Returns
/// when the last one arrived, in nanoseconds since `base`.
async fn read_all(
    events: &mut Events,
    count: usize,
    arm: &str,
    mut seen: impl FnMut(usize, u64),
    base: Instant,
) -> Result<u64> {
    let deadline = tokio::time::Instant::now() + WATCH_DEADLINE;
    let mut received = vec![false; count];
    let mut distinct = 0;
    let mut last = 0;
    while distinct < count {
        let Ok(batch) = tokio::time::timeout_at(deadline, events.next()).await else {
            return Err(BenchError::Invalid(format!(
                "{arm} watch delivered {distinct} of {count} events in {WATCH_DEADLINE:?}"
            )));
        };
        let now = nanos_since(base);
        for object in batch? {
            let Some(slot) = slot_of(&object) else {
                continue;
            };
            if slot >= count || std::mem::replace(&mut received[slot], true) {
                continue;
            }
            distinct += 1;
            last = now;
            seen(slot, now);
            black_box(object);
        }
    }
    Ok(last)
}

/// The index a watch object was written with, from its name.
fn slot_of(object: &BenchObject) -> Option<usize> {
    object.metadata.name.get(4..)?.parse().ok()
}

fn nanos_since(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}
