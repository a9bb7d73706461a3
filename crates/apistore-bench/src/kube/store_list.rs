//! The `kube store-list ...` rows: the shape of kube's `RunBenchmarkStoreList`
//! (`pkg/storage/testing/store_benchmarks.go`): resourceVersion "" / NotOlderThan /
//! Exact × cluster, cluster in pages of 1,000, one node by field selector
//! `spec.nodeName`, one namespace; 4 callers, reporting list-objs/s and list-calls/s,
//! against kube's etcd3 store in Go over the same etcd.
//!
//! Each row runs three times on the apistore side, with the same Go answer per round:
//! through an `Etcd3Store<KubePod>` (every Pod it returns decoded whole into a
//! `DynamicObject`), as `..., typed Pod` through an `Etcd3Store<TypedPod>` (k8s-openapi's
//! `Pod` by the generated decode: the object Go's store lists), and as `..., LazyObject`
//! through an `Etcd3Store<LazyPod>` (metadata decoded, bodies left as stored protobuf,
//! `spec.nodeName` read from the stored bytes for the node selector).
//!
//! The first two stores judge the node selector on the stored bytes
//! (`with_stored_selector` with a [`LazySelector`] making `spec.nodeName` selectable,
//! as the Pod types of the bench do) and decode only the Pods it keeps, where Go's
//! store decodes every Pod and then selects; the rows without a
//! selector decode every Pod either way. Before a row is timed, each store's list is
//! checked against the section's `DynamicObject` store, which has no stored selector.

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use apistore_etcd3::{Etcd3Store, StoreConfig};
use apistore_protobuf::{LazyCodec, LazySelector, MediaType, StorageCodec};
use apistore_storage::{ApiObject, ListOptions, ResourceVersionMatch, Storage, StoredSelector};
use apistore_value::IdentityTransformer;
use serde_json::json;

use crate::bench::Bench;
use crate::driver::{self, OpFn, Plan, Sample};
use crate::error::{BenchError, Result};
use crate::freeing::Freeing;
use crate::gobench::GoArm;
use crate::kube::{PREFIX, PodStore, RESOURCE, SPREAD, namespace_of, node_of, pick};
use crate::kube_pod::kube_pod_codec;
use crate::lazy_pod::{LazyPod, LazyPodCodec};
use crate::side_by_side::{Collector, Side, SideBySide, spec};
use crate::stats::Unit;
use crate::typed_pod::{TypedPod, TypedPodCodec};

/// Callers of the store-list workloads (kube's benchmark runs 4 per GOMAXPROCS).
pub(crate) const LIST_CALLERS: usize = 4;
/// The page of the paged cluster-scope store-list (kube's, above 1,000 items).
const STORE_LIST_PAGE: i64 = 1_000;

/// The list scopes of kube's store-list benchmark.
#[derive(Debug, Clone, Copy)]
enum Scope {
    Cluster,
    ClusterPaged,
    Node,
    Namespace,
}

impl Scope {
    fn name(self) -> String {
        match self {
            Self::Cluster => "cluster".to_owned(),
            Self::ClusterPaged => format!("cluster, pages of {STORE_LIST_PAGE}"),
            Self::Node => "node (spec.nodeName=)".to_owned(),
            Self::Namespace => "namespace".to_owned(),
        }
    }

    fn limit(self) -> i64 {
        match self {
            Self::ClusterPaged => STORE_LIST_PAGE,
            _ => 0,
        }
    }
}
/// The apistore side of the `, LazyObject` rows.
type LazyPodStore = Etcd3Store<LazyPod>;
/// The apistore side of the `, typed Pod` rows.
type TypedPodStore = Etcd3Store<TypedPod>;

/// list-objs/s, list-calls/s and client CPU per list of one side's sample.
fn rates(sample: &Sample, objects: u64, calls: u64) -> Vec<f64> {
    let seconds = sample.elapsed.as_secs_f64().max(1e-9);
    vec![
        objects as f64 / seconds,
        calls as f64 / seconds,
        sample.client_cpu_per_op(),
    ]
}

