//! What a new watcher starts with (kube's `watch_cache_interval.go`): the window's
//! events after its resourceVersion, or, for a watch that asks for the current state
//! (resourceVersion "0" or unset, `sendInitialEvents: true`), the objects under its key
//! as ADDED events.
//!
//! The current state is taken as a snapshot: under the cache's read lock the watch
//! only clones the persistent store, which is O(1) and shares every node, and records
//! the revision; the objects are then read from that clone as the watcher is polled,
//! a chunk at a time, with no lock held (kube 1.37's `newCacheIntervalFromLazySnapshot`,
//! which reads the latest B-tree snapshot off the lock). Until v0.31.1 kube copied the
//! objects out of the store under the lock, and so did this cache: a watch of 100,000
//! objects held up the reflector for the whole copy. What the watcher sees is the same
//! either way: the objects in key order as they were at the revision the watch was
//! registered at, then every later event.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;

use crate::event::{CacheEvent, has_path_prefix};
use crate::watch_cache::Objects;

/// How many objects a snapshot interval reads from its clone of the store at a time:
/// each read is a walk down the tree from the previous key, so a chunk amortises it
/// while keeping a watcher's buffer small.
const CHUNK: usize = 256;

/// The initial events of one watcher, in the order it sends them.
pub(crate) enum Interval<T> {
    /// Events from the window, after the watch's resourceVersion.
    Events(std::vec::IntoIter<Arc<CacheEvent<T>>>),
    /// The objects under a key as of a revision, read lazily from a snapshot.
    Snapshot(SnapshotInterval<T>),
}

/// One initial item.
pub(crate) enum Initial<T> {
    /// An event of the window.
    Event(Arc<CacheEvent<T>>),
    /// An object of the snapshot, to be sent as ADDED if the watcher selects it.
    Object {
        key: Arc<str>,
        object: Arc<T>,
        resource_version: u64,
    },
}

impl<T> Interval<T> {
    /// Events from the window.
    pub(crate) fn events(events: Vec<Arc<CacheEvent<T>>>) -> Self {
        Self::Events(events.into_iter())
    }

    /// The objects of `store` under `key` (as a path prefix), as of `resource_version`.
    pub(crate) fn snapshot(store: Objects<T>, key: &str, resource_version: u64) -> Self {
        Self::Snapshot(SnapshotInterval {
            store,
            prefix: Arc::from(key),
            resource_version,
            after: None,
            chunk: VecDeque::new(),
            exhausted: false,
        })
    }

    /// The next initial item, `None` once all were handed out.
    pub(crate) fn next(&mut self) -> Option<Initial<T>> {
        match self {
            Self::Events(events) => events.next().map(Initial::Event),
            Self::Snapshot(snapshot) => snapshot.next(),
        }
    }
}

/// The objects under `prefix` in a clone of the store, read a chunk at a time.
pub(crate) struct SnapshotInterval<T> {
    store: Objects<T>,
    prefix: Arc<str>,
    resource_version: u64,
    /// The key of the last object read into a chunk.
    after: Option<Arc<str>>,
    chunk: VecDeque<(Arc<str>, Arc<T>)>,
    exhausted: bool,
}

impl<T> SnapshotInterval<T> {
    fn next(&mut self) -> Option<Initial<T>> {
        if self.chunk.is_empty() && !self.exhausted {
            self.fill();
        }
        let (key, object) = self.chunk.pop_front()?;
        Some(Initial::Object {
            key,
            object,
            resource_version: self.resource_version,
        })
    }

    /// Reads the next chunk of objects after [`Self::after`].
    fn fill(&mut self) {
        let prefix = &*self.prefix;
        let start = match &self.after {
            Some(after) => Bound::Excluded(&**after),
            None => Bound::Included(prefix),
        };
        self.chunk.extend(
            self.store
                .range::<_, str>((start, Bound::Unbounded))
                .take_while(|(key, _)| key.starts_with(prefix))
                .filter(|(key, _)| has_path_prefix(key, prefix))
                .take(CHUNK)
                .map(|(key, object)| (Arc::clone(key), Arc::clone(object))),
        );
        match self.chunk.back() {
            Some((last, _)) if self.chunk.len() == CHUNK => self.after = Some(Arc::clone(last)),
            _ => self.exhausted = true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshots::tests::store;

    fn keys(mut interval: Interval<u32>) -> Vec<String> {
        let mut keys = Vec::new();
        while let Some(item) = interval.next() {
            match item {
                Initial::Object {
                    key,
                    resource_version,
                    ..
                } => {
                    assert_eq!(resource_version, 7);
                    keys.push(key.to_string());
                }
                Initial::Event(_) => panic!("a snapshot interval holds objects"),
            }
        }
        keys
    }

    #[test]
    fn a_snapshot_interval_reads_the_objects_under_its_key_in_order() {
        let all = store(&[
            "/pods/a/x",
            "/pods/a/y",
            "/pods/ab/z",
            "/pods/b/w",
            "/podsx",
        ]);
        assert_eq!(
            keys(Interval::snapshot(all.clone(), "/pods/a", 7)),
            ["/pods/a/x", "/pods/a/y"]
        );
        assert_eq!(
            keys(Interval::snapshot(all.clone(), "/pods", 7)),
            ["/pods/a/x", "/pods/a/y", "/pods/ab/z", "/pods/b/w"]
        );
        assert_eq!(keys(Interval::snapshot(all, "/pods/a/x", 7)), ["/pods/a/x"]);
    }

    #[test]
    fn a_snapshot_interval_crosses_chunks_without_losing_or_repeating_an_object() {
        let names: Vec<String> = (0..CHUNK * 2 + 3)
            .map(|i| format!("/pods/ns/p{i:05}"))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut all = store(&refs);
        all.insert(Arc::from("/pods/other/q"), Arc::new(0));
        assert_eq!(keys(Interval::snapshot(all, "/pods/ns", 7)), names);
    }

    #[test]
    fn a_snapshot_interval_does_not_see_later_changes_to_the_store() {
        let mut live = store(&["/pods/a/x", "/pods/a/y"]);
        let interval = Interval::snapshot(live.clone(), "/pods", 7);
        live.remove("/pods/a/x");
        live.insert(Arc::from("/pods/a/z"), Arc::new(9));
        assert_eq!(keys(interval), ["/pods/a/x", "/pods/a/y"]);
    }
}
