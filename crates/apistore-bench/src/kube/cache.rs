//! The kube section's watch-cache rows: apistore's `Cacher` against k8s.io/apiserver
//! v0.37.2's cacher (`pkg/storage/cacher`, composed as the registry's
//! `StorageWithCacher` composes it for Pods: the Pod key function, `spec.nodeName` as
//! trigger and index, `APIObjectVersioner`, the storage codec; see
//! interop/gobench/cache.go), each over its own side's etcd3 store, on the same 10,000
//! Pods in the same etcd, side after side, round after round:
//!
//! - `kube cache memory/Pod, <representation>`: bytes a filled cache holds per cached
//!   Pod (apistore: the counting allocator, from before the cache is built to when it
//!   holds the fill's revision; kube: heap in use after a GC, before and after);
//! - `kube cache list RV=0 whole|namespace, <representation>`: one caller listing every
//!   Pod, or one namespace's 100 (rotating over the 100), with resourceVersion "0"
//!   (NotOlderThan), served from the cache;
//! - `kube cache list RV="" whole|namespace, <representation>`: the same lists with no
//!   resourceVersion (consistent, kube 1.37's default for a `kubectl get`), which
//!   each cache serves itself after a progress request brings it to etcd's current
//!   revision (kube's `ConsistentListFromCache`, GA at 1.34). Measured only on an etcd
//!   that answers progress requests (3.4.31+, 3.5.13+), where both caches take that
//!   path; each side's own count of consistent reads served without falling back to
//!   etcd (`apiserver_watch_cache_consistent_read_total`) must equal its lists, or the
//!   run says which side fell back;
//! - `kube cache watchers`: [`watchers`] watchers of one namespace on each side's
//!   cache while [`WRITERS`] raw etcd-client writers (the bench's, for both sides, so
//!   that the writes cost neither) create Pods in it; the median over watchers of the
//!   events per second each received;
//! - `kube cache watchers, paced` (src/kube/paced_watchers.rs): the same watchers
//!   while one writer creates stamped Pods at a pace both caches keep up with; what
//!   the fan-out costs (delay from write to watcher, CPU per delivered event);
//! - `kube write throughput ...` (src/kube/write_throughput/): kube's
//!   `RunBenchmarkWriteThroughput` over each side's cache.
//!
//! apistore's cache holds `Shared` objects (one decoded object handed to every list
//! and watcher, as kube's cacher hands out pointers) in two representations:
//! `LazyObject` (metadata decoded, body kept as stored) and `DynamicObject` (the
//! `KubePod` of the rest of the section). The watcher and write rows use `LazyObject`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_etcd3::{Etcd3Store, StoreConfig};
use apistore_protobuf::{KubeProtobuf, LazyCodec, LazyObject, MediaType};
use apistore_storage::{
    ApiObject, Codec, CodecError, KubeVersion, ListOptions, ResourceVersionMatch, Shared, Storage,
    WatchStream,
};
use apistore_value::IdentityTransformer;
use bytes::Bytes;
use prometheus::Registry;
use serde_json::json;

use super::{RESOURCE, SPREAD, encoded_pod, group_selected, namespace_of, node_of};
use crate::alloc::Window;
use crate::bench::Bench;
use crate::cacher::{Events, WRITERS, median_rate, read_count};
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};
use crate::gobench::{GoAnswer, GoArm};
use crate::kube_pod::kube_pod_codec;
use crate::object::ETCD_PREFIX;
use crate::pod::pod_name;
use crate::side_by_side::{Collector, Side, SideBySide, Spec, spec};
use crate::stats::Unit;

/// Every workload name of these rows starts with this (`--only "kube cache"`).
pub(super) const CACHE: &str = "kube cache";
/// The watcher row's name.
const WATCHERS: &str = "kube cache watchers";
/// Pods each watcher run writes.
const WATCH_WRITES: u64 = 2_000;

/// apistore's cache of Pods held as `T`.
pub(super) type PodCache<T> = Cacher<Etcd3Store<Shared<T>>>;

/// Watchers per run: kube's issue asks for 1,000; a quick run opens 100 (as the
/// `cacher watchers` workload does).
pub(super) fn watchers(quick: bool) -> usize {
    if quick { 100 } else { 1_000 }
}

