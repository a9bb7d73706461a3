//! etcd watch events and initial-sync key-values as [`RawEvent`]s: the etcd half of
//! `etcd3/event.go` in k8s.io/apiserver v0.31.1 (parseKV, parseEvent). What a raw
//! change becomes for a watcher (decoding, predicate transitions, bookmarks) is
//! `apistore_backend::event`'s, shared with the memory store.

use apistore_backend::{Change, RawEvent};
use apistore_storage::Result;
use bytes::Bytes;
use etcd_client::KeyValue;

use crate::error::internal;

/// A key-value found by the initial sync: a synthetic creation at its mod revision.
pub(crate) fn raw_from_kv(kv: KeyValue) -> RawEvent {
    let rev = kv.mod_revision();
    let (key, value) = kv.into_key_value();
    RawEvent::initial(
        String::from_utf8_lossy(&key).into_owned(),
        Bytes::from(value),
        rev,
    )
}

/// An event of an etcd watch. A change other than a creation must carry the previous
/// value (the watch asks for it): without it the object that changed is unknown, which
/// happens when the previous revision was compacted away ([`Change::of`]).
pub(crate) fn raw_from_etcd(event: &etcd_client::Event) -> Result<RawEvent> {
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
    let change = Change::of(
        &key,
        kv.mod_revision(),
        deleted,
        created,
        prev_value.is_some(),
    )?;
    Ok(RawEvent {
        value: Bytes::copy_from_slice(kv.value()),
        prev_value,
        rev: kv.mod_revision(),
        change,
        key,
    })
}
