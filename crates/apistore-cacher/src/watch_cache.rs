//! The watch cache proper (kube's `watch_cache.go`): the current objects by key, the
//! window of recent events, and the revision both reflect, behind one lock.
//!
//! The reflector feeds it (`replace` after a list, `process` per watch event,
//! `update_resource_version` per progress bookmark); reads and new watchers take
//! consistent views of it. Waiting for a revision does not hold the lock: the revision
//! is also published on a `watch` channel, and a reader waits there (at most
//! [`BLOCK_TIMEOUT`], kube's `blockTimeout`) before it locks.

use std::ops::Bound;
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use apistore_storage::{ApiObject, SelectionPredicate, StorageError};
use apistore_versioning::parse_resource_version;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::event::{CacheEvent, EventKind, has_path_prefix};
use crate::index::{CacheIndex, Indexes};
use crate::interval::Interval;
use crate::snapshots::Snapshots;
use crate::window::{EVENT_FRESH_DURATION, EventWindow, PushOutcome};

/// How long a read waits for the cache to reach its resourceVersion before it fails
/// with "Too large resource version" (kube's `blockTimeout`).
pub const BLOCK_TIMEOUT: Duration = Duration::from_secs(3);

/// The retry-after a too-large-resourceVersion answer suggests (kube's
/// `resourceVersionTooHighRetrySeconds`).
pub(crate) const RESOURCE_VERSION_TOO_HIGH_RETRY_SECONDS: u32 = 1;

/// How the cache keys an object (kube's `KeyFunc`); it must give the keys callers use.
pub type KeyFn<T> = Arc<dyn Fn(&T) -> String + Send + Sync>;

/// The current objects, keyed by the key function, in key order (so a namespace or a
/// resource is a range of keys). A persistent B+ tree: a clone is O(1) and shares its
/// nodes, which is what makes a snapshot per revision affordable (`snapshots.rs`) and
/// lets a list read a clone outside the lock.
pub(crate) type Objects<T> = imbl::OrdMap<Arc<str>, Arc<T>>;

/// Objects with their keys, in key order: what a list reads from the cache.
pub(crate) type Items<T> = Vec<(Arc<str>, Arc<T>)>;

/// Everything behind the cache's lock.
#[derive(Debug)]
pub(crate) struct CacheState<T> {
    pub(crate) store: Objects<T>,
    /// The keys of [`Self::store`] by indexed field and label values.
    pub(crate) indexes: Indexes,
    pub(crate) window: EventWindow<T>,
    /// The revision the cache reflects.
    pub(crate) resource_version: u64,
    /// The revision of the last list, 0 before the first.
    pub(crate) list_resource_version: u64,
    /// Whether events fell out of the window since that list.
    pub(crate) removed_event_since_relist: bool,
    /// The store at each revision the window covers (kube's `ListFromCacheSnapshot`).
    pub(crate) snapshots: Snapshots<T>,
}

impl<T> CacheState<T> {
    /// The oldest revision whose changes the window still holds (kube's `oldest` in
    /// `getAllEventsSinceLocked`); a watch may start at this minus one.
    pub(crate) fn oldest_watchable(&self) -> Option<u64> {
        if self.list_resource_version > 0 && !self.removed_event_since_relist {
            return Some(self.list_resource_version + 1);
        }
        self.window.oldest().map(|event| event.resource_version)
    }

    /// Drops the snapshots the window no longer covers: a list exactly at a revision
    /// a watch could no longer start from goes to the backend, as kube's does.
    fn trim_snapshots_to_window(&mut self) {
        if let Some(oldest) = self.oldest_watchable() {
            self.snapshots.trim(oldest.saturating_sub(1));
        }
    }
}

/// The objects of `store` under `prefix` (as a path prefix) from key `start` on (the
/// prefix itself, or a continue token's key), in key order.
pub(crate) fn range_from<'a, T>(
    store: &'a Objects<T>,
    prefix: &'a str,
    start: &'a str,
) -> impl Iterator<Item = (&'a Arc<str>, &'a Arc<T>)> + 'a {
    let start = if start < prefix { prefix } else { start };
    store
        .range::<_, str>((Bound::Included(start), Bound::Unbounded))
        .take_while(move |(key, _)| key.starts_with(prefix))
        .filter(move |(key, _)| has_path_prefix(key, prefix))
}

