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

use std::collections::{BTreeMap, HashMap};
use std::env;
use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{
    Codec, DeleteOptions, ErrorKind, GetOptions, JsonCodec, ListOptions, Storage, StorageError,
    UpdateOptions, WatchEvent, WatchStream,
};
use apistore_testing::etcd::{EtcdCluster, EtcdOptions};
use apistore_testing::suite::Pod;
use futures::StreamExt;
use tokio::task::block_in_place;

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

/// A small xorshift generator: the soak needs variety, not statistics.
struct Rng(u64);

impl Rng {
    fn seeded(task: usize) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let spread = (task as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self((u64::from(nanos) ^ spread) | 1)
    }

    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n.max(1) as u64).unwrap_or(0)
    }
}

/// The value worker `worker` gives key `name` at step `seq`: distinct for every write.
fn pod_at(worker: usize, name: &str, seq: u64) -> Pod {
    Pod::new(NAMESPACE, name)
        .with_label("worker", &worker.to_string())
        .with_label("seq", &seq.to_string())
        .on_node(&format!("node-{}", seq % 7))
}

fn seq_of(pod: &Pod) -> Option<u64> {
    pod.metadata.labels.get("seq")?.parse().ok()
}

/// The kinds of operation, for the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Op {
    Create,
    Update,
    Delete,
    Get,
    List,
}

/// Latencies and outcomes of one kind of operation.
#[derive(Debug, Default)]
struct OpStats {
    ok: u64,
    failed: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
}

/// What one worker did and what its keys may hold.
#[derive(Debug)]
struct WorkerReport {
    worker: usize,
    epoch: Instant,
    /// Key name -> the values it may hold (`None`: absent). One value when certain.
    ledger: BTreeMap<String, Vec<Option<u64>>>,
    ops: BTreeMap<Op, OpStats>,
    violations: Vec<String>,
    /// Key name -> what was done to it, for explaining a violation.
    log: BTreeMap<String, Vec<String>>,
    /// The outcome of the last operation, for the log.
    last_outcome: String,
}

impl WorkerReport {
    fn record(&mut self, op: Op, took: Duration, error: Option<&StorageError>) {
        let stats = self.ops.entry(op).or_default();
        stats.latencies.push(took);
        match error {
            None => {
                stats.ok += 1;
                "ok".clone_into(&mut self.last_outcome);
            }
            Some(err) => {
                *stats.failed.entry(format!("{:?}", err.kind())).or_default() += 1;
                self.last_outcome = err.to_string();
            }
        }
    }

    /// The key may hold what it held (nothing, for a key never written), or `value` (a
    /// write that failed).
    fn maybe(&mut self, name: &str, value: Option<u64>) {
        let possible = self
            .ledger
            .entry(name.to_owned())
            .or_insert_with(|| vec![None]);
        if !possible.contains(&value) {
            possible.push(value);
        }
    }

    /// The key certainly holds `value`: a write of it was acknowledged. (Only an
    /// acknowledged write narrows the ledger: a failed write may still land later, but
    /// not after an acknowledged one, since every write compares the revision it read.)
    fn certainly(&mut self, name: &str, value: Option<u64>) {
        self.ledger.insert(name.to_owned(), vec![value]);
    }

    /// A read found the key holding `value` (`None`: absent); the ledger must allow it.
    /// A read does not narrow the ledger: a write that failed on our side may land in
    /// etcd after the read.
    fn observed(&mut self, what: &str, name: &str, value: Option<u64>) {
        let possible = self.ledger.get(name).cloned().unwrap_or_default();
        if !possible.contains(&value) {
            self.violations.push(format!(
                "{what} {name}: found step {value:?}; the ledger allows only {possible:?}"
            ));
        }
    }
}

