//! The compactor: keeps etcd's history to about one interval, so watches and exact
//! reads can go back that far and no further.
//!
//! Follows `pkg/storage/etcd3/compact.go` of k8s.io/apiserver v0.31.1, and the
//! per-transport sharing of `storagebackend/factory/etcd3.go`:
//!
//! - Every interval (kube-apiserver's default: 5 minutes), a transaction on the
//!   unprefixed key `compact_rev_key`: *if its version is my logical time, put the
//!   revision I saw last time, else read it*. The key's version is a cluster-wide
//!   logical clock. The compactor whose compare succeeds compacts etcd to the revision
//!   it saw one interval earlier (nothing on its first success: it has seen no revision
//!   yet); the others learn the new time and revision and try again next interval. So
//!   any number of apistore processes on one etcd compact once per interval between
//!   them, and when the one that compacts dies another takes over within two intervals.
//! - Each successful compare bumps etcd's revision by one (the put).
//! - Compaction is not physical: etcd answers without waiting for its disk.
//!
//! [`Compactor`] is one running compactor, owned by its handle: dropping it or calling
//! [`Compactor::stop`] ends it. [`SharedCompactor`] is the reference's
//! one-compactor-per-cluster registry: handles on the same endpoints share one
//! compactor, a smaller interval replaces the running one, and the last handle to go
//! stops it and clears the entry. Unlike the reference (whose endpoint registry in
//! `compact.go` is never cleared, so a replacement or a restart after all users left is
//! silently skipped), a replaced or restarted compactor really runs.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::Duration;

use apistore_storage::{Result, StorageError};
use etcd_client::{Compare, CompareOp, KvClient, Txn, TxnOp, TxnOpResponse};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::client::EtcdClient;

/// kube-apiserver's default compaction interval (`--etcd-compaction-interval`).
pub const DEFAULT_COMPACT_INTERVAL: Duration = Duration::from_secs(5 * 60);

/// The etcd key whose version is the compactors' logical clock and whose value is the
/// last revision a compactor claimed. It is not under any prefix, so every apistore
/// (and kube-apiserver) on one etcd shares it.
pub const COMPACT_REV_KEY: &str = "compact_rev_key";

/// What a compactor has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompactorStatus {
    /// Intervals that have passed (compaction attempts made).
    pub attempts: u64,
    /// Compactions this compactor made.
    pub compactions: u64,
    /// The revision of its last compaction; 0 before the first.
    pub last_compacted_revision: i64,
    /// Its logical time: the version of [`COMPACT_REV_KEY`] it last saw or wrote.
    pub logical_time: i64,
    /// Attempts that failed (etcd unreachable, compaction refused); each is logged.
    pub errors: u64,
}

/// Counters shared between a compactor's task and its handle.
#[derive(Debug, Default)]
struct Counters {
    attempts: AtomicU64,
    compactions: AtomicU64,
    last_compacted_revision: AtomicI64,
    logical_time: AtomicI64,
    errors: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> CompactorStatus {
        CompactorStatus {
            attempts: self.attempts.load(Ordering::SeqCst),
            compactions: self.compactions.load(Ordering::SeqCst),
            last_compacted_revision: self.last_compacted_revision.load(Ordering::SeqCst),
            logical_time: self.logical_time.load(Ordering::SeqCst),
            errors: self.errors.load(Ordering::SeqCst),
        }
    }
}

/// A compactor running in the background on the current tokio runtime.
///
/// Dropping the handle stops it (at once if it is waiting for the next interval, else
/// as soon as its current etcd request is abandoned); [`Self::stop`] also waits for the
/// task to be gone. An interval of zero means no compaction: the handle runs nothing.
///
/// ```no_run
/// use std::time::Duration;
/// use apistore_etcd3::{ClientConfig, Compactor, EtcdClient};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = EtcdClient::connect(&ClientConfig::new(["http://127.0.0.1:2379"])).await?;
/// let compactor = Compactor::start(&client, Duration::from_secs(300))?;
/// // ... serve ...
/// compactor.stop().await;
/// # Ok(()) }
/// ```
pub struct Compactor {
    interval: Duration,
    endpoints: Vec<String>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl fmt::Debug for Compactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compactor")
            .field("interval", &self.interval)
            .field("endpoints", &self.endpoints)
            .field("running", &self.is_running())
            .field("status", &self.status())
            .finish()
    }
}

