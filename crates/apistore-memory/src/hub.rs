//! The watch hub of a store (shared by its clones): how many of its watches run, and
//! the progress requests they answer.
//!
//! Changes reach watches through the key space's revision ([`MemoryKv`] wakes every
//! waiting watch when it moves); each watch then reads the history from where it is,
//! at its own pace. A consumer that does not read holds up only its own watch, and one
//! that falls behind the bounded history gets 410 Expired, as a slow etcd watcher does
//! after a compaction.
//!
//! [`MemoryKv`]: crate::MemoryKv

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::watch;

/// The watches of one store.
#[derive(Debug)]
pub(crate) struct WatchHub {
    active: Arc<AtomicUsize>,
    /// Bumped by every progress request (kube's `RequestWatchProgress`).
    progress: watch::Sender<u64>,
}

impl Default for WatchHub {
    fn default() -> Self {
        Self {
            active: Arc::new(AtomicUsize::new(0)),
            progress: watch::channel(0).0,
        }
    }
}

impl WatchHub {
    /// Counts a watch as running until the returned guard drops.
    pub(crate) fn track(&self) -> ActiveWatch {
        self.active.fetch_add(1, Ordering::SeqCst);
        ActiveWatch {
            active: Arc::clone(&self.active),
        }
    }

    /// How many watches run.
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Asks every watch of the store for a bookmark at the current revision.
    pub(crate) fn request_progress(&self) {
        self.progress.send_modify(|requests| *requests += 1);
    }

    /// A receiver that changes with every progress request.
    pub(crate) fn progress_requests(&self) -> watch::Receiver<u64> {
        self.progress.subscribe()
    }
}

/// A running watch, counted until dropped.
#[derive(Debug)]
pub(crate) struct ActiveWatch {
    active: Arc<AtomicUsize>,
}

impl Drop for ActiveWatch {
    fn drop(&mut self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
    }
}
