//! The soak's workers: each creates, updates, deletes, gets and lists pods in keys of
//! its own, keeping a ledger of what each key may hold, which the reckoning in
//! `main.rs` holds etcd to.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use apistore_etcd3::Etcd3Store;
use apistore_storage::{
    DeleteOptions, ErrorKind, GetOptions, ListOptions, Storage, StorageError, UpdateOptions,
};
use apistore_testing::suite::Pod;

use super::{MAX_KEYS_PER_WORKER, NAMESPACE};

/// A small xorshift generator: the soak needs variety, not statistics.
pub(super) struct Rng(u64);

impl Rng {
    pub(super) fn seeded(task: usize) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let spread = (task as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Self((u64::from(nanos) ^ spread) | 1)
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % n.max(1) as u64).unwrap_or(0)
    }
}

/// The value worker `worker` gives key `name` at step `seq`: distinct for every write.
pub(super) fn pod_at(worker: usize, name: &str, seq: u64) -> Pod {
    Pod::new(NAMESPACE, name)
        .with_label("worker", &worker.to_string())
        .with_label("seq", &seq.to_string())
        .on_node(&format!("node-{}", seq % 7))
}

pub(super) fn seq_of(pod: &Pod) -> Option<u64> {
    pod.metadata.labels.get("seq")?.parse().ok()
}

/// The kinds of operation, for the figures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Op {
    Create,
    Update,
    Delete,
    Get,
    List,
}

/// Latencies and outcomes of one kind of operation.
#[derive(Debug, Default)]
pub(super) struct OpStats {
    pub(super) ok: u64,
    pub(super) failed: BTreeMap<String, u64>,
    pub(super) latencies: Vec<Duration>,
}

/// What one worker did and what its keys may hold.
#[derive(Debug)]
pub(super) struct WorkerReport {
    pub(super) worker: usize,
    pub(super) epoch: Instant,
    /// Key name -> the values it may hold (`None`: absent). One value when certain.
    pub(super) ledger: BTreeMap<String, Vec<Option<u64>>>,
    pub(super) ops: BTreeMap<Op, OpStats>,
    pub(super) violations: Vec<String>,
    /// Key name -> what was done to it, for explaining a violation.
    pub(super) log: BTreeMap<String, Vec<String>>,
    /// The outcome of the last operation, for the log.
    pub(super) last_outcome: String,
}

impl WorkerReport {
    pub(super) fn record(&mut self, op: Op, took: Duration, error: Option<&StorageError>) {
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
    pub(super) fn maybe(&mut self, name: &str, value: Option<u64>) {
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
    pub(super) fn certainly(&mut self, name: &str, value: Option<u64>) {
        self.ledger.insert(name.to_owned(), vec![value]);
    }

    /// A read found the key holding `value` (`None`: absent); the ledger must allow it.
    /// A read does not narrow the ledger: a write that failed on our side may land in
    /// etcd after the read.
    pub(super) fn observed(&mut self, what: &str, name: &str, value: Option<u64>) {
        let possible = self.ledger.get(name).cloned().unwrap_or_default();
        if !possible.contains(&value) {
            self.violations.push(format!(
                "{what} {name}: found step {value:?}; the ledger allows only {possible:?}"
            ));
        }
    }
}

/// Runs a mix of writes and reads on keys of its own until `stop`.
pub(super) async fn worker(
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