/// Why the window cannot serve a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IntervalError {
    /// The revision is older than the window (410).
    TooOld { requested: u64, oldest: u64 },
    /// Nothing was ever listed or seen.
    Uninitialized,
}

impl IntervalError {
    pub(crate) fn into_storage_error(self, key: &str) -> StorageError {
        match self {
            Self::TooOld { requested, oldest } => StorageError::Expired {
                key: key.to_owned(),
                message: format!("too old resource version: {requested} ({oldest})"),
                continue_token: None,
            },
            Self::Uninitialized => StorageError::Internal {
                key: key.to_owned(),
                message: "watch cache isn't correctly initialized".to_owned(),
                source: None,
            },
        }
    }
}

/// What a change did, for the caller's metrics and dispatch.
#[derive(Debug)]
pub(crate) struct Processed<T> {
    pub(crate) event: Arc<CacheEvent<T>>,
    pub(crate) window: PushOutcome,
}

/// The store, the window and the revision.
pub(crate) struct WatchCache<T> {
    state: RwLock<CacheState<T>>,
    revision: watch::Sender<u64>,
    key_fn: KeyFn<T>,
}

impl<T: ApiObject> WatchCache<T> {
    pub(crate) fn new(
        key_fn: KeyFn<T>,
        indexes: &[CacheIndex],
        lower_bound: usize,
        upper_bound: usize,
        snapshots: bool,
    ) -> Self {
        Self {
            state: RwLock::new(CacheState {
                store: Objects::new(),
                indexes: Indexes::new(indexes),
                window: EventWindow::new(lower_bound, upper_bound),
                resource_version: 0,
                list_resource_version: 0,
                removed_event_since_relist: false,
                snapshots: Snapshots::new(snapshots),
            }),
            revision: watch::Sender::new(0),
            key_fn,
        }
    }

    /// The state, for reading. A panic elsewhere while the lock was held cannot leave
    /// the state half-updated (every update is a few assignments), so poisoning is
    /// ignored.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, CacheState<T>> {
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, CacheState<T>> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn key_of(&self, object: &T) -> String {
        let key = (self.key_fn)(object);
        if key.starts_with('/') {
            key
        } else {
            format!("/{key}")
        }
    }

    /// The revision the cache reflects.
    pub(crate) fn resource_version(&self) -> u64 {
        *self.revision.borrow()
    }

    pub(crate) fn capacity(&self) -> usize {
        self.read().window.capacity()
    }

    /// Replaces everything with the result of a list at `resource_version` and
    /// forgets the window (kube's `Replace`).
    pub(crate) fn replace(&self, objects: Vec<T>, resource_version: u64) {
        let store: Objects<T> = objects
            .into_iter()
            .map(|object| (Arc::from(self.key_of(&object)), Arc::new(object)))
            .collect();
        {
            let mut state = self.write();
            let state = &mut *state;
            state.indexes.clear();
            if !state.indexes.is_empty() {
                for (key, object) in &store {
                    state.indexes.insert(key, &**object);
                }
            }
            state.snapshots.reset(resource_version, &store);
            state.store = store;
            state.window.clear();
            state.removed_event_since_relist = false;
            state.list_resource_version = resource_version;
            state.resource_version = resource_version;
        }
        self.revision.send_replace(resource_version);
    }