impl Compactor {
    /// Starts compacting the etcd behind `client` every `interval`, the first attempt
    /// one interval from now. A zero interval starts nothing.
    ///
    /// Fails only outside a tokio runtime.
    pub fn start(client: &EtcdClient, interval: Duration) -> Result<Self> {
        let counters = Arc::new(Counters::default());
        let endpoints = client.endpoints().to_vec();
        if interval.is_zero() {
            return Ok(Self {
                interval,
                endpoints,
                stop: None,
                task: None,
                counters,
            });
        }
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|err| StorageError::Internal {
                key: COMPACT_REV_KEY.to_owned(),
                message: format!("the compactor needs a tokio runtime: {err}"),
                source: None,
            })?;
        let (stop, stopped) = oneshot::channel();
        let task = runtime.spawn(run(
            client.inner.kv_client(),
            endpoints.join(","),
            interval,
            stopped,
            Arc::clone(&counters),
            client.compactions.handle(),
        ));
        Ok(Self {
            interval,
            endpoints,
            stop: Some(stop),
            task: Some(task),
            counters,
        })
    }

    /// The interval between compactions; zero for a compactor that does nothing.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Whether the background task is still there.
    pub fn is_running(&self) -> bool {
        self.task.as_ref().is_some_and(|task| !task.is_finished())
    }

    /// What the compactor has done so far.
    pub fn status(&self) -> CompactorStatus {
        self.counters.snapshot()
    }

    /// Stops the compactor, waits until its task has ended, and says what it did.
    ///
    /// An attempt under way is abandoned: its claim may or may not have reached etcd.
    pub async fn stop(mut self) -> CompactorStatus {
        self.signal_stop();
        if let Some(task) = self.task.take() {
            // The task ends on the signal; a panic in it (there is no unwrap there) or
            // its runtime shutting down ends it too, which is all we wait for.
            let _ = task.await;
        }
        self.status()
    }

    fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // An error means the task is gone already.
            let _ = stop.send(());
        }
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// The compactor's loop: wait an interval, compact, until told to stop.
async fn run(
    mut kv: KvClient,
    endpoints: String,
    interval: Duration,
    mut stopped: oneshot::Receiver<()>,
    counters: Arc<Counters>,
    compacted: Arc<AtomicI64>,
) {
    let mut time = 0;
    let mut rev = 0;
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            () = tokio::time::sleep(interval) => {}
        }
        counters.attempts.fetch_add(1, Ordering::SeqCst);
        let tick = tokio::select! {
            _ = &mut stopped => return,
            tick = compact(&mut kv, time, rev) => tick,
        };
        time = tick.time;
        rev = tick.rev;
        counters.logical_time.store(time, Ordering::SeqCst);
        // What the client's stores report as compacted (kube's UpdateCompactRevision):
        // this compaction, or the one another compactor claimed when it won the race.
        if let Ok(Some(revision)) = tick.outcome {
            compacted.fetch_max(revision, Ordering::SeqCst);
        }
        compacted.fetch_max(tick.claimed, Ordering::SeqCst);
        match tick.outcome {
            Ok(Some(compacted)) => {
                counters.compactions.fetch_add(1, Ordering::SeqCst);
                counters
                    .last_compacted_revision
                    .store(compacted, Ordering::SeqCst);
                tracing::debug!(revision = compacted, %endpoints, "etcd: compacted");
            }
            Ok(None) => {}
            Err(err) => {
                counters.errors.fetch_add(1, Ordering::SeqCst);
                tracing::warn!(%endpoints, error = %err, "etcd: compaction failed");
            }
        }
    }
}

/// The result of one compaction attempt.
#[derive(Debug)]
struct Tick {
    /// The logical time to compare with next.
    time: i64,
    /// The revision to compact to next.
    rev: i64,
    /// The revision compacted to, `None` when this attempt had nothing to do (it lost
    /// the race, or it was the first success), or the error.
    outcome: Result<Option<i64>, etcd_client::Error>,
    /// On a lost race, the revision the winner claimed (and compacted to): the value
    /// of [`COMPACT_REV_KEY`]; 0 otherwise or when it is not a revision.
    claimed: i64,
}