/// A codec of `T` as a codec of `Shared<T>`: the bytes are the object's own.
struct SharedCodec<C>(C);

impl<T, C> Codec<Shared<T>> for SharedCodec<C>
where
    T: Clone + Send + Sync + 'static,
    C: Codec<T>,
{
    fn encode(&self, object: &Shared<T>) -> Result<Bytes, CodecError> {
        self.0.encode(object)
    }

    fn decode(&self, data: &[u8]) -> Result<Shared<T>, CodecError> {
        self.0.decode(data).map(Shared::new)
    }

    fn round_trips(&self) -> bool {
        self.0.round_trips()
    }

    fn encode_replacing(&self, object: &Shared<T>, previous: &[u8]) -> Result<Bytes, CodecError> {
        self.0.encode_replacing(object, previous)
    }

    fn carries_previous(&self) -> bool {
        self.0.carries_previous()
    }

    fn stored_value<'a>(&self, object: &'a Shared<T>) -> Option<&'a [u8]> {
        self.0.stored_value(object)
    }
}

/// A cache of Pods as `T`, configured as kube's registry configures the Pods' cacher
/// (the namespace key function, an index on `spec.nodeName`), recording its metrics in
/// `registry`. It serves consistent lists itself when its etcd answers progress
/// requests: kube 1.37's cacher decides the same from the same check of its store.
async fn pod_cache<T>(
    bench: &Bench,
    codec: impl Codec<T>,
    registry: &Registry,
) -> Result<PodCache<T>>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    let store = Etcd3Store::with_parts(
        bench.client.clone(),
        StoreConfig::for_resource(RESOURCE),
        Arc::new(SharedCodec(codec)),
        Arc::new(IdentityTransformer),
    );
    // As kube 1.37's cacher, which the Go arm runs (the defaults already are, but
    // for the `WatchList` gate, off by default as in v0.31.1).
    let mut config = CacherConfig::new(format!("/{RESOURCE}"), RESOURCE)
        .with_kube_version(KubeVersion::V1_37)
        .with_field_index("spec.nodeName");
    config.consistent_reads_from_cache = store.check_request_watch_progress_support().await?;
    config.metrics = Some(
        CacherMetrics::register(registry)
            .map_err(|err| BenchError::Invalid(format!("cacher metrics: {err}")))?,
    );
    Ok(Cacher::new(store, config))
}

/// The report's note for rows left out because the bench's etcd answers no progress
/// requests, without which neither cache serves `what`.
pub(super) fn not_served_note(rows: &str, what: &str) -> String {
    format!(
        "{rows}: not measured; this etcd does not answer progress requests correctly \
         (3.4.31+ or 3.5.13+ does), so neither cache serves {what}"
    )
}

/// apistore's cache of Pods, ready and holding etcd's current revision.
pub(super) struct FilledCache<T: ApiObject + Clone + Default + Send + Sync + 'static> {
    /// The cache.
    pub(super) cache: PodCache<T>,
    /// The revision it holds: etcd's when the cache was asked for.
    pub(super) revision: i64,
    /// Where it records its metrics.
    registry: Registry,
}

impl<T: ApiObject + Clone + Default + Send + Sync + 'static> FilledCache<T> {
    /// Consistent lists the cache served itself, without falling back to etcd (its
    /// `apiserver_watch_cache_consistent_read_total{success="true",fallback="false"}`).
    fn consistent_reads_from_cache(&self) -> u64 {
        let served = apistore_testing::metrics::counter(
            &self.registry,
            "apiserver_watch_cache_consistent_read_total",
            &[("success", "true"), ("fallback", "false")],
        );
        served as u64
    }
}

/// Everything at resourceVersion "0": what a cache serves from memory.
fn from_cache() -> ListOptions {
    ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan)
}

/// A list's resourceVersion: "0" from the cache as it is, or none (consistent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListRv {
    Zero,
    Consistent,
}

impl ListRv {
    /// The row names' spelling.
    fn name(self) -> &'static str {
        match self {
            Self::Zero => "RV=0",
            Self::Consistent => "RV=\"\"",
        }
    }

    fn options(self) -> ListOptions {
        match self {
            Self::Zero => from_cache(),
            Self::Consistent => ListOptions::prefix(),
        }
    }

    /// How the Go arm's protocol spells it: resourceVersion and its match.
    fn wire(self) -> (&'static str, &'static str) {
        match self {
            Self::Zero => ("0", "NotOlderThan"),
            Self::Consistent => ("", ""),
        }
    }
}

