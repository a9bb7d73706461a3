//! The watch cache (`apistore-cacher`) over the etcd3 store, against raw etcd-client in
//! the same run (`--only cacher`):
//!
//! - *cacher list*: 10,000 objects of 1 KiB listed with resourceVersion "0" from the
//!   cache (arm A) against one etcd-client range of the same keys with every value
//!   decoded (arm B);
//! - *cacher watchers*: N watchers of one namespace served by the cache while 16 raw
//!   writers create objects in it (arm A), against one raw etcd watch of the same
//!   writes decoding every event (arm B). The figure compared is the events per second
//!   each watcher receives: the cache serves all N from its one etcd watch.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_etcd3::Etcd3Store;
use apistore_storage::{ListOptions, ResourceVersionMatch, Storage, WatchEvent, WatchStream};
use apistore_testing::metrics::counter;
use etcd_client::WatchOptions;
use futures::StreamExt as _;

use crate::alloc::Window;
use crate::bench::Bench;
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};
use crate::object::{
    BenchObject, RESOURCE, etcd_key, etcd_namespace_prefix, object_name, store_namespace_key,
};
use crate::raw::decode;
use crate::report::col;
use crate::stats::{Comparison, Metric, Section, Unit};

/// The workloads' names, for `--only`.
pub(crate) const LIST: &str = "cacher list";
pub(crate) const WATCHERS: &str = "cacher watchers";

const ARMS: [&str; 2] = ["cache", "raw"];
const NAMESPACE: &str = "cacher-list";
const DEADLINE: Duration = Duration::from_secs(120);

/// The cache holds `Shared<BenchObject>`: every list and every watcher gets the one
/// decoded object, as kube's cacher hands out pointers.
type Shared = apistore_storage::Shared<BenchObject>;
type Cached = Cacher<Etcd3Store<Shared>>;

impl Bench {
    /// A store over the bench's etcd with its settings, for shared objects.
    pub(crate) fn shared_store(&self) -> Etcd3Store<Shared> {
        Etcd3Store::new(self.client.clone(), Self::store_config())
    }
}

/// Whether any cacher workload is selected.
pub(crate) fn selected(settings: &crate::settings::Settings) -> bool {
    settings.selected(LIST) || settings.selected(WATCHERS)
}

impl Bench {
    /// Both cacher workloads; the notes say what the cache's metrics saw.
    pub(crate) async fn cacher_section(&self) -> Result<(Vec<Comparison>, Vec<String>)> {
        let registry = prometheus::Registry::new();
        let mut config = CacherConfig::new(format!("/{RESOURCE}"), RESOURCE);
        config.metrics = Some(
            CacherMetrics::register(&registry)
                .map_err(|err| BenchError::Invalid(format!("cacher metrics: {err}")))?,
        );
        let cacher = Cacher::new(self.shared_store(), config);
        cacher.wait_until_ready().await?;
        let mut comparisons = Vec::new();
        let mut notes = Vec::new();
        if self.settings.selected(LIST) {
            let (lists, note) = self.compare_cached_list(&cacher).await?;
            comparisons.extend(lists);
            notes.push(note);
        }
        if self.settings.selected(WATCHERS) {
            let (comparison, note) = self.compare_cached_watchers(&cacher, &registry).await?;
            comparisons.push(comparison);
            notes.push(note);
        }
        drop(cacher);
        self.compact().await?;
        Ok((comparisons, notes))
    }

    /// The list from the cache at resourceVersion 0 against the raw range, and, when
    /// the backend answers progress requests (etcd 3.4.31+, 3.5.13+), the consistent
    /// list (resourceVersion "") the cache serves after one.
    async fn compare_cached_list(&self, cacher: &Cached) -> Result<(Vec<Comparison>, String)> {
        let objects = self.settings.list_objects;
        println!("  {LIST}: filling {objects} objects");
        let names = (0..objects).map(|i| object_name('k', 0, i)).collect();
        self.fill(
            NAMESPACE,
            names,
            &crate::bench::Backend::Raw(Arc::clone(&self.raw)),
        )
        .await?;
        let revision = u64::try_from(self.current_revision().await?).unwrap_or(0);
        cacher.wait_until_fresh(revision).await?;
        let mut memory = self.cache_memory(objects).await?;
        let mut comparisons = vec![self.time_cached_list(cacher, objects, false).await?];
        let consistent_store = self.shared_store();
        if consistent_store
            .check_request_watch_progress_support()
            .await?
        {
            let mut config = CacherConfig::new(format!("/{RESOURCE}"), RESOURCE);
            config.consistent_reads_from_cache = true;
            let consistent = Cacher::new(consistent_store, config);
            consistent.wait_until_ready().await?;
            comparisons.push(self.time_cached_list(&consistent, objects, true).await?);
        } else {
            memory.push_str(
                "; the consistent list from the cache was not measured: this etcd does not \
                 answer progress requests correctly (3.4.31+ or 3.5.13+ does)",
            );
        }
        self.clear(NAMESPACE).await?;
        Ok((comparisons, memory))
    }

