//! The kube section: apistore against kube-apiserver's own storage layer (k8s.io/apiserver
//! v0.37.2's etcd3 store, in Go: `interop/gobench`, see src/gobench.rs) and against raw
//! etcd-client, on the same etcd, in the same run, round after round, with the same
//! realistic Pods (src/pods.rs) stored as kube's protobuf.
//!
//! Workloads, each named `kube ...` for `--only`:
//! - `kube decode/Pod`: a stored value decoded into an object (apistore: `DynamicObject`
//!   through the protobuf codec, k8s-openapi's typed `Pod` through
//!   `KubeProtobuf::decode` (serde) and `KubeProtobuf::decode_k8s` (generated code),
//!   and `LazyObject` through `LazyCodec`, as read and with its
//!   body read; kube: the storage codec into a typed `v1.Pod`): the wall time and the
//!   process's CPU time per Pod over the same loop (Go's collector works on the other
//!   core while the loop runs, where apistore frees each object on the decoding
//!   thread, so the wall time leaves part of Go's cost out), and the memory each
//!   decoded Pod holds;
//! - `kube list whole` and `kube list pages of 500`: one caller listing all 10,000 Pods;
//!   the same `, typed Pod`: apistore's store of k8s-openapi `Pod`s (the generated
//!   decode, the object Go's store lists), and `, LazyObject`: its store of
//!   `LazyObject`s (bodies not decoded), against the same Go lists; both sides time
//!   the list calls alone: apistore's pages are freed on the bench's freeing thread
//!   (src/freeing.rs) as Go's are by its collector, and its CPU column counts that;
//! - `kube store-list RV=<match> <scope>`: the shape of kube's `RunBenchmarkStoreList`
//!   (resourceVersion "" / NotOlderThan / Exact × cluster, cluster in pages of 1,000,
//!   one node by field selector `spec.nodeName`, one namespace), 4 callers, reporting
//!   list-objs/s and list-calls/s; Pods spread over 100 namespaces and 100 nodes; each
//!   also `, LazyObject`, through a store of `LazyPod`s (src/kube/store_list.rs);
//! - `kube create|get|guaranteed update, 1|16 caller(s)`: on a pool of 1,024 Pods;
//! - `kube cache ...` and `kube write throughput ...`: against kube's cacher
//!   (src/kube/cache.rs, src/kube/write_throughput/).
//!
//! The raw etcd-client arm does the same etcd requests with no codec at all (the floor
//! under both stores); it has no store-list or decode rows.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use apistore_etcd3::{Etcd3Store, StoreConfig};
use apistore_protobuf::{KubeProtobuf, LazyCodec, LazyObject, MediaType, StorageCodec};
use apistore_storage::{Codec, DynamicObject};
use apistore_value::IdentityTransformer;
use etcd_client::{GetOptions as EtcdGetOptions, Txn, TxnOp};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use crate::alloc::Window;
use crate::bench::Bench;
use crate::cpu::CpuMeter;
use crate::crud::{Crud, workload_name};
use crate::driver::{self, Plan, Sample};
use crate::error::{BenchError, Result};
use crate::freeing::{self, Freeing};
use crate::gobench::{GoAnswer, GoArm};
use crate::kube_pod::{KubePod, kube_pod_codec};
use crate::lazy_pod::{LazyPod, LazyPodCodec};
use crate::object::ETCD_PREFIX;
use crate::pod::{pod, pod_name};
use crate::raw::prefix_range_end;
use crate::side_by_side::{Collector, Side, SideBySide, spec};
use crate::stats::{Unit, median};
use crate::typed_pod::{TypedPod, TypedPodCodec};
use store_list::ListShape;

mod cache;
mod crud;
mod paced_watchers;
mod store_list;
mod write_throughput;

/// Every workload name of the section starts with this.
pub(crate) const PREFIX: &str = "kube ";
/// The resource, as both stores name it.
pub(crate) const RESOURCE: &str = "pods";
/// Namespaces and nodes the listed Pods are spread over.
pub(crate) const SPREAD: u64 = 100;
/// The namespace of the CRUD pool.
const POOL_NAMESPACE: &str = "kube-pool";
/// The page of the single-caller paged list.
const LIST_PAGE: i64 = 500;

