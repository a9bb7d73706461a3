//! Lists of 10,000 realistic Pods, stored once as kube's protobuf and once as JSON:
//! the protobuf codec against the JSON codec, and against the baseline of a raw range
//! plus a `serde_json` decode of each JSON value.
//!
//! The Pods are the realistic Pod of src/pod.rs, about 4 KiB of JSON each.
//! The protobuf bytes are `apistore-protobuf`'s encoding, which the golden tests hold
//! byte for byte to kube-apiserver's; the JSON is the same object as Go writes it.
//! Both stores are `Etcd3Store<DynamicObject>` with `StorageCodec`, so the object type
//! and everything above the codec are the same in every arm. Besides the list time,
//! each round decodes the listed values alone (no etcd) to give the decode time per
//! object of each encoding.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use apistore_etcd3::Etcd3Store;
use apistore_protobuf::{KubeProtobuf, MediaType, StorageCodec};
use apistore_storage::{Codec, DynamicObject, ListOptions, Storage};
use apistore_value::IdentityTransformer;
use etcd_client::{GetOptions, Txn, TxnOp};

use crate::bench::Bench;
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};
use crate::object::ETCD_PREFIX;
use crate::pod::{pod, pod_name};
use crate::raw::prefix_range_end;
use crate::report::col;
use crate::stats::{Comparison, Metric, Section, Unit};

/// The resource the Pods are stored as (`/registry/pods/...`).
const RESOURCE: &str = "pods";
/// The namespace of the protobuf copies.
const PROTOBUF_NAMESPACE: &str = "bench-protobuf";
/// The namespace of the JSON copies.
const JSON_NAMESPACE: &str = "bench-json";
/// Puts per fill transaction (etcd's default `--max-txn-ops` is 128).
const FILL_BATCH: usize = 100;

/// The workload comparing the two codecs.
pub(crate) const AGAINST_JSON: &str = "pods whole, protobuf/json";
/// The workload comparing the protobuf codec with a raw range and decode.
pub(crate) const AGAINST_RAW: &str = "pods whole, protobuf/raw";
/// Column heading: decode time per object, outside any list.
pub(crate) const DECODE: &str = "decode/object";

/// The three arms, in the order each round runs them.
#[derive(Debug, Clone, Copy)]
enum Arm {
    Protobuf,
    Json,
    Raw,
}

/// One arm's figures in one round.
#[derive(Debug, Clone, Copy, Default)]
struct Round {
    time: f64,
    keys_per_sec: f64,
    client_cpu: f64,
    decode: f64,
}

/// The section's state: both stores and the stored values, for the decode timing.
struct Setup {
    protobuf: Arc<Etcd3Store<DynamicObject>>,
    json: Arc<Etcd3Store<DynamicObject>>,
    protobuf_values: Vec<Vec<u8>>,
    json_values: Vec<Vec<u8>>,
}