impl Bench {
    /// The twelve store-list rows, each with its `, typed Pod` and `, LazyObject` twins.
    pub(crate) async fn kube_store_lists(
        &self,
        go: &mut GoArm,
        store: &Arc<PodStore>,
        revision: i64,
        out: &mut SideBySide,
    ) -> Result<()> {
        let rounds = self.settings.rounds;
        // The node selector judged on the stored bytes, as the Pod types judge it.
        let by_node: Arc<dyn StoredSelector> =
            Arc::new(LazySelector::new().with_field("spec.nodeName"));
        let checked = store;
        let store: Arc<PodStore> = Arc::new(
            PodStore::with_parts(
                self.client.clone(),
                StoreConfig::for_resource(RESOURCE),
                Arc::new(kube_pod_codec()),
                Arc::new(IdentityTransformer),
            )
            .with_stored_selector(Arc::clone(&by_node)),
        );
        let lazy_store: Arc<LazyPodStore> = Arc::new(Etcd3Store::with_parts(
            self.client.clone(),
            StoreConfig::for_resource(RESOURCE),
            LazyPodCodec::shared(LazyCodec::new(MediaType::Protobuf)),
            Arc::new(IdentityTransformer),
        ));
        let typed_store: Arc<TypedPodStore> = Arc::new(
            Etcd3Store::with_parts(
                self.client.clone(),
                StoreConfig::for_resource(RESOURCE),
                TypedPodCodec::shared(StorageCodec::new(MediaType::Protobuf)),
                Arc::new(IdentityTransformer),
            )
            .with_stored_selector(by_node),
        );
        let namespaces: Vec<String> = (0..SPREAD).map(|k| namespace_of(k * SPREAD)).collect();
        let nodes: Vec<String> = (0..SPREAD).map(node_of).collect();
        for (matching, rv) in [
            (ResourceVersionMatch::Unset, String::new()),
            (ResourceVersionMatch::NotOlderThan, revision.to_string()),
            (ResourceVersionMatch::Exact, revision.to_string()),
        ] {
            for scope in [
                Scope::Cluster,
                Scope::ClusterPaged,
                Scope::Node,
                Scope::Namespace,
            ] {
                let workload = format!(
                    "{PREFIX}store-list RV={} {}",
                    if matching == ResourceVersionMatch::Unset {
                        "\"\""
                    } else {
                        matching.as_str()
                    },
                    scope.name()
                );
                let lazy_name = format!("{workload}, LazyObject");
                let typed_name = format!("{workload}, typed Pod");
                let (plain, lazy, typed) = (
                    self.settings.selected(&workload),
                    self.settings.selected(&lazy_name),
                    self.settings.selected(&typed_name),
                );
                // `--only '..., typed Pod'` runs that twin alone (for profiling).
                if !(plain || lazy || typed) {
                    continue;
                }
                println!("  {workload}");
                let (keys, node_names): (Vec<String>, Vec<String>) = match scope {
                    Scope::Cluster | Scope::ClusterPaged => (vec![RESOURCE.to_owned()], vec![]),
                    Scope::Node => (vec![RESOURCE.to_owned()], nodes.clone()),
                    Scope::Namespace => (
                        namespaces
                            .iter()
                            .map(|ns| format!("{RESOURCE}/{ns}"))
                            .collect(),
                        vec![],
                    ),
                };
                let shape = ListShape {
                    keys: keys.clone(),
                    node_names: node_names.clone(),
                    limit: scope.limit(),
                    resource_version: rv.clone(),
                    matching,
                };
                let request = json!({
                    "op": "list",
                    "keys": keys.iter().map(|k| format!("/{k}")).collect::<Vec<_>>(),
                    "nodeNames": node_names,
                    "limit": scope.limit(),
                    "resourceVersion": rv,
                    "resourceVersionMatch": matching.as_str(),
                    "callers": LIST_CALLERS,
                    "seconds": self.settings.run.as_secs_f64(),
                });
                let specs = [
                    spec("list-objs/s", Unit::PerSec, true, Some(1.0)),
                    spec("list-calls/s", Unit::PerSec, true, None),
                    spec("client CPU/list", Unit::CpuSeconds, false, None),
                ];
                // A list that selected nothing (or dropped Pods it should select) would
                // look fast: every store must list the Pods the store without a stored
                // selector lists first.
                if plain && self.runs(Side::Apistore) {
                    self.same_lists(checked, store.as_ref(), &shape).await?;
                }
                if lazy && self.runs(Side::Apistore) {
                    self.same_lists(checked, lazy_store.as_ref(), &shape)
                        .await?;
                }
                if typed && self.runs(Side::Apistore) {
                    self.same_lists(checked, typed_store.as_ref(), &shape)
                        .await?;
                }
                let (mut collector, mut lazy_collector, mut typed_collector) = (
                    Collector::new(&specs),
                    Collector::new(&specs),
                    Collector::new(&specs),
                );
                for _ in 0..rounds {
                    if self.runs(Side::Apistore) {
                        let plan = Plan::For(self.settings.run);
                        if plain {
                            let (sample, objects, calls) = self
                                .store_lists(
                                    &store,
                                    LIST_CALLERS,
                                    plan,
                                    shape.clone(),
                                    Freeing::Inline,
                                )
                                .await?;
                            collector.push(Side::Apistore, rates(&sample, objects, calls));
                        }
                        if typed {
                            let (sample, objects, calls) = self
                                .store_lists(
                                    &typed_store,
                                    LIST_CALLERS,
                                    plan,
                                    shape.clone(),
                                    Freeing::Inline,
                                )
                                .await?;
                            typed_collector.push(Side::Apistore, rates(&sample, objects, calls));
                        }
                        if lazy {
                            let (sample, objects, calls) = self
                                .store_lists(
                                    &lazy_store,
                                    LIST_CALLERS,
                                    plan,
                                    shape.clone(),
                                    Freeing::Inline,
                                )
                                .await?;
                            lazy_collector.push(Side::Apistore, rates(&sample, objects, calls));
                        }
                    }
                    if self.runs(Side::Kube) {
                        let answer = Self::ask(go, &request)?;
                        let seconds = answer.seconds.max(1e-9);
                        let kube = vec![
                            answer.objects as f64 / seconds,
                            answer.calls as f64 / seconds,
                            answer.cpu_seconds / answer.ops.max(1) as f64,
                        ];
                        lazy_collector.push(Side::Kube, kube.clone());
                        typed_collector.push(Side::Kube, kube.clone());
                        collector.push(Side::Kube, kube);
                    }
                }
                if plain {
                    out.rows.push(collector.row(workload));
                }
                if typed {
                    out.rows.push(typed_collector.row(typed_name));
                }
                if lazy {
                    out.rows.push(lazy_collector.row(lazy_name));
                }
            }
        }
        Ok(())
    }

