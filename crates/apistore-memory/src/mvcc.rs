//! The revision log: etcd's multi-version key space, in memory.
//!
//! One global revision, moved by one by every write (a lease expiry that deletes several
//! keys moves it once); per key its versions with create and mod revisions and a
//! version counter, so reads at a past revision see that revision's state; an ordered
//! history of events (with the previous value, as etcd's `PrevKv`) for watches; and
//! compaction, after which reads below the compacted revision fail as etcd's do.
//!
//! etcd's rules, kept here: a fresh store is at revision 1; a compaction at `C` keeps
//! revision `C` readable (each key's latest version at or before `C`) and forgets what
//! came before; the event at `C` itself loses its previous value, as etcd's watch then
//! cannot find it. Nothing here is async, decodes or decrypts: the store does that,
//! outside the lock.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;
use std::time::Duration;

use bytes::Bytes;

/// One key's value at one revision (etcd's `mvccpb.KeyValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyValue {
    pub(crate) key: String,
    pub(crate) value: Bytes,
    pub(crate) create_revision: i64,
    pub(crate) mod_revision: i64,
    pub(crate) version: i64,
}

/// What a change did to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    Put,
    Delete,
}

/// One change in the history (etcd's `mvccpb.Event` with `PrevKv`).
#[derive(Debug, Clone)]
pub(crate) struct Event {
    pub(crate) kind: EventKind,
    /// For a put, the new key-value; for a delete, the key with the delete's revision
    /// as its mod revision and an empty value.
    pub(crate) kv: KeyValue,
    /// The value before the change; `None` for a creation, or when compaction took it.
    pub(crate) prev_value: Option<Bytes>,
}

impl Event {
    /// The revision of the change.
    pub(crate) fn revision(&self) -> i64 {
        self.kv.mod_revision
    }

    /// Whether the change created its key.
    pub(crate) fn is_create(&self) -> bool {
        self.kind == EventKind::Put && self.kv.create_revision == self.kv.mod_revision
    }
}

/// Why a read at a revision failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RevisionError {
    /// The revision is below the compacted one.
    Compacted,
    /// The revision is past the current one.
    Future,
}

/// A range read's answer, as etcd's `RangeResponse`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Range {
    pub(crate) kvs: Vec<KeyValue>,
    /// Whether keys past the limit remain.
    pub(crate) more: bool,
    /// How many keys the range holds from its start, limit aside.
    pub(crate) count: i64,
    /// The store's current revision when it answered.
    pub(crate) revision: i64,
}

/// Which keys a read or watch covers: one key, or every key with a prefix starting at a
/// key (a continued page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Keys<'a> {
    One(&'a str),
    Prefix { start: &'a str, prefix: &'a str },
}

impl Keys<'_> {
    fn contains(&self, key: &str) -> bool {
        match self {
            Keys::One(one) => key == *one,
            Keys::Prefix { start, prefix } => key >= *start && key.starts_with(prefix),
        }
    }
}

/// A version of a key: `None` is a tombstone (the key was deleted at `mod_revision`).
#[derive(Debug, Clone)]
struct Version {
    mod_revision: i64,
    create_revision: i64,
    version: i64,
    value: Option<Bytes>,
}

/// The key space and its history.
#[derive(Debug)]
pub(crate) struct Mvcc {
    revision: i64,
    compacted: i64,
    keys: BTreeMap<String, Vec<Version>>,
    history: VecDeque<Event>,
    /// When each key with a TTL expires, on the store's clock.
    deadlines: BTreeMap<String, Duration>,
    /// The most revisions kept before the oldest are compacted away; 0 keeps all.
    history_limit: u64,
}

impl Mvcc {
    pub(crate) fn new(history_limit: u64) -> Self {
        Self {
            revision: 1,
            compacted: 0,
            keys: BTreeMap::new(),
            history: VecDeque::new(),
            deadlines: BTreeMap::new(),
            history_limit,
        }
    }

    pub(crate) fn revision(&self) -> i64 {
        self.revision
    }

    pub(crate) fn compacted(&self) -> i64 {
        self.compacted
    }