/// The list rows of one representation, in order: whole and by namespace, at
/// resourceVersion "0" and consistent.
const LIST_ROWS: [(ListRv, bool); 4] = [
    (ListRv::Zero, true),
    (ListRv::Zero, false),
    (ListRv::Consistent, true),
    (ListRv::Consistent, false),
];

/// Whether any row of this file or of write_throughput/ is selected.
pub(super) fn selected(settings: &crate::settings::Settings) -> bool {
    group_selected(settings, CACHE) || group_selected(settings, super::write_throughput::NAME)
}

impl Bench {
    /// The cache rows, on 10,000 Pods stored as the rest of the section stores them.
    pub(super) async fn kube_cache(&self, go: &mut GoArm, out: &mut SideBySide) -> Result<()> {
        if !selected(&self.settings) {
            return Ok(());
        }
        let objects = self.settings.list_objects;
        let mut puts = Vec::with_capacity(objects as usize);
        for k in 0..objects {
            let namespace = namespace_of(k);
            puts.push((
                format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/{}", pod_name(k)),
                encoded_pod(KubeProtobuf::k8s_1_31(), k, &namespace, &node_of(k))?,
            ));
        }
        self.put_batches(puts).await?;
        let result = self.kube_cache_rows(go, out).await;
        // Cleanup, also after a failed row: that row's error is the one to report.
        let _ = Self::ask(go, &json!({"op": "cacheStop"}));
        self.clean_up_after(result).await
    }

    async fn kube_cache_rows(&self, go: &mut GoArm, out: &mut SideBySide) -> Result<()> {
        let lazy = || LazyCodec::new(MediaType::Protobuf);
        let dynamic = kube_pod_codec;
        self.cache_lists(go, out, "LazyObject", lazy).await?;
        self.cache_lists(go, out, "DynamicObject", dynamic).await?;
        if self.settings.selected(WATCHERS) {
            self.cache_watchers(go, out).await?;
        }
        if self.settings.selected(super::paced_watchers::PACED) {
            self.cache_watchers_paced(go, out).await?;
        }
        if group_selected(&self.settings, super::write_throughput::NAME) {
            self.write_throughput(go, out).await?;
        }
        Ok(())
    }

