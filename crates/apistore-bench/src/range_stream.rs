//! The issue's `RangeStream` target (`--only "range stream"`): one list of 100,000
//! objects of about 1 KiB (10,000 with `--quick`) on an etcd 3.7 of the section's own,
//! read by the etcd3 store at kube 1.37 (one `RangeStream`, each chunk decoded as it
//! arrives), whole and consumed in chunks (`Etcd3Store::list_chunks`, each chunk's
//! objects counted and dropped), against the same store at kube 1.36 listing it whole
//! (one `Range`, the whole answer held while it is decoded), alternately, round after
//! round. Per arm and round: the time of
//! a list, then the peak bytes held during a second one (counted by the bench's
//! counting allocator from the call to its return; counting slows every allocation, so
//! the time is taken without it). The objects listed are part of both arms' peaks.
//!
//! `cargo xtask bench` builds etcd 3.7 as `cargo xtask test --etcd 3.7` does and hands
//! it over in [`ETCD37_BIN_ENV`]; without it (no Go, `--no-go`) the section is left out
//! with a note. An etcd that refuses `RangeStream` fails the section: both arms would
//! read with `Range`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{DynamicObject, KubeVersion, ListOptions, Storage};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use futures::StreamExt;

use crate::alloc;
use crate::error::{BenchError, Result};
use crate::report::col;
use crate::settings::Settings;
use crate::stats::{Comparison, Metric, Section, Unit};

/// Environment variable naming the etcd 3.7 binary.
pub(crate) const ETCD37_BIN_ENV: &str = "APISTORE_ETCD37_BIN";

/// The workload of the whole list (`--only "range stream"` selects the section).
pub(crate) const WHOLE: &str = "range stream: list whole";

/// The workload of the list consumed in chunks (`Etcd3Store::list_chunks`).
pub(crate) const CHUNKS: &str = "range stream: list in chunks";

/// The resource, and the namespace the objects are listed from.
const RESOURCE: &str = "configmaps";
const NAMESPACE: &str = "range-stream";
/// Bytes of each object's payload: about a KiB per stored value with its metadata.
const PAYLOAD: usize = 1000;
/// Puts in flight while filling.
const FILL_CONCURRENCY: usize = 32;

/// The arms of the whole list.
const WHOLE_ARMS: [&str; 2] = ["RangeStream (kube 1.37)", "Range (kube 1.36)"];

/// The arms of the list in chunks: against the same unstreamed whole list.
const CHUNKS_ARMS: [&str; 2] = ["RangeStream in chunks (kube 1.37)", "Range (kube 1.36)"];

/// How one arm lists.
#[derive(Debug, Clone, Copy)]
enum How {
    /// `Storage::list`: the whole list returned.
    Whole,
    /// `Etcd3Store::list_chunks`: each chunk counted and dropped.
    Chunks,
}

