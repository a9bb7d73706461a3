//! `cargo xtask bench [--quick]`: apistore's etcd3 store against a raw etcd-client
//! baseline doing the same etcd work, side by side in one run.
//!
//! The harness starts its own etcd (`APISTORE_ETCD_BIN`; `cargo xtask bench` sets it to
//! the etcd 3.7 it builds, unless set already), then for every workload runs
//! arm A and arm B alternately, round after round, and reports per workload the
//! throughput, p50 and p99 latency, the bench process's CPU per operation, etcd's CPU
//! per operation, and the median of the per-round ratios A/B; then the targets
//! with PASS or MISS. The report goes to the terminal and, for a full run, into
//! `docs/benchmarks.md` between two markers (the analysis around them is kept).
//!
//! Workloads: create, get, guaranteed update and delete at 1 and 16 callers (src/crud.rs);
//! lists of 10,000 objects, whole and in pages (src/list.rs); a watcher over 20,000
//! writes and 1,000 idle watches (src/watch.rs); AES-GCM against identity, KMS v2
//! against AES-GCM (src/kms.rs) and telemetry on against off (both arms apistore);
//! lists of 10,000 realistic Pods stored as kube's
//! protobuf against the same Pods as JSON and against a raw range plus decode
//! (src/pods.rs); the watch cache's lists and watchers (src/cacher.rs) and its Exact and
//! continued lists from snapshots against the etcd3 store (src/snapshot.rs); a list of
//! 100,000 objects with and without `RangeStream` on an etcd 3.7 of its own
//! (src/range_stream.rs, `APISTORE_ETCD37_BIN`, which `cargo xtask bench` builds). The
//! baseline is src/raw.rs. The CRUD workloads run again on kine over SQLite when `cargo xtask
//! bench` built it (src/kine.rs, `--only kine`). Last, the kube section (src/kube.rs): the same realistic Pods through
//! apistore, through kube-apiserver's own etcd3 store (k8s.io/apiserver v0.37.2, the Go
//! program `interop/gobench`, driven from src/gobench.rs) and through raw etcd-client,
//! side by side, when `cargo xtask bench` built the Go program (`APISTORE_GOBENCH_BIN`).
//! Then the offline section (src/offline.rs): the `apistore` command reading a snapshot
//! file of 200,000 objects (20,000 with `--quick`) against etcd's `etcdutl snapshot
//! status` on the same file (`APISTORE_CLI_BIN`, `APISTORE_ETCDUTL_BIN`).
//!
//! Options (after `--` when run through cargo):
//! - `--quick`: fewer rounds and shorter runs (3 rounds, not 7); the report is printed
//!   but docs/benchmarks.md is left alone;
//! - `--only NAME` (repeatable, and then, as with `--quick`, docs/benchmarks.md is left
//!   alone unless `--report PATH` says where to write): only the workloads whose names
//!   contain one of the
//!   NAMEs (`create`, `get, 16`, `list whole`, `pods`, `watch`, `idle`, `aes`, `aes get`,
//!   `kms`, `kms get`, `cacher`, `cacher list`, `cacher watchers`, `cacher snapshot`,
//!   `telemetry`, `telemetry untraced create`, `telemetry traced guaranteed update`,
//!   `kube`, `kube decode`, `kube list`, `kube store-list`, `kube store-list RV=Exact`,
//!   `kube get`..., `kube cache`, `kube cache list`, `kube cache watchers`,
//!   `kube write throughput`, `offline`, `range stream`; a store-list row's full name
//!   with `, typed Pod` or `, LazyObject` runs that twin alone), for profiling;
//! - `--arm apistore|raw|kube`: run only arm A, only arm B, or only the kube section's
//!   Go side, for profiling (no report);
//! - `--report PATH`: write the report to PATH; `--no-report`: write no file.

mod alloc;
mod bench;
mod cacher;
mod cpu;
mod crud;
mod driver;
mod error;
mod freeing;
mod gobench;
mod kine;
mod kms;
mod kube;
mod kube_pod;
mod lazy_pod;
mod list;
mod machine;
mod object;
mod offline;
mod pod;
mod pods;
mod range_stream;
mod raw;
mod report;
mod settings;
mod side_by_side;
mod snapshot;
mod stats;
mod telemetry;
mod typed_pod;
mod watch;
mod wrapped_codec;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use apistore_etcd3::Etcd3Store;
use apistore_telemetry::StorageMetrics;
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use apistore_value::EncryptionConfig;