/// Runs a mix of writes and reads on keys of its own until `stop`.
async fn worker(
    store: Etcd3Store<Pod>,
    id: usize,
    stop: Arc<AtomicBool>,
    epoch: Instant,
) -> WorkerReport {
    let mut report = WorkerReport {
        worker: id,
        epoch,
        ledger: BTreeMap::new(),
        ops: BTreeMap::new(),
        violations: Vec::new(),
        log: BTreeMap::new(),
        last_outcome: String::new(),
    };
    let mut rng = Rng::seeded(id);
    let mut next_key = 0_u64;
    let mut next_seq = 1_u64;
    while !stop.load(Ordering::SeqCst) {
        let names: Vec<String> = report
            .ledger
            .iter()
            .filter(|(_, possible)| possible.iter().any(Option::is_some))
            .map(|(name, _)| name.clone())
            .collect();
        let roll = rng.below(100);
        let op = if names.is_empty() || (roll < 30 && names.len() < MAX_KEYS_PER_WORKER) {
            Op::Create
        } else if roll < 70 {
            Op::Update
        } else if roll < 85 {
            Op::Delete
        } else if roll < 93 {
            Op::Get
        } else {
            Op::List
        };
        let name = match op {
            Op::Create => {
                next_key += 1;
                format!("w{id:02}-k{next_key:05}")
            }
            _ => names[rng.below(names.len())].clone(),
        };
        let key = format!("pods/{NAMESPACE}/{name}");
        let seq = next_seq;
        next_seq += 1;
        let started = Instant::now();
        let before = report.ledger.get(&name).cloned();
        let mut last_rv = String::new();
        let violations_before = report.violations.len();
        match op {
            Op::Create => {
                let outcome = store.create(&key, pod_at(id, &name, seq), 0).await;
                report.record(op, started.elapsed(), outcome.as_ref().err());
                match outcome {
                    Ok(pod) => {
                        last_rv.clone_from(&pod.metadata.resource_version);
                        report.certainly(&name, Some(seq));
                    }
                    Err(_) => report.maybe(&name, Some(seq)),
                }
            }
            Op::Update => {
                let outcome = store
                    .guaranteed_update(&key, UpdateOptions::default(), |_, _| {
                        Ok(pod_at(id, &name, seq).into())
                    })
                    .await;
                report.record(op, started.elapsed(), outcome.as_ref().err());
                match outcome {
                    Ok(pod) => {
                        last_rv.clone_from(&pod.metadata.resource_version);
                        report.certainly(&name, Some(seq));
                    }
                    Err(err) if err.kind() == ErrorKind::NotFound => {
                        report.observed("update", &name, None);
                    }
                    Err(_) => report.maybe(&name, Some(seq)),
                }
            }
            Op::Delete => {
                let outcome = store.delete(&key, DeleteOptions::default()).await;
                report.record(op, started.elapsed(), outcome.as_ref().err());
                match outcome {
                    Ok(_) => report.certainly(&name, None),
                    Err(err) if err.kind() == ErrorKind::NotFound => {
                        report.observed("delete", &name, None);
                    }
                    Err(_) => report.maybe(&name, None),
                }
            }
            Op::Get => {
                let outcome = store.get(&key, &GetOptions::default()).await;
                report.record(op, started.elapsed(), outcome.as_ref().err());
                match outcome {
                    Ok(mut pod) => {
                        let value = seq_of(&pod);
                        report.observed("get", &name, value);
                        pod.metadata.resource_version.clear();
                        if pod != pod_at(id, &name, value.unwrap_or_default()) {
                            report
                                .violations
                                .push(format!("get {key}: a torn value {pod:?}"));
                        }
                    }
                    Err(err) if err.kind() == ErrorKind::NotFound => {
                        report.observed("get", &name, None);
                    }
                    Err(_) => {}
                }
            }
            Op::List => {
                let options = ListOptions {
                    recursive: true,
                    ..ListOptions::default()
                };
                let outcome = store.list(&format!("pods/{NAMESPACE}"), &options).await;
                report.record(op, started.elapsed(), outcome.as_ref().err());
                if let Ok(list) = outcome {
                    let list_rv: u64 = list.metadata.resource_version.parse().unwrap_or(0);
                    let sorted = list
                        .items
                        .windows(2)
                        .all(|w| w[0].metadata.name < w[1].metadata.name);
                    let in_time = list.items.iter().all(|pod| {
                        pod.metadata
                            .resource_version
                            .parse::<u64>()
                            .unwrap_or(u64::MAX)
                            <= list_rv
                    });
                    if !sorted || !in_time {
                        report.violations.push(format!(
                            "list at {list_rv}: items out of order ({}) or newer than the list ({})",
                            !sorted, !in_time
                        ));
                    }
                }
            }
        }
        if op != Op::List {
            let after = report.ledger.get(&name).cloned();
            let flag = if report.violations.len() > violations_before {
                " VIOLATION"
            } else {
                ""
            };
            let line = format!(
                "{:.3?} {op:?} step {seq} ({:.1?}): {} rv {last_rv:?}; ledger {before:?} -> \
                 {after:?}{flag}",
                started.duration_since(report.epoch),
                started.elapsed(),
                report.last_outcome,
            );
            report.log.entry(name.clone()).or_default().push(line);
        }
    }
    report
}

