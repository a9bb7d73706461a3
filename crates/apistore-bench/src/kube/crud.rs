//! The kube section's CRUD workloads: create, get and guaranteed update at 1 and 16
//! callers on a pool of Pods, through apistore's etcd3 store (as `KubePod`, a
//! `DynamicObject`, with a raw etcd-client side; and as `LazyPod`, metadata decoded and
//! the body left stored, in rows named `..., LazyObject`), against kube's etcd3 store
//! (Go) in the same rounds.

use std::hint::black_box;
use std::sync::Arc;

use apistore_etcd3::Etcd3Store;
use apistore_protobuf::{KubeProtobuf, LazyObject};
use apistore_storage::{ApiObject, GetOptions, Storage, UpdateOptions};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};
use serde_json::{Value, json};

use super::{COUNTER, POOL_NAMESPACE, PREFIX, RESOURCE, pick};
use crate::bench::Bench;
use crate::crud::{Crud, workload_name};
use crate::driver::{self, OpFn, Plan};
use crate::error::{BenchError, Result};
use crate::gobench::GoArm;
use crate::kube_pod::KubePod;
use crate::lazy_pod::LazyPod;
use crate::object::ETCD_PREFIX;
use crate::pod::{POD_NAME_PREFIX, pod_name};
use crate::side_by_side::{Collector, Row, Side, spec};
use crate::stats::Unit;

/// A Pod representation the CRUD workloads run with.
pub(super) trait CrudPod: ApiObject + Clone + Default + Send + Sync + 'static {
    /// The Pod read from the pool as the template creates store: resourceVersion and
    /// uid cleared.
    fn into_template(self) -> Result<Self>;
    /// A copy of this template under another name and namespace: what one create
    /// stores.
    fn renamed(&self, namespace: &str, name: &str) -> Self;
    /// The Pod as JSON, for the raw side's encoded template.
    fn to_value(&self) -> Result<Value>;
}

impl CrudPod for KubePod {
    fn into_template(mut self) -> Result<Self> {
        self.set_resource_version(String::new());
        self.0.metadata.uid.clear();
        Ok(self)
    }

    fn renamed(&self, namespace: &str, name: &str) -> Self {
        let mut pod = self.clone();
        pod.0.metadata.name = name.to_owned();
        pod.0.metadata.namespace = namespace.to_owned();
        pod
    }

    fn to_value(&self) -> Result<Value> {
        Ok(serde_json::to_value(self)?)
    }
}

impl CrudPod for LazyPod {
    /// The template is built from a `DynamicObject` (its body owned), as a create's
    /// object is: a create encodes it whole, as kube's does.
    fn into_template(self) -> Result<Self> {
        let mut dynamic = self.0.into_dynamic()?;
        dynamic.metadata.resource_version.clear();
        dynamic.metadata.uid.clear();
        Ok(Self(LazyObject::from(dynamic)))
    }

    fn renamed(&self, namespace: &str, name: &str) -> Self {
        let mut pod = self.clone();
        let metadata = pod.0.metadata_mut();
        metadata.name = name.to_owned();
        metadata.namespace = namespace.to_owned();
        pod
    }

    fn to_value(&self) -> Result<Value> {
        Ok(serde_json::to_value(self.0.to_dynamic()?)?)
    }
}

impl Bench {
    /// One CRUD workload through `store` (its row named with `suffix`): an untimed
    /// warm-up of each side, then the rounds. The raw side runs only with `raw`.
    pub(super) async fn kube_crud<T: CrudPod>(
        &self,
        go: &mut GoArm,
        store: &Arc<Etcd3Store<T>>,
        crud: (Crud, usize),
        suffix: &str,
        raw: bool,
    ) -> Result<Row> {
        let (op, callers) = crud;
        let workload = format!("{PREFIX}{}{suffix}", workload_name(op, callers));
        println!("  {workload}");
        let mut collector = Collector::new(&[
            spec("ops/s", Unit::PerSec, true, None),
            spec("p50", Unit::Seconds, false, None),
            spec("client CPU/op", Unit::CpuSeconds, false, None),
        ]);
        let template = Arc::new(self.template_pod(store).await?);
        let sides = [Side::Apistore, Side::Kube, Side::Raw];
        let sides = &sides[..if raw { 3 } else { 2 }];
        for (round, plan) in std::iter::once(self.settings.warmup)
            .chain(std::iter::repeat_n(self.settings.run, self.settings.rounds))
            .enumerate()
        {
            for &side in sides {
                if !self.runs(side) {
                    continue;
                }
                let namespace = self.fresh_namespace("kube-create");
                let figures = match side {
                    Side::Kube => {
                        let answer = Self::ask(
                            go,
                            &json!({
                                "op": "crud",
                                "crud": match op {
                                    Crud::Create => "create",
                                    Crud::Get => "get",
                                    _ => "update",
                                },
                                "namespace": namespace,
                                "poolNamespace": POOL_NAMESPACE,
                                "namePrefix": POD_NAME_PREFIX,
                                "pool": self.settings.pool_size,
                                "callers": callers,
                                "seconds": plan.as_secs_f64(),
                            }),
                        )?;
                        vec![
                            answer.ops_per_sec(),
                            answer.latency(0.5),
                            answer.cpu_seconds / answer.ops.max(1) as f64,
                        ]
                    }
                    Side::Apistore | Side::Raw => {
                        let call = self.crud_op(side, store, op, callers, &namespace, &template)?;
                        let sample =
                            driver::drive(&self.cpu, callers, Plan::For(plan), &call, None).await?;
                        vec![
                            sample.ops_per_sec(),
                            sample.latency(0.5),
                            sample.client_cpu_per_op(),
                        ]
                    }
                };
                if op == Crud::Create {
                    self.clear(&namespace).await?;
                }
                if round > 0 {
                    collector.push(side, figures);
                }
            }
        }
        Ok(collector.row(workload))
    }

