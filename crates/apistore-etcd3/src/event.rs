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

/// mvccpb's `Event.EventType` numbers.
const PUT: i32 = 0;
const DELETE: i32 = 1;

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
    let Some((event, kv)) = response
        .events()
        .get(index)
        .and_then(|event| Some((event, event.kv()?)))
    else {
        return Err(internal("", "etcd event received without a key-value"));
    };
    let key = String::from_utf8_lossy(kv.key()).into_owned();
    // The event's type, as kube's parseEvent reads it (`isDeleted: e.Type ==
    // clientv3.EventTypeDelete`, `isCreated: e.IsCreate()`). The key-value alone does not
    // tell: etcd's DELETE carries no create revision, but kine's carries the deleted
    // object's, with an empty value. The field is read raw (etcd-client's
    // `pub-response-field`) because `event_type()` panics on a number it does not know.
    let deleted = match event.0.r#type {
        PUT => false,
        DELETE => true,
        other => {
            return Err(internal(
                &key,
                format!(
                    "etcd event of unknown type {other} (key={key:?}, modRevision={})",
                    kv.mod_revision()
                ),
            ));
        }
    };
    let created = !deleted && kv.create_revision() == kv.mod_revision();
    let has_prev = event.prev_kv().is_some();
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

#[cfg(test)]
mod tests {
    use apistore_backend::Change;
    use etcd_client::proto::{PbEvent, PbKeyValue, PbWatchResponse};

    use super::*;

    fn kv(key: &str, value: &str, create_revision: i64, mod_revision: i64) -> PbKeyValue {
        PbKeyValue {
            key: key.into(),
            value: value.into(),
            create_revision,
            mod_revision,
            ..PbKeyValue::default()
        }
    }

    fn raw(r#type: i32, kv: PbKeyValue, prev_kv: Option<PbKeyValue>) -> Result<RawEvent> {
        let response = WatchResponse(PbWatchResponse {
            events: vec![PbEvent {
                r#type,
                kv: Some(kv),
                prev_kv,
            }],
            ..PbWatchResponse::default()
        });
        raw_from_etcd(&Arc::new(response), 0)
    }

    #[test]
    fn etcd_events_keep_their_type() {
        let created = raw(PUT, kv("/k", "v1", 5, 5), None).unwrap();
        assert_eq!(created.change, Change::Created);
        let modified = raw(PUT, kv("/k", "v2", 5, 6), Some(kv("/k", "v1", 5, 5))).unwrap();
        assert_eq!(modified.change, Change::Modified);
        assert_eq!(modified.prev_value.as_deref(), Some(&b"v1"[..]));
        // etcd's delete: the key and the revision of the delete, nothing else.
        let deleted = raw(DELETE, kv("/k", "", 0, 7), Some(kv("/k", "v2", 5, 6))).unwrap();
        assert_eq!(deleted.change, Change::Deleted);
        assert_eq!(deleted.rev, 7);
        assert_eq!(deleted.prev_value.as_deref(), Some(&b"v2"[..]));
    }

    /// kine's delete carries the deleted object's create revision and an empty value:
    /// told by its type, it is a deletion, not a modification to an empty value (which
    /// failed to decode: "EOF while parsing a value").
    #[test]
    fn kine_deletes_are_deletes() {
        let deleted = raw(DELETE, kv("/k", "", 5, 7), Some(kv("/k", "v2", 5, 6))).unwrap();
        assert_eq!(deleted.change, Change::Deleted);
        assert_eq!(deleted.rev, 7);
        assert!(deleted.value.is_empty());
        assert_eq!(deleted.prev_value.as_deref(), Some(&b"v2"[..]));
    }

    #[test]
    fn an_unknown_type_is_an_error_naming_the_key() {
        let error = raw(7, kv("/k", "v", 5, 5), None).unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("/k") && text.contains("unknown type 7"),
            "{text}"
        );
    }
}
