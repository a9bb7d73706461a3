//! Decode alone, no etcd: the bench's realistic Pods (src/pod.rs) stored as kube's
//! protobuf, decoded by `apistore-protobuf` into each representation a caller can ask
//! for, round after round, with the memory each decoded Pod holds (the bench's
//! counting allocator, src/alloc.rs, as the kube section counts it). A tool to profile
//! and to compare builds with, beside the kube section's `kube decode/Pod` rows, which
//! put the same decodes next to Go's in a full run.
//!
//! `cargo run --release -p apistore-bench --bin decode -- [--objects N] [--rounds N]
//! [--only dynamic|typed|typed-direct|lazy|lazy+body|value|value-tree|text|json|encode|...]`; `--only` with `--rounds 0 --seconds S` loops
//! that one decode for S seconds and prints nothing per round, for `perf record`.
//!
//! Besides the time of a decode whose object is dropped at once (what the kube section
//! times), one pass keeps every object (the time of the decodes alone, and the bytes
//! they hold) and then times dropping them all.
//!
//! Representations: `dynamic` (`StorageCodec<DynamicObject>`, what the stores hold),
//! `typed` (`KubeProtobuf::decode` into k8s-openapi's `Pod`, through serde),
//! `typed-direct` (`KubeProtobuf::decode_k8s`: the same `Pod` by the generated code), `lazy` (`LazyCodec`: the
//! metadata decoded, the stored bytes kept), `lazy+body` (the same with its body read
//! and cached, what a caller of the spec pays), `value` (into a
//! `serde_json::Value` through serde), `value-tree` (`KubeProtobuf::decode_to_value`:
//! the same value built by the walk itself, what a `DynamicObject` is made from),
//! `text` (`decode_to_json`: Go's JSON text, no tree), and `json` (Go's JSON of the
//! same Pod read by `serde_json` into `DynamicObject`: the figure protobuf is to
//! match).
//!
//! Two more rows are not decodes: `clone-dynamic` and `clone-typed` clone an already
//! decoded `DynamicObject` resp. typed `Pod`, building the same heap tree a decode must
//! build (every `String`, map node and `Vec`) with no parsing at all. In instructions
//! (callgrind) that is a floor under any decode into the representation; in wall clock
//! it is not one, since a clone reads its source from memory that, 2,000 objects of
//! 30-60 KiB later, is out of cache, where a decode reads 2.7 KiB of compact bytes.
//!
//! Nor is the last: `encode` writes each decoded `DynamicObject` back as kube's
//! protobuf (`StorageCodec::encode`, what a create or update pays), keeping the bytes.

// The tool reads only what a window leaves held, not its peak.
#[allow(dead_code)]
#[path = "../alloc.rs"]
mod alloc;
#[path = "../pod.rs"]
mod pod;

use std::env;
use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use apistore_protobuf::{KubeProtobuf, LazyCodec, MediaType, StorageCodec};
use apistore_storage::{Codec, DynamicObject};
use k8s_openapi::api::core::v1::Pod;

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The representations, in the order each round decodes them.
const REPRESENTATIONS: [&str; 12] = [
    "typed",
    "typed-direct",
    "dynamic",
    "lazy",
    "lazy+body",
    "value",
    "value-tree",
    "text",
    "json",
    "clone-typed",
    "clone-dynamic",
    "encode",
];

struct Options {
    objects: u64,
    rounds: usize,
    only: Option<String>,
    seconds: f64,
}

fn options() -> Result<Options, BoxError> {
    let mut o = Options {
        objects: 2_000,
        rounds: 5,
        only: None,
        seconds: 10.0,
    };
    let mut args = env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--objects" => o.objects = value()?.parse()?,
            "--rounds" => o.rounds = value()?.parse()?,
            "--seconds" => o.seconds = value()?.parse()?,
            "--only" => {
                let name = value()?;
                if !REPRESENTATIONS.contains(&name.as_str()) {
                    return Err(format!("--only {name}: one of {REPRESENTATIONS:?}").into());
                }
                o.only = Some(name);
            }
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    Ok(o)
}

/// The stored Pods: protobuf, Go's JSON of each, and each decoded once (what the
/// clone floors copy).
struct Values {
    protobuf: Vec<Vec<u8>>,
    json: Vec<Vec<u8>>,
    dynamic: Vec<DynamicObject>,
    typed: Vec<Pod>,
}