    /// Applies one change seen at `now` (kube's `processEvent`): the object's
    /// resourceVersion is the change's revision.
    pub(crate) fn process(
        &self,
        kind: EventKind,
        object: T,
        now: Instant,
    ) -> Result<Processed<T>, StorageError> {
        let key: Arc<str> = Arc::from(self.key_of(&object));
        let resource_version = parse_resource_version(object.resource_version())
            .map_err(|err| err.with_key(key.to_string()))?;
        let object = Arc::new(object);
        let processed = {
            let mut state = self.write();
            let state = &mut *state;
            let prev_object = match kind {
                EventKind::Deleted => state.store.remove(&key),
                EventKind::Added | EventKind::Modified => {
                    state.store.insert(Arc::clone(&key), Arc::clone(&object))
                }
            };
            if !state.indexes.is_empty() {
                if let Some(prev) = &prev_object {
                    state.indexes.remove(&key, &**prev);
                }
                if kind != EventKind::Deleted {
                    state.indexes.insert(&key, &*object);
                }
            }
            let event = Arc::new(CacheEvent {
                kind,
                key,
                object,
                prev_object,
                resource_version,
                record_time: now,
            });
            let window = state.window.push(Arc::clone(&event));
            state.snapshots.add(resource_version, &state.store);
            if window.dropped {
                state.removed_event_since_relist = true;
                state.trim_snapshots_to_window();
            }
            state.resource_version = resource_version;
            Processed { event, window }
        };
        self.revision.send_replace(resource_version);
        Ok(processed)
    }

    /// Moves the revision forward without a change (a progress bookmark, kube's
    /// `UpdateResourceVersion`).
    pub(crate) fn update_resource_version(&self, resource_version: u64) {
        {
            let mut state = self.write();
            if resource_version <= state.resource_version {
                return;
            }
            state.resource_version = resource_version;
        }
        self.revision.send_replace(resource_version);
    }

    /// Waits until the cache reflects `resource_version` (kube's
    /// `waitUntilFreshAndBlock`); 0 never waits. After [`BLOCK_TIMEOUT`], a
    /// too-large-resourceVersion error about `key`.
    pub(crate) async fn wait_until_fresh(
        &self,
        resource_version: u64,
        key: &str,
    ) -> Result<(), StorageError> {
        self.wait_until_fresh_for(resource_version, key, BLOCK_TIMEOUT)
            .await
    }

    pub(crate) async fn wait_until_fresh_for(
        &self,
        resource_version: u64,
        key: &str,
        timeout: Duration,
    ) -> Result<(), StorageError> {
        if resource_version == 0 {
            return Ok(());
        }
        let mut revision = self.revision.subscribe();
        let reached = tokio::time::timeout(
            timeout,
            revision.wait_for(|current| *current >= resource_version),
        )
        .await;
        match reached {
            Ok(Ok(_)) => Ok(()),
            _ => Err(StorageError::ResourceVersionTooLarge {
                key: key.to_owned(),
                requested: resource_version,
                current: self.resource_version(),
                retry_after_seconds: RESOURCE_VERSION_TOO_HIGH_RETRY_SECONDS,
            }),
        }
    }

    /// Forgets the window's events up to `resource_version`, as if the cache had been
    /// listed there: watches and exact lists from before it are refused (410) or go to
    /// the backend.
    pub(crate) fn forget_events_through(&self, resource_version: u64) {
        let mut state = self.write();
        state.window.forget_through(resource_version);
        state.snapshots.trim(resource_version);
        if state.removed_event_since_relist {
            // The window already lost events, perhaps later ones: only what it holds
            // can be served, which `oldest_watchable` then says.
            return;
        }
        state.list_resource_version = state.list_resource_version.max(resource_version);
    }

    /// Whether the cache has not reached `resource_version` yet (kube's `notFresh`).
    pub(crate) fn not_fresh(&self, resource_version: u64) -> bool {
        resource_version > self.resource_version()
    }

    /// The object under `key` and the revision it was read at.
    pub(crate) fn get(&self, key: &str) -> (Option<Arc<T>>, u64) {
        let state = self.read();
        (state.store.get(key).cloned(), state.resource_version)
    }

    /// The objects under `prefix` in key order and the revision they were read at.
    /// The store is cloned under the lock (O(1)) and read after it is released, so a
    /// long list does not hold up the reflector.
    pub(crate) fn list(&self, prefix: &str) -> (Items<T>, u64) {
        let (store, resource_version) = self.latest();
        let items = range_from(&store, prefix, prefix)
            .map(|(key, object)| (Arc::clone(key), Arc::clone(object)))
            .collect();
        (items, resource_version)
    }