/// What a `kube list` row's apistore side lists the Pods as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    /// `DynamicObject`s (the bench's `KubePod`).
    Dynamic,
    /// k8s-openapi `Pod`s, decoded by the generated code.
    Typed,
    /// `LazyObject`s, bodies left as stored.
    Lazy,
}
/// Puts per fill transaction (etcd's default `--max-txn-ops` is 128).
const FILL_BATCH: usize = 100;
/// The annotation a guaranteed update bumps, so that every update writes.
const COUNTER: &str = "bench.apistore.io/counter";

/// The apistore side: the etcd3 store over Pods stored as protobuf.
pub(crate) type PodStore = Etcd3Store<KubePod>;

/// The namespace of the `k`th listed Pod.
pub(crate) fn namespace_of(k: u64) -> String {
    format!("kube-ns-{:03}", k / SPREAD % SPREAD)
}

/// The node of the `k`th listed Pod.
pub(crate) fn node_of(k: u64) -> String {
    format!("node-{:03}", k % SPREAD)
}

/// The `k`th Pod, in `namespace` on `node`, as kube's protobuf.
fn encoded_pod(kp: &KubeProtobuf, k: u64, namespace: &str, node: &str) -> Result<Vec<u8>> {
    Ok(kp.encode_value(&pod_value(k, namespace, node))?)
}

/// The `k`th realistic Pod in `namespace`, scheduled to `node`, as JSON.
fn pod_value(k: u64, namespace: &str, node: &str) -> Value {
    let mut value = pod(k);
    value["metadata"]["namespace"] = json!(namespace);
    value["spec"]["nodeName"] = json!(node);
    value
}

/// What a rotating caller picks: the `seq`th call of `caller` out of `count` choices.
pub(crate) fn pick(caller: usize, seq: u64, count: u64) -> u64 {
    (caller as u64 * 7919 + seq) % count.max(1)
}

/// Whether `--only` selects any workload whose name starts with `group`: a part of
/// the group's name, or a longer name within the group.
fn group_selected(settings: &crate::settings::Settings, group: &str) -> bool {
    settings.only.is_empty()
        || settings
            .only
            .iter()
            .any(|only| group.contains(only.as_str()) || only.starts_with(group))
}

/// Whether any kube workload is selected.
pub(crate) fn selected(settings: &crate::settings::Settings) -> bool {
    settings.only.is_empty() || settings.only.iter().any(|o| o.starts_with("kube"))
}

impl Bench {
    /// Runs the section against the Go arm.
    pub(crate) async fn kube_section(&self, go: &mut GoArm) -> Result<SideBySide> {
        let mut out = SideBySide::default();
        let store = Arc::new(PodStore::with_parts(
            self.client.clone(),
            StoreConfig::for_resource(RESOURCE),
            Arc::new(kube_pod_codec()),
            Arc::new(IdentityTransformer),
        ));
        let kp = KubeProtobuf::k8s_1_31();
        self.clear_pods().await?;

        let lists = [
            "kube decode/Pod",
            "kube list whole",
            "kube list pages of 500",
            "kube store-list",
        ];
        // Each group of rows stores its Pods, runs, and clears them away on its own: one
        // that fails keeps the rows it finished and is named in the report, and the
        // groups after it still run.
        if lists
            .iter()
            .any(|group| group_selected(&self.settings, group))
        {
            let result = self.kube_list_group(go, &store, kp, &mut out).await;
            out.record_failure("the decode, list and store-list rows", result);
        }
        let result = self.kube_cache(go, &mut out).await;
        out.record_failure("the cache and write-throughput rows", result);

        let crud: Vec<(Crud, usize)> = [Crud::Create, Crud::Get, Crud::Update]
            .into_iter()
            .flat_map(|op| [(op, 1), (op, 16)])
            .filter(|&(op, callers)| {
                self.settings
                    .selected(&format!("{PREFIX}{}", workload_name(op, callers)))
            })
            .collect();
        if !crud.is_empty() {
            let result = self.kube_crud_group(go, &store, kp, crud, &mut out).await;
            out.record_failure("the create, get and update rows", result);
        }
        Ok(out)
    }

