//! A read-only apistore backend over an etcd snapshot file or a member's data
//! directory: no etcd process, no network.
//!
//! An operator holding an etcd snapshot (`etcdctl snapshot save`, `etcdutl`) or a
//! member's `member/snap/db` reads it here as kube-apiserver's storage would have
//! served it: [`Snapshot`] opens the file (bbolt pages, read by our own reader in
//! [`bolt`]) and indexes etcd's revisions ([`mvcc`]); [`SnapshotStore`] is a
//! [`Storage`] over it with the codec and value transformer the cluster uses, so
//! encrypted and protobuf values read as online.
//!
//! - **get** at the snapshot's last revision, and [`SnapshotStore::get_at`] any
//!   revision the file still holds;
//! - **list** with selectors, limits, continue tokens (`apistore-versioning`'s) and
//!   Exact or NotOlderThan resourceVersions, through `apistore-backend`'s list loop;
//! - **count**, and [`SnapshotStore::history`]: every revision of a key;
//! - **watch**: a replay from a resourceVersion to the end of the file, then the
//!   stream ends;
//! - **writes** fail with a bad request: `read-only: a snapshot (FILE) cannot be
//!   written`.
//!
//! A damaged file is a [`SnapshotError`] naming the page and byte offset (as an
//! internal [`StorageError`](apistore_storage::StorageError) from the store), never a
//! panic or a loop. The file must not change while it is read: open a copy of a live
//! member's `db`, not the file etcd is writing.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use apistore_snapshot::{Snapshot, SnapshotStore, SnapshotStoreConfig};
//! use apistore_storage::{DynamicObject, GetOptions, Storage};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let snapshot = Arc::new(Snapshot::open("backup.db")?);
//! let store: SnapshotStore<DynamicObject> =
//!     SnapshotStore::new(snapshot, SnapshotStoreConfig::default());
//! let cm = store.get("configmaps/default/cm1", &GetOptions::default()).await?;
//! let earlier = store.get_at("configmaps/default/cm1", 42)?;
//! # let _ = (cm, earlier);
//! # Ok(())
//! # }
//! ```

pub mod bolt;
mod error;
mod index;
mod key;
mod list;
pub mod mvcc;
mod snapshot;
mod stats;
mod store;
mod watch;

use apistore_storage::{
    ApiObject, DeleteOptions, GetOptions, KeysFn, ListOptions, ObjectList, ResponseMeta, Result,
    Stats, Storage, Update, UpdateOptions, Versioner, WatchStream,
};

pub use error::SnapshotError;
pub use snapshot::{IndexedRevision, Range, Record, RevisionError, Snapshot};
pub use store::{HistoryEntry, HistoryEvent, SnapshotStore, SnapshotStoreConfig};

impl<T> Storage for SnapshotStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    type Object = T;

    fn versioner(&self) -> &dyn Versioner {
        self.layers.versioner()
    }

    async fn create(&self, key: &str, _object: T, _ttl: u64) -> Result<T> {
        Err(self.read_only(key))
    }

    async fn get(&self, key: &str, options: &GetOptions) -> Result<T> {
        self.get_object(key, options)
    }

    async fn delete(&self, key: &str, _options: DeleteOptions<T>) -> Result<T> {
        Err(self.read_only(key))
    }

    async fn guaranteed_update<F>(
        &self,
        key: &str,
        _options: UpdateOptions<T>,
        _try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
    {
        Err(self.read_only(key))
    }

    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<T>> {
        self.list_objects(key, options)
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<T>> {
        self.watch_objects(key, options)
    }

    async fn count(&self, key: &str) -> Result<i64> {
        self.count_objects(key)
    }

    async fn readiness_check(&self) -> Result<()> {
        Ok(())
    }

    async fn request_watch_progress(&self) -> Result<()> {
        // Nothing ever changes: a replay has nothing to report progress on.
        Ok(())
    }

    async fn get_current_resource_version(&self) -> Result<u64> {
        self.file_revision()
    }

    async fn stats(&self) -> Result<Stats> {
        self.file_stats()
    }

    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()> {
        self.enable_size_estimation(keys)
    }

    fn compact_revision(&self) -> i64 {
        self.snapshot.compact_revision()
    }
}