/// Decodes every value once in `representation`, keeping each decoded object in
/// `keep` when given (to count what they hold).
fn decode_all(
    representation: &str,
    values: &Values,
    keep: Option<&mut Vec<Box<dyn std::any::Any>>>,
) -> Result<(), BoxError> {
    let dynamic = StorageCodec::<DynamicObject>::new(MediaType::Protobuf);
    let lazy = LazyCodec::new(MediaType::Protobuf);
    let kp = KubeProtobuf::latest();
    let mut keep = keep;
    let mut hold = |object: Box<dyn std::any::Any>| match keep.as_deref_mut() {
        Some(kept) => kept.push(object),
        None => drop(black_box(object)),
    };
    match representation {
        "typed" => {
            for value in &values.protobuf {
                hold(Box::new(kp.decode::<Pod>(value)?));
            }
        }
        "typed-direct" => {
            for value in &values.protobuf {
                hold(Box::new(kp.decode_k8s::<Pod>(value)?));
            }
        }
        "dynamic" => {
            for value in &values.protobuf {
                hold(Box::new(dynamic.decode(value)?));
            }
        }
        "lazy" => {
            for value in &values.protobuf {
                hold(Box::new(lazy.decode(value)?));
            }
        }
        "lazy+body" => {
            for value in &values.protobuf {
                let object = lazy.decode(value)?;
                object.body()?;
                hold(Box::new(object));
            }
        }
        "value" => {
            for value in &values.protobuf {
                hold(Box::new(kp.decode::<serde_json::Value>(value)?));
            }
        }
        "value-tree" => {
            for value in &values.protobuf {
                hold(Box::new(kp.decode_to_value(value)?));
            }
        }
        "text" => {
            for value in &values.protobuf {
                hold(Box::new(kp.decode_to_json(value)?));
            }
        }
        "encode" => {
            for object in &values.dynamic {
                hold(Box::new(dynamic.encode(object)?));
            }
        }
        "clone-typed" => {
            for object in &values.typed {
                hold(Box::new(object.clone()));
            }
        }
        "clone-dynamic" => {
            for object in &values.dynamic {
                hold(Box::new(object.clone()));
            }
        }
        _ => {
            for value in &values.json {
                hold(Box::new(serde_json::from_slice::<DynamicObject>(value)?));
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("decode: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), BoxError> {
    let o = options()?;
    let kp = KubeProtobuf::k8s_1_31();
    let mut values = Values {
        protobuf: Vec::new(),
        json: Vec::new(),
        dynamic: Vec::new(),
        typed: Vec::new(),
    };
    let dynamic = StorageCodec::<DynamicObject>::new(MediaType::Protobuf);
    for i in 0..o.objects {
        let stored = kp.encode_value(&pod::pod(i))?;
        values.json.push(kp.decode_to_json(&stored)?);
        values.dynamic.push(dynamic.decode(&stored)?);
        values
            .typed
            .push(KubeProtobuf::latest().decode::<Pod>(&stored)?);
        values.protobuf.push(stored);
    }
    // The schemas are parsed when first used: not in the first timed round.
    KubeProtobuf::latest();
    let chosen: Vec<&str> = match &o.only {
        Some(name) => vec![name.as_str()],
        None => REPRESENTATIONS.to_vec(),
    };
    if o.rounds == 0 {
        let until = Instant::now() + Duration::from_secs_f64(o.seconds);
        while Instant::now() < until {
            for representation in &chosen {
                decode_all(representation, &values, None)?;
            }
        }
        return Ok(());
    }
    let per = |d: Duration| d.as_secs_f64() * 1e6 / o.objects.max(1) as f64;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); chosen.len()];
    for _ in 0..o.rounds {
        for (k, representation) in chosen.iter().enumerate() {
            let started = Instant::now();
            decode_all(representation, &values, None)?;
            times[k].push(per(started.elapsed()));
        }
    }
    println!(
        "{} Pods, {} bytes of protobuf and {} of JSON each on average; {} rounds; allocator: {}",
        o.objects,
        values.protobuf.iter().map(Vec::len).sum::<usize>() / o.objects.max(1) as usize,
        values.json.iter().map(Vec::len).sum::<usize>() / o.objects.max(1) as usize,
        o.rounds,
        alloc::UNDERLYING
    );
    println!(
        "| decode into | µs/Pod, each dropped (median) | rounds | µs/Pod, all kept | \
         µs/Pod to drop them | bytes held per Pod |"
    );
    println!("|---|--:|---|--:|--:|--:|");
    for (k, representation) in chosen.iter().enumerate() {
        let mut kept = Vec::with_capacity(values.protobuf.len());
        let window = alloc::Window::open();
        let started = Instant::now();
        decode_all(representation, &values, Some(&mut kept))?;
        let decoded = per(started.elapsed());
        let counted = window.close();
        let started = Instant::now();
        kept.clear();
        let dropped = per(started.elapsed());
        // The Vec of boxes was sized before the window; each box is the object's own
        // inline part (what a slot of a `Vec<T>` would hold), the rest is its heap.
        drop(kept);
        let mut sorted = times[k].clone();
        sorted.sort_by(f64::total_cmp);
        let rounds: Vec<String> = times[k].iter().map(|t| format!("{t:.1}")).collect();
        println!(
            "| {representation} | {:.1} | {} | {decoded:.1} | {dropped:.1} | {:.0} |",
            sorted[sorted.len() / 2],
            rounds.join(" "),
            counted.net as f64 / o.objects.max(1) as f64
        );
    }
    Ok(())
}