    /// The decode, list and store-list rows, on the section's Pods stored for them.
    async fn kube_list_group(
        &self,
        go: &mut GoArm,
        store: &Arc<PodStore>,
        kp: &KubeProtobuf,
        out: &mut SideBySide,
    ) -> Result<()> {
        let objects = self.settings.list_objects;
        let mut values = Vec::with_capacity(objects as usize);
        let mut puts = Vec::with_capacity(objects as usize);
        for k in 0..objects {
            let namespace = namespace_of(k);
            let value = encoded_pod(kp, k, &namespace, &node_of(k))?;
            puts.push((
                format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/{}", pod_name(k)),
                value.clone(),
            ));
            values.push(value);
        }
        self.put_batches(puts).await?;
        let revision = self.current_revision().await?;
        let bytes: usize = values.iter().map(Vec::len).sum();
        out.notes.push(format!(
            "kube section: {objects} Pods as protobuf, {:.0} bytes each on average, over \
             {SPREAD} namespaces and {SPREAD} nodes, stored at revision {revision} (the \
             resourceVersion of the NotOlderThan and Exact store-lists); the same etcd \
             for all three sides",
            bytes as f64 / objects.max(1) as f64
        ));
        let result = self.kube_lists(go, store, &values, revision, out).await;
        self.clean_up_after(result).await
    }

    /// The create, get and update rows, on a pool of Pods stored for them.
    async fn kube_crud_group(
        &self,
        go: &mut GoArm,
        store: &Arc<PodStore>,
        kp: &KubeProtobuf,
        crud: Vec<(Crud, usize)>,
        out: &mut SideBySide,
    ) -> Result<()> {
        let pool = self.settings.pool_size;
        let mut puts = Vec::with_capacity(pool as usize);
        for k in 0..pool {
            puts.push((
                format!("{ETCD_PREFIX}{RESOURCE}/{POOL_NAMESPACE}/{}", pod_name(k)),
                encoded_pod(kp, k, POOL_NAMESPACE, &node_of(k))?,
            ));
        }
        self.put_batches(puts).await?;
        // Each workload through the `DynamicObject` store, then through a store of
        // `LazyObject`s against a Go answer of its own (no raw side there).
        let lazy_store = Arc::new(Etcd3Store::<LazyPod>::with_parts(
            self.client.clone(),
            StoreConfig::for_resource(RESOURCE),
            LazyPodCodec::shared(LazyCodec::new(MediaType::Protobuf)),
            Arc::new(IdentityTransformer),
        ));
        let mut result = Ok(());
        for workload in crud {
            // Every row's writes stay in etcd's history until compacted; the rows'
            // history together passes etcd's 2 GiB quota ("database space
            // exceeded") once the stores write fast enough, so each row starts
            // compacted (bolt reuses the freed pages).
            let rows = match self.compact().await {
                Ok(()) => self.kube_crud(go, store, workload, "", true).await,
                Err(error) => Err(error),
            };
            let rows = match rows {
                Ok(row) => {
                    out.rows.push(row);
                    match self.compact().await {
                        Ok(()) => {
                            self.kube_crud(go, &lazy_store, workload, ", LazyObject", false)
                                .await
                        }
                        Err(error) => Err(error),
                    }
                }
                Err(error) => Err(error),
            };
            match rows {
                Ok(row) => out.rows.push(row),
                Err(error) => {
                    result = Err(error);
                    break;
                }
            }
        }
        self.clean_up_after(result).await
    }

    /// Clears the section's Pods and compacts after a group of rows, whether or not
    /// the group failed. The group's own error wins over the clean-up's (it is the one
    /// worth reporting; a clean-up that fails after it most likely fails for the same
    /// reason); after a group that did not fail, a failed clean-up is the error.
    async fn clean_up_after(&self, group: Result<()>) -> Result<()> {
        let cleaned = match self.clear_pods().await {
            Ok(()) => self.compact().await,
            Err(error) => Err(error),
        };
        group.and(cleaned)
    }

