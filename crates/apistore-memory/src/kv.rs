//! [`MemoryKv`]: the in-memory key space every [`MemoryStore`](crate::MemoryStore) made
//! from it shares, as the stores of one API server share one etcd: one revision across
//! resources, one history, one compaction.
//!
//! Besides the stores' own operations it offers what a test reaches around a store for:
//! the stored bytes of a key, writes that bypass the store, compaction, and the
//! current and compacted revisions.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use apistore_storage::{Result, StorageError};
use bytes::Bytes;
use tokio::sync::watch;

use crate::clock::{Clock, SystemClock};
use crate::lease::Reaper;
use crate::mvcc::{Mvcc, RevisionError};

/// etcd's words for a revision below the compacted one.
pub(crate) const COMPACTED: &str = "mvcc: required revision has been compacted";
/// etcd's words for a revision past the current one.
pub(crate) const FUTURE: &str = "mvcc: required revision is a future revision";

/// How a [`MemoryKv`] keeps its history and times its notifications.
#[derive(Debug, Clone)]
pub struct KvConfig {
    /// The most revisions kept; older ones are compacted away as new ones come, as a
    /// compactor would (reads and watches below them get 410 Expired). 0 keeps every
    /// revision until [`MemoryKv::compact`]. Default 10,000.
    pub history_limit: u64,
    /// How often a watch that asked for progress notifications and saw no event gets a
    /// bookmark (etcd's `--experimental-watch-progress-notify-interval`, 10 minutes by
    /// default there and here).
    pub progress_notify_interval: Duration,
    /// How often expired TTLs are looked for on the real clock (etcd's lessor checks
    /// every 500 ms). Default 100 ms.
    pub lease_check_interval: Duration,
}

impl Default for KvConfig {
    fn default() -> Self {
        Self {
            history_limit: 10_000,
            progress_notify_interval: Duration::from_secs(600),
            lease_check_interval: Duration::from_millis(100),
        }
    }
}

pub(crate) struct Shared {
    mvcc: RwLock<Mvcc>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) config: KvConfig,
    /// The current revision, for watches to wait on.
    revision: watch::Sender<i64>,
    reaper: Reaper,
    /// The resource directories (`/registry/pods/`) whose stores estimate sizes.
    pub(crate) size_estimation: Mutex<HashSet<String>>,
}

/// An in-memory key space with etcd's semantics. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct MemoryKv {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for MemoryKv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryKv")
            .field("revision", &self.revision())
            .field("compacted", &self.compacted_revision())
            .field("clock", &self.shared.clock)
            .finish_non_exhaustive()
    }
}

impl Default for MemoryKv {
    fn default() -> Self {
        Self::new(KvConfig::default())
    }
}

impl MemoryKv {
    /// An empty key space at revision 1, on the system clock.
    pub fn new(config: KvConfig) -> Self {
        Self::with_clock(config, Arc::new(SystemClock::new()))
    }

    /// An empty key space whose TTLs run on `clock` (a [`ManualClock`](crate::ManualClock)
    /// in tests).
    pub fn with_clock(config: KvConfig, clock: Arc<dyn Clock>) -> Self {
        let (revision, _) = watch::channel(1);
        Self {
            shared: Arc::new(Shared {
                mvcc: RwLock::new(Mvcc::new(config.history_limit)),
                clock,
                config,
                revision,
                reaper: Reaper::default(),
                size_estimation: Mutex::default(),
            }),
        }
    }

    /// The current revision.
    pub fn revision(&self) -> i64 {
        self.read().revision()
    }

    /// The revision the history was last compacted at (0: never).
    pub fn compacted_revision(&self) -> i64 {
        self.read().compacted()
    }

    /// The bytes stored under a key (prefix included), bypassing every store.
    pub fn raw_get(&self, key: &str) -> Option<Bytes> {
        self.read().get(key).map(|kv| kv.value)
    }

    /// Stores bytes under a key (prefix included), bypassing every store: no codec, no
    /// transformer. Returns the new revision. Watches see it as any write.
    pub fn raw_put(&self, key: &str, value: impl Into<Bytes>) -> i64 {
        self.write(|mvcc| mvcc.put_unconditionally(key, value.into()))
    }

    /// Forgets the history before `revision` (etcd's compaction): reads and watches
    /// below it then fail with 410 Expired. Compacting at or below the last compaction,
    /// or past the current revision, is refused with etcd's words.
    pub fn compact(&self, revision: i64) -> Result<()> {
        self.write(|mvcc| mvcc.compact(revision))
            .map_err(|err| revision_error("compact", err))
    }

    /// Deletes every object whose TTL has run out on the store's clock, now; returns
    /// whether any did. A background task does this every
    /// [`KvConfig::lease_check_interval`]; a test on a manual clock may call it right
    /// after moving the clock.
    pub fn expire_leases(&self) -> bool {
        let now = self.shared.clock.now();
        let expired = self.write(|mvcc| mvcc.expire(now));
        expired.is_some()
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Mvcc> {
        self.shared
            .mvcc
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs a write and wakes the watches if the revision moved.
    pub(crate) fn write<R>(&self, change: impl FnOnce(&mut Mvcc) -> R) -> R {
        let (result, revision) = {
            let mut mvcc: RwLockWriteGuard<'_, Mvcc> = self
                .shared
                .mvcc
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            let result = change(&mut mvcc);
            (result, mvcc.revision())
        };
        self.shared.revision.send_if_modified(|current| {
            let moved = *current != revision;
            *current = revision;
            moved
        });
        result
    }

    /// A receiver that changes whenever the revision moves.
    pub(crate) fn subscribe(&self) -> watch::Receiver<i64> {
        self.shared.revision.subscribe()
    }

    /// Makes sure expired TTLs are looked for in the background.
    pub(crate) fn ensure_reaper(&self) {
        self.shared.reaper.ensure(self);
    }
}

/// A revision error as the etcd3 store reports an etcd error of the same kind.
pub(crate) fn revision_error(key: &str, err: RevisionError) -> StorageError {
    let message = match err {
        RevisionError::Compacted => COMPACTED,
        RevisionError::Future => FUTURE,
    };
    StorageError::Internal {
        key: key.to_owned(),
        message: format!("etcd error: etcdserver: {message}"),
        source: None,
    }
}