/// The etcd binary [`ETCD37_BIN_ENV`] names, if it is set.
pub(crate) fn binary_from_env() -> Option<PathBuf> {
    std::env::var_os(ETCD37_BIN_ENV)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

/// Whether `--only` selects the section.
pub(crate) fn selected(settings: &Settings) -> bool {
    settings.selected(WHOLE)
}

/// How many objects the section lists.
pub(crate) fn objects(settings: &Settings) -> usize {
    if settings.quick { 10_000 } else { 100_000 }
}

/// The section: its comparisons, and a note on the run.
pub(crate) async fn run(settings: &Settings, binary: &Path) -> Result<(Vec<Comparison>, String)> {
    let etcd = EtcdServer::start_binary(
        binary.to_path_buf(),
        EtcdOptions {
            name: "apistore-bench-range-stream".to_owned(),
            ..EtcdOptions::default()
        },
    )?;
    let endpoint = etcd.endpoint();
    let raw = etcd_client::Client::connect([endpoint.as_str()], None).await?;
    let version = raw.clone().status().await?.version().to_owned();
    let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()])).await?;
    let store = |kube_version| {
        Etcd3Store::<DynamicObject>::new(client.clone(), StoreConfig::for_resource(RESOURCE))
            .with_kube_version(kube_version)
    };
    // The same store but for the kube version: 1.37 streams, 1.36 reads one Range.
    let arms = [store(KubeVersion::V1_37), store(KubeVersion::V1_36)];
    let objects = objects(settings);

    let started = Instant::now();
    fill(&raw, objects).await?;
    let filled = started.elapsed();
    // The streamed whole list, the streamed list in chunks, and the unstreamed one.
    let arms = [
        (&arms[0], How::Whole),
        (&arms[0], How::Chunks),
        (&arms[1], How::Whole),
    ];
    // One untimed list per arm first: connections, caches and the allocator warm.
    for (store, how) in arms {
        list(store, how, objects).await?;
    }
    if !client.range_stream_available() {
        return Err(BenchError::Invalid(format!(
            "{ETCD37_BIN_ENV}: etcd {version} refused RangeStream, so both arms would read \
             with Range; the section needs etcd 3.7 or later"
        )));
    }
    let mut time = [Vec::new(), Vec::new(), Vec::new()];
    let mut peak = [Vec::new(), Vec::new(), Vec::new()];
    for _ in 0..settings.rounds {
        for (arm, (store, how)) in arms.into_iter().enumerate() {
            let started = Instant::now();
            list(store, how, objects).await?;
            time[arm].push(started.elapsed().as_secs_f64());
            let window = alloc::Window::open();
            let listed = list(store, how, objects).await;
            let counted = window.close();
            listed?;
            peak[arm].push(counted.peak as f64);
        }
    }
    // Each streamed arm against the same unstreamed lists, round by round.
    let comparison = |workload, names, arm: usize| {
        Comparison::new(
            Section::RangeStream,
            workload,
            names,
            vec![
                Metric::new(col::TIME, Unit::Seconds, time[arm].clone(), time[2].clone()),
                Metric::new(col::PEAK, Unit::Bytes, peak[arm].clone(), peak[2].clone()),
            ],
        )
    };
    let comparisons = vec![
        comparison(WHOLE, WHOLE_ARMS, 0),
        comparison(CHUNKS, CHUNKS_ARMS, 1),
    ];
    let note = format!(
        "range stream: etcd {version} ({}), {objects} ConfigMaps of {PAYLOAD} payload bytes \
         filled in {:.1} s",
        binary.display(),
        filled.as_secs_f64()
    );
    drop(etcd);
    Ok((comparisons, note))
}

/// Writes `objects` ConfigMaps as kube's JSON straight to etcd (untimed).
async fn fill(raw: &etcd_client::Client, objects: usize) -> Result<()> {
    let payload = "x".repeat(PAYLOAD);
    let puts = futures::stream::iter(0..objects)
        .map(|i| {
            let mut kv = raw.kv_client();
            let name = format!("cm-{i:06}");
            let key = format!("/registry/{RESOURCE}/{NAMESPACE}/{name}");
            let value = format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"{NAMESPACE}"}},"data":{{"payload":"{payload}"}}}}"#
            );
            async move { kv.put(key, value, None).await.map(drop) }
        })
        .buffer_unordered(FILL_CONCURRENCY);
    futures::pin_mut!(puts);
    while let Some(put) = puts.next().await {
        put?;
    }
    Ok(())
}

/// The options of every list: the namespace, recursive, no limit.
fn whole_list() -> ListOptions {
    ListOptions {
        recursive: true,
        ..ListOptions::default()
    }
}

/// One list of the namespace, whole or in chunks each dropped once counted; checks it
/// holds every object.
async fn list(store: &Etcd3Store<DynamicObject>, how: How, objects: usize) -> Result<()> {
    let key = format!("/{RESOURCE}/{NAMESPACE}");
    let listed = match how {
        How::Whole => store.list(&key, &whole_list()).await?.items.len(),
        How::Chunks => {
            let mut listed = 0;
            store
                .list_chunks(&key, &whole_list(), |chunk| listed += chunk.len())
                .await?;
            listed
        }
    };
    check_count(listed, objects)
}

fn check_count(listed: usize, objects: usize) -> Result<()> {
    if listed == objects {
        Ok(())
    } else {
        Err(BenchError::Invalid(format!(
            "range stream: listed {listed} objects, expected {objects}"
        )))
    }
}