    /// Lists the first list of `shape` (every page) through the section's `DynamicObject`
    /// store (no stored selector) and another and checks they return the same Pods
    /// (untimed).
    async fn same_lists<S: Storage>(
        &self,
        store: &PodStore,
        other: &S,
        shape: &ListShape,
    ) -> Result<()> {
        let (key, options) = shape.first_page(0, 0)?;
        let (mut whole, mut listed) = (Vec::new(), Vec::new());
        let mut page = options.clone();
        loop {
            let list = store.list(&key, &page).await?;
            whole.extend(list.items.iter().map(|p| p.0.metadata.name.clone()));
            if list.metadata.continue_token.is_empty() {
                break;
            }
            page = page
                .at(String::new(), ResourceVersionMatch::Unset)
                .continue_from(list.metadata.continue_token);
        }
        let mut page = options;
        loop {
            let list = other.list(&key, &page).await?;
            listed.extend(list.items.iter().map(|p| p.name().to_owned()));
            if list.metadata.continue_token.is_empty() {
                break;
            }
            page = page
                .at(String::new(), ResourceVersionMatch::Unset)
                .continue_from(list.metadata.continue_token);
        }
        if whole.is_empty() || whole != listed {
            return Err(BenchError::Invalid(format!(
                "{key} listed {} Pods through the DynamicObject store and {} through the \
                 {} store (expected the same, and some)",
                whole.len(),
                listed.len(),
                std::any::type_name::<S::Object>()
            )));
        }
        Ok(())
    }

