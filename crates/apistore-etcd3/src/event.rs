//! etcd watch events and initial-sync key-values, and how they become typed watch events.
//!
//! Follows `etcd3/event.go` (parsing) and `transform`/`prepareObjs` of
//! `etcd3/watcher.go` (decoding and the predicate transitions) in k8s.io/apiserver
//! v0.31.1.

use apistore_storage::{ApiObject, INITIAL_EVENTS_END_ANNOTATION, Result, WatchEvent};
use bytes::Bytes;
use etcd_client::KeyValue;

use crate::error::internal;
use crate::store::Etcd3Store;

/// What happened to a key, before decoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Change {
    /// A put that created the key (or a key found by the initial sync).
    Created,
    /// A put to an existing key.
    Modified,
    /// A delete.
    Deleted,
}

/// One change of one key as etcd reported it (kube-apiserver's `event`).
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    pub(crate) key: String,
    /// The stored value after the change (empty for a delete).
    pub(crate) value: Bytes,
    /// The stored value before the change, when etcd sent one.
    pub(crate) prev_value: Option<Bytes>,
    /// The revision of the change: the mod revision of the new value, or the revision
    /// of the delete.
    pub(crate) rev: i64,
    pub(crate) change: Change,
}

impl RawEvent {
    /// A key-value found by the initial sync: a synthetic creation at its mod revision.
    pub(crate) fn from_kv(kv: KeyValue) -> Self {
        let rev = kv.mod_revision();
        let (key, value) = kv.into_key_value();
        Self {
            key: String::from_utf8_lossy(&key).into_owned(),
            value: Bytes::from(value),
            prev_value: None,
            rev,
            change: Change::Created,
        }
    }

    /// An event of an etcd watch. A change other than a creation must carry the previous
    /// value (the watch asks for it): without it the object that changed is unknown,
    /// which happens when the previous revision was compacted away.
    pub(crate) fn from_etcd(event: &etcd_client::Event) -> Result<Self> {
        let Some(kv) = event.kv() else {
            return Err(internal("", "etcd event received without a key-value"));
        };
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        // A delete is told by its key-value, as etcd itself decides an event's type
        // (`watchableStoreTxnWrite.End` in etcd's mvcc: a change without a create
        // revision is a DELETE). etcd-client's `event_type()` panics on a type number
        // it does not know, so the wire's type field is not consulted.
        let deleted = kv.create_revision() == 0;
        let created = !deleted && kv.create_revision() == kv.mod_revision();
        let prev_value = event
            .prev_kv()
            .map(|prev| Bytes::copy_from_slice(prev.value()));
        if !created && prev_value.is_none() {
            let type_name = if deleted { "DELETE" } else { "PUT" };
            let message = format!(
                "etcd event received with PrevKv=nil (key={key:?}, modRevision={}, type={type_name})",
                kv.mod_revision()
            );
            return Err(internal(key, message));
        }
        Ok(Self {
            value: Bytes::copy_from_slice(kv.value()),
            prev_value,
            rev: kv.mod_revision(),
            change: if deleted {
                Change::Deleted
            } else if created {
                Change::Created
            } else {
                Change::Modified
            },
            key,
        })
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Turns a raw change into what a watcher with `predicate` sees, or nothing when the
    /// predicate filters it out (kube-apiserver's `transform`).
    ///
    /// The current object is decoded for every change but a delete; the previous one
    /// only for a delete or when the predicate selects less than everything (otherwise
    /// it cannot change the outcome). The previous object carries the revision of the
    /// change, so a Deleted event says when the object went away.
    pub(crate) fn watch_event_for(
        &self,
        raw: RawEvent,
        predicate: &apistore_storage::SelectionPredicate,
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
                let (data, _) = self.transform_from_storage(&raw.key, prev)?;
                Some(self.decode_uncounted(&raw.key, &data, raw.rev)?)
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
                    return Err(internal(raw.key, message));
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
