//! What a store knows of etcd's compactions: kube's `CompactRevision` (k8s.io/apiserver
//! v0.34+, `etcd3/compact.go`).
//!
//! Every [`EtcdClient`](crate::EtcdClient) (and its clones) keeps one
//! [`CompactionTracker`]: the highest revision it has seen compacted. It learns from
//! two sources, as kube's per-endpoint compactor does:
//!
//! - the compactors running on this client: the revision each compaction made, and the
//!   revision another compactor claimed when this one lost the race for
//!   [`COMPACT_REV_KEY`];
//! - from kube 1.34 (`ListFromCacheSnapshot`, beta and on by default), a watch of
//!   [`COMPACT_REV_KEY`] itself, so compactions made by any other server on the same
//!   etcd count too. The watch starts on a store's first [`compact_revision`] call at
//!   1.34 or later (that call may answer before the watch has read the key: ask again,
//!   as kube's callers poll), runs on the current tokio runtime, is re-established a
//!   second after it fails, and stops when the last clone of the client goes.
//!
//! [`compact_revision`]: apistore_storage::Storage::compact_revision

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};
use tokio::task::JoinHandle;

use crate::compactor::COMPACT_REV_KEY;

/// How long the watch of [`COMPACT_REV_KEY`] waits before it is made again after it
/// failed or ended (kube's one second).
const REWATCH_DELAY: Duration = Duration::from_secs(1);

/// The highest compacted revision a client has seen, and the watch that keeps it
/// current (see the module).
#[derive(Debug, Default)]
pub(crate) struct CompactionTracker {
    /// Shared with the watch task, which must not keep the tracker alive.
    revision: Arc<AtomicI64>,
    watch: Mutex<Option<JoinHandle<()>>>,
}

impl CompactionTracker {
    /// The highest compacted revision seen; 0 before the first.
    pub(crate) fn revision(&self) -> i64 {
        self.revision.load(Ordering::SeqCst)
    }

    /// Records a compaction at `revision` (revisions only move forward; 0 is none).
    #[cfg(test)]
    pub(crate) fn observe(&self, revision: i64) {
        observe(&self.revision, revision);
    }

    /// The counter a compactor task records into.
    pub(crate) fn handle(&self) -> Arc<AtomicI64> {
        Arc::clone(&self.revision)
    }

    /// Starts the watch of [`COMPACT_REV_KEY`] on `client` unless it runs already.
    /// Outside a tokio runtime nothing starts (the next call tries again).
    pub(crate) fn ensure_watching(&self, client: &Client) {
        let mut watch = self.watch.lock().unwrap_or_else(PoisonError::into_inner);
        if watch.is_some() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        *watch = Some(runtime.spawn(watch_loop(client.clone(), self.handle())));
    }

    /// Whether the watch of [`COMPACT_REV_KEY`] has been started.
    #[cfg(test)]
    pub(crate) fn is_watching(&self) -> bool {
        self.watch
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }
}

impl Drop for CompactionTracker {
    fn drop(&mut self) {
        let watch = self.watch.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(task) = watch.take() {
            task.abort();
        }
    }
}

fn observe(counter: &AtomicI64, revision: i64) {
    if revision > 0 {
        counter.fetch_max(revision, Ordering::SeqCst);
    }
}

/// Reads [`COMPACT_REV_KEY`], then watches it from the revision read at; again after
/// [`REWATCH_DELAY`] whenever that fails or ends.
async fn watch_loop(client: Client, revision: Arc<AtomicI64>) {
    loop {
        if let Err(err) = watch_once(&client, &revision).await {
            tracing::warn!(key = COMPACT_REV_KEY, error = %err, "etcd: watching the compacted revision failed");
        }
        tokio::time::sleep(REWATCH_DELAY).await;
    }
}

/// Why one round of [`watch_loop`] ended.
#[derive(Debug, thiserror::Error)]
enum WatchError {
    #[error("{0}")]
    Etcd(#[from] etcd_client::Error),
    #[error("its value {value:?} is not a revision")]
    NotARevision { value: String },
    #[error("etcd cancelled the watch: {0}")]
    Cancelled(String),
}

async fn watch_once(client: &Client, revision: &AtomicI64) -> Result<(), WatchError> {
    let mut kv = client.kv_client();
    let response = kv.get(COMPACT_REV_KEY, None).await?;
    let header_revision = response.header().map_or(0, |h| h.revision());
    if let Some(stored) = response.kvs().first() {
        observe(revision, parse_revision(stored.value())?);
    }
    let mut watch_client = client.watch_client();
    let options = WatchOptions::new().with_start_revision(header_revision.saturating_add(1));
    let mut stream = watch_client.watch(COMPACT_REV_KEY, Some(options)).await?;
    while let Some(message) = stream.message().await? {
        if message.canceled() {
            return Err(WatchError::Cancelled(message.cancel_reason().to_owned()));
        }
        // The last put of a response is the newest claim; deletions (by hand) say
        // nothing about compaction.
        let last = message
            .events()
            .iter()
            .rev()
            .filter(|event| event.event_type() == EventType::Put)
            .find_map(|event| event.kv());
        if let Some(kv) = last {
            observe(revision, parse_revision(kv.value())?);
        }
    }
    Ok(())
}

/// The value of [`COMPACT_REV_KEY`]: a decimal revision.
fn parse_revision(value: &[u8]) -> Result<i64, WatchError> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| WatchError::NotARevision {
            value: String::from_utf8_lossy(value).into_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_only_move_forward() {
        let tracker = CompactionTracker::default();
        assert_eq!(tracker.revision(), 0);
        tracker.observe(7);
        tracker.observe(3);
        tracker.observe(0);
        tracker.observe(-1);
        assert_eq!(tracker.revision(), 7);
        tracker.handle().fetch_max(9, Ordering::SeqCst);
        assert_eq!(tracker.revision(), 9);
    }

    #[test]
    fn the_key_holds_a_decimal_revision() {
        assert_eq!(parse_revision(b"42").ok(), Some(42));
        assert!(matches!(
            parse_revision(b"forty-two"),
            Err(WatchError::NotARevision { value }) if value == "forty-two"
        ));
        assert!(parse_revision(&[0xff, 0xfe]).is_err());
    }

    #[test]
    fn no_watch_starts_outside_a_runtime() {
        let tracker = CompactionTracker::default();
        assert!(!tracker.is_watching());
    }
}
