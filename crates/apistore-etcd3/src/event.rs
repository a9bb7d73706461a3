//! etcd watch events and initial-sync key-values as [`RawEvent`]s: the etcd half of
//! `etcd3/event.go` in k8s.io/apiserver v0.31.1 (parseKV, parseEvent). What a raw
//! change becomes for a watcher (decoding, predicate transitions, bookmarks) is
//! `apistore_backend::event`'s, shared with the memory store.

use std::sync::Arc;

use apistore_backend::{Change, RawEvent};
use apistore_storage::Result;
use bytes::Bytes;
use etcd_client::{KeyValue, WatchResponse};

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

/// The `index`th event of an etcd watch response. A change other than a creation must
/// carry the previous value (the watch asks for it): without it the object that
/// changed is unknown, which happens when the previous revision was compacted away
/// ([`Change::of`]).
///
/// The values are not copied: they stay in the response, which lives until the last
/// of them is dropped (decoding copies what it keeps, so that is soon after). A copy
/// of each value cost a large allocation per event, freed by another thread than the
/// one that made it.
pub(crate) fn raw_from_etcd(response: &Arc<WatchResponse>, index: usize) -> Result<RawEvent> {
    let Some(kv) = response.events().get(index).and_then(|event| event.kv()) else {
        return Err(internal("", "etcd event received without a key-value"));
    };
    let key = String::from_utf8_lossy(kv.key()).into_owned();
    // A delete is told by its key-value, as etcd itself decides an event's type
    // (`watchableStoreTxnWrite.End` in etcd's mvcc: a change without a create
    // revision is a DELETE). etcd-client's `event_type()` panics on a type number
    // it does not know, so the wire's type field is not consulted.
    let deleted = kv.create_revision() == 0;
    let created = !deleted && kv.create_revision() == kv.mod_revision();
    let has_prev = response
        .events()
        .get(index)
        .is_some_and(|event| event.prev_kv().is_some());
    let change = Change::of(&key, kv.mod_revision(), deleted, created, has_prev)?;
    let value_of = |part: Part| {
        let empty = EventValue::slice(response, index, part).is_empty();
        if empty {
            Bytes::new()
        } else {
            Bytes::from_owner(EventValue {
                response: Arc::clone(response),
                index,
                part,
            })
        }
    };
    Ok(RawEvent {
        value: value_of(Part::Value),
        prev_value: has_prev.then(|| value_of(Part::PrevValue)),
        rev: kv.mod_revision(),
        change,
        key,
    })
}

/// Which value of an event an [`EventValue`] is.
#[derive(Debug, Clone, Copy)]
enum Part {
    Value,
    PrevValue,
}

/// One value of one event, kept inside its watch response.
struct EventValue {
    response: Arc<WatchResponse>,
    index: usize,
    part: Part,
}

impl EventValue {
    fn slice(response: &WatchResponse, index: usize, part: Part) -> &[u8] {
        let event = response.events().get(index);
        let kv = match part {
            Part::Value => event.and_then(etcd_client::Event::kv),
            Part::PrevValue => event.and_then(etcd_client::Event::prev_kv),
        };
        kv.map_or(&[], KeyValue::value)
    }
}

impl AsRef<[u8]> for EventValue {
    fn as_ref(&self) -> &[u8] {
        Self::slice(&self.response, self.index, self.part)
    }
}