    /// Runs whole lists of `shape` from `callers` tasks, each paged to its end and
    /// each page disposed of by `freeing`; the sample, the Pods all the lists returned
    /// and the `list` calls they made.
    pub(crate) async fn store_lists<S: Storage + 'static>(
        &self,
        store: &Arc<S>,
        callers: usize,
        plan: Plan,
        shape: ListShape,
        freeing: Freeing,
    ) -> Result<(Sample, u64, u64)> {
        let objects = Arc::new(AtomicU64::new(0));
        let calls = Arc::new(AtomicU64::new(0));
        let shape = Arc::new(shape);
        let op: OpFn = {
            let (store, objects, calls, shape) = (
                Arc::clone(store),
                Arc::clone(&objects),
                Arc::clone(&calls),
                Arc::clone(&shape),
            );
            driver::op(move |caller, seq| {
                let (store, objects, calls, shape) = (
                    Arc::clone(&store),
                    Arc::clone(&objects),
                    Arc::clone(&calls),
                    Arc::clone(&shape),
                );
                async move {
                    let (key, mut options) = shape.first_page(caller, seq)?;
                    loop {
                        let list = store.list(&key, &options).await?;
                        calls.fetch_add(1, Ordering::Relaxed);
                        objects.fetch_add(list.items.len() as u64, Ordering::Relaxed);
                        black_box(&list.items);
                        let token = list.metadata.continue_token;
                        freeing.dispose(list.items);
                        if token.is_empty() {
                            return Ok(());
                        }
                        options = options
                            .at(String::new(), ResourceVersionMatch::Unset)
                            .continue_from(token);
                    }
                }
            })
        };
        let sample = driver::drive(&self.cpu, callers, plan, &op, None).await?;
        Ok((
            sample,
            objects.load(Ordering::Relaxed),
            calls.load(Ordering::Relaxed),
        ))
    }
}

/// What one whole list asks for: the key (rotating over several), the node (rotating,
/// when selecting by node), the page size and the resourceVersion of the first page.
#[derive(Debug, Clone)]
pub(crate) struct ListShape {
    keys: Vec<String>,
    node_names: Vec<String>,
    limit: i64,
    resource_version: String,
    matching: ResourceVersionMatch,
}

impl ListShape {
    /// Every Pod, at the latest revision, in pages of `limit` (0: one call).
    pub(crate) fn whole(limit: i64) -> Self {
        Self {
            keys: vec![RESOURCE.to_owned()],
            node_names: Vec::new(),
            limit,
            resource_version: String::new(),
            matching: ResourceVersionMatch::Unset,
        }
    }

    /// The key and options of the first call of the `seq`th list of `caller`.
    fn first_page(&self, caller: usize, seq: u64) -> Result<(String, ListOptions)> {
        let key = &self.keys[pick(caller, seq, self.keys.len() as u64) as usize];
        let mut options = ListOptions::prefix()
            .limit(self.limit)
            .at(self.resource_version.clone(), self.matching);
        if !self.node_names.is_empty() {
            let node = &self.node_names[pick(caller, seq, self.node_names.len() as u64) as usize];
            options = options
                .fields(&format!("spec.nodeName={node}"))
                .map_err(|e| BenchError::Invalid(format!("field selector: {e}")))?;
        }
        Ok((key.clone(), options))
    }
}
