//! The watch state a store and its clones share: the shared watch stream, the
//! `WatchList` gate, how long a watch waits for etcd to come back, and the initial
//! sync's paging (a test seam). Below the store and the watcher, which both use it.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use crate::endpoints::Members;
use crate::watch_mux::WatchHub;

/// [`StoreConfig::watch_unavailable_limit`](crate::StoreConfig::watch_unavailable_limit)
/// by default.
pub const DEFAULT_WATCH_UNAVAILABLE_LIMIT: Duration = Duration::from_secs(30);

/// The page size of the initial sync of a recursive watch (the reference's `maxLimit`).
pub(crate) const SYNC_PAGE_SIZE: i64 = 10_000;

/// Called after each page the initial sync of a recursive watch reads, with the page's
/// index: a test seam, standing in for the reference's wrapped etcd client.
pub type SyncPageHook = Arc<dyn Fn(usize) -> BoxFuture<'static, ()> + Send + Sync>;

/// The watch state a store and its clones share.
#[derive(Clone)]
pub(crate) struct WatchSettings {
    pub(crate) hub: Arc<WatchHub>,
    pub(crate) watch_list: bool,
    pub(crate) sync_page_size: i64,
    pub(crate) after_sync_page: Option<SyncPageHook>,
}

impl WatchSettings {
    pub(crate) fn new(
        members: &Arc<Members>,
        watch_list: bool,
        unavailable_limit: Duration,
    ) -> Self {
        Self {
            hub: Arc::new(WatchHub::new(Arc::clone(members), unavailable_limit)),
            watch_list,
            sync_page_size: SYNC_PAGE_SIZE,
            after_sync_page: None,
        }
    }
}

impl std::fmt::Debug for WatchSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchSettings")
            .field("watch_list", &self.watch_list)
            .field("sync_page_size", &self.sync_page_size)
            .finish_non_exhaustive()
    }
}