    /// The whole store as it is now (an O(1) clone, read after the lock is released)
    /// and the revision it reflects.
    pub(crate) fn latest(&self) -> (Objects<T>, u64) {
        let state = self.read();
        (state.store.clone(), state.resource_version)
    }

    /// Like [`Self::list`], but from the index `predicate` pins to one value, if any:
    /// the objects under `prefix` that hold that value, the revision, and the index's
    /// name. `None` when no index applies.
    pub(crate) fn list_indexed(
        &self,
        prefix: &str,
        predicate: &SelectionPredicate,
    ) -> Option<(Items<T>, u64, String)> {
        let state = self.read();
        let found = state.indexes.lookup(predicate)?;
        let items = found
            .keys
            .into_iter()
            .flatten()
            .filter(|key| has_path_prefix(key, prefix))
            .filter_map(|key| Some((Arc::clone(key), Arc::clone(state.store.get(key)?))))
            .collect();
        Some((items, state.resource_version, found.name))
    }

    /// The store as it was at exactly `resource_version`, from the snapshots; `None`
    /// when snapshots are off, the cache has not reached that revision, or it is below
    /// what the window (or a compaction) left.
    pub(crate) fn snapshot_at(&self, resource_version: u64) -> Option<Objects<T>> {
        let state = self.read();
        if resource_version > state.resource_version {
            return None;
        }
        state.snapshots.at(resource_version)
    }

    /// Forgets the snapshots below `revision`, the backend's compacted revision (kube's
    /// cacher `compactor`): the backend refuses those revisions, so must the cache.
    pub(crate) fn compact(&self, revision: u64) {
        self.write().snapshots.trim(revision);
    }

    /// Turns snapshots on or off; off also forgets them (kube's `MarkConsistent`).
    pub(crate) fn set_snapshots_enabled(&self, enabled: bool) {
        self.write().snapshots.set_enabled(enabled);
    }

    /// Whether snapshots are being taken.
    pub(crate) fn snapshots_enabled(&self) -> bool {
        self.read().snapshots.enabled()
    }

    /// How many snapshots are held.
    pub(crate) fn snapshot_count(&self) -> usize {
        self.read().snapshots.len()
    }

    /// What a watch from `resource_version` under `key` starts with (kube's
    /// `getAllEventsSinceLocked`), computed under the given read guard so that the
    /// caller can register its watcher before any later event is applied.
    ///
    /// `initial_state` asks for the current objects as ADDED events (resourceVersion 0
    /// without `sendInitialEvents: false`, or `sendInitialEvents: true`): a snapshot of
    /// the store, cloned in O(1) and read after the lock is released (`interval.rs`);
    /// otherwise a 0 means "from now".
    pub(crate) fn interval(
        state: &CacheState<T>,
        resource_version: u64,
        key: &str,
        initial_state: bool,
    ) -> Result<Interval<T>, IntervalError> {
        if initial_state {
            return Ok(Interval::snapshot(
                state.store.clone(),
                key,
                state.resource_version,
            ));
        }
        let oldest = state
            .oldest_watchable()
            .ok_or(IntervalError::Uninitialized)?;
        let resource_version = if resource_version == 0 {
            state.resource_version
        } else {
            resource_version
        };
        if resource_version + 1 < oldest {
            return Err(IntervalError::TooOld {
                requested: resource_version,
                oldest: oldest - 1,
            });
        }
        Ok(Interval::events(state.window.since(resource_version)))
    }

    /// kube's `suggestedWatchChannelSize` without indexes: about one second of the
    /// window's history, between 10 and 100 events.
    pub(crate) fn suggested_watch_channel_size(&self) -> usize {
        suggested_watch_channel_size(self.capacity())
    }
}

pub(crate) fn suggested_watch_channel_size(capacity: usize) -> usize {
    let per_second = capacity.div_ceil(EVENT_FRESH_DURATION.as_secs() as usize);
    per_second.clamp(10, 100)
}

#[cfg(test)]
#[path = "watch_cache_tests.rs"]
mod tests;
