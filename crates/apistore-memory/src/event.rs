//! History events and initial-sync key-values as [`RawEvent`]s, as the etcd3 store
//! reads etcd's (kube-apiserver's `etcd3/event.go`), including the 500 for a change
//! whose previous value compaction took. What a raw change becomes for a watcher is
//! `apistore_backend::event`'s, shared with the etcd3 store.

use apistore_backend::{Change, RawEvent};
use apistore_storage::Result;

use crate::mvcc::{Event, EventKind, KeyValue};

/// A key-value found by the initial sync: a synthetic creation at its mod revision.
pub(crate) fn raw_from_kv(kv: KeyValue) -> RawEvent {
    RawEvent::initial(kv.key, kv.value, kv.mod_revision)
}

/// A history event. A change other than a creation must carry the previous value:
/// without it (compacted away) the object that changed is unknown ([`Change::of`]).
pub(crate) fn raw_from_history(event: Event) -> Result<RawEvent> {
    let deleted = event.kind == EventKind::Delete;
    let created = event.is_create();
    let rev = event.revision();
    let change = Change::of(
        &event.kv.key,
        rev,
        deleted,
        created,
        event.prev_value.is_some(),
    )?;
    Ok(RawEvent {
        key: event.kv.key,
        value: event.kv.value,
        prev_value: event.prev_value,
        rev,
        change,
    })
}