/// One attempt: claim the logical time `time`, and if that works, compact to `rev`.
///
/// On a lost race the time and revision etcd reports are adopted; on a transport error
/// they stay as they were; if the claim worked but the compaction failed, the claim
/// still counts (as in the reference): the next attempt goes on from it.
async fn compact(kv: &mut KvClient, time: i64, rev: i64) -> Tick {
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, time)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, rev.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    let response = match kv.txn(txn).await {
        Ok(response) => response,
        Err(err) => {
            return Tick {
                time,
                rev,
                outcome: Err(err),
                claimed: 0,
            };
        }
    };
    let current_rev = response.header().map_or(rev, |h| h.revision());
    if !response.succeeded() {
        // Someone else claimed this time: adopt theirs. A key deleted meanwhile (by
        // hand) reads as time 0, which the next attempt claims afresh.
        let remote = response.op_responses().into_iter().find_map(|op| match op {
            TxnOpResponse::Get(get) => get.kvs().first().map(|kv| {
                let claimed = kv.value_str().ok().and_then(|v| v.parse().ok());
                (kv.version(), claimed.unwrap_or(0))
            }),
            _ => None,
        });
        let (remote_time, claimed) = remote.unwrap_or((0, 0));
        return Tick {
            time: remote_time,
            rev: current_rev,
            outcome: Ok(None),
            claimed,
        };
    }
    let next = Tick {
        time: time + 1,
        rev: current_rev,
        outcome: Ok(None),
        claimed: 0,
    };
    if rev == 0 {
        // The first claim: no revision has been seen an interval ago.
        return next;
    }
    match kv.compact(rev, None).await {
        Ok(_) => Tick {
            outcome: Ok(Some(rev)),
            ..next
        },
        Err(err) => Tick {
            outcome: Err(err),
            ..next
        },
    }
}

/// The running compactor of one set of endpoints and how many handles hold it.
#[derive(Debug)]
struct Entry {
    compactor: Compactor,
    refs: usize,
    /// Bumped on every replacement, so a handle knows its entry is still the same.
    generation: u64,
}

/// The compactors of this process, one per set of endpoints.
static COMPACTORS: LazyLock<Mutex<HashMap<String, Entry>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// A share in the one compactor this process runs for a set of etcd endpoints, as
/// kube-apiserver shares one per transport among all its storages.
///
/// [`Self::acquire`] starts the compactor for these endpoints if there is none, or
/// replaces it if the requested interval is smaller (zero, "no compaction", is the
/// smallest: asking for it stops compaction on those endpoints for as long as the entry
/// lives). Dropping the last share stops the compactor and forgets the endpoints, so a
/// later [`Self::acquire`] starts a fresh one.
///
/// Endpoints are compared as a set: the same URLs in another order share a compactor.
#[derive(Debug)]
pub struct SharedCompactor {
    key: String,
}

impl SharedCompactor {
    /// Takes a share in the compactor for `client`'s endpoints, starting or replacing it
    /// as described on the type.
    ///
    /// Fails only outside a tokio runtime (when a compactor has to be started).
    pub fn acquire(client: &EtcdClient, interval: Duration) -> Result<Self> {
        let key = registry_key(client.endpoints());
        let mut compactors = COMPACTORS.lock().unwrap_or_else(PoisonError::into_inner);
        match compactors.get_mut(&key) {
            Some(entry) if entry.compactor.interval() <= interval => entry.refs += 1,
            Some(entry) => {
                // Replacing drops the old compactor, which stops it.
                entry.compactor = Compactor::start(client, interval)?;
                entry.generation += 1;
                entry.refs += 1;
            }
            None => {
                let compactor = Compactor::start(client, interval)?;
                compactors.insert(
                    key.clone(),
                    Entry {
                        compactor,
                        refs: 1,
                        generation: 0,
                    },
                );
            }
        }
        Ok(Self { key })
    }

    /// The interval of the compactor this share is in (the smallest asked for so far).
    pub fn interval(&self) -> Duration {
        self.with_entry(|entry| entry.compactor.interval())
            .unwrap_or_default()
    }

    /// What the shared compactor has done so far (since it last replaced one).
    pub fn status(&self) -> CompactorStatus {
        self.with_entry(|entry| entry.compactor.status())
            .unwrap_or_default()
    }

