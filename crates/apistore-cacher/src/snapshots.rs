//! The cache's snapshots of its object store, one per revision it applied a change at
//! (kube 1.34+'s `ListFromCacheSnapshot`: `storeSnapshotter` in
//! k8s.io/apiserver v0.37 `pkg/storage/cacher/store/store_btree.go`).
//!
//! The store is a persistent B+ tree ([`imbl::OrdMap`]): a snapshot is a clone, which
//! shares every node with the live store and costs O(1); a later change copies only the
//! nodes on its path. So the state at any revision the window covers is kept, and an
//! Exact list or a continued list at that revision reads it as etcd would answer.
//!
//! Snapshots are added in revision order, so they are kept in a deque and found by
//! binary search (kube keeps them in a second B-tree and notes this as the better
//! structure). They go when they fall below the *floor*: the oldest revision the cache
//! still answers for. The floor rises when the window drops events, when the backend
//! compacts, and when the cache is told to forget events; the snapshot just below the
//! floor stays while it is the state *at* the floor (no change happened in between).

use std::collections::VecDeque;

use crate::watch_cache::Objects;

/// The snapshots of one cache, oldest first.
#[derive(Debug)]
pub(crate) struct Snapshots<T> {
    /// `(revision, store after the change at that revision)`, revisions increasing.
    entries: VecDeque<(u64, Objects<T>)>,
    /// No revision below this is answered.
    floor: u64,
    /// Whether snapshots are taken: the configuration's choice (kube's feature gate)
    /// and, while on, the consistency checker's verdict (kube's `MarkConsistent`).
    enabled: bool,
}

impl<T> Snapshots<T> {
    /// An empty set that takes snapshots when `enabled`.
    pub(crate) fn new(enabled: bool) -> Self {
        Self {
            entries: VecDeque::new(),
            floor: 0,
            enabled,
        }
    }

    /// Whether snapshots are taken now.
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// Starts taking snapshots again, from the next one added, or stops and forgets
    /// them all (kube's `MarkConsistent(false)`: a cache found inconsistent serves
    /// nothing from its past).
    pub(crate) fn set_enabled(&mut self, enabled: bool) {
        self.enabled = enabled;
        if !enabled {
            self.entries.clear();
        }
    }

    /// How many snapshots are held.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Forgets everything and starts again from a list at `revision` (kube's `Reset`
    /// then `Add` in `ReplaceLocked`): nothing before the list is known.
    pub(crate) fn reset(&mut self, revision: u64, store: &Objects<T>) {
        self.entries.clear();
        self.floor = revision;
        self.add(revision, store);
    }

    /// Keeps the store as it is after the change at `revision`. A second change at the
    /// same revision (one etcd transaction writing several keys) replaces the first's.
    pub(crate) fn add(&mut self, revision: u64, store: &Objects<T>) {
        if !self.enabled {
            return;
        }
        match self.entries.back_mut() {
            Some((last, snapshot)) if *last == revision => *snapshot = store.clone(),
            _ => self.entries.push_back((revision, store.clone())),
        }
    }

    /// Raises the floor to `revision` and drops the snapshots no revision at or above
    /// it needs: all but the newest at or below it (kube's `RemoveLess`, which also
    /// drops that one and so sends a list exactly at the floor to the backend).
    pub(crate) fn trim(&mut self, revision: u64) {
        self.floor = self.floor.max(revision);
        while self
            .entries
            .get(1)
            .is_some_and(|(next, _)| *next <= self.floor)
        {
            self.entries.pop_front();
        }
    }