use crate::bench::{Backend, Bench};
use crate::crud::{Arm, Crud, pool_names, workload_name};
use crate::error::{BenchError, Result};
use crate::machine::RunInfo;
use crate::object::RESOURCE;
use crate::report::Report;
use crate::settings::Settings;
use crate::stats::{Comparison, Section};
use crate::telemetry::{Tracing, traced_request_context};

#[global_allocator]
static ALLOCATOR: alloc::CountingAllocator = alloc::CountingAllocator;

/// The encryption configuration the bench encrypts `resource` with: kube's `aesgcm`
/// provider with one key, then identity to read plain data, as an operator would write
/// it (the AES-GCM arm's for its objects, the offline section's for Secrets).
fn aesgcm_config(resource: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [{resource}]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: dGhpcyBpcyBhIDMyIGJ5dGUga2V5IGZvciBiZW5jaCE=
      - identity: {{}}
"
    )
}

/// Where the report goes.
#[derive(Debug)]
enum ReportTarget {
    /// docs/benchmarks.md of this workspace (full runs only).
    Default,
    /// A path given with `--report`.
    Path(PathBuf),
    /// Nowhere but the terminal.
    None,
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().is_some_and(|arg| arg == offline::MEASURE_FLAG) {
        args.next();
        return match offline::measure_child(args) {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("apistore-bench: {err}");
                ExitCode::FAILURE
            }
        };
    }
    match parse_args(args).and_then(|(settings, target)| run(settings, target)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("apistore-bench: {err}");
            ExitCode::FAILURE
        }
    }
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<(Settings, ReportTarget)> {
    let args: Vec<String> = args.collect();
    let mut settings = if args.iter().any(|a| a == "--quick") {
        Settings::quick()
    } else {
        Settings::full()
    };
    let mut target = ReportTarget::Default;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let mut value = |flag: &str| {
            args.next()
                .ok_or_else(|| BenchError::Invalid(format!("{flag} needs a value")))
        };
        match arg.as_str() {
            "--quick" => {}
            "--only" => settings.only.push(value("--only")?),
            "--arm" => {
                settings.single_arm = Some(match value("--arm")?.as_str() {
                    "apistore" | "a" | "A" => 0,
                    "raw" | "b" | "B" => 1,
                    "kube" | "go" => KUBE_ARM,
                    other => {
                        return Err(BenchError::Invalid(format!(
                            "--arm takes apistore, raw or kube, not {other}"
                        )));
                    }
                });
            }
            "--report" => target = ReportTarget::Path(PathBuf::from(value("--report")?)),
            "--no-report" => target = ReportTarget::None,
            other => {
                return Err(BenchError::Invalid(format!(
                    "unknown argument {other}; see the top of crates/apistore-bench/src/main.rs"
                )));
            }
        }
    }
    Ok((settings, target))
}