    /// Whether the shared compactor's task is running (false for interval zero).
    pub fn is_running(&self) -> bool {
        self.with_entry(|entry| entry.compactor.is_running())
            .unwrap_or(false)
    }

    /// How many times the compactor of these endpoints has been replaced by one with a
    /// smaller interval since it was started.
    pub fn replacements(&self) -> u64 {
        self.with_entry(|entry| entry.generation).unwrap_or(0)
    }

    /// How many shares the compactor of these endpoints has.
    pub fn shares(&self) -> usize {
        self.with_entry(|entry| entry.refs).unwrap_or(0)
    }

    fn with_entry<R>(&self, f: impl FnOnce(&Entry) -> R) -> Option<R> {
        let compactors = COMPACTORS.lock().unwrap_or_else(PoisonError::into_inner);
        compactors.get(&self.key).map(f)
    }
}

impl Drop for SharedCompactor {
    fn drop(&mut self) {
        let mut compactors = COMPACTORS.lock().unwrap_or_else(PoisonError::into_inner);
        let last = match compactors.get_mut(&self.key) {
            Some(entry) => {
                entry.refs = entry.refs.saturating_sub(1);
                entry.refs == 0
            }
            None => false,
        };
        if last {
            // Dropping the entry drops its compactor, which stops it.
            compactors.remove(&self.key);
        }
    }
}

/// The registry key of a set of endpoints: sorted and deduplicated, so the order they
/// were given in does not matter.
fn registry_key(endpoints: &[String]) -> String {
    let mut endpoints: Vec<&str> = endpoints.iter().map(String::as_str).collect();
    endpoints.sort_unstable();
    endpoints.dedup();
    endpoints.join(",")
}

#[cfg(test)]
mod tests {
    //! Against a real etcd of each test's own: compaction changes etcd for everyone on
    //! it, and the shared-compactor registry is keyed by endpoints.

    use apistore_storage::{ListOptions, ResourceVersionMatch, Storage, UpdateOptions};
    use apistore_testing::etcd::{EtcdOptions, EtcdServer};
    use apistore_testing::suite::Pod;

    use super::*;
    use crate::{ClientConfig, Etcd3Store, StoreConfig};

    /// An etcd of the test's own, an apistore client and a raw client on it.
    async fn etcd(name: &str) -> (EtcdServer, EtcdClient, etcd_client::Client) {
        let server = EtcdServer::start(EtcdOptions {
            name: name.to_owned(),
            ..EtcdOptions::default()
        })
        .unwrap();
        let client = EtcdClient::connect(&ClientConfig::new([server.endpoint()]))
            .await
            .unwrap();
        let raw = etcd_client::Client::connect([server.endpoint()], None)
            .await
            .unwrap();
        (server, client, raw)
    }

    /// The version of `compact_rev_key` (the compactors' logical time) and its value.
    async fn clock(raw: &mut etcd_client::Client) -> (i64, i64) {
        let response = raw.get(COMPACT_REV_KEY, None).await.unwrap();
        response.kvs().first().map_or((0, 0), |kv| {
            let value = kv.value_str().unwrap().parse().unwrap();
            (kv.version(), value)
        })
    }

    fn is_compacted(result: Result<etcd_client::GetResponse, etcd_client::Error>) -> bool {
        matches!(result, Err(err) if crate::error::is_compacted(&err))
    }

    /// compact_test.go `TestCompact`: a compaction at a revision makes the revisions
    /// before it unreadable, through etcd and through the store's exact list (410).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compact_makes_earlier_revisions_unreadable() {
        let (_server, client, mut raw) = etcd("compact").await;
        let first = raw.put("/somekey", "data", None).await.unwrap();
        let second = raw.put("/somekey", "data2", None).await.unwrap();
        let first_rev = first.header().unwrap().revision();
        let second_rev = second.header().unwrap().revision();

