//! The in-memory store's answers about its resource as a whole: `Stats`,
//! `GetCurrentResourceVersion`, `EnableResourceSizeEstimation` and `CompactRevision`
//! (k8s.io/apiserver v0.37 `etcd3/store.go`).
//!
//! The key space holds every value, so nothing needs estimating: once size estimation
//! is enabled, the average is the exact average of the stored values (what the etcd3
//! store's estimate settles on after a list of everything). As from kube 1.35, it is on
//! only when asked for; the keys function handed over is not needed and not called.
//! The compacted revision is the key space's own: every compaction, by whoever made
//! it, as the etcd3 store sees from kube 1.34 on.

use std::sync::PoisonError;

use apistore_storage::{ApiObject, KeysFn, Result, Stats, StorageError};

use crate::mvcc::Keys;
use crate::store::MemoryStore;

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// The stored key of the resource prefix as a directory (`/registry/pods/`).
    fn resource_directory(&self) -> Result<String> {
        self.scope.resource_directory()
    }

    fn estimates_sizes(&self, directory: &str) -> bool {
        self.kv
            .shared
            .size_estimation
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(directory)
    }

    /// `Stats`: the live keys under the resource prefix and, with size estimation on,
    /// the average size of their stored values.
    pub(crate) fn resource_stats(&self) -> Result<Stats> {
        let directory = self.resource_directory()?;
        let keys = Keys::Prefix {
            start: &directory,
            prefix: &directory,
        };
        let range = self
            .kv
            .read()
            .range(&keys, 0, 0)
            .map_err(|err| crate::kv::revision_error(&directory, err))?;
        let mut stats = Stats {
            object_count: range.count,
            estimated_average_object_size_bytes: 0,
        };
        if self.estimates_sizes(&directory) && range.count > 0 {
            let total = range.kvs.iter().fold(0i64, |sum, kv| {
                sum.saturating_add(i64::try_from(kv.value.len()).unwrap_or(i64::MAX))
            });
            stats.estimated_average_object_size_bytes = total / range.count;
        }
        Ok(stats)
    }

    /// `EnableResourceSizeEstimation`: fails when it is on already for this resource in
    /// this key space.
    pub(crate) fn enable_size_estimation(&self, _keys: KeysFn) -> Result<()> {
        let directory = self.resource_directory()?;
        let mut enabled = self
            .kv
            .shared
            .size_estimation
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if enabled.contains(&directory) {
            return Err(StorageError::Internal {
                key: directory,
                message: "resource size estimation is already enabled".to_owned(),
                source: None,
            });
        }
        enabled.insert(directory);
        Ok(())
    }

    /// `GetCurrentResourceVersion`: the key space's revision.
    pub(crate) fn current_resource_version(&self) -> Result<u64> {
        // A fresh key space is at revision 1, so this is never 0.
        Ok(self.kv.revision().max(1).unsigned_abs())
    }
}