    async fn time_cached_list(
        &self,
        cacher: &Cached,
        objects: u64,
        consistent: bool,
    ) -> Result<Comparison> {
        let rv = if consistent { "\"\" (consistent)" } else { "0" };
        println!("  {LIST}: cache (resourceVersion {rv}) against raw range + decode");
        let metrics = self
            .time_lists(objects, |arm| {
                list_op(
                    arm,
                    cacher.clone(),
                    Arc::clone(&self.raw),
                    objects,
                    consistent,
                )
            })
            .await?;
        Ok(Comparison::new(
            Section::Cacher,
            format!("{LIST} of {objects} × 1 KiB, resourceVersion {rv}"),
            ARMS,
            metrics,
        ))
    }

    /// Times the list of `objects` that `op_of(arm)` makes, arm A then arm B, round
    /// after round (`list_repeats` lists, at least 3, per arm and round); the figures
    /// per list: keys/s, time and client CPU.
    pub(crate) async fn time_lists(
        &self,
        objects: u64,
        op_of: impl Fn(usize) -> driver::OpFn,
    ) -> Result<Vec<Metric>> {
        let repeats = self.settings.list_repeats.max(3);
        let mut times: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut cpu: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for arm in self.arm_indexes() {
                let op = op_of(arm);
                let sample = driver::drive(&self.cpu, 1, Plan::Count(repeats), &op, None).await?;
                times[arm].push(sample.latency(0.5));
                cpu[arm].push(sample.client_cpu_per_op());
            }
        }
        let keys = |times: &[f64]| {
            times
                .iter()
                .map(|t| objects as f64 / t.max(1e-9))
                .collect::<Vec<_>>()
        };
        let [time_a, time_b] = times;
        let [cpu_a, cpu_b] = cpu;
        Ok(vec![
            Metric::new(col::KEYS, Unit::PerSec, keys(&time_a), keys(&time_b)),
            Metric::new(col::TIME, Unit::Seconds, time_a, time_b),
            Metric::new("client CPU/list", Unit::CpuSeconds, cpu_a, cpu_b),
        ])
    }

    /// The bytes a cache of the list namespace's resource holds once ready, against the
    /// bytes the same objects hold decoded in a `Vec` (the counting allocator, nothing
    /// else running meanwhile).
    async fn cache_memory(&self, objects: u64) -> Result<String> {
        let window = Window::open();
        let mut decoded = Vec::new();
        self.raw
            .list(&etcd_namespace_prefix(NAMESPACE), 0, |items| {
                decoded.extend_from_slice(items);
            })
            .await?;
        let decoded_bytes = window.close().net;
        drop(decoded);
        let window = Window::open();
        let cacher = Cacher::new(
            self.shared_store(),
            CacherConfig::new(format!("/{RESOURCE}"), RESOURCE),
        );
        cacher.wait_until_ready().await?;
        let cached_bytes = window.close().net;
        // The cache holds the whole resource, which has more than the list namespace
        // (the CRUD pool lives there too): compare per object.
        let everything = ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan);
        let cached = cacher
            .list(&format!("/{RESOURCE}"), &everything)
            .await?
            .items
            .len();
        drop(cacher);
        let per_cached = cached_bytes as f64 / cached.max(1) as f64;
        let per_decoded = decoded_bytes as f64 / objects.max(1) as f64;
        Ok(format!(
            "{LIST}: a ready cache holds {cached_bytes} bytes for its {cached} objects \
             ({per_cached:.0} per object); {objects} of them decoded in a Vec hold {decoded_bytes} \
             bytes ({per_decoded:.0} per object): {:.2}×",
            per_cached / per_decoded.max(1.0)
        ))
    }

    /// The arms to run: both, or the one `--arm` chose.
    pub(crate) fn arm_indexes(&self) -> Vec<usize> {
        match self.settings.single_arm {
            Some(arm) => vec![arm],
            None => vec![0, 1],
        }
    }

    async fn compare_cached_watchers(
        &self,
        cacher: &Cached,
        registry: &prometheus::Registry,
    ) -> Result<(Comparison, String)> {
        let (watchers, writes) = if self.settings.quick {
            (100, 2_000)
        } else {
            (1_000, 2_000)
        };
        let workload =
            format!("{WATCHERS}: {watchers} watchers, {WRITERS} writers, {writes} writes");
        println!("  {workload}: per-watcher events/s against one raw watch");
        let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for arm in self.arm_indexes() {
                let watchers = if arm == 0 { watchers } else { 1 };
                rates[arm].push(self.watchers_run(arm, cacher, watchers, writes).await?);
            }
        }
        let terminated = counter(registry, "apiserver_terminated_watchers_total", &[]);
        let dispatched = counter(
            registry,
            "apiserver_watch_cache_events_dispatched_total",
            &[],
        );
        let note = format!(
            "{WATCHERS}: the cache held one etcd watch for all {watchers} watchers; over the run it \
             dispatched {dispatched} events and terminated {terminated} watchers for not keeping up \
             (apiserver_terminated_watchers_total)"
        );
        let [a, b] = rates;
        Ok((
            Comparison::new(
                Section::CacherWatch,
                workload,
                ARMS,
                vec![Metric::new("events/s per watcher", Unit::PerSec, a, b)],
            ),
            note,
        ))
    }

    /// Opens `watchers` watches of a fresh namespace (through the cache, or one raw
    /// watch), has [`WRITERS`] raw writers create `writes` objects there, and waits until every
    /// watcher has seen all of them. Returns the median per-watcher events per second
    /// (writes over the time from the first write to that watcher's last event).
    async fn watchers_run(
        &self,
        arm: usize,
        cacher: &Cached,
        watchers: usize,
        writes: u64,
    ) -> Result<f64> {
        let namespace = self.fresh_namespace("cacher-watch");
        let revision = self.current_revision().await?;
        let mut streams = Vec::with_capacity(watchers);
        for _ in 0..watchers {
            streams.push(if arm == 0 {
                let options =
                    ListOptions::prefix().at(revision.to_string(), ResourceVersionMatch::Unset);
                Events::Cache(
                    cacher
                        .watch(&store_namespace_key(&namespace), &options)
                        .await?,
                )
            } else {
                let options = WatchOptions::new()
                    .with_prefix()
                    .with_prev_key()
                    .with_start_revision(revision + 1);
                let stream = self
                    .raw
                    .watch_client()
                    .watch(etcd_namespace_prefix(&namespace), Some(options))
                    .await?;
                Events::Raw(Box::new(stream))
            });
        }
        let base = Instant::now();
        let readers: Vec<_> = streams
            .into_iter()
            .map(|events| tokio::spawn(read_count(events, writes, base)))
            .collect();
        let template = Self::template(&namespace);
        let put_namespace = namespace.clone();
        self.raw_writes(writes, move |index| {
            let name = object_name('v', 0, index);
            let value = serde_json::to_vec(&template.named(name.clone()))?;
            Ok((etcd_key(&put_namespace, &name), value))
        })
        .await?;
        let mut finished = Vec::with_capacity(readers.len());
        for reader in readers {
            finished.extend(reader.await??);
        }
        self.clear(&namespace).await?;
        Ok(median_rate(writes, watchers, &finished))
    }

    /// Has [`WRITERS`] raw writers put `writes` values, the `index`th as `put_of(index)`
    /// names it (an etcd key and its value), each writer every [`WRITERS`]th index.
    /// Raw puts, so that the writes cost neither side of a comparison of watchers.
    pub(crate) async fn raw_writes(
        &self,
        writes: u64,
        put_of: impl Fn(u64) -> Result<(String, Vec<u8>)> + Send + Sync + 'static,
    ) -> Result<()> {
        let put_of = Arc::new(put_of);
        let mut tasks = Vec::new();
        for writer in 0..WRITERS {
            let mut kv = self.raw.kv();
            let put_of = Arc::clone(&put_of);
            tasks.push(tokio::spawn(async move {
                let mut index = writer;
                while index < writes {
                    let (key, value) = put_of(index)?;
                    kv.put(key, value, None).await?;
                    index += WRITERS;
                }
                Ok::<_, BenchError>(())
            }));
        }
        for task in tasks {
            task.await??;
        }
        Ok(())
    }
}