/// What a reflector ended with.
#[derive(Debug, Default)]
struct ReflectorReport {
    state: BTreeMap<String, Pod>,
    revision: i64,
    events: u64,
    watch_errors: u64,
    relists: u64,
    failed_relists: u64,
    violations: Vec<String>,
}

/// Follows the namespace as a client-go reflector does, until `stop` is set and the
/// revision it has reached is at least `until`.
async fn reflector(
    store: Etcd3Store<Pod>,
    stop: Arc<AtomicBool>,
    mut until: tokio::sync::watch::Receiver<i64>,
) -> ReflectorReport {
    let mut report = ReflectorReport::default();
    let key = format!("pods/{NAMESPACE}");
    let recursive = |rv: String| ListOptions {
        resource_version: rv,
        recursive: true,
        ..ListOptions::default()
    };
    'relist: loop {
        let done = |report: &ReflectorReport, until: &tokio::sync::watch::Receiver<i64>| {
            let target = *until.borrow();
            stop.load(Ordering::SeqCst) && target > 0 && report.revision >= target
        };
        if done(&report, &until) {
            return report;
        }
        let Ok(list) = store.list(&key, &recursive(String::new())).await else {
            report.failed_relists += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        report.relists += 1;
        report.revision = list.metadata.resource_version.parse().unwrap_or(0);
        report.state = list
            .items
            .into_iter()
            .map(|pod| (pod.metadata.name.clone(), pod))
            .collect();
        let Ok(mut watch) = store
            .watch(&key, &recursive(list.metadata.resource_version))
            .await
        else {
            report.watch_errors += 1;
            continue;
        };
        let watch: &mut WatchStream<Pod> = &mut watch;
        loop {
            if done(&report, &until) {
                return report;
            }
            let event = tokio::select! {
                event = watch.next() => event,
                _ = until.changed() => continue,
                () = tokio::time::sleep(Duration::from_millis(200)) => continue,
            };
            let Some(event) = event else {
                report.watch_errors += 1;
                continue 'relist;
            };
            let (pod, deleted) = match event {
                WatchEvent::Added(pod) | WatchEvent::Modified(pod) => (pod, false),
                WatchEvent::Deleted(pod) => (pod, true),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(_) => {
                    report.watch_errors += 1;
                    continue 'relist;
                }
            };
            let rv: i64 = pod.metadata.resource_version.parse().unwrap_or(0);
            if rv <= report.revision {
                report.violations.push(format!(
                    "watch delivered revision {rv} after {} (a duplicate or out of order)",
                    report.revision
                ));
            }
            report.revision = rv;
            report.events += 1;
            if deleted {
                report.state.remove(&pod.metadata.name);
            } else {
                report.state.insert(pod.metadata.name.clone(), pod);
            }
        }
    }
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