    /// The store as it was at `revision`: the newest snapshot at or below it (kube's
    /// `GetLessOrEqual`), if `revision` is not below the floor. The caller makes sure
    /// the cache has reached `revision`; the clone is O(1) and outlives the lock.
    pub(crate) fn at(&self, revision: u64) -> Option<Objects<T>> {
        if revision < self.floor {
            return None;
        }
        let after = self.entries.partition_point(|(rev, _)| *rev <= revision);
        let (_, snapshot) = self.entries.get(after.checked_sub(1)?)?;
        Some(snapshot.clone())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;

    use super::{Objects, Snapshots};

    /// A store holding `keys`, each object its key's position.
    pub(crate) fn store(keys: &[&str]) -> Objects<u32> {
        keys.iter()
            .enumerate()
            .map(|(i, key)| (Arc::from(*key), Arc::new(i as u32)))
            .collect()
    }

    fn keys(snapshot: Option<Objects<u32>>) -> Option<Vec<String>> {
        snapshot.map(|store| store.keys().map(|key| key.to_string()).collect())
    }

    #[test]
    fn a_revision_reads_the_newest_snapshot_at_or_below_it() {
        let mut snapshots = Snapshots::new(true);
        snapshots.reset(10, &store(&["/a"]));
        snapshots.add(12, &store(&["/a", "/b"]));
        snapshots.add(15, &store(&["/b"]));
        let cases: [(u64, Option<&[&str]>); 7] = [
            (9, None),
            (10, Some(&["/a"])),
            (11, Some(&["/a"])),
            (12, Some(&["/a", "/b"])),
            (14, Some(&["/a", "/b"])),
            (15, Some(&["/b"])),
            (99, Some(&["/b"])),
        ];
        for (revision, want) in cases {
            let want = want.map(|keys| keys.iter().map(|k| (*k).to_owned()).collect());
            assert_eq!(keys(snapshots.at(revision)), want, "at {revision}");
        }
    }

    #[test]
    fn a_snapshot_does_not_change_with_the_store() {
        let mut snapshots = Snapshots::new(true);
        let mut live = store(&["/a"]);
        snapshots.reset(1, &live);
        live.insert(Arc::from("/b"), Arc::new(7));
        live.remove("/a");
        snapshots.add(2, &live);
        assert_eq!(keys(snapshots.at(1)), Some(vec!["/a".to_owned()]));
        assert_eq!(keys(snapshots.at(2)), Some(vec!["/b".to_owned()]));
    }

    #[test]
    fn two_changes_at_one_revision_keep_the_last() {
        let mut snapshots = Snapshots::new(true);
        snapshots.reset(1, &store(&[]));
        snapshots.add(2, &store(&["/a"]));
        snapshots.add(2, &store(&["/a", "/b"]));
        assert_eq!(snapshots.len(), 2);
        assert_eq!(
            keys(snapshots.at(2)),
            Some(vec!["/a".to_owned(), "/b".to_owned()])
        );
    }

    #[test]
    fn trimming_keeps_the_state_at_the_floor() {
        let mut snapshots = Snapshots::new(true);
        snapshots.reset(10, &store(&["/a"]));
        snapshots.add(12, &store(&["/b"]));
        snapshots.add(15, &store(&["/c"]));
        snapshots.trim(13);
        // The snapshot at 12 is the state at 13 and 14: kept. The one at 10 is not.
        assert_eq!(snapshots.len(), 2);
        assert_eq!(keys(snapshots.at(12)), None, "below the floor");
        assert_eq!(keys(snapshots.at(13)), Some(vec!["/b".to_owned()]));
        snapshots.trim(15);
        assert_eq!(snapshots.len(), 1);
        assert_eq!(keys(snapshots.at(15)), Some(vec!["/c".to_owned()]));
        snapshots.trim(11);
        assert_eq!(keys(snapshots.at(14)), None, "the floor never goes down");
    }

    #[test]
    fn a_reset_forgets_the_past() {
        let mut snapshots = Snapshots::new(true);
        snapshots.reset(10, &store(&["/a"]));
        snapshots.add(12, &store(&["/b"]));
        snapshots.reset(20, &store(&["/c"]));
        assert_eq!(snapshots.len(), 1);
        assert_eq!(keys(snapshots.at(12)), None);
        assert_eq!(keys(snapshots.at(20)), Some(vec!["/c".to_owned()]));
    }

    #[test]
    fn disabled_snapshots_are_neither_taken_nor_kept() {
        let mut off = Snapshots::new(false);
        off.reset(1, &store(&["/a"]));
        off.add(2, &store(&["/b"]));
        assert_eq!((off.len(), keys(off.at(2))), (0, None));

        let mut on = Snapshots::new(true);
        on.reset(1, &store(&["/a"]));
        on.set_enabled(false);
        assert_eq!((on.len(), keys(on.at(1))), (0, None));
        on.set_enabled(true);
        on.add(3, &store(&["/b"]));
        assert_eq!(
            keys(on.at(2)),
            None,
            "nothing from before it was turned off"
        );
        assert_eq!(keys(on.at(3)), Some(vec!["/b".to_owned()]));
    }
}