impl Bench {
    /// Stores the Pods both ways, compares the lists, and clears them.
    pub(crate) async fn pods_section(&self) -> Result<Vec<Comparison>> {
        let objects = self.settings.list_objects;
        println!("  encoding and storing {objects} Pods as protobuf and as JSON");
        let kp = KubeProtobuf::k8s_1_31();
        let mut protobuf_values = Vec::new();
        let mut json_values = Vec::new();
        for i in 0..objects {
            let stored = kp.encode_value(&pod(i))?;
            json_values.push(kp.decode_to_json(&stored)?);
            protobuf_values.push(stored);
        }
        self.put_all(PROTOBUF_NAMESPACE, &protobuf_values).await?;
        self.put_all(JSON_NAMESPACE, &json_values).await?;
        let store = |write| {
            Arc::new(Etcd3Store::with_parts(
                self.client.clone(),
                Self::pods_store_config(),
                Arc::new(StorageCodec::<DynamicObject>::new(write)),
                Arc::new(IdentityTransformer),
            ))
        };
        let setup = Setup {
            protobuf: store(MediaType::Protobuf),
            json: store(MediaType::Json),
            protobuf_values,
            json_values,
        };
        let (pb_bytes, json_bytes) = (
            setup.protobuf_values.iter().map(Vec::len).sum::<usize>(),
            setup.json_values.iter().map(Vec::len).sum::<usize>(),
        );
        println!(
            "  stored {:.1} MiB of protobuf, {:.1} MiB of JSON ({:.0} and {:.0} bytes a Pod)",
            pb_bytes as f64 / 1048576.0,
            json_bytes as f64 / 1048576.0,
            pb_bytes as f64 / objects.max(1) as f64,
            json_bytes as f64 / objects.max(1) as f64,
        );
        let result = self.compare_pods(&setup).await;
        for namespace in [PROTOBUF_NAMESPACE, JSON_NAMESPACE] {
            let mut kv = self.raw.client().kv_client();
            kv.delete(
                namespace_prefix(namespace),
                Some(etcd_client::DeleteOptions::new().with_prefix()),
            )
            .await?;
        }
        self.compact().await?;
        result
    }

    fn pods_store_config() -> apistore_etcd3::StoreConfig {
        apistore_etcd3::StoreConfig::for_resource(RESOURCE)
    }

    /// Puts the values under `namespace` in transactions of [`FILL_BATCH`] (untimed).
    async fn put_all(&self, namespace: &str, values: &[Vec<u8>]) -> Result<()> {
        let mut kv = self.raw.kv();
        for (batch_index, batch) in values.chunks(FILL_BATCH).enumerate() {
            let ops: Vec<TxnOp> = batch
                .iter()
                .enumerate()
                .map(|(i, value)| {
                    let name = pod_name((batch_index * FILL_BATCH + i) as u64);
                    TxnOp::put(
                        format!("{}{name}", namespace_prefix(namespace)),
                        value.clone(),
                        None,
                    )
                })
                .collect();
            kv.txn(Txn::new().and_then(ops)).await?;
        }
        Ok(())
    }