/// Writers of the watcher workloads.
pub(crate) const WRITERS: u64 = 16;

/// The median over `watchers` watchers of the events per second each received:
/// `events` over its time from the first write to its last event, for each that
/// `finished`; a watcher that did not (terminated for not keeping up: kube's clients
/// would re-watch, here it simply did not keep up) counts as 0 events/s.
pub(crate) fn median_rate(events: u64, watchers: usize, finished: &[Duration]) -> f64 {
    let mut rates: Vec<f64> = finished
        .iter()
        .map(|elapsed| events as f64 / elapsed.as_secs_f64().max(1e-9))
        .collect();
    rates.resize(watchers.max(finished.len()), 0.0);
    crate::stats::median(&rates)
}

fn list_op(
    arm: usize,
    cacher: Cached,
    raw: Arc<crate::raw::Raw>,
    objects: u64,
    consistent: bool,
) -> driver::OpFn {
    driver::op(move |_, _| {
        let cacher = cacher.clone();
        let raw = Arc::clone(&raw);
        async move {
            let listed = if arm == 0 {
                let options = if consistent {
                    ListOptions::prefix()
                } else {
                    ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan)
                };
                let list = cacher
                    .list(&store_namespace_key(NAMESPACE), &options)
                    .await?;
                let listed = list.items.len();
                black_box(list);
                listed
            } else {
                raw.list(&etcd_namespace_prefix(NAMESPACE), 0, |items| {
                    black_box(items);
                })
                .await?
            };
            if listed as u64 != objects {
                return Err(BenchError::Invalid(format!(
                    "listed {listed} objects, expected {objects}"
                )));
            }
            Ok(())
        }
    })
}