    /// The pool's first Pod, its resourceVersion and uid cleared: what creates store.
    async fn template_pod<T: CrudPod>(&self, store: &Etcd3Store<T>) -> Result<T> {
        let pod = store
            .get(
                &format!("{RESOURCE}/{POOL_NAMESPACE}/{}", pod_name(0)),
                &GetOptions::default(),
            )
            .await?;
        pod.into_template()
    }

    /// One call of a CRUD workload on the apistore or raw side.
    fn crud_op<T: CrudPod>(
        &self,
        side: Side,
        store: &Arc<Etcd3Store<T>>,
        op: Crud,
        callers: usize,
        namespace: &str,
        template: &Arc<T>,
    ) -> Result<OpFn> {
        // The raw side writes the template's bytes as they are: no codec on that side.
        let encoded = Arc::new(KubeProtobuf::k8s_1_31().encode_value(&template.to_value()?)?);
        let pool = self.settings.pool_size;
        let slice = (pool / callers as u64).max(1);
        let store = Arc::clone(store);
        let raw = Arc::clone(&self.raw);
        let template = Arc::clone(template);
        let namespace: Arc<str> = namespace.into();
        Ok(driver::op(move |caller, seq| {
            let (store, raw, template, encoded, namespace) = (
                Arc::clone(&store),
                Arc::clone(&raw),
                Arc::clone(&template),
                Arc::clone(&encoded),
                Arc::clone(&namespace),
            );
            async move {
                let index = match op {
                    Crud::Update => (caller as u64 * slice + seq % slice) % pool,
                    _ => pick(caller, seq, pool),
                };
                let pool_key = format!("{RESOURCE}/{POOL_NAMESPACE}/{}", pod_name(index));
                match (side, op) {
                    (Side::Raw, Crud::Create) => {
                        let key =
                            format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/raw-{caller:02}-{seq:07}");
                        let txn = Txn::new()
                            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                            .and_then([TxnOp::put(key.as_str(), encoded.as_slice(), None)]);
                        if !raw.kv().txn(txn).await?.succeeded() {
                            return Err(BenchError::Invalid(format!("{key} exists")));
                        }
                    }
                    (Side::Raw, Crud::Get) => {
                        black_box(
                            raw.kv()
                                .get(format!("{ETCD_PREFIX}{pool_key}"), None)
                                .await?,
                        );
                    }
                    (Side::Raw, _) => {
                        let key = format!("{ETCD_PREFIX}{pool_key}");
                        let mut kv = raw.kv();
                        loop {
                            let mut got = kv.get(key.as_str(), None).await?;
                            let Some(current) = got.take_kvs().into_iter().next() else {
                                return Err(BenchError::Invalid(format!("{key} is gone")));
                            };
                            let txn = Txn::new()
                                .when([Compare::mod_revision(
                                    key.as_str(),
                                    CompareOp::Equal,
                                    current.mod_revision(),
                                )])
                                .and_then([TxnOp::put(key.as_str(), current.value(), None)]);
                            if kv.txn(txn).await?.succeeded() {
                                break;
                            }
                        }
                    }
                    (_, Crud::Create) => {
                        let name = format!("rs-{caller:02}-{seq:07}");
                        let pod = template.renamed(&namespace, &name);
                        black_box(
                            store
                                .create(&format!("{RESOURCE}/{namespace}/{name}"), pod, 0)
                                .await?,
                        );
                    }
                    (_, Crud::Get) => {
                        black_box(store.get(&pool_key, &GetOptions::default()).await?);
                    }
                    (_, _) => {
                        let updated = store
                            .guaranteed_update(&pool_key, UpdateOptions::default(), |mut pod, _| {
                                bump_counter(&mut pod);
                                Ok(pod.into())
                            })
                            .await?;
                        black_box(updated);
                    }
                }
                Ok(())
            }
        }))
    }
}

/// Adds one to the Pod's counter annotation.
fn bump_counter<T: ApiObject>(pod: &mut T) {
    let annotations = pod.annotations_mut();
    let next = annotations
        .get(COUNTER)
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0)
        + 1;
    annotations.insert(COUNTER.to_owned(), next.to_string());
}