fn run(settings: Settings, target: ReportTarget) -> Result<()> {
    let started = Instant::now();
    let load_before = machine::load_average();
    println!("apistore-bench: starting etcd");
    // An 8 GiB backend quota (etcd's largest recommended, what large clusters run
    // with): the kube section's writes pass the default 2 GiB within one run once the
    // stores write fast enough ("database space exceeded"), compacted or not.
    let etcd = EtcdServer::start(EtcdOptions {
        extra_args: vec!["--quota-backend-bytes=8589934592".to_owned()],
        ..EtcdOptions::default()
    })?;
    let info = RunInfo::gather(etcd.binary(), &settings);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| BenchError::Io {
            what: "start the tokio runtime".to_owned(),
            source,
        })?;
    let profiling = settings.single_arm.is_some();
    let quick = settings.quick;
    let partial = !settings.only.is_empty();
    let endpoint = etcd.endpoint();
    let (comparisons, notes, side_by_side, offline) = runtime.block_on(async {
        let bench = Bench::connect(&etcd, settings).await?;
        let (comparisons, mut notes) = if bench.settings.single_arm == Some(KUBE_ARM) {
            (Vec::new(), Vec::new())
        } else {
            run_workloads(&bench).await?
        };
        let side_by_side = run_kube(&bench, &endpoint, &mut notes).await?;
        let offline = run_offline(&bench.settings, &mut notes).await?;
        Ok::<_, BenchError>((comparisons, notes, side_by_side, offline))
    })?;
    drop(runtime);
    drop(etcd);
    // Groups of rows that failed are in the report; the run still fails once it is
    // written.
    let failed: Vec<String> = side_by_side
        .as_ref()
        .map_or_else(Vec::new, |table| table.failed.clone());

    let mut report = Report {
        info,
        comparisons,
        notes,
        side_by_side,
        offline,
    };
    report
        .notes
        .push(format!("allocator: {}", alloc::UNDERLYING));
    report.notes.push(format!(
        "the run took {:.0} s; load average (1, 5, 15 min) before: {load_before}, after: {} \
         (on {} cores: more than that means other processes competed for the CPU)",
        started.elapsed().as_secs_f64(),
        machine::load_average(),
        std::thread::available_parallelism().map_or(0, usize::from),
    ));
    let markdown = report.markdown();
    println!("\n{markdown}");
    write_report(&report, &target, profiling, quick, partial)?;
    if failed.is_empty() {
        Ok(())
    } else {
        Err(BenchError::Invalid(format!(
            "the run is incomplete: {}",
            failed.join("; ")
        )))
    }
}

/// Writes the report where `target` says, unless this run's kind writes none.
fn write_report(
    report: &Report,
    target: &ReportTarget,
    profiling: bool,
    quick: bool,
    partial: bool,
) -> Result<()> {
    if profiling {
        println!("(--arm: profiling run, no report written)");
        return Ok(());
    }
    let path = match target {
        ReportTarget::None => return Ok(()),
        ReportTarget::Path(path) => path.clone(),
        ReportTarget::Default if quick => {
            println!("(--quick: docs/benchmarks.md is left as it is; the full run writes it)");
            return Ok(());
        }
        // The latest run in the docs is a whole run's table; a run of some workloads
        // would replace it with a few rows.
        ReportTarget::Default if partial => {
            println!(
                "(--only: docs/benchmarks.md is left as it is; the full run writes it; \
                 --report PATH writes this one)"
            );
            return Ok(());
        }
        ReportTarget::Default => {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/benchmarks.md")
        }
    };
    report.write_doc(&path)?;
    println!("report written to {}", path.display());
    Ok(())
}

/// The `--arm` index of the kube section's Go side (0 and 1 are arms A and B).
const KUBE_ARM: usize = 2;

/// The kube section, when selected and the Go arm was built; otherwise a note says why
/// it did not run.
async fn run_kube(
    bench: &Bench,
    endpoint: &str,
    notes: &mut Vec<String>,
) -> Result<Option<side_by_side::SideBySide>> {
    if !kube::selected(&bench.settings) {
        return Ok(None);
    }
    let Some(binary) = gobench::binary_from_env() else {
        notes.push(format!(
            "kube section not run: no Go arm ({} unset; `cargo xtask bench` builds \
             interop/gobench when Go is installed)",
            gobench::GOBENCH_BIN_ENV
        ));
        return Ok(None);
    };
    let section_started = Instant::now();
    println!("kube: apistore against kube-apiserver's etcd3 store (Go) and raw etcd-client");
    let mut go = gobench::GoArm::start(&binary, endpoint)?;
    let mut side_by_side = bench.kube_section(&mut go).await?;
    notes.append(&mut side_by_side.notes);
    println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    Ok(Some(side_by_side))
}

/// The offline section (src/offline.rs), when selected and `cargo xtask bench` built
/// its binaries; otherwise a note says why it did not run.
async fn run_offline(
    settings: &Settings,
    notes: &mut Vec<String>,
) -> Result<Option<offline::OfflineSection>> {
    if !offline::selected(settings) || settings.single_arm.is_some() {
        return Ok(None);
    }
    let Some((cli, etcdutl)) = offline::binaries_from_env() else {
        notes.push(format!(
            "offline section not run: {} or {} unset (`cargo xtask bench` builds the \
             command in release and etcdutl from the Go module proxy)",
            offline::CLI_BIN_ENV,
            offline::ETCDUTL_BIN_ENV
        ));
        return Ok(None);
    };
    let section_started = Instant::now();
    let section = offline::run(settings, &cli, &etcdutl).await?;
    println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    Ok(Some(section))
}