    /// The latest value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<KeyValue> {
        self.at(key, self.revision)
    }

    fn at(&self, key: &str, revision: i64) -> Option<KeyValue> {
        let versions = self.keys.get(key)?;
        let version = versions.iter().rev().find(|v| v.mod_revision <= revision)?;
        let value = version.value.clone()?;
        Some(KeyValue {
            key: key.to_owned(),
            value,
            create_revision: version.create_revision,
            mod_revision: version.mod_revision,
            version: version.version,
        })
    }

    /// The keys of `keys` at `revision` (0: the current one), at most `limit` of them
    /// (0: all), in key order.
    pub(crate) fn range(
        &self,
        keys: &Keys<'_>,
        limit: i64,
        revision: i64,
    ) -> Result<Range, RevisionError> {
        let at = if revision <= 0 {
            self.revision
        } else {
            revision
        };
        if at < self.compacted {
            return Err(RevisionError::Compacted);
        }
        if at > self.revision {
            return Err(RevisionError::Future);
        }
        let mut range = Range {
            revision: self.revision,
            ..Range::default()
        };
        let start = match keys {
            Keys::One(key) | Keys::Prefix { start: key, .. } => *key,
        };
        for (key, _) in self
            .keys
            .range::<str, _>((Bound::Included(start), Bound::Unbounded))
        {
            if !keys.contains(key) {
                break;
            }
            let Some(kv) = self.at(key, at) else {
                continue;
            };
            range.count += 1;
            if limit > 0 && range.kvs.len() as i64 >= limit {
                range.more = true;
                continue;
            }
            range.kvs.push(kv);
        }
        Ok(range)
    }

    /// Writes `value` under `key` if its mod revision is `expected` (0: absent), with a
    /// TTL deadline or none (a write without one drops the key's). Returns the new
    /// revision, or the current value when the comparison failed.
    pub(crate) fn put_if(
        &mut self,
        key: &str,
        expected: i64,
        value: Bytes,
        deadline: Option<Duration>,
    ) -> Result<i64, Option<KeyValue>> {
        let current = self.get(key);
        if current.as_ref().map_or(0, |kv| kv.mod_revision) != expected {
            return Err(current);
        }
        Ok(self.put(key, value, deadline, current))
    }

    /// Writes `value` under `key` unconditionally (raw access around the store).
    pub(crate) fn put_unconditionally(&mut self, key: &str, value: Bytes) -> i64 {
        let current = self.get(key);
        self.put(key, value, None, current)
    }

    fn put(
        &mut self,
        key: &str,
        value: Bytes,
        deadline: Option<Duration>,
        current: Option<KeyValue>,
    ) -> i64 {
        self.revision += 1;
        let revision = self.revision;
        let (create_revision, version) = match &current {
            Some(kv) => (kv.create_revision, kv.version + 1),
            None => (revision, 1),
        };
        let kv = KeyValue {
            key: key.to_owned(),
            value: value.clone(),
            create_revision,
            mod_revision: revision,
            version,
        };
        self.keys.entry(key.to_owned()).or_default().push(Version {
            mod_revision: revision,
            create_revision,
            version,
            value: Some(value),
        });
        match deadline {
            Some(deadline) => self.deadlines.insert(key.to_owned(), deadline),
            None => self.deadlines.remove(key),
        };
        self.history.push_back(Event {
            kind: EventKind::Put,
            kv,
            prev_value: current.map(|kv| kv.value),
        });
        self.enforce_history_limit();
        revision
    }

    /// Deletes `key` if its mod revision is `expected`. Returns the delete's revision,
    /// or the current value (`None`: absent) when the comparison failed.
    pub(crate) fn delete_if(&mut self, key: &str, expected: i64) -> Result<i64, Option<KeyValue>> {
        let current = self.get(key);
        match current {
            Some(kv) if kv.mod_revision == expected => {
                self.revision += 1;
                self.tombstone(kv, self.revision);
                self.enforce_history_limit();
                Ok(self.revision)
            }
            other => Err(other),
        }
    }

    fn tombstone(&mut self, kv: KeyValue, revision: i64) {
        self.keys.entry(kv.key.clone()).or_default().push(Version {
            mod_revision: revision,
            create_revision: 0,
            version: 0,
            value: None,
        });
        self.deadlines.remove(&kv.key);
        self.history.push_back(Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key: kv.key,
                value: Bytes::new(),
                create_revision: 0,
                mod_revision: revision,
                version: 0,
            },
            prev_value: Some(kv.value),
        });
    }

    /// Deletes every key whose TTL ran out by `now`, all at one new revision, as etcd's
    /// lease revocation does. Returns that revision, if anything expired.
    pub(crate) fn expire(&mut self, now: Duration) -> Option<i64> {
        let expired: Vec<String> = self
            .deadlines
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(key, _)| key.clone())
            .collect();
        let live: Vec<KeyValue> = expired.iter().filter_map(|key| self.get(key)).collect();
        for key in &expired {
            self.deadlines.remove(key);
        }
        if live.is_empty() {
            return None;
        }
        self.revision += 1;
        for kv in live {
            self.tombstone(kv, self.revision);
        }
        self.enforce_history_limit();
        Some(self.revision)
    }

    /// Forgets every revision before `revision`, as etcd's compaction.
    pub(crate) fn compact(&mut self, revision: i64) -> Result<(), RevisionError> {
        if revision <= self.compacted {
            return Err(RevisionError::Compacted);
        }
        if revision > self.revision {
            return Err(RevisionError::Future);
        }
        self.compacted = revision;
        self.keys.retain(|_, versions| {
            // Keep the latest version at or before the compaction, unless it is a
            // tombstone, and everything after it.
            let keep_from = versions
                .iter()
                .rposition(|v| v.mod_revision <= revision)
                .unwrap_or(0);
            versions.drain(..keep_from);
            if versions
                .first()
                .is_some_and(|v| v.mod_revision <= revision && v.value.is_none())
            {
                versions.remove(0);
            }
            !versions.is_empty()
        });
        while self
            .history
            .front()
            .is_some_and(|event| event.revision() < revision)
        {
            self.history.pop_front();
        }
        for event in self.history.iter_mut() {
            if event.revision() != revision {
                break;
            }
            event.prev_value = None;
        }
        Ok(())
    }

    fn enforce_history_limit(&mut self) {
        let limit = i64::try_from(self.history_limit).unwrap_or(i64::MAX);
        if limit > 0 && self.revision - self.compacted.max(1) > limit {
            // Cannot fail: the revision is above the compacted one and not in the future.
            let _ = self.compact(self.revision - limit);
        }
    }

    /// The events of `keys` from revision `from` on, in order.
    pub(crate) fn events_since(
        &self,
        keys: &Keys<'_>,
        from: i64,
    ) -> Result<Vec<Event>, RevisionError> {
        if from < self.compacted {
            return Err(RevisionError::Compacted);
        }
        let first = self
            .history
            .partition_point(|event| event.revision() < from);
        Ok(self
            .history
            .range(first..)
            .filter(|event| keys.contains(&event.kv.key))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests;
