//! The snapshot store's answers about the file as a whole: `Stats`,
//! `GetCurrentResourceVersion`, `EnableResourceSizeEstimation` and `CompactRevision`
//! (k8s.io/apiserver v0.37 `etcd3/store.go`), read from the file: its current revision,
//! its compacted revision (`finishedCompactRev`, or a compaction scheduled after it),
//! and, once size estimation is enabled, the exact average size of the stored values
//! (the file holds them all; the keys function handed over is not needed).

use std::sync::atomic::Ordering;

use apistore_storage::{ApiObject, KeysFn, Result, Stats, StorageError};

use crate::key::as_directory;
use crate::store::{SnapshotStore, internal};

impl<T> SnapshotStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// The directory `stats` covers: the resource prefix's, or the whole prefix.
    fn stats_directory(&self) -> Result<String> {
        if self.resource_prefix.is_empty() {
            return Ok(self.path_prefix.to_string());
        }
        Ok(as_directory(self.prepare_key(&self.resource_prefix)?))
    }

    /// `Stats`: the keys live at the file's revision and, with size estimation on, the
    /// average size of their values.
    pub(crate) fn file_stats(&self) -> Result<Stats> {
        let directory = self.stats_directory()?;
        let current = self.snapshot.revision();
        let range = self
            .snapshot
            .range(directory.as_bytes(), directory.as_bytes(), 0, current)
            .map_err(|err| internal(&directory, err))?;
        let mut stats = Stats {
            object_count: range.count,
            estimated_average_object_size_bytes: 0,
        };
        if !self.size_estimation.load(Ordering::SeqCst) || range.count == 0 {
            return Ok(stats);
        }
        let mut total = 0i64;
        for (key, _) in &range.keys {
            let value = self
                .snapshot
                .get(key, current)
                .map_err(|err| internal(&String::from_utf8_lossy(key), err))?;
            let size = value.map_or(0, |kv| kv.value.len());
            total = total.saturating_add(i64::try_from(size).unwrap_or(i64::MAX));
        }
        stats.estimated_average_object_size_bytes = total / range.count;
        Ok(stats)
    }

    /// `EnableResourceSizeEstimation`: fails when it is on already.
    pub(crate) fn enable_size_estimation(&self, _keys: KeysFn) -> Result<()> {
        if self.size_estimation.swap(true, Ordering::SeqCst) {
            return Err(StorageError::Internal {
                key: self.stats_directory().unwrap_or_default(),
                message: "resource size estimation is already enabled".to_owned(),
                source: None,
            });
        }
        Ok(())
    }

    /// `GetCurrentResourceVersion`: the file's current revision (its last write, or a
    /// later compaction).
    pub(crate) fn file_revision(&self) -> Result<u64> {
        let revision = self.snapshot.revision();
        match u64::try_from(revision) {
            Ok(revision) if revision > 0 => Ok(revision),
            _ => Err(StorageError::Internal {
                key: self.path_prefix.to_string(),
                message: format!(
                    "the snapshot {} has no revision ({revision})",
                    self.snapshot.path().display()
                ),
                source: None,
            }),
        }
    }
}
