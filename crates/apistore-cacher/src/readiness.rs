//! Waiting for watch caches to be ready without blocking their creation: what a
//! server built on apistore needs for kube's `storage-readiness` post-start hook
//! (`WatchCacheInitializationPostStartHook`: beta and off in kube 1.31–1.35, on in 1.36,
//! GA in 1.37; `pkg/server/storage_readiness_hook.go`).
//!
//! kube creates every cacher at once and lets them list in the background; meanwhile
//! each answers as `ready.rs` says (gets and unfiltered paged lists from etcd, other
//! lists and watches 429 "storage is (re)initializing"). With the hook on, the server
//! does not report ready (`/readyz`) until every registered storage is ready, polling
//! every 100 ms for at most `StorageInitializationTimeout` (1 minute by default), and
//! then starts anyway with a warning. A [`Readiness`] is one cacher's part of that: a
//! handle that can be kept in a list of every cache the server made, checked, and
//! waited on with a deadline, without keeping the cacher alive.

use std::time::Duration;

use apistore_storage::{Result, StorageError};
use tokio::sync::watch;

use crate::ready::{ReadyState, is_ready, wait_ready};

/// kube's default `StorageInitializationTimeout`: how long its `storage-readiness`
/// hook waits for the caches before the server starts anyway.
pub const DEFAULT_STORAGE_INITIALIZATION_TIMEOUT: Duration = Duration::from_secs(60);

/// The readiness of one cacher, apart from the cacher (see the module docs; from
/// [`Cacher::readiness`](crate::Cacher::readiness)). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Readiness {
    resource: String,
    state: watch::Receiver<ReadyState>,
}

impl Readiness {
    pub(crate) fn new(resource: String, state: watch::Receiver<ReadyState>) -> Self {
        Self { resource, state }
    }

    /// The cached resource's group-resource string (`pods`, `deployments.apps`).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// Whether the cache holds a complete list and is following the backend (kube's
    /// `ReadinessCheck` of the cacher). A dropped cacher is not ready.
    pub fn is_ready(&self) -> bool {
        is_ready(&self.state)
    }

    /// Waits until the cache is ready, for at most `timeout`.
    ///
    /// # Errors
    ///
    /// A timeout error about the resource when it is not ready by then; an internal
    /// error when the cacher stopped (was dropped) instead.
    pub async fn wait(&self, timeout: Duration) -> Result<()> {
        match tokio::time::timeout(timeout, wait_ready(self.state.clone())).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(StorageError::Internal {
                key: self.resource.clone(),
                message: "watch cache stopped".to_owned(),
                source: None,
            }),
            Err(_) => Err(StorageError::Timeout {
                key: self.resource.clone(),
                message: format!("watch cache not initialized within {timeout:?}"),
            }),
        }
    }
}

/// Waits for every cache in `caches` to be ready, together, for at most `timeout`
/// (kube's `storage-readiness` hook), and returns the resources that were not ready
/// by then, in the order given; empty when all were. As kube's hook, it never fails:
/// a server may start with caches still initializing, which answer 429 meanwhile.
pub async fn wait_all_ready<'a>(
    caches: impl IntoIterator<Item = &'a Readiness>,
    timeout: Duration,
) -> Vec<String> {
    // A timeout too long to add (`Duration::MAX`) waits as long as it may.
    let now = tokio::time::Instant::now();
    let deadline = now
        .checked_add(timeout)
        .unwrap_or_else(|| now + Duration::from_secs(u64::from(u32::MAX)));
    let mut not_ready = Vec::new();
    // One after the other against the one deadline: all are done by it, and no task
    // is spawned per cache.
    for cache in caches {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if cache.wait(left).await.is_err() {
            not_ready.push(cache.resource.clone());
        }
    }
    not_ready
}