/// The CRUD workloads at 1 and 16 callers on a kine of their own started from `binary`
/// (src/kine.rs), apistore against raw etcd-client.
async fn kine_crud(binary: &std::path::Path, settings: &Settings) -> Result<Vec<Comparison>> {
    let kine = kine::KineProcess::start(binary)?;
    let bench = Bench::connect_to(kine.endpoint(), kine.pid(), false, settings.clone()).await?;
    let pool = "pool";
    let raw = Backend::Raw(Arc::clone(&bench.raw));
    bench
        .fill(pool, pool_names(settings.pool_size), &raw)
        .await?;
    let arms = [
        Arm::plain("apistore", Backend::Store(Arc::clone(&bench.store)), pool),
        Arm::plain("raw", raw, pool),
    ];
    let mut comparisons = Vec::new();
    for op in [Crud::Create, Crud::Get, Crud::Update, Crud::Delete] {
        for callers in [1, 16] {
            comparisons.push(
                bench
                    .compare_crud(Section::KineCrud, op, callers, &arms)
                    .await?,
            );
        }
    }
    drop(bench);
    drop(kine);
    Ok(comparisons)
}

async fn run_workloads(bench: &Bench) -> Result<(Vec<Comparison>, Vec<String>)> {
    let mut comparisons = Vec::new();
    let mut notes = Vec::new();
    let settings = &bench.settings;
    let section_started = Instant::now();
    let pool = "pool";
    let raw = Backend::Raw(Arc::clone(&bench.raw));
    let store = Backend::Store(Arc::clone(&bench.store));

    println!("crud: apistore against raw etcd-client");
    bench
        .fill(pool, pool_names(settings.pool_size), &raw)
        .await?;
    let arms = [
        Arm::plain("apistore", store.clone(), pool),
        Arm::plain("raw", raw.clone(), pool),
    ];
    for op in [Crud::Create, Crud::Get, Crud::Update, Crud::Delete] {
        for callers in [1, 16] {
            if settings.selected(&workload_name(op, callers)) {
                comparisons.push(
                    bench
                        .compare_crud(Section::Crud, op, callers, &arms)
                        .await?,
                );
            }
        }
    }
    println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());

    let section_started = Instant::now();
    if settings.selected(kine::SELECTOR) {
        match kine::binary_from_env() {
            Some(binary) => {
                println!("kine-sqlite crud: apistore against raw etcd-client, both on kine");
                comparisons.extend(kine_crud(&binary, settings).await?);
                println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
            }
            None => notes.push(format!(
                "kine-sqlite CRUD not run: no kine ({} unset; `cargo xtask bench` builds \
                 interop/kine when Go is installed)",
                kine::KINE_BIN_ENV
            )),
        }
    }

    let section_started = Instant::now();
    if settings.selected("list whole") || settings.selected("list pages of 500") {
        println!("list: apistore against raw etcd-client");
        comparisons.extend(bench.list_section().await?);
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }

    let section_started = Instant::now();
    if settings.selected(pods::AGAINST_JSON) || settings.selected(pods::AGAINST_RAW) {
        println!("pods: protobuf against JSON and against raw etcd-client");
        comparisons.extend(bench.pods_section().await?);
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }

    let section_started = Instant::now();
    if settings.selected("watch") || settings.selected("idle") {
        println!("watch: apistore against raw etcd-client");
        comparisons.extend(bench.watch_section().await?);
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }

    let section_started = Instant::now();
    if cacher::selected(settings) {
        println!("cacher: the watch cache over the etcd3 store against raw etcd-client");
        let (cached, cacher_notes) = bench.cacher_section().await?;
        comparisons.extend(cached);
        notes.extend(cacher_notes);
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }
    if snapshot::selected(settings) {
        let section_started = Instant::now();
        println!("cacher snapshot: Exact and continued lists from the watch cache's snapshots");
        let (snapshots, note) = bench.snapshot_section().await?;
        comparisons.extend(snapshots);
        notes.push(note);
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }

    if range_stream::selected(settings) && settings.single_arm.is_none() {
        match range_stream::binary_from_env() {
            Some(binary) => {
                let section_started = Instant::now();
                println!(
                    "range stream: a list of 100,000 objects with and without RangeStream, etcd 3.7"
                );
                let (streamed, note) = range_stream::run(settings, &binary).await?;
                comparisons.extend(streamed);
                notes.push(note);
                println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
            }
            None => notes.push(format!(
                "range stream section not run: no etcd 3.7 ({} unset; `cargo xtask bench` \
                 builds it from interop/etcd/3.7 when Go is installed)",
                range_stream::ETCD37_BIN_ENV
            )),
        }
    }

    let section_started = Instant::now();
    let aes_ops: Vec<Crud> = [Crud::Create, Crud::Get]
        .into_iter()
        .filter(|op| settings.selected(&format!("aes {}", workload_name(*op, 16))))
        .collect();
    if !aes_ops.is_empty() {
        println!("aes: apistore with AES-GCM against apistore with identity");
        let config = EncryptionConfig::parse(&aesgcm_config(RESOURCE))?;
        let aes = Backend::Store(Arc::new(
            Etcd3Store::new(bench.client.clone(), Bench::store_config())
                .with_transformer(config.transformer_for(RESOURCE)),
        ));
        let aes_pool = "pool-aes";
        bench
            .fill(aes_pool, pool_names(settings.pool_size), &aes)
            .await?;
        let arms = [
            Arm::plain("aes-gcm", aes, aes_pool),
            Arm::plain("identity", store.clone(), pool),
        ];
        for op in aes_ops {
            comparisons.push(
                bench
                    .compare_crud(Section::Encryption, op, 16, &arms)
                    .await?,
            );
        }
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }

    let section_started = Instant::now();
    if kms::selected(settings) {
        println!("kms: apistore with KMS v2 (test plugin over gRPC) against apistore with AES-GCM");
        let (kms, note) = bench.kms_section().await?;
        comparisons.extend(kms);
        notes.push(note);
        println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
    }

    // Selected by `telemetry untraced <workload>` or `telemetry traced <workload>`.
    let telemetry_selected = |how: &str, op: Crud| {
        settings.selected(&format!("telemetry {how} {}", workload_name(op, 16)))
    };
    let telemetry_ops: Vec<Crud> = [Crud::Create, Crud::Get, Crud::Update]
        .into_iter()
        .filter(|&op| telemetry_selected("untraced", op) || telemetry_selected("traced", op))
        .collect();
    if !telemetry_ops.is_empty() {
        let registry = prometheus::Registry::new();
        let on_store = Backend::Store(Arc::new(
            Etcd3Store::new(bench.client.clone(), Bench::store_config())
                .with_metrics(StorageMetrics::register(&registry)?),
        ));
        let tracing = Tracing::install();
        // Untraced callers first: the state most requests are in.
        for (section, how, context, title) in [
            (
                Section::TelemetryUntraced,
                "untraced",
                None,
                "telemetry: apistore with metrics and tracing against apistore without, callers untraced",
            ),
            (
                Section::Telemetry,
                "traced",
                Some(traced_request_context()),
                "telemetry: apistore with metrics and tracing against apistore without, every call traced",
            ),
        ] {
            let section_started = Instant::now();
            println!("{title}");
            let arms = [
                Arm {
                    name: "on",
                    backend: on_store.clone(),
                    dispatch: Some(tracing.dispatch.clone()),
                    context: context.clone(),
                    pool: pool.to_owned(),
                },
                Arm {
                    context,
                    ..Arm::plain("off", store.clone(), pool)
                },
            ];
            for &op in telemetry_ops
                .iter()
                .filter(|&&op| telemetry_selected(how, op))
            {
                comparisons.push(bench.compare_crud(section, op, 16, &arms).await?);
            }
            println!("  ({:.0} s)", section_started.elapsed().as_secs_f64());
        }
        let families = registry.gather().len();
        notes.push(format!(
            "telemetry on: {} spans exported (and discarded), {families} metric families recorded",
            tracing.spans_exported()
        ));
    }
    Ok((comparisons, notes))
}
