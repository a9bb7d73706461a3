//! Soak: a minute of mixed load on a three-member etcd cluster, one member restarted
//! midway, then a reckoning against etcd itself.
//!
//! `cargo xtask soak` runs it (it provisions etcd); by hand:
//! `APISTORE_ETCD_BIN=/usr/bin/etcd cargo run --release -p apistore-bench --bin soak
//! -- [--seconds 60] [--tasks 32]`.
//!
//! Of the tasks, one in eight (at least one) follow the namespace as a client-go
//! reflector does (watch; on an error event, re-list and watch again from the list's
//! revision); the others create, update, delete, get and list pods, each in keys of its
//! own, keeping a ledger of what each key may hold: after a successful write exactly
//! that, after a failed one either the old value or the new. At the end:
//!
//! - every key in etcd holds a value its ledger allows (no acknowledged write is
//!   missing, no failed write is half done), decoding to exactly what was written, and
//!   etcd holds no key nobody wrote;
//! - every reflector's state equals a final list through the store and a raw read, and
//!   every watch delivered strictly increasing revisions.
//!
//! The figures (operations, errors by kind, latencies, watch events, re-lists) are
//! printed; the exit status says whether the checks held. docs/reliability.md records a
//! run.

mod reflector;
mod worker;

use std::collections::{BTreeMap, HashMap};
use std::env;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{Codec, JsonCodec, ListOptions, Storage};
use apistore_testing::etcd::{EtcdCluster, EtcdOptions};
use apistore_testing::suite::Pod;
use tokio::task::block_in_place;

use reflector::reflector;
use worker::{Op, OpStats, pod_at, seq_of, worker};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const NAMESPACE: &str = "soak";
/// The store's deadline for one etcd request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// Live keys a worker keeps at most.
const MAX_KEYS_PER_WORKER: usize = 40;

/// The command line.
#[derive(Debug, Clone, Copy)]
struct Settings {
    run_for: Duration,
    tasks: usize,
}

fn settings() -> Result<Settings, BoxError> {
    let mut settings = Settings {
        run_for: Duration::from_secs(60),
        tasks: 32,
    };
    let args: Vec<String> = env::args().skip(1).collect();
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--seconds" => settings.run_for = Duration::from_secs(value.parse()?),
            "--tasks" => settings.tasks = value.parse()?,
            other => {
                return Err(format!("unknown argument {other}; use --seconds N, --tasks N").into());
            }
        }
    }
    if settings.tasks < 2 {
        return Err("--tasks must be at least 2 (a reflector and a worker)".into());
    }
    Ok(settings)
}

/// How many watchers etcd's member at `endpoint` serves (its
/// `etcd_debugging_mvcc_watcher_total` gauge, from `/metrics` over plain HTTP).
fn watchers_served(endpoint: &str) -> Result<u64, BoxError> {
    use std::io::{Read, Write};
    let address = endpoint.strip_prefix("http://").unwrap_or(endpoint);
    let mut stream = std::net::TcpStream::connect(address)?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.write_all(format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())?;
    let mut body = String::new();
    stream.read_to_string(&mut body)?;
    let value = body
        .lines()
        .find_map(|line| line.strip_prefix("etcd_debugging_mvcc_watcher_total "))
        .ok_or_else(|| format!("no watcher gauge in the metrics of {endpoint}"))?;
    Ok(value.trim().parse::<f64>()? as u64)
}

/// The member serving the store's watches (one stream per store, on one member), or
/// the leader if none can be told.
fn member_to_restart(cluster: &EtcdCluster) -> Result<usize, BoxError> {
    for index in 0..cluster.size() {
        if watchers_served(&cluster.endpoint(index)?)? > 0 {
            return Ok(index);
        }
    }
    Ok(cluster.wait_for_leader(Duration::from_secs(10))?)
}

fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * p / 100]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 8)]
async fn main() -> Result<(), BoxError> {
    let settings = settings()?;
    let reflectors = (settings.tasks / 8).max(1);
    let workers = settings.tasks - reflectors;
    println!(
        "soak: {workers} workers and {reflectors} reflectors for {:?} on a three-member etcd \
         cluster; one member restarted midway",
        settings.run_for
    );

    let mut cluster = block_in_place(|| {
        EtcdCluster::start(
            3,
            EtcdOptions {
                name: "apistore-soak".to_owned(),
                ..EtcdOptions::default()
            },
        )
    })?;
    let client = EtcdClient::connect(&ClientConfig {
        dial_timeout: Duration::from_secs(5),
        ..ClientConfig::new(cluster.endpoints())
    })
    .await?;
    let store: Etcd3Store<Pod> = Etcd3Store::new(
        client,
        StoreConfig {
            request_timeout: Some(REQUEST_TIMEOUT),
            ..StoreConfig::for_resource("pods")
        },
    );

    let stop = Arc::new(AtomicBool::new(false));
    let (until_tx, until_rx) = tokio::sync::watch::channel(0_i64);
    let reflector_tasks: Vec<_> = (0..reflectors)
        .map(|_| {
            tokio::spawn(reflector(
                store.clone(),
                Arc::clone(&stop),
                until_rx.clone(),
            ))
        })
        .collect();
    let started = Instant::now();
    let worker_tasks: Vec<_> = (0..workers)
        .map(|id| tokio::spawn(worker(store.clone(), id, Arc::clone(&stop), started)))
        .collect();

    tokio::time::sleep(settings.run_for / 2).await;
    // The member the watches are on, so that the reflectors have to recover.
    let leader_before = block_in_place(|| cluster.wait_for_leader(Duration::from_secs(10)))?;
    let restarted = block_in_place(|| member_to_restart(&cluster))?;
    let restart_started = Instant::now();
    block_in_place(|| cluster.restart_member(restarted))?;
    let restart_took = restart_started.elapsed();
    let leader_after = block_in_place(|| cluster.wait_for_leader(Duration::from_secs(10)))?;
    println!(
        "soak: restarted member {restarted} (it served the watches; member {leader_before} \
         led) at {:.1?}; back and healthy after {restart_took:.1?}; member {leader_after} leads",
        restart_started.duration_since(started)
    );
    tokio::time::sleep(settings.run_for.saturating_sub(started.elapsed())).await;
    stop.store(true, Ordering::SeqCst);
    let mut reports = Vec::new();
    for task in worker_tasks {
        reports.push(task.await?);
    }
    let ran_for = started.elapsed();

    // The reckoning: etcd as an independent client sees it.
    let mut raw = etcd_client::Client::connect(cluster.endpoints(), None).await?;
    let prefix = format!("/registry/pods/{NAMESPACE}/");
    let response = raw
        .get(
            prefix.as_str(),
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await?;
    let final_revision = response.header().map_or(0, |h| h.revision());
    let codec = JsonCodec::<Pod>::new();
    let mut violations: Vec<String> = Vec::new();
    let mut stored: HashMap<String, Pod> = HashMap::new();
    for kv in response.kvs() {
        let key = kv.key_str()?;
        let name = key.strip_prefix(&prefix).unwrap_or(key).to_owned();
        match codec.decode(kv.value()) {
            Ok(mut pod) => {
                pod.metadata.resource_version = kv.mod_revision().to_string();
                stored.insert(name, pod);
            }
            Err(err) => violations.push(format!("{key} does not decode: {err}")),
        }
    }
    let mut keys_checked = 0;
    for report in &reports {
        violations.extend(report.violations.iter().cloned());
        for (name, possible) in &report.ledger {
            keys_checked += 1;
            let held = stored.get(name);
            let value = held.and_then(seq_of);
            if held.is_some() && value.is_none() {
                violations.push(format!("{name} holds a value without a step"));
                continue;
            }
            if !possible.contains(&value) {
                let key = format!("{prefix}{name}");
                let mut history = Vec::new();
                if let Ok(mut stream) = raw
                    .watch(
                        key.as_str(),
                        Some(etcd_client::WatchOptions::new().with_start_revision(1)),
                    )
                    .await
                {
                    if let Ok(Ok(Some(response))) =
                        tokio::time::timeout(Duration::from_secs(2), stream.message()).await
                    {
                        for event in response.events() {
                            history.push(format!(
                                "{:?} at {:?}",
                                event.event_type(),
                                event.kv().map(|kv| kv.mod_revision())
                            ));
                        }
                    }
                }
                violations.push(format!(
                    "{name} holds step {value:?}; its ledger allows only {possible:?}; log: {:#?}; etcd history: {history:?}",
                    report.log.get(name)
                ));
            }
            if let (Some(pod), Some(seq)) = (held, value) {
                let mut expected = pod_at(report.worker, name, seq);
                expected.metadata.resource_version = pod.metadata.resource_version.clone();
                if pod != &expected {
                    violations.push(format!("{name} holds a torn value {pod:?}"));
                }
            }
        }
    }
    for name in stored.keys() {
        if !reports.iter().any(|r| r.ledger.contains_key(name)) {
            violations.push(format!("{name} is in etcd but no worker wrote it"));
        }
    }

    // The reflectors catch up to the final revision and must agree with a final list.
    until_tx.send(final_revision)?;
    let final_list = store
        .list(
            &format!("pods/{NAMESPACE}"),
            &ListOptions {
                resource_version: final_revision.to_string(),
                resource_version_match: apistore_storage::ResourceVersionMatch::Exact,
                recursive: true,
                ..ListOptions::default()
            },
        )
        .await?;
    let listed: BTreeMap<String, Pod> = final_list
        .items
        .into_iter()
        .map(|pod| (pod.metadata.name.clone(), pod))
        .collect();
    let raw_state: BTreeMap<String, Pod> = stored.into_iter().collect();
    if listed != raw_state {
        violations.push("the final list through the store differs from etcd".to_owned());
    }
    let mut reflected = Vec::new();
    for (i, task) in reflector_tasks.into_iter().enumerate() {
        let report = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .map_err(|_| format!("reflector {i} did not reach revision {final_revision}"))??;
        violations.extend(report.violations.iter().cloned());
        if report.state != listed {
            violations.push(format!(
                "reflector {i} ended with {} keys at revision {}, the final list has {} at {}",
                report.state.len(),
                report.revision,
                listed.len(),
                final_revision
            ));
        }
        reflected.push(report);
    }

    // The figures.
    let mut ops: BTreeMap<Op, OpStats> = BTreeMap::new();
    for report in reports {
        for (op, stats) in report.ops {
            let all = ops.entry(op).or_default();
            all.ok += stats.ok;
            for (kind, count) in stats.failed {
                *all.failed.entry(kind).or_default() += count;
            }
            all.latencies.extend(stats.latencies);
        }
    }
    let mut out = String::new();
    let total: u64 = ops
        .values()
        .map(|s| s.ok + s.failed.values().sum::<u64>())
        .sum();
    writeln!(
        out,
        "soak: {total} operations in {ran_for:.1?} ({:.0}/s); {keys_checked} keys checked, \
         {} in etcd at revision {final_revision}",
        total as f64 / ran_for.as_secs_f64(),
        listed.len()
    )?;
    writeln!(
        out,
        "| op | ok | failed (by kind) | p50 | p99 | max |\n|---|---|---|---|---|---|"
    )?;
    for (op, stats) in &mut ops {
        stats.latencies.sort();
        writeln!(
            out,
            "| {op:?} | {} | {:?} | {:.1?} | {:.1?} | {:.1?} |",
            stats.ok,
            stats.failed,
            percentile(&stats.latencies, 50),
            percentile(&stats.latencies, 99),
            stats.latencies.last().copied().unwrap_or_default()
        )?;
    }
    for (i, r) in reflected.iter().enumerate() {
        writeln!(
            out,
            "reflector {i}: {} events, {} watch errors, {} lists ({} failed), {} keys at revision {}",
            r.events,
            r.watch_errors,
            r.relists,
            r.failed_relists,
            r.state.len(),
            r.revision
        )?;
    }
    print!("{out}");
    if violations.is_empty() {
        println!(
            "soak: every check held (no acknowledged write missing, no torn value, watches agree \
             with the final list)"
        );
        Ok(())
    } else {
        for violation in violations.iter().take(50) {
            println!("VIOLATION: {violation}");
        }
        Err(format!("{} checks failed", violations.len()).into())
    }
}
