//! History events and initial-sync key-values, and how they become typed watch events:
//! the etcd3 store's rules (kube-apiserver's `transform` and `prepareObjs` in
//! `etcd3/watcher.go`), including the predicate transitions (an update into the
//! selection is Added, out of it Deleted) and the 500 for a change whose previous
//! value compaction took.

use apistore_storage::{
    ApiObject, INITIAL_EVENTS_END_ANNOTATION, Result, SelectionPredicate, StorageError, WatchEvent,
};
use bytes::Bytes;

use crate::mvcc::{Event, EventKind, KeyValue};
use crate::store::MemoryStore;

/// What happened to a key, before decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    Created,
    Modified,
    Deleted,
}

/// One change of one key (kube-apiserver's `event`).
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    pub(crate) key: String,
    pub(crate) value: Bytes,
    pub(crate) prev_value: Option<Bytes>,
    pub(crate) rev: i64,
    pub(crate) change: Change,
}

impl RawEvent {
    /// A key-value found by the initial sync: a synthetic creation at its mod revision.
    pub(crate) fn from_kv(kv: KeyValue) -> Self {
        Self {
            rev: kv.mod_revision,
            key: kv.key,
            value: kv.value,
            prev_value: None,
            change: Change::Created,
        }
    }

    /// A history event. A change other than a creation must carry the previous value:
    /// without it (compacted away) the object that changed is unknown.
    pub(crate) fn from_history(event: Event) -> Result<Self> {
        let deleted = event.kind == EventKind::Delete;
        let created = event.is_create();
        let rev = event.revision();
        if !created && event.prev_value.is_none() {
            let type_name = if deleted { "DELETE" } else { "PUT" };
            return Err(StorageError::Internal {
                message: format!(
                    "etcd event received with PrevKv=nil (key={:?}, modRevision={rev}, type={type_name})",
                    event.kv.key
                ),
                key: event.kv.key,
                source: None,
            });
        }
        Ok(Self {
            key: event.kv.key,
            value: event.kv.value,
            prev_value: event.prev_value,
            rev,
            change: if deleted {
                Change::Deleted
            } else if created {
                Change::Created
            } else {
                Change::Modified
            },
        })
    }
}

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Turns a raw change into what a watcher with `predicate` sees, or nothing when the
    /// predicate filters it out. The previous object (decoded only for a delete or a
    /// selective predicate) carries the revision of the change.
    pub(crate) fn watch_event_for(
        &self,
        raw: RawEvent,
        predicate: &SelectionPredicate,
    ) -> Result<Option<WatchEvent<T>>> {
        let accept_all = predicate.is_empty();
        let deleted = raw.change == Change::Deleted;
        let current = if deleted {
            None
        } else {
            let (data, _) = self.transform_from_storage(&raw.key, raw.value)?;
            Some(self.decode(&raw.key, &data, raw.rev)?)
        };
        let previous = match raw.prev_value {
            Some(prev) if !prev.is_empty() && (deleted || !accept_all) => {
                let (data, _) = self.transform_from_storage(&raw.key, prev)?;
                Some(self.decode(&raw.key, &data, raw.rev)?)
            }
            _ => None,
        };
        let passes = |object: &Option<T>| {
            object
                .as_ref()
                .is_some_and(|object| accept_all || predicate.matches(object))
        };
        Ok(match raw.change {
            Change::Deleted => {
                let Some(previous) = previous else {
                    if !accept_all {
                        return Ok(None);
                    }
                    return Err(StorageError::Internal {
                        message: format!(
                            "etcd delete event without a previous value (key={:?}, modRevision={})",
                            raw.key, raw.rev
                        ),
                        key: raw.key,
                        source: None,
                    });
                };
                (accept_all || predicate.matches(&previous))
                    .then_some(WatchEvent::Deleted(previous))
            }
            Change::Created => current
                .filter(|current| accept_all || predicate.matches(current))
                .map(WatchEvent::Added),
            Change::Modified if accept_all => current.map(WatchEvent::Modified),
            Change::Modified => match (passes(&current), passes(&previous)) {
                (true, true) => current.map(WatchEvent::Modified),
                (true, false) => current.map(WatchEvent::Added),
                (false, true) => previous.map(WatchEvent::Deleted),
                (false, false) => None,
            },
        })
    }

    /// A bookmark: an empty object carrying only a resourceVersion (and, for the end of
    /// the initial events, kube-apiserver's annotation).
    pub(crate) fn bookmark(&self, rev: i64, initial_events_end: bool) -> WatchEvent<T> {
        let mut object = T::default();
        self.set_revision(&mut object, rev);
        if initial_events_end {
            object
                .annotations_mut()
                .insert(INITIAL_EVENTS_END_ANNOTATION.to_owned(), "true".to_owned());
        }
        WatchEvent::Bookmark(object)
    }
}