    async fn compare_pods(&self, setup: &Setup) -> Result<Vec<Comparison>> {
        let objects = self.settings.list_objects as usize;
        let arms = [Arm::Protobuf, Arm::Json, Arm::Raw];
        // Untimed: every arm once, checking what it returns.
        for arm in arms {
            let listed = self.list_pods(setup, arm).await?;
            if listed != objects {
                return Err(BenchError::Invalid(format!(
                    "{arm:?} listed {listed} Pods, expected {objects}"
                )));
            }
        }
        let mut rounds: [Vec<Round>; 3] = [Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..self.settings.rounds {
            for (i, arm) in arms.into_iter().enumerate() {
                rounds[i].push(self.pods_round(setup, arm).await?);
            }
        }
        let comparison = |workload, names, b: usize| {
            let metric = |name, unit, f: fn(&Round) -> f64| {
                Metric::new(
                    name,
                    unit,
                    rounds[0].iter().map(f).collect(),
                    rounds[b].iter().map(f).collect(),
                )
            };
            Comparison::new(
                Section::PodList,
                workload,
                names,
                vec![
                    metric(col::TIME, Unit::Seconds, |r| r.time),
                    metric(col::KEYS, Unit::PerSec, |r| r.keys_per_sec),
                    metric("client CPU/list", Unit::CpuSeconds, |r| r.client_cpu),
                    metric(DECODE, Unit::Seconds, |r| r.decode),
                ],
            )
        };
        Ok(vec![
            comparison(AGAINST_JSON, ["protobuf", "json"], 1),
            comparison(AGAINST_RAW, ["protobuf", "raw range + decode"], 2),
        ])
    }

    /// Timed lists of one arm, then its values decoded alone.
    async fn pods_round(&self, setup: &Setup, arm: Arm) -> Result<Round> {
        let objects = self.settings.list_objects;
        let (protobuf, json, raw) = (
            Arc::clone(&setup.protobuf),
            Arc::clone(&setup.json),
            Arc::clone(&self.raw),
        );
        let op = driver::op(move |_, _| {
            let (protobuf, json, raw) =
                (Arc::clone(&protobuf), Arc::clone(&json), Arc::clone(&raw));
            async move {
                let listed = match arm {
                    Arm::Protobuf => store_list(&protobuf, PROTOBUF_NAMESPACE).await?,
                    Arm::Json => store_list(&json, JSON_NAMESPACE).await?,
                    Arm::Raw => raw_list(&raw, JSON_NAMESPACE).await?,
                };
                if listed as u64 != objects {
                    return Err(BenchError::Invalid(format!(
                        "listed {listed} Pods, expected {objects}"
                    )));
                }
                Ok(())
            }
        });
        let sample = driver::drive(
            &self.cpu,
            1,
            Plan::Count(self.settings.list_repeats),
            &op,
            None,
        )
        .await?;
        let decode = decode_per_object(setup, arm)?;
        let time = sample.latency(0.5);
        Ok(Round {
            time,
            keys_per_sec: objects as f64 / time.max(1e-9),
            client_cpu: sample.client_cpu_per_op(),
            decode,
        })
    }

    async fn list_pods(&self, setup: &Setup, arm: Arm) -> Result<usize> {
        match arm {
            Arm::Protobuf => store_list(&setup.protobuf, PROTOBUF_NAMESPACE).await,
            Arm::Json => store_list(&setup.json, JSON_NAMESPACE).await,
            Arm::Raw => raw_list(&self.raw, JSON_NAMESPACE).await,
        }
    }
}

/// A whole recursive list of a namespace through a store, in one call.
async fn store_list(store: &Etcd3Store<DynamicObject>, namespace: &str) -> Result<usize> {
    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store
        .list(&format!("{RESOURCE}/{namespace}"), &options)
        .await?;
    black_box(&list.items);
    Ok(list.items.len())
}

/// The baseline: one range request, each JSON value decoded with `serde_json` into the
/// same `DynamicObject` with its resourceVersion set from the mod revision.
async fn raw_list(raw: &crate::raw::Raw, namespace: &str) -> Result<usize> {
    let prefix = namespace_prefix(namespace);
    let options = GetOptions::new().with_range(prefix_range_end(prefix.as_bytes()));
    let mut response = raw.kv().get(prefix, Some(options)).await?;
    let kvs = response.take_kvs();
    let mut items = Vec::with_capacity(kvs.len());
    for kv in kvs {
        let mod_revision = kv.mod_revision();
        let mut object: DynamicObject = serde_json::from_slice(kv.value())?;
        object.metadata.resource_version = mod_revision.to_string();
        items.push(object);
    }
    black_box(&items);
    Ok(items.len())
}

/// Seconds to decode one stored value of the arm's encoding, outside any list: the
/// codec the arm's store uses (the raw arm: plain `serde_json`).
fn decode_per_object(setup: &Setup, arm: Arm) -> Result<f64> {
    let values = match arm {
        Arm::Protobuf => &setup.protobuf_values,
        Arm::Json | Arm::Raw => &setup.json_values,
    };
    let codec = StorageCodec::<DynamicObject>::new(match arm {
        Arm::Protobuf => MediaType::Protobuf,
        Arm::Json | Arm::Raw => MediaType::Json,
    });
    let started = Instant::now();
    for value in values {
        let object: DynamicObject = match arm {
            Arm::Protobuf | Arm::Json => codec.decode(value)?,
            Arm::Raw => serde_json::from_slice(value)?,
        };
        black_box(object);
    }
    Ok(started.elapsed().as_secs_f64() / values.len().max(1) as f64)
}

fn namespace_prefix(namespace: &str) -> String {
    format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/")
}
