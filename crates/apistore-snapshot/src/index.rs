//! The index of every key's revisions (etcd's `treeIndex`): one scan of the `key`
//! bucket in revision order, then sorted by key. A [`crate::Snapshot`] builds it the
//! first time a read needs it.

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::Range;
use crate::bolt::{BoltFile, Bucket};
use crate::error::Result;
use crate::mvcc::Revision;
use crate::snapshot::{IndexedRevision, in_order, record};

/// Every key with its revisions, oldest first.
#[derive(Debug)]
pub(crate) struct Index {
    by_key: BTreeMap<Bytes, Vec<IndexedRevision>>,
    records: usize,
}

impl Index {
    /// Reads every record of the `key` bucket. Records out of revision order are a
    /// corrupt file.
    pub(crate) fn build(file: &BoltFile, keys: &Bucket) -> Result<Self> {
        // Every revision with its key, in revision order; then sorted by key once. The
        // sort is stable, so each key's revisions stay oldest first, and the index is
        // built from sorted keys in one pass. Inserting key by key into the tree
        // compared each key, by estimate, with about twice as many others (a B-tree
        // searches each node in order; 200,000 keys of `/registry/...` with long common
        // prefixes), and gave each key's list room for four revisions.
        let mut revisions: Vec<(Bytes, IndexedRevision)> = Vec::new();
        let mut last: Option<Revision> = None;
        keys.for_each(file, |entry| {
            let record = record(file, &entry)?;
            if let Some(last) = last {
                in_order(file, &entry, last, record.revision)?;
            }
            last = Some(record.revision);
            // A copy: the record's key is a slice of its page, which it would keep.
            revisions.push((
                Bytes::copy_from_slice(&record.kv.key),
                IndexedRevision {
                    revision: record.revision,
                    tombstone: record.tombstone,
                },
            ));
            Ok(true)
        })?;
        let records = revisions.len();
        revisions.sort_by(|a, b| a.0.cmp(&b.0));
        let mut by_key: Vec<(Bytes, Vec<IndexedRevision>)> = Vec::new();
        for (key, at) in revisions {
            match by_key.last_mut() {
                Some((last, ats)) if *last == key => ats.push(at),
                _ => by_key.push((key, vec![at])),
            }
        }
        Ok(Self {
            by_key: by_key.into_iter().collect(),
            records,
        })
    }

    /// How many revisions of how many keys.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.records, self.by_key.len())
    }

    /// The revisions of `key`, oldest first.
    pub(crate) fn revisions(&self, key: &[u8]) -> &[IndexedRevision] {
        self.by_key.get(key).map_or(&[], Vec::as_slice)
    }

    /// See [`crate::Snapshot::range`].
    pub(crate) fn range(&self, start: &[u8], prefix: &[u8], limit: usize, rev: i64) -> Range {
        let mut range = Range::default();
        let keys = self
            .by_key
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .take_while(|(key, _)| key.starts_with(prefix));
        for (key, revisions) in keys {
            let Some(revision) = live_at(revisions, rev) else {
                continue;
            };
            range.count += 1;
            if limit > 0 && range.keys.len() >= limit {
                range.more = true;
                continue;
            }
            range.keys.push((key.clone(), revision));
        }
        range
    }

    /// See [`crate::Snapshot::keys_under`].
    pub(crate) fn keys_under<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a Bytes, &'a [IndexedRevision])> + 'a {
        self.by_key
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(key, _)| key.starts_with(prefix))
            .map(|(key, revisions)| (key, revisions.as_slice()))
    }
}

/// The revision of the value live at `rev` among `revisions` (oldest first).
pub(crate) fn live_at(revisions: &[IndexedRevision], rev: i64) -> Option<Revision> {
    let last = revisions.iter().rev().find(|at| at.revision.main <= rev)?;
    (!last.tombstone).then_some(last.revision)
}
