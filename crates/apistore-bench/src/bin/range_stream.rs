//! The issue's `RangeStream` target, measured: one list of 100,000 objects of about
//! 1 KiB each on etcd 3.7, read by the etcd3 store at kube 1.37 (one `RangeStream`,
//! each chunk decoded as it arrives) and by the same store at kube 1.36 (one `Range`,
//! the whole answer held while it is decoded), alternately, round after round. Per arm:
//! the median time of a list and the median of the peak bytes held during one list
//! (counted by the bench's counting allocator, src/alloc.rs, from the list's call to its
//! return; the objects listed are part of both arms' peaks). The target: streamed peak
//! at most 0.5× the unstreamed one, streamed time at most 1.05×.
//!
//! `APISTORE_ETCD_BIN=target/tools/etcd-3.7.3/etcd cargo run --release -p apistore-bench
//! --bin range_stream -- [--objects N] [--rounds N]` (`cargo xtask test --etcd 3.7`
//! builds that etcd). The etcd must be 3.7 or later: on an older one both arms would
//! read with `Range`, and the run fails saying so. docs/benchmarks.md records a run.

#[path = "../alloc.rs"]
mod alloc;

use std::env;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{DynamicObject, KubeVersion, ListOptions, Storage};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use futures::StreamExt;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The resource, and the namespace the objects are listed from.
const RESOURCE: &str = "configmaps";
const NAMESPACE: &str = "range-stream";
/// Bytes of each object's payload: about a KiB per stored value with its metadata.
const PAYLOAD: usize = 1000;
/// Puts in flight while filling.
const FILL_CONCURRENCY: usize = 32;

/// What to list and how often: `--objects N` (100,000) and `--rounds N` (5).
#[derive(Debug, Clone, Copy)]
struct Settings {
    /// Objects in the listed namespace.
    objects: usize,
    /// Rounds of one list per arm, alternating.
    rounds: usize,
}

impl Settings {
    /// The settings `args` (the command line after the program) ask for.
    fn parse(args: &[String]) -> Result<Self, BoxError> {
        let mut settings = Self {
            objects: 100_000,
            rounds: 5,
        };
        for pair in args.chunks(2) {
            let [flag, value] = pair else {
                return Err(format!("{} needs a value", pair[0]).into());
            };
            let number = value
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{flag} {value}: give a number above 0"))?;
            match flag.as_str() {
                "--objects" => settings.objects = number,
                "--rounds" => settings.rounds = number,
                _ => return Err(format!("takes --objects N and --rounds N, not {flag}").into()),
            }
        }
        Ok(settings)
    }
}

/// One arm's figures in one round.
#[derive(Debug, Clone, Copy)]
struct Round {
    seconds: f64,
    peak: u64,
    held_after: i64,
}

fn main() -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("range_stream: start a tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("range_stream: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), BoxError> {
    let args: Vec<String> = env::args().skip(1).collect();
    let settings = Settings::parse(&args)?;
    let etcd = EtcdServer::start(EtcdOptions {
        name: "apistore-range-stream".to_owned(),
        ..EtcdOptions::default()
    })?;
    let endpoint = etcd.endpoint();
    let mut raw = etcd_client::Client::connect([endpoint.as_str()], None).await?;
    let version = raw.status().await?.version().to_owned();
    println!("etcd {version} at {endpoint}");
    let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()])).await?;
    let store = |kube_version| {
        Etcd3Store::<DynamicObject>::new(client.clone(), StoreConfig::for_resource(RESOURCE))
            .with_kube_version(kube_version)
    };
    // The same store but for the kube version: 1.37 streams, 1.36 reads one Range.
    let arms = [
        ("RangeStream (kube 1.37)", store(KubeVersion::V1_37)),
        ("Range (kube 1.36)", store(KubeVersion::V1_36)),
    ];

    let started = Instant::now();
    fill(&raw, settings.objects).await?;
    println!(
        "filled {} objects of {PAYLOAD} payload bytes in {:.1} s",
        settings.objects,
        started.elapsed().as_secs_f64()
    );

    let mut rounds: [Vec<Round>; 2] = [Vec::new(), Vec::new()];
    // One untimed list per arm first: connections, caches and the allocator warm.
    for (_, store) in &arms {
        list(store, settings.objects).await?;
    }
    if !client.range_stream_available() {
        return Err(format!(
            "etcd {version} refused RangeStream: both arms would read with Range; run this \
             against etcd 3.7 or later (APISTORE_ETCD_BIN)"
        )
        .into());
    }
    for round in 0..settings.rounds {
        for (arm, (name, store)) in arms.iter().enumerate() {
            let figures = measure(store, settings.objects).await?;
            println!(
                "round {}: {name}: {:.3} s, peak {:.1} MiB, held after {:.1} MiB",
                round + 1,
                figures.seconds,
                mib(figures.peak as f64),
                mib(figures.held_after as f64)
            );
            rounds[arm].push(figures);
        }
    }

    let time = [
        median(&rounds[0], |r| r.seconds),
        median(&rounds[1], |r| r.seconds),
    ];
    let peak = [
        median(&rounds[0], |r| r.peak as f64),
        median(&rounds[1], |r| r.peak as f64),
    ];
    let (time_ratio, peak_ratio) = (time[0] / time[1], peak[0] / peak[1]);
    println!();
    println!("| arm | list time (median) | peak bytes during the list (median) |");
    println!("|---|---|---|");
    for (arm, (name, _)) in arms.iter().enumerate() {
        println!(
            "| {name} | {:.3} s | {:.1} MiB |",
            time[arm],
            mib(peak[arm])
        );
    }
    println!(
        "| streamed / unstreamed | {time_ratio:.2}× (target ≤ 1.05×: {}) | {peak_ratio:.2}× (target ≤ 0.5×: {}) |",
        verdict(time_ratio <= 1.05),
        verdict(peak_ratio <= 0.5)
    );
    Ok(())
}

fn verdict(met: bool) -> &'static str {
    if met { "PASS" } else { "MISS" }
}

fn mib(bytes: f64) -> f64 {
    bytes / (1024.0 * 1024.0)
}

fn median(rounds: &[Round], figure: fn(&Round) -> f64) -> f64 {
    let mut values: Vec<f64> = rounds.iter().map(figure).collect();
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Writes `objects` ConfigMaps as kube's JSON straight to etcd (untimed).
async fn fill(raw: &etcd_client::Client, objects: usize) -> Result<(), BoxError> {
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

/// One list of the namespace; checks it holds every object.
async fn list(store: &Etcd3Store<DynamicObject>, objects: usize) -> Result<Duration, BoxError> {
    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let started = Instant::now();
    let listed = store
        .list(&format!("/{RESOURCE}/{NAMESPACE}"), &options)
        .await?;
    let took = started.elapsed();
    if listed.items.len() != objects {
        return Err(format!("listed {} objects, expected {objects}", listed.items.len()).into());
    }
    drop(listed);
    Ok(took)
}

/// A timed list, then one more with the allocation counter on (counting slows every
/// allocation, so the time is taken without it).
async fn measure(store: &Etcd3Store<DynamicObject>, objects: usize) -> Result<Round, BoxError> {
    let seconds = list(store, objects).await?.as_secs_f64();
    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let window = alloc::Window::open();
    let listed = store
        .list(&format!("/{RESOURCE}/{NAMESPACE}"), &options)
        .await;
    let counted = window.close();
    let listed = listed?;
    if listed.items.len() != objects {
        return Err(format!("listed {} objects, expected {objects}", listed.items.len()).into());
    }
    Ok(Round {
        seconds,
        peak: counted.peak,
        held_after: counted.net,
    })
}
