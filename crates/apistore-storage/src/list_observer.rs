//! The hook a watch cache reports the lists it served through, so that the storage
//! metrics that count them (apistore-telemetry) and the cache (apistore-cacher) need not
//! know each other.
//!
//! kube 1.37's cacher counts every list it serves in the storage layer's list families
//! as well as its own (`RecordListCacheMetrics` into `apiserver_storage_list_*` with
//! `storage="watchcache"`), so that one set of series shows every list whichever storage
//! served it.

/// Receives every list a watch cache served.
pub trait CachedListObserver: Send + Sync + std::fmt::Debug {
    /// One list of `group_resource` (`pods`, `deployments.apps`) served from the cache:
    /// the index it read from (`f:spec.nodeName`, `l:app`; empty for none), the objects
    /// it took from the cache and the objects it returned.
    fn cached_list(&self, group_resource: &str, index: &str, fetched: usize, returned: usize);
}