    /// Deletes every Pod (untimed).
    async fn clear_pods(&self) -> Result<()> {
        let mut kv = self.raw.client().kv_client();
        kv.delete(
            format!("{ETCD_PREFIX}{RESOURCE}/"),
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .map_err(|source| BenchError::EtcdCall {
            what: "deleting the section's Pods",
            source,
        })?;
        Ok(())
    }

    /// Puts the keys and values in transactions of [`FILL_BATCH`] (untimed).
    async fn put_batches(&self, puts: Vec<(String, Vec<u8>)>) -> Result<()> {
        let mut kv = self.raw.kv();
        for batch in puts.chunks(FILL_BATCH) {
            let ops: Vec<TxnOp> = batch
                .iter()
                .map(|(key, value)| TxnOp::put(key.as_str(), value.clone(), None))
                .collect();
            kv.txn(Txn::new().and_then(ops))
                .await
                .map_err(|source| BenchError::EtcdCall {
                    what: "putting the section's Pods",
                    source,
                })?;
        }
        Ok(())
    }

    /// Whether a side runs in this run (`--arm` runs one alone, for profiling).
    pub(crate) fn runs(&self, side: Side) -> bool {
        self.settings.single_arm.is_none_or(|arm| arm == side.arm())
    }

    /// The apistore and kube sides this run measures, one after the other, round
    /// after round (the rows that compare two caches have no raw side).
    pub(crate) fn apistore_then_kube(&self) -> impl Iterator<Item = Side> + '_ {
        (0..self.settings.rounds)
            .flat_map(|_| [Side::Apistore, Side::Kube])
            .filter(|&side| self.runs(side))
    }

    /// The go arm's answer to one request, off the runtime's async threads.
    pub(crate) fn ask(go: &mut GoArm, request: &Value) -> Result<GoAnswer> {
        tokio::task::block_in_place(|| go.call(request))
    }