/// A watch being read: the cache's or etcd-client's.
pub(crate) enum Events<T> {
    Cache(WatchStream<T>),
    Raw(Box<etcd_client::WatchStream>),
}

/// Reads until `count` objects were added; returns when the last one arrived, or `None`
/// when the cache terminated the watcher first.
pub(crate) async fn read_count<T: Send + 'static>(
    events: Events<T>,
    count: u64,
    base: Instant,
) -> Result<Option<Duration>> {
    let (finished, ()) = read_added(events, count, base, (), |(), object| {
        black_box(object);
    })
    .await?;
    Ok(finished)
}

/// [`read_count`], handing every object a cache's watch adds to `on_added` with
/// `state` (a raw watch's objects are decoded and dropped); returns `state` too, with
/// what `on_added` gathered in it.
pub(crate) async fn read_added<T: Send + 'static, S: Send>(
    mut events: Events<T>,
    count: u64,
    base: Instant,
    mut state: S,
    on_added: impl Fn(&mut S, T) + Send,
) -> Result<(Option<Duration>, S)> {
    let mut seen = 0u64;
    // One deadline for the whole read: a timer per event would cost the cache's arm a
    // timer registration per event and watcher, the raw arm one per batch of events.
    let read = async {
        while seen < count {
            let n = match &mut events {
                Events::Cache(stream) => match stream.next().await {
                    Some(WatchEvent::Added(object)) => {
                        on_added(&mut state, object);
                        1
                    }
                    Some(WatchEvent::Error(status)) => {
                        return Err(BenchError::Invalid(format!(
                            "the cache's watch ended with {status:?}"
                        )));
                    }
                    Some(_) => 0,
                    None => return Ok(None),
                },
                Events::Raw(stream) => {
                    let Some(response) = stream.message().await? else {
                        return Err(BenchError::Invalid("the raw watch ended early".to_owned()));
                    };
                    let mut n = 0;
                    for kv in response.events().iter().filter_map(|e| e.kv()) {
                        black_box(decode(kv.value(), kv.mod_revision())?);
                        n += 1;
                    }
                    n
                }
            };
            seen += n;
        }
        Ok(Some(base.elapsed()))
    };
    let outcome = tokio::time::timeout(DEADLINE, read).await;
    match outcome {
        Ok(finished) => Ok((finished?, state)),
        Err(_) => Err(BenchError::Invalid(format!(
            "a watcher saw fewer than {count} events in {DEADLINE:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_rate_counts_watchers_that_did_not_finish_as_zero() {
        let second = Duration::from_secs(1);
        // Three of four finished: rates 100, 50, 25 and a 0.
        let finished = [second, 2 * second, 4 * second];
        assert_eq!(median_rate(100, 4, &finished), 37.5);
        // All finished.
        assert_eq!(median_rate(100, 3, &finished), 50.0);
        // Most did not: the median is 0.
        assert_eq!(median_rate(100, 7, &finished), 0.0);
        assert_eq!(median_rate(100, 0, &[]), 0.0);
    }
}