    /// The memory and list rows of one representation: per round and side, a cache
    /// built and filled (its memory counted), then timed lists from it.
    async fn cache_lists<T, C>(
        &self,
        go: &mut GoArm,
        out: &mut SideBySide,
        representation: &str,
        codec: impl Fn() -> C,
    ) -> Result<()>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
        C: Codec<T>,
    {
        let memory_name = format!("{CACHE} memory/Pod, {representation}");
        let list_names = LIST_ROWS.map(|(rv, whole)| {
            let scope = if whole { "whole" } else { "namespace" };
            format!("{CACHE} list {} {scope}, {representation}", rv.name())
        });
        let memory_selected = self.settings.selected(&memory_name);
        let mut lists_selected = list_names.clone().map(|name| self.settings.selected(&name));
        if !memory_selected && !lists_selected.contains(&true) {
            return Ok(());
        }
        let consistent_selected = LIST_ROWS
            .iter()
            .zip(lists_selected)
            .any(|((rv, _), selected)| *rv == ListRv::Consistent && selected);
        if consistent_selected && !self.etcd_answers_progress_requests().await? {
            for ((rv, _), selected) in LIST_ROWS.iter().zip(&mut lists_selected) {
                *selected &= *rv != ListRv::Consistent;
            }
            out.notes.push(not_served_note(
                &format!("{CACHE} list RV=\"\", {representation}"),
                "a consistent list",
            ));
        }
        println!("  {CACHE} memory and lists, {representation}");
        let memory_spec = [spec("memory/cached Pod", Unit::Bytes, false, Some(1.0))];
        let list_specs: [Spec; 2] = [
            spec("time/list", Unit::Seconds, false, Some(1.0)),
            spec("client CPU/list", Unit::CpuSeconds, false, None),
        ];
        let mut memory = Collector::new(&memory_spec);
        let mut lists = LIST_ROWS.map(|_| Collector::new(&list_specs));
        // Runs in which a side's cache did not serve every consistent list itself.
        let mut fell_back: Vec<String> = Vec::new();
        let namespaces: Vec<String> = (0..SPREAD).map(|n| namespace_of(n * SPREAD)).collect();
        let run = self.settings.run;
        for _ in 0..self.settings.rounds {
            if self.runs(Side::Apistore) {
                let window = Window::open();
                let filled = self.filled_pod_cache(codec()).await?;
                let held = window.close().net;
                let cached = filled
                    .cache
                    .list(RESOURCE, &from_cache())
                    .await?
                    .items
                    .len();
                memory.push(Side::Apistore, vec![held as f64 / cached.max(1) as f64]);
                for ((&(rv, whole), collector), selected) in
                    LIST_ROWS.iter().zip(&mut lists).zip(lists_selected)
                {
                    if !selected {
                        continue;
                    }
                    let (cache, namespaces) = (filled.cache.clone(), Arc::new(namespaces.clone()));
                    let op = driver::op(move |caller, seq| {
                        let (cache, namespaces) = (cache.clone(), Arc::clone(&namespaces));
                        async move {
                            let key = if whole {
                                RESOURCE.to_owned()
                            } else {
                                let n = super::pick(caller, seq, namespaces.len() as u64);
                                format!("{RESOURCE}/{}", namespaces[n as usize])
                            };
                            let list = cache.list(&key, &rv.options()).await?;
                            if list.items.is_empty() {
                                return Err(BenchError::Invalid(format!("{key}: empty list")));
                            }
                            black_box(list);
                            Ok(())
                        }
                    });
                    let served_before = filled.consistent_reads_from_cache();
                    let sample = driver::drive(&self.cpu, 1, Plan::For(run), &op, None).await?;
                    let served = filled.consistent_reads_from_cache() - served_before;
                    if rv == ListRv::Consistent && served != sample.ops {
                        fell_back.push(format!("apistore {served} of {}", sample.ops));
                    }
                    collector.push(
                        Side::Apistore,
                        vec![sample.latency(0.5), sample.client_cpu_per_op()],
                    );
                }
            }
            if self.runs(Side::Kube) {
                let (started, _) = self.filled_kube_cache(go).await?;
                memory.push(Side::Kube, vec![started.bytes_per_object]);
                let keys: Vec<String> = namespaces
                    .iter()
                    .map(|ns| format!("/{RESOURCE}/{ns}"))
                    .collect();
                for ((&(rv, whole), collector), selected) in
                    LIST_ROWS.iter().zip(&mut lists).zip(lists_selected)
                {
                    if !selected {
                        continue;
                    }
                    let (resource_version, resource_version_match) = rv.wire();
                    let answer = Self::ask(
                        go,
                        &json!({
                            "op": "list", "cache": true,
                            "keys": if whole { vec![format!("/{RESOURCE}")] } else { keys.clone() },
                            "resourceVersion": resource_version,
                            "resourceVersionMatch": resource_version_match,
                            "callers": 1, "seconds": run.as_secs_f64(),
                        }),
                    )?;
                    if answer.objects == 0 {
                        return Err(BenchError::Invalid("the kube cache listed nothing".into()));
                    }
                    if rv == ListRv::Consistent && answer.consistent_from_cache != answer.ops {
                        fell_back.push(format!(
                            "kube {} of {}",
                            answer.consistent_from_cache, answer.ops
                        ));
                    }
                    collector.push(
                        Side::Kube,
                        vec![
                            answer.latency(0.5),
                            answer.cpu_seconds / answer.ops.max(1) as f64,
                        ],
                    );
                }
                Self::ask(go, &json!({"op": "cacheStop"}))?;
            }
        }
        if memory_selected {
            out.rows.push(memory.row(memory_name));
        }
        for ((collector, name), selected) in lists.into_iter().zip(list_names).zip(lists_selected) {
            if selected {
                out.rows.push(collector.row(name));
            }
        }
        if !fell_back.is_empty() {
            // Not an error: a cache that does not reach etcd's revision in time hands
            // the list to etcd, as kube's does; but those runs then time etcd too.
            out.notes.push(format!(
                "{CACHE} list RV=\"\", {representation}: not every consistent list was \
                 served from the cache (served of made, per run: {})",
                fell_back.join(", ")
            ));
        }
        Ok(())
    }