    async fn kube_lists(
        &self,
        go: &mut GoArm,
        store: &Arc<PodStore>,
        values: &[Vec<u8>],
        revision: i64,
        out: &mut SideBySide,
    ) -> Result<()> {
        let rounds = self.settings.rounds;
        let objects = self.settings.list_objects;
        if self.settings.selected("kube decode/Pod") {
            println!("  kube decode/Pod");
            let specs = [
                spec("decode/Pod", Unit::Seconds, false, Some(1.0)),
                spec("CPU/decoded Pod", Unit::Seconds, false, Some(1.0)),
                spec("memory/decoded Pod", Unit::Bytes, false, Some(1.0)),
            ];
            // Each of apistore's representations against the same answer of Go's: the
            // lazy one twice, as read and with its body read (what a caller that needs
            // the spec pays).
            let (mut dynamic, mut typed) = (Collector::new(&specs), Collector::new(&specs));
            let mut generated = Collector::new(&specs);
            let (mut lazy, mut lazy_body) = (Collector::new(&specs), Collector::new(&specs));
            let lazy_codec = LazyCodec::new(MediaType::Protobuf);
            let request =
                json!({"op": "decode", "etcdPrefix": format!("{ETCD_PREFIX}{RESOURCE}/")});
            let codec = StorageCodec::<DynamicObject>::new(MediaType::Protobuf);
            let latest = KubeProtobuf::latest();
            for _ in 0..rounds {
                if self.runs(Side::Apistore) {
                    dynamic.push(
                        Side::Apistore,
                        decode_each(&self.cpu, values, |v| Ok(codec.decode(v)?))?,
                    );
                    typed.push(
                        Side::Apistore,
                        decode_each(&self.cpu, values, |v| Ok(latest.decode::<Pod>(v)?))?,
                    );
                    generated.push(
                        Side::Apistore,
                        decode_each(&self.cpu, values, |v| Ok(latest.decode_k8s::<Pod>(v)?))?,
                    );
                    lazy.push(
                        Side::Apistore,
                        decode_each(&self.cpu, values, |v| Ok(lazy_codec.decode(v)?))?,
                    );
                    lazy_body.push(
                        Side::Apistore,
                        decode_each(&self.cpu, values, |v| {
                            let object = lazy_codec.decode(v)?;
                            object.body()?;
                            Ok(object)
                        })?,
                    );
                }
                if self.runs(Side::Kube) {
                    let answer = Self::ask(go, &request)?;
                    if answer.ops != objects {
                        return Err(BenchError::Invalid(format!(
                            "the kube arm decoded {} Pods, expected {objects}",
                            answer.ops
                        )));
                    }
                    for collector in [
                        &mut dynamic,
                        &mut typed,
                        &mut generated,
                        &mut lazy,
                        &mut lazy_body,
                    ] {
                        collector.push(
                            Side::Kube,
                            vec![
                                answer.decode_seconds,
                                answer.cpu_seconds / answer.ops.max(1) as f64,
                                answer.bytes_per_object,
                            ],
                        );
                    }
                }
            }
            out.rows
                .push(dynamic.row("kube decode/Pod, protobuf → DynamicObject".to_owned()));
            out.rows
                .push(typed.row("kube decode/Pod, protobuf → typed Pod".to_owned()));
            out.rows
                .push(generated.row("kube decode/Pod, protobuf → typed Pod, generated".to_owned()));
            out.rows
                .push(lazy.row("kube decode/Pod, protobuf → LazyObject".to_owned()));
            out.rows.push(
                lazy_body.row("kube decode/Pod, protobuf → LazyObject, body read".to_owned()),
            );
        }

        // The lazy rows list through a store of `LazyObject`s (bodies left undecoded),
        // the typed ones through a store of k8s-openapi `Pod`s (decoded by the
        // generated code, as Go's store decodes into its `v1.Pod`), against the same
        // Go answer; neither has a raw side.
        let lazy_store = Arc::new(Etcd3Store::<LazyObject>::with_parts(
            self.client.clone(),
            StoreConfig::for_resource(RESOURCE),
            Arc::new(LazyCodec::new(MediaType::Protobuf)),
            Arc::new(IdentityTransformer),
        ));
        let typed_store = Arc::new(Etcd3Store::<TypedPod>::with_parts(
            self.client.clone(),
            StoreConfig::for_resource(RESOURCE),
            TypedPodCodec::shared(StorageCodec::new(MediaType::Protobuf)),
            Arc::new(IdentityTransformer),
        ));
        for (name, limit, repr) in [
            ("kube list whole", 0, Listed::Dynamic),
            ("kube list pages of 500", LIST_PAGE, Listed::Dynamic),
            ("kube list whole, typed Pod", 0, Listed::Typed),
            (
                "kube list pages of 500, typed Pod",
                LIST_PAGE,
                Listed::Typed,
            ),
            ("kube list whole, LazyObject", 0, Listed::Lazy),
            (
                "kube list pages of 500, LazyObject",
                LIST_PAGE,
                Listed::Lazy,
            ),
        ] {
            if !self.settings.selected(name) {
                continue;
            }
            println!("  {name}");
            let mut collector = Collector::new(&[
                spec("time/list", Unit::Seconds, false, Some(0.9)),
                spec("client CPU/list", Unit::CpuSeconds, false, None),
            ]);
            let request = json!({
                "op": "list", "keys": ["/pods"], "limit": limit, "callers": 1, "seconds": 0.0,
            });
            for _ in 0..rounds {
                for side in [Side::Apistore, Side::Kube, Side::Raw] {
                    if !self.runs(side) || (repr != Listed::Dynamic && side == Side::Raw) {
                        continue;
                    }
                    let mut times = Vec::new();
                    let mut cpu = Vec::new();
                    for _ in 0..self.settings.list_repeats {
                        let (time, client_cpu, listed) = match side {
                            Side::Apistore => {
                                let (plan, shape) = (Plan::Count(1), ListShape::whole(limit));
                                // Each page is freed on the bench's freeing thread,
                                // outside the call's time, as Go's collector frees
                                // beside its calls (`freeing.rs`); the CPU column
                                // counts the call and its freeing.
                                let aside = Freeing::Aside;
                                let before = self.cpu.snapshot()?;
                                let (mut sample, listed, _) = match repr {
                                    Listed::Dynamic => {
                                        self.store_lists(store, 1, plan, shape, aside).await?
                                    }
                                    Listed::Typed => {
                                        self.store_lists(&typed_store, 1, plan, shape, aside)
                                            .await?
                                    }
                                    Listed::Lazy => {
                                        self.store_lists(&lazy_store, 1, plan, shape, aside).await?
                                    }
                                };
                                tokio::task::spawn_blocking(freeing::drain).await?;
                                sample.client_cpu = self.cpu.snapshot()?.since(&before).client;
                                (sample.latency(0.5), sample.client_cpu_per_op(), listed)
                            }
                            Side::Kube => {
                                let answer = Self::ask(go, &request)?;
                                (
                                    answer.latency(0.5),
                                    answer.cpu_seconds / answer.ops.max(1) as f64,
                                    answer.objects,
                                )
                            }
                            Side::Raw => {
                                let (sample, listed) = self.raw_lists(limit).await?;
                                (sample.latency(0.5), sample.client_cpu_per_op(), listed)
                            }
                        };
                        if listed != objects {
                            return Err(BenchError::Invalid(format!(
                                "{side:?} listed {listed} Pods, expected {objects}"
                            )));
                        }
                        times.push(time);
                        cpu.push(client_cpu);
                    }
                    collector.push(side, vec![median(&times), median(&cpu)]);
                }
            }
            out.rows.push(collector.row(name.to_owned()));
        }

        self.kube_store_lists(go, store, revision, out).await
    }

