//! The read-only store: a [`Snapshot`] seen through a codec and a value transformer,
//! with the key preparation, get and count of the other stores, reads at past
//! revisions, and every write refused.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use apistore_backend::ObjectLayers;
use apistore_storage::{ApiObject, Codec, GetOptions, JsonCodec, Result, StorageError};
use apistore_value::{IdentityTransformer, Transformer};
use bytes::Bytes;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::SnapshotError;
use crate::key::{as_directory, path_prefix, prepare_key};
use crate::snapshot::{RevisionError, Snapshot};

/// etcd's words for a revision below the compacted one.
pub(crate) const COMPACTED: &str = "mvcc: required revision has been compacted";
/// etcd's words for a revision past the current one.
pub(crate) const FUTURE: &str = "mvcc: required revision is a future revision";

/// How a [`SnapshotStore`] finds its objects in the snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotStoreConfig {
    /// The prefix every key is stored under (default `/registry`).
    pub prefix: String,
}

impl Default for SnapshotStoreConfig {
    fn default() -> Self {
        Self {
            prefix: "/registry".to_owned(),
        }
    }
}

/// What happened at one revision of a key's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryEvent {
    /// The key was created (its first revision, or the first after a deletion).
    Added,
    /// The key was updated.
    Modified,
    /// The key was deleted.
    Deleted,
}

/// One revision of an object's history.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryEntry<T> {
    /// The revision.
    pub revision: i64,
    /// What happened.
    pub event: HistoryEvent,
    /// The object after the change; for a deletion, its last state (when the file
    /// still holds it) with the deletion's revision as resourceVersion.
    pub object: Option<T>,
}

/// A read-only [`Storage`](apistore_storage::Storage) of `T` objects over an etcd
/// snapshot. Cheap to clone: the snapshot and the layers are shared.
pub struct SnapshotStore<T> {
    pub(crate) snapshot: Arc<Snapshot>,
    pub(crate) layers: ObjectLayers<T>,
    pub(crate) path_prefix: Arc<str>,
    /// Index reads (gets and list pages), shared by clones.
    pub(crate) reads: Arc<AtomicU64>,
    /// The key, relative to the prefix, that `stats` covers (empty: the whole prefix).
    pub(crate) resource_prefix: Arc<str>,
    /// Whether `stats` reports sizes, shared by clones.
    pub(crate) size_estimation: Arc<AtomicBool>,
}

impl<T> Clone for SnapshotStore<T> {
    fn clone(&self) -> Self {
        Self {
            snapshot: Arc::clone(&self.snapshot),
            layers: self.layers.clone(),
            path_prefix: Arc::clone(&self.path_prefix),
            reads: Arc::clone(&self.reads),
            resource_prefix: Arc::clone(&self.resource_prefix),
            size_estimation: Arc::clone(&self.size_estimation),
        }
    }
}

impl<T> fmt::Debug for SnapshotStore<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SnapshotStore")
            .field("path", &self.snapshot.path())
            .field("path_prefix", &self.path_prefix)
            .field("transformer", self.layers.transformer())
            .finish_non_exhaustive()
    }
}