    /// The watcher row: per round and side, a filled cache, its watchers of a fresh
    /// namespace, and the bench's raw writers creating [`WATCH_WRITES`] Pods there.
    async fn cache_watchers(&self, go: &mut GoArm, out: &mut SideBySide) -> Result<()> {
        let watchers = watchers(self.settings.quick);
        let name =
            format!("{WATCHERS}: {watchers} watchers, {WRITERS} writers, {WATCH_WRITES} Pods");
        println!("  {name}");
        let mut collector =
            Collector::new(&[spec("events/s per watcher", Unit::PerSec, true, Some(1.0))]);
        let mut completed: [Vec<usize>; 2] = [Vec::new(), Vec::new()];
        // What kube's watchers received on average, terminated ones included.
        let mut kube_received = Vec::new();
        for side in self.apistore_then_kube() {
            let namespace = self.fresh_namespace("kube-watch");
            let puts = Arc::new(self.watch_puts(&namespace)?);
            let finished = if side == Side::Apistore {
                let (_cache, streams) = self.namespace_watches(&namespace, watchers).await?;
                let base = Instant::now();
                let readers: Vec<_> = streams
                    .into_iter()
                    .map(|events| {
                        tokio::spawn(read_count(Events::Cache(events), WATCH_WRITES, base))
                    })
                    .collect();
                self.raw_writes(WATCH_WRITES, move |i| Ok(puts[i as usize].clone()))
                    .await?;
                let mut finished = Vec::with_capacity(watchers);
                for reader in readers {
                    finished.extend(reader.await??);
                }
                finished
            } else {
                self.kube_namespace_watches(go, &namespace, watchers, WATCH_WRITES, false)
                    .await?;
                self.raw_writes(WATCH_WRITES, move |i| Ok(puts[i as usize].clone()))
                    .await?;
                let (answer, finished) = Self::kube_watches_done(go)?;
                kube_received.push(answer.objects / watchers.max(1) as u64);
                finished
            };
            completed[usize::from(side == Side::Kube)].push(finished.len());
            collector.push(side, vec![median_rate(WATCH_WRITES, watchers, &finished)]);
            self.clear_namespace(&namespace).await?;
        }
        out.rows.push(collector.row(name));
        // A watcher the cache terminated counts as 0 events/s: say how many finished.
        let [apistore, kube] = completed.map(|counts| format!("{counts:?}"));
        out.notes.push(format!(
            "{WATCHERS}: watchers that received all {WATCH_WRITES} events, of {watchers}, per \
             round: apistore {apistore}, kube {kube} (the others were terminated by their \
             cache for not keeping up, and count as 0 events/s); kube's watchers received \
             {kube_received:?} events each on average, per round, terminated ones included"
        ));
        Ok(())
    }

    /// The watcher rows' start on apistore's side: a filled cache of `LazyObject` Pods
    /// and `watchers` watches of `namespace` on it from the revision it holds. The
    /// cache is returned to be kept while the watches are read.
    pub(super) async fn namespace_watches(
        &self,
        namespace: &str,
        watchers: usize,
    ) -> Result<(PodCache<LazyObject>, Vec<WatchStream<Shared<LazyObject>>>)> {
        let FilledCache {
            cache,
            revision: since,
            ..
        } = self
            .filled_pod_cache(LazyCodec::new(MediaType::Protobuf))
            .await?;
        let options = ListOptions::prefix().at(since.to_string(), ResourceVersionMatch::Unset);
        let key = format!("{RESOURCE}/{namespace}");
        let mut streams = Vec::with_capacity(watchers);
        for _ in 0..watchers {
            streams.push(cache.watch(&key, &options).await?);
        }
        Ok((cache, streams))
    }