        let store: Etcd3Store<Pod> =
            Etcd3Store::new(client.clone(), StoreConfig::for_resource("pods"));
        let created = store
            .create("pods/ns/p1", Pod::new("ns", "p1"), 0)
            .await
            .unwrap();
        let updated = store
            .guaranteed_update("pods/ns/p1", UpdateOptions::default(), |mut pod: Pod, _| {
                pod.spec.node_name = "node-a".to_owned();
                Ok(pod.into())
            })
            .await
            .unwrap();
        let created_rev: i64 = created.metadata.resource_version.parse().unwrap();
        let updated_rev: i64 = updated.metadata.resource_version.parse().unwrap();
        assert!(second_rev < created_rev && created_rev < updated_rev);

        let mut kv = client.inner.kv_client();
        let tick = compact(&mut kv, 0, updated_rev).await;
        assert_eq!(tick.outcome.unwrap(), Some(updated_rev));
        assert_eq!(tick.time, 1);
        // The claim itself is one more revision.
        assert_eq!(tick.rev, updated_rev + 1);

        let old = raw
            .get(
                "/somekey",
                Some(etcd_client::GetOptions::new().with_revision(first_rev)),
            )
            .await;
        assert!(
            is_compacted(old),
            "a read at revision {first_rev} must be compacted"
        );
        let exact = |rev: i64| ListOptions {
            resource_version: rev.to_string(),
            resource_version_match: ResourceVersionMatch::Exact,
            recursive: true,
            ..ListOptions::default()
        };
        let err = store.list("pods", &exact(created_rev)).await.unwrap_err();
        assert!(
            matches!(&err, StorageError::Expired { message, .. } if message.contains("too old")),
            "an exact list at a compacted revision is 410 Expired, got {err:?}"
        );
        assert_eq!(err.kind(), apistore_storage::ErrorKind::Expired);
        // The compaction revision itself stays readable.
        let list = store.list("pods", &exact(updated_rev)).await.unwrap();
        assert_eq!(list.items, vec![updated]);
    }

    /// compact_test.go `TestCompactConflict`: of two compactors at the same logical
    /// time, the first claims it and the second adopts the new time without compacting.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_compactor_that_loses_the_race_adopts_the_winners_time() {
        let (_server, client, mut raw) = etcd("compact-conflict").await;
        let put = raw.put("/somekey", "data", None).await.unwrap();
        let rev = put.header().unwrap().revision();
        let mut kv = client.inner.kv_client();

        let first = compact(&mut kv, 0, rev).await;
        assert_eq!(first.outcome.unwrap(), Some(rev));
        assert_eq!(first.time, 1, "the winner's logical time is incremented");

        let second = compact(&mut kv, 0, rev).await;
        assert_eq!(second.outcome.unwrap(), None, "the loser does not compact");
        assert_eq!(
            second.time, first.time,
            "the loser adopts the winner's time"
        );
        assert_eq!(second.rev, first.rev, "a lost race writes nothing");
        assert_eq!(
            second.claimed, rev,
            "the loser learns the revision the winner compacted to"
        );
        assert_eq!(clock(&mut raw).await, (1, rev));
    }

    /// The first claim on a fresh etcd has no earlier revision to compact to.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_first_claim_does_not_compact() {
        let (_server, client, mut raw) = etcd("compact-bootstrap").await;
        raw.put("/somekey", "data", None).await.unwrap();
        let mut kv = client.inner.kv_client();
        let tick = compact(&mut kv, 0, 0).await;
        assert_eq!(tick.outcome.unwrap(), None);
        assert_eq!(tick.time, 1);
        assert_eq!(clock(&mut raw).await, (1, 0));
        let early = raw
            .get(
                "/somekey",
                Some(etcd_client::GetOptions::new().with_revision(1)),
            )
            .await;
        assert!(early.is_ok(), "nothing was compacted: {early:?}");
    }

    // The compactor's own runs (Compactor, SharedCompactor) are tested against etcd
    // from tests/compactor.rs.

    #[test]
    fn endpoint_sets_are_keyed_regardless_of_order() {
        let a = [
            "http://127.0.0.1:2".to_owned(),
            "http://127.0.0.1:1".to_owned(),
        ];
        let b = [
            "http://127.0.0.1:1".to_owned(),
            "http://127.0.0.1:2".to_owned(),
            "http://127.0.0.1:1".to_owned(),
        ];
        assert_eq!(registry_key(&a), registry_key(&b));
        assert_ne!(registry_key(&a[..1]), registry_key(&b));
    }
}
