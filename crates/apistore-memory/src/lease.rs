//! TTLs: an object written with a TTL is deleted once the key space's clock passes its
//! deadline, all expired objects at one revision, as etcd's lessor revokes a lease.
//!
//! kube-apiserver's lease manager shares leases between objects to spare etcd; here a
//! deadline per key costs nothing, so every object gets exactly its own TTL (etcd3
//! objects may live up to the reuse window longer). The deadlines are read on the
//! key space's [`Clock`](crate::Clock); a background task looks for expired ones every
//! [`KvConfig::lease_check_interval`](crate::KvConfig::lease_check_interval), and a
//! test on a manual clock can ask at once ([`MemoryKv::expire_leases`]).

use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use apistore_storage::{Result, StorageError};

use crate::kv::{MemoryKv, Shared};

/// The deadline of a TTL of `ttl` seconds from `now`; 0 is none.
pub(crate) fn deadline(key: &str, now: Duration, ttl: u64) -> Result<Option<Duration>> {
    if ttl == 0 {
        return Ok(None);
    }
    // etcd's lease TTLs are int64 seconds; anything larger is refused as there.
    if i64::try_from(ttl).is_err() {
        return Err(StorageError::bad_request(
            key,
            format!("ttl {ttl} is out of range"),
        ));
    }
    Ok(Some(now.saturating_add(Duration::from_secs(ttl))))
}

/// The background task that expires TTLs, started by the first write with one, and
/// again by a later one if the runtime it ran on has shut down since.
#[derive(Debug, Default)]
pub(crate) struct Reaper {
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Reaper {
    /// Starts the task unless it runs, on the current tokio runtime. Outside a runtime
    /// nothing starts; [`MemoryKv::expire_leases`] still works.
    pub(crate) fn ensure(&self, kv: &MemoryKv) {
        let mut task = self.task.lock().unwrap_or_else(PoisonError::into_inner);
        if task.as_ref().is_some_and(|task| !task.is_finished()) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared: Weak<Shared> = Arc::downgrade(&kv.shared);
        let interval = kv
            .shared
            .config
            .lease_check_interval
            .max(Duration::from_millis(1));
        *task = Some(runtime.spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                // The key space is gone once every store and handle of it is.
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                MemoryKv { shared }.expire_leases();
            }
        }));
    }
}