    /// The watcher rows' start on kube's side: its filled cache, and `watchers`
    /// watches of `namespace` on it from the revision it holds, each to read `count`
    /// Pods (with `delays`, each Pod's delay from its write's stamp measured too).
    pub(super) async fn kube_namespace_watches(
        &self,
        go: &mut GoArm,
        namespace: &str,
        watchers: usize,
        count: u64,
        delays: bool,
    ) -> Result<()> {
        let (_, since) = self.filled_kube_cache(go).await?;
        Self::ask(
            go,
            &json!({
                "op": "cacheWatch", "keys": [format!("/{RESOURCE}/{namespace}")],
                "resourceVersion": since.to_string(), "watchers": watchers,
                "count": count, "delays": delays,
            }),
        )?;
        Ok(())
    }

    /// The watcher rows' end on kube's side: what its watchers read, once they all
    /// finished or were terminated, with the cache stopped; and per watcher that read
    /// every Pod, its time from the start to the last.
    pub(super) fn kube_watches_done(go: &mut GoArm) -> Result<(GoAnswer, Vec<Duration>)> {
        let answer = Self::ask(go, &json!({"op": "cacheWatchWait"}))?;
        Self::ask(go, &json!({"op": "cacheStop"}))?;
        let finished = answer
            .latencies
            .iter()
            .map(|&s| Duration::from_secs_f64(s.max(0.0)))
            .collect();
        Ok((answer, finished))
    }

    /// apistore's cache of Pods as `T`, ready and holding etcd's current revision.
    pub(super) async fn filled_pod_cache<T>(&self, codec: impl Codec<T>) -> Result<FilledCache<T>>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        let revision = self.current_revision().await?;
        let registry = Registry::new();
        let cache = pod_cache(self, codec, &registry).await?;
        cache.wait_until_ready().await?;
        cache
            .wait_until_fresh(u64::try_from(revision).unwrap_or(0))
            .await?;
        Ok(FilledCache {
            cache,
            revision,
            registry,
        })
    }

    /// Whether the bench's etcd answers progress requests, which both caches need to
    /// serve consistent lists and watch-lists (kube's cacher asks its store the same).
    pub(super) async fn etcd_answers_progress_requests(&self) -> Result<bool> {
        Ok(self
            .shared_store()
            .check_request_watch_progress_support()
            .await?)
    }

    /// kube's cache, started in the Go arm and holding etcd's current revision, and
    /// that revision; the answer carries the heap it holds per cached Pod.
    pub(super) async fn filled_kube_cache(&self, go: &mut GoArm) -> Result<(GoAnswer, i64)> {
        let revision = self.current_revision().await?;
        let answer = Self::ask(
            go,
            &json!({"op": "cacheStart", "resourceVersion": revision.to_string()}),
        )?;
        Ok((answer, revision))
    }

    /// The etcd keys and values of the Pods a watcher run creates in `namespace`,
    /// encoded before the run so that encoding costs neither side.
    fn watch_puts(&self, namespace: &str) -> Result<Vec<(String, Vec<u8>)>> {
        (0..WATCH_WRITES)
            .map(|k| {
                let value = encoded_pod(KubeProtobuf::k8s_1_31(), k, namespace, &node_of(k))?;
                Ok((
                    format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/{}", pod_name(k)),
                    value,
                ))
            })
            .collect()
    }

    /// Deletes one namespace's Pods (untimed).
    pub(super) async fn clear_namespace(&self, namespace: &str) -> Result<()> {
        let mut kv = self.raw.client().kv_client();
        kv.delete(
            format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/"),
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_rows_are_selected_by_their_names() {
        let only = |names: &[&str]| crate::settings::Settings {
            only: names.iter().map(|n| (*n).to_owned()).collect(),
            ..crate::settings::Settings::quick()
        };
        assert!(selected(&only(&[])));
        assert!(selected(&only(&["kube cache"])));
        assert!(selected(&only(&["kube"])));
        assert!(selected(&only(&["kube write"])));
        assert!(selected(&only(&["kube cache list RV=0 whole, LazyObject"])));
        assert!(!selected(&only(&["kube list whole"])));
        assert!(!selected(&only(&["cacher"])));
        let quick = only(&["kube cache"]);
        assert!(quick.selected(&format!("{CACHE} memory/Pod, LazyObject")));
        assert!(quick.selected(WATCHERS));
        assert!(quick.selected(super::super::paced_watchers::PACED));
        assert!(only(&["kube cache watchers"]).selected(super::super::paced_watchers::PACED));
        assert!(!quick.selected("kube list whole"));
    }
}