    /// One raw list of every Pod: a range (in pages of `limit` when not 0), no decode.
    async fn raw_lists(&self, limit: i64) -> Result<(Sample, u64)> {
        let objects = Arc::new(AtomicU64::new(0));
        let raw = Arc::clone(&self.raw);
        let counted = Arc::clone(&objects);
        let op = driver::op(move |_, _| {
            let (raw, counted) = (Arc::clone(&raw), Arc::clone(&counted));
            async move {
                let prefix = format!("{ETCD_PREFIX}{RESOURCE}/");
                let end = prefix_range_end(prefix.as_bytes());
                let mut start = prefix.into_bytes();
                let mut revision = 0;
                loop {
                    let mut options = EtcdGetOptions::new()
                        .with_range(end.clone())
                        .with_revision(revision);
                    if limit > 0 {
                        options = options.with_limit(limit);
                    }
                    let mut response = raw.kv().get(start.clone(), Some(options)).await?;
                    if revision == 0 {
                        revision = response.header().map_or(0, |h| h.revision());
                    }
                    let more = response.more();
                    let kvs = response.take_kvs();
                    counted.fetch_add(kvs.len() as u64, Ordering::Relaxed);
                    let Some(last) = kvs.last() else {
                        return Ok(());
                    };
                    if !more {
                        black_box(&kvs);
                        return Ok(());
                    }
                    start = last.key().to_vec();
                    start.push(0);
                    black_box(&kvs);
                }
            }
        });
        let sample = driver::drive(&self.cpu, 1, Plan::Count(1), &op, None).await?;
        Ok((sample, objects.load(Ordering::Relaxed)))
    }
}

/// Decodes every value with `decode` (apistore: into a `DynamicObject` through the
/// protobuf codec, into k8s-openapi's typed `Pod`, or into a `LazyObject`, its body
/// read or not): seconds per value, then bytes
/// held per decoded value (a second pass, counted by the allocator; the objects'
/// inline parts in a `Vec` sized before counting starts, and their heap).
fn decode_each<T>(
    cpu: &CpuMeter,
    values: &[Vec<u8>],
    decode: impl Fn(&[u8]) -> Result<T>,
) -> Result<Vec<f64>> {
    let cpu_before = cpu.snapshot()?;
    let started = Instant::now();
    for value in values {
        black_box(decode(value)?);
    }
    let per_object = started.elapsed().as_secs_f64() / values.len().max(1) as f64;
    let cpu_per_object =
        cpu.snapshot()?.since(&cpu_before).client.as_secs_f64() / values.len().max(1) as f64;
    let mut held = Vec::with_capacity(values.len());
    let window = Window::open();
    for value in values {
        held.push(decode(value)?);
    }
    let counted = window.close();
    let inline = std::mem::size_of::<T>() * values.len();
    drop(held);
    Ok(vec![
        per_object,
        cpu_per_object,
        (counted.net as f64 + inline as f64) / values.len().max(1) as f64,
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_selected_by_a_part_of_its_name_or_a_name_within_it() {
        let only = |names: &[&str]| crate::settings::Settings {
            only: names.iter().map(|n| (*n).to_owned()).collect(),
            ..crate::settings::Settings::quick()
        };
        assert!(group_selected(&only(&[]), "kube store-list"));
        assert!(group_selected(&only(&["kube"]), "kube store-list"));
        assert!(group_selected(&only(&["store-list"]), "kube store-list"));
        assert!(group_selected(
            &only(&["kube store-list RV=\"\" cluster, pages"]),
            "kube store-list"
        ));
        assert!(!group_selected(&only(&["kube get"]), "kube store-list"));
    }

    #[test]
    fn pods_spread_over_namespaces_and_nodes() {
        assert_eq!(namespace_of(0), "kube-ns-000");
        assert_eq!(namespace_of(199), "kube-ns-001");
        assert_eq!(node_of(199), "node-099");
        let per_node = (0..10_000).filter(|&k| node_of(k) == "node-007").count();
        assert_eq!(per_node, 100);
    }
}
