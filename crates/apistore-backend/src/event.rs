//! A stored key-value change as a watcher sees it: what changed, and the typed watch
//! event it becomes.
//!
//! Follows `etcd3/event.go` (the change, and the 500 for a change without its previous
//! value) and `transform` of `etcd3/watcher.go` in k8s.io/apiserver v0.31.1: decoding
//! the current and previous objects and the predicate transitions (an update into the
//! selection is Added, one out of it Deleted). A backend turns its own events (etcd's
//! `mvccpb.Event`, the memory store's history) into a [`RawEvent`]; everything after
//! that is here.

use apistore_storage::{
    ApiObject, INITIAL_EVENTS_END_ANNOTATION, Result, SelectionPredicate, Status, StatusReason,
    StorageError, WatchEvent,
};
use bytes::Bytes;

use crate::object::{DecodeErrors, ObjectLayers};

/// What happened to a key, before decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// A put that created the key (or a key found by the initial sync).
    Created,
    /// A put to an existing key.
    Modified,
    /// A delete.
    Deleted,
}

impl Change {
    /// The change of a watch event that `deleted` or `created` its key (neither: a
    /// modification). A change other than a creation must come with the previous value
    /// (`has_prev`): without it the object that changed is unknown, which happens when
    /// compaction took the previous revision; that is an internal error naming the key.
    pub fn of(key: &str, rev: i64, deleted: bool, created: bool, has_prev: bool) -> Result<Self> {
        if !created && !has_prev {
            let type_name = if deleted { "DELETE" } else { "PUT" };
            return Err(StorageError::Internal {
                key: key.to_owned(),
                message: format!(
                    "etcd event received with PrevKv=nil (key={key:?}, modRevision={rev}, type={type_name})"
                ),
                source: None,
            });
        }
        Ok(if deleted {
            Self::Deleted
        } else if created {
            Self::Created
        } else {
            Self::Modified
        })
    }
}

/// One change of one key as the key-value store reported it (kube-apiserver's `event`).
#[derive(Debug, Clone)]
pub struct RawEvent {
    /// The stored key.
    pub key: String,
    /// The stored value after the change (empty for a delete).
    pub value: Bytes,
    /// The stored value before the change, when the store sent one.
    pub prev_value: Option<Bytes>,
    /// The revision of the change: the mod revision of the new value, or the revision
    /// of the delete.
    pub rev: i64,
    /// What the change did.
    pub change: Change,
}

impl RawEvent {
    /// A key-value found by the initial sync: a synthetic creation at its mod revision.
    pub fn initial(key: String, value: Bytes, mod_revision: i64) -> Self {
        Self {
            key,
            value,
            prev_value: None,
            rev: mod_revision,
            change: Change::Created,
        }
    }
}

impl<T, E> ObjectLayers<T, E>
where
    T: ApiObject + Default + 'static,
    E: DecodeErrors,
{
    /// The error a watch ends with when the value of a deleted object cannot be read:
    /// with kube's `AllowUnsafeMalformedObjectDeletion`, a 500 `StoreReadError` saying
    /// so (the object was most likely deleted unread on purpose); otherwise `err`.
    fn deleted_unreadable(&self, key: &str, err: StorageError) -> StorageError {
        let Some(corrupt) = err.corrupt_object() else {
            return err;
        };
        if self.unsafe_malformed_object_deletion().is_none() {
            return err;
        }
        StorageError::Api {
            key: key.to_owned(),
            status: Box::new(Status::failure(
                500,
                StatusReason::StoreReadError,
                format!("saw a DELETED event, but object data is corrupt - {corrupt}"),
            )),
        }
    }

    /// Turns a raw change into what a watcher with `predicate` sees, or nothing when the
    /// predicate filters it out (kube-apiserver's `transform`).
    ///
    /// The current object is decoded for every change but a delete; the previous one
    /// only for a delete or when the predicate selects less than everything (otherwise
    /// it cannot change the outcome). The previous object carries the revision of the
    /// change, so a Deleted event says when the object went away. Decode failures here
    /// are not counted ([`Self::decode_uncounted`]).
    pub fn watch_event(
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
            Some(self.decode_uncounted(&raw.key, &data, raw.rev)?)
        };
        let previous = match raw.prev_value {
            Some(prev) if !prev.is_empty() && (deleted || !accept_all) => {
                let previous = self
                    .transform_from_storage(&raw.key, prev)
                    .and_then(|(data, _)| self.decode_uncounted(&raw.key, &data, raw.rev));
                match previous {
                    Ok(previous) => Some(previous),
                    Err(err) if deleted => return Err(self.deleted_unreadable(&raw.key, err)),
                    Err(err) => return Err(err),
                }
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
                        // kube-apiserver's predicate fails on a missing object: filtered.
                        return Ok(None);
                    }
                    let message = format!(
                        "etcd delete event without a previous value (key={:?}, modRevision={})",
                        raw.key, raw.rev
                    );
                    return Err(StorageError::Internal {
                        key: raw.key,
                        message,
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

    /// A bookmark: an empty object of the watched type carrying only a resourceVersion
    /// (and, for the end of the initial events, kube-apiserver's annotation).
    pub fn bookmark(&self, rev: i64, initial_events_end: bool) -> WatchEvent<T> {
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