impl<T> SnapshotStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// A store of `T` objects in `snapshot` with the JSON codec and no encryption.
    pub fn new(snapshot: Arc<Snapshot>, config: SnapshotStoreConfig) -> Self
    where
        T: Serialize + DeserializeOwned,
    {
        Self::with_parts(
            snapshot,
            config,
            Arc::new(JsonCodec::<T>::new()),
            Arc::new(IdentityTransformer),
        )
    }

    /// A store with an explicit codec and value transformer, as the live cluster's.
    pub fn with_parts(
        snapshot: Arc<Snapshot>,
        config: SnapshotStoreConfig,
        codec: Arc<dyn Codec<T>>,
        transformer: Arc<dyn Transformer>,
    ) -> Self {
        Self {
            snapshot,
            layers: ObjectLayers::new(codec, transformer, ()),
            path_prefix: path_prefix(&config.prefix).into(),
            reads: Arc::new(AtomicU64::new(0)),
            resource_prefix: "".into(),
            size_estimation: Arc::default(),
        }
    }

    /// Counts reads in `counter` (builder style), so that stores over successive
    /// snapshots can share one count.
    pub fn with_read_counter(mut self, counter: Arc<AtomicU64>) -> Self {
        self.reads = counter;
        self
    }

    /// Scopes [`stats`](apistore_storage::Storage::stats) to the objects under
    /// `resource_prefix` (`/pods`; builder style), as a live store of one resource
    /// answers it. Without it, stats cover every key under the prefix.
    pub fn with_resource_prefix(mut self, resource_prefix: &str) -> Self {
        self.resource_prefix = resource_prefix.into();
        self
    }

    /// How many reads (gets and list pages: what the etcd3 store sends etcd as `get`
    /// and `list` requests) this store and its clones made.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    pub(crate) fn count_read(&self) {
        self.reads.fetch_add(1, Ordering::SeqCst);
    }

    /// The snapshot read.
    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    /// The value transformer.
    pub fn transformer(&self) -> &Arc<dyn Transformer> {
        self.layers.transformer()
    }

    /// The normalised path prefix every key is joined to (`/registry/`).
    pub fn path_prefix(&self) -> &str {
        &self.path_prefix
    }

    /// The stored key a caller's key maps to, after validation.
    pub fn prepare_key(&self, key: &str) -> Result<String> {
        prepare_key(&self.path_prefix, key)
    }

    /// The object under `key` as it was at revision `rev` (0: the current one), with
    /// the resourceVersion of that value: kube's get with an exact resourceVersion,
    /// which the contract's get has no option for. A revision compacted away is 410
    /// Expired, one past the snapshot a too-large-resourceVersion error.
    pub fn get_at(&self, key: &str, rev: i64) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        let rev = self.checked_revision(&prepared, rev)?;
        match self.snapshot.get(prepared.as_bytes(), rev) {
            Ok(Some(kv)) => self
                .layers
                .decode_stored(&prepared, kv.value, kv.mod_revision),
            Ok(None) => Err(StorageError::NotFound {
                key: prepared,
                resource_version: rev.unsigned_abs(),
            }),
            Err(err) => Err(internal(&prepared, err)),
        }
    }

    /// Every revision of the object under `key` the snapshot holds, oldest first:
    /// creations, updates and deletions, each decoded. History before the compacted
    /// revision is gone ([`Snapshot::compact_revision`] says where it ends).
    pub fn history(&self, key: &str) -> Result<Vec<HistoryEntry<T>>> {
        let prepared = self.prepare_key(key)?;
        let records = self
            .snapshot
            .history(prepared.as_bytes())
            .map_err(|err| internal(&prepared, err))?;
        let mut entries = Vec::with_capacity(records.len());
        let mut previous: Option<Bytes> = None;
        for record in records {
            let revision = record.revision.main;
            if record.tombstone {
                let object = match previous.take() {
                    Some(value) => Some(self.layers.decode_stored(&prepared, value, revision)?),
                    None => None,
                };
                entries.push(HistoryEntry {
                    revision,
                    event: HistoryEvent::Deleted,
                    object,
                });
                continue;
            }
            let event = if record.kv.create_revision == revision {
                HistoryEvent::Added
            } else {
                HistoryEvent::Modified
            };
            let object = self
                .layers
                .decode_stored(&prepared, record.kv.value.clone(), revision)?;
            previous = Some(record.kv.value);
            entries.push(HistoryEntry {
                revision,
                event,
                object: Some(object),
            });
        }
        Ok(entries)
    }

    /// `rev` (0: current) checked against the snapshot, as kube's errors for `key`.
    pub(crate) fn checked_revision(&self, key: &str, rev: i64) -> Result<i64> {
        self.snapshot.check_revision(rev).map_err(|err| match err {
            RevisionError::Compacted => StorageError::Expired {
                key: key.to_owned(),
                message: format!(
                    "etcd error: etcdserver: {COMPACTED} (compacted at {})",
                    self.snapshot.compact_revision()
                ),
                continue_token: None,
            },
            RevisionError::Future => StorageError::ResourceVersionTooLarge {
                key: key.to_owned(),
                requested: rev.unsigned_abs(),
                current: self.snapshot.revision().unsigned_abs(),
                retry_after_seconds: 0,
            },
        })
    }

    /// Get: the latest value, after the minimum-resourceVersion check.
    pub(crate) fn get_object(&self, key: &str, options: &GetOptions) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        self.count_read();
        let current = self.snapshot.revision();
        self.layers.validate_minimum_resource_version(
            &prepared,
            &options.resource_version,
            current,
        )?;
        match self.snapshot.get(prepared.as_bytes(), current) {
            Ok(Some(kv)) => self
                .layers
                .decode_stored(&prepared, kv.value, kv.mod_revision),
            Ok(None) if options.ignore_not_found => Ok(T::default()),
            Ok(None) => Err(StorageError::not_found(prepared)),
            Err(err) => Err(internal(&prepared, err)),
        }
    }

    /// Count: the keys under `key/` at the current revision.
    pub(crate) fn count_objects(&self, key: &str) -> Result<i64> {
        let prepared = as_directory(self.prepare_key(key)?);
        let current = self.snapshot.revision();
        let range = self
            .snapshot
            .range(prepared.as_bytes(), prepared.as_bytes(), 1, current)
            .map_err(|err| internal(&prepared, err))?;
        Ok(range.count)
    }

    /// The error of every write.
    pub(crate) fn read_only(&self, key: &str) -> StorageError {
        let key = self.prepare_key(key).unwrap_or_else(|_| key.to_owned());
        StorageError::bad_request(
            key,
            format!(
                "read-only: a snapshot ({}) cannot be written",
                self.snapshot.path().display()
            ),
        )
    }
}

/// A snapshot's error as the store reports it: internal, naming the key.
pub(crate) fn internal(key: &str, err: SnapshotError) -> StorageError {
    StorageError::internal(key, err.to_string(), Box::new(err))
}
