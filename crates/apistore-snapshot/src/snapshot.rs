//! An etcd database read from a bbolt file: the index of every key's revisions, the
//! current and compacted revisions, and reads of any revision the file still holds.
//!
//! Opening scans etcd's `key` bucket once, in revision order, and keeps per key the
//! revisions it holds (etcd builds the same in-memory index when it starts, its
//! `treeIndex`); values stay in the file and are read when asked for, by their revision
//! key. The `meta` bucket gives the compaction (`finishedCompactRev`,
//! `scheduledCompactRev`: a revision key, of which the first 8 bytes are the main
//! revision) and `consistent_index`.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::bolt::{BoltFile, Bucket, Entry};
use crate::error::{Result, SnapshotError};
use crate::mvcc::{KeyValue, Revision, decode_key_value};

/// Where a member's data directory keeps its database, tried in this order for a
/// directory: the data dir, the member dir, the snap dir.
const DATABASE_PATHS: [&str; 3] = ["member/snap/db", "snap/db", "db"];

/// One revision of one key, as the index keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexedRevision {
    /// The revision.
    pub revision: Revision,
    /// Whether the key was deleted at it.
    pub tombstone: bool,
}

/// One revision of a key with its stored key-value (only the key, for a deletion).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The revision.
    pub revision: Revision,
    /// Whether the key was deleted at it.
    pub tombstone: bool,
    /// The stored key-value.
    pub kv: KeyValue,
}

/// Why a revision cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RevisionError {
    /// It is below the compacted revision: its history is gone.
    Compacted,
    /// It is past the snapshot's current revision.
    Future,
}

/// A page of keys read at one revision ([`Snapshot::range`]).
#[derive(Debug, Clone, Default)]
pub struct Range {
    /// The keys that exist at the revision, in order, with the revision of their
    /// current value.
    pub keys: Vec<(Bytes, Revision)>,
    /// Whether more keys follow the page.
    pub more: bool,
    /// Keys in the range at the revision (from the start key on).
    pub count: i64,
}

/// An etcd database in a snapshot file or a member's data directory, read-only.
#[derive(Debug)]
pub struct Snapshot {
    file: BoltFile,
    keys: Bucket,
    index: BTreeMap<Bytes, Vec<IndexedRevision>>,
    records: usize,
    current: i64,
    finished_compact: i64,
    scheduled_compact: i64,
    consistent_index: Option<u64>,
}

impl Snapshot {
    /// Opens a snapshot file (`etcdctl snapshot save`, with or without its appended
    /// sha256) or a member's `db` file, or finds the database in a data directory
    /// (`member/snap/db`), and indexes its revisions.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = database_path(path.as_ref())?;
        let file = BoltFile::open(&path)?;
        let root = Bucket::root(&file);
        let keys = required_bucket(&file, &root, "key")?;
        let meta = required_bucket(&file, &root, "meta")?;
        let revision_of = |name: &str| -> Result<i64> {
            let Some(entry) = meta.get(&file, name.as_bytes())? else {
                return Ok(0);
            };
            let Some(raw) = entry.value.get(..8) else {
                return Err(bad_record(&file, name, &entry, "shorter than 8 bytes"));
            };
            let mut main = [0; 8];
            main.copy_from_slice(raw);
            Ok(i64::from_be_bytes(main).max(0))
        };
        let finished_compact = revision_of("finishedCompactRev")?;
        let scheduled_compact = revision_of("scheduledCompactRev")?;
        let consistent_index = match meta.get(&file, b"consistent_index")? {
            Some(entry) => entry
                .value
                .get(..8)
                .and_then(|raw| raw.try_into().ok())
                .map(u64::from_be_bytes),
            None => None,
        };

        // Every revision with its key, in revision order; then sorted by key once. The
        // sort is stable, so each key's revisions stay oldest first, and the index is
        // built from sorted keys in one pass. Inserting key by key into the tree
        // compared each key, by estimate, with about twice as many others (a B-tree
        // searches each node in order; 200,000 keys of `/registry/...` with long common
        // prefixes), and gave each key's list room for four revisions.
        let mut revisions: Vec<(Bytes, IndexedRevision)> = Vec::new();
        let mut current = 1;
        let mut last: Option<Revision> = None;
        keys.for_each(&file, |entry| {
            let record = record(&file, &entry)?;
            if last.is_some_and(|last| last >= record.revision) {
                return Err(bad_record(
                    &file,
                    "in the key bucket",
                    &entry,
                    "revisions out of order",
                ));
            }
            last = Some(record.revision);
            current = current.max(record.revision.main);
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
        let index: BTreeMap<Bytes, Vec<IndexedRevision>> = by_key.into_iter().collect();
        // As etcd when it restores: a compaction past the last write is the current
        // revision.
        current = current.max(finished_compact).max(scheduled_compact);
        Ok(Self {
            file,
            keys,
            index,
            records,
            current,
            finished_compact,
            scheduled_compact,
            consistent_index,
        })
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The bbolt file.
    pub fn bolt(&self) -> &BoltFile {
        &self.file
    }

    /// The current revision: the last one written, or the compacted one if later.
    pub fn revision(&self) -> i64 {
        self.current
    }

    /// The compacted revision: reads below it fail. A compaction scheduled but not
    /// finished counts (etcd finishes it when it restarts, and part of it may be done).
    pub fn compact_revision(&self) -> i64 {
        self.finished_compact.max(self.scheduled_compact)
    }

    /// The compaction etcd recorded as finished, and the one it scheduled last.
    pub fn compactions(&self) -> (i64, i64) {
        (self.finished_compact, self.scheduled_compact)
    }

    /// etcd's `consistent_index` (the last raft entry applied), when recorded.
    pub fn consistent_index(&self) -> Option<u64> {
        self.consistent_index
    }

    /// How many revisions of how many keys the file holds.
    pub fn counts(&self) -> (usize, usize) {
        (self.records, self.index.len())
    }

    /// `rev` checked against the file: 0 is the current revision.
    pub fn check_revision(&self, rev: i64) -> Result<i64, RevisionError> {
        if rev <= 0 {
            return Ok(self.current);
        }
        if rev > self.current {
            return Err(RevisionError::Future);
        }
        if rev < self.compact_revision() {
            return Err(RevisionError::Compacted);
        }
        Ok(rev)
    }

    /// The revisions of `key` the file holds, oldest first.
    pub fn revisions(&self, key: &[u8]) -> &[IndexedRevision] {
        self.index.get(key).map_or(&[], Vec::as_slice)
    }

    /// The revision of `key`'s value at `rev`, `None` when it did not exist then.
    pub fn revision_at(&self, key: &[u8], rev: i64) -> Option<Revision> {
        live_at(self.revisions(key), rev)
    }

    /// The key-value stored at a revision of `key`.
    pub fn read(&self, key: &[u8], at: IndexedRevision) -> Result<Record> {
        let revision_key = at.revision.to_key(at.tombstone);
        let Some(entry) = self.keys.get(&self.file, &revision_key)? else {
            return Err(SnapshotError::CorruptRecord {
                path: self.file.path().to_owned(),
                record: describe(at),
                page: 0,
                offset: 0,
                problem: "indexed when the file was opened but gone now: the file changed"
                    .to_owned(),
            });
        };
        let record = record(&self.file, &entry)?;
        if record.kv.key != key {
            return Err(bad_record(
                &self.file,
                &describe(at),
                &entry,
                "holds another key",
            ));
        }
        Ok(record)
    }

    /// The key-value of `key` at `rev` (checked with [`Self::check_revision`] first),
    /// `None` when it did not exist then.
    pub fn get(&self, key: &[u8], rev: i64) -> Result<Option<KeyValue>> {
        let Some(revision) = self.revision_at(key, rev) else {
            return Ok(None);
        };
        let at = IndexedRevision {
            revision,
            tombstone: false,
        };
        self.read(key, at).map(|record| Some(record.kv))
    }

    /// Every revision of `key` the file holds, with its key-value, oldest first.
    pub fn history(&self, key: &[u8]) -> Result<Vec<Record>> {
        self.revisions(key)
            .iter()
            .map(|at| self.read(key, *at))
            .collect()
    }

    /// The keys from `start` that begin with `prefix` and exist at `rev`, at most
    /// `limit` of them (0: all), as etcd's range answers.
    pub fn range(&self, start: &[u8], prefix: &[u8], limit: usize, rev: i64) -> Range {
        let mut range = Range::default();
        let keys = self
            .index
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

    /// Every record (every revision) of the keys under `prefix`, in the file's own
    /// order, which is by revision, handed to `visit` until it returns `false`. One
    /// pass over the key bucket: each page is read once and no record is looked up
    /// (a [`Self::read`] per record descends the bucket's tree for each). When the
    /// pass ends, it must have seen as many records under `prefix` as the index built
    /// at open holds; otherwise the file changed since, which is an error.
    pub fn scan_under(
        &self,
        prefix: &[u8],
        mut visit: impl FnMut(Record) -> Result<bool>,
    ) -> Result<()> {
        let indexed: usize = self
            .keys_under(prefix)
            .map(|(_, revisions)| revisions.len())
            .sum();
        let (mut seen, mut stopped) = (0, false);
        self.keys.for_each(&self.file, |entry| {
            let record = record(&self.file, &entry)?;
            if !record.kv.key.starts_with(prefix) {
                return Ok(true);
            }
            seen += 1;
            let more = visit(record)?;
            stopped = !more;
            Ok(more)
        })?;
        if !stopped && seen != indexed {
            return Err(SnapshotError::CorruptRecord {
                path: self.file.path().to_owned(),
                record: format!("the records under {:?}", String::from_utf8_lossy(prefix)),
                page: 0,
                offset: 0,
                problem: format!(
                    "{seen} found, {indexed} indexed when the file was opened: the file changed"
                ),
            });
        }
        Ok(())
    }

    /// The keys holding `key` itself, or every key under `prefix`.
    pub fn keys_under<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> impl Iterator<Item = (&'a Bytes, &'a [IndexedRevision])> + 'a {
        self.index
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(move |(key, _)| key.starts_with(prefix))
            .map(|(key, revisions)| (key, revisions.as_slice()))
    }
}

/// The revision of the value live at `rev` among `revisions` (oldest first).
fn live_at(revisions: &[IndexedRevision], rev: i64) -> Option<Revision> {
    let last = revisions.iter().rev().find(|at| at.revision.main <= rev)?;
    (!last.tombstone).then_some(last.revision)
}

fn describe(at: IndexedRevision) -> String {
    let mark = if at.tombstone { " (deletion)" } else { "" };
    format!("revision {}_{}{mark}", at.revision.main, at.revision.sub)
}

fn bad_record(file: &BoltFile, record: &str, entry: &Entry, problem: &str) -> SnapshotError {
    SnapshotError::CorruptRecord {
        path: file.path().to_owned(),
        record: record.to_owned(),
        page: entry.page,
        offset: entry.offset,
        problem: problem.to_owned(),
    }
}

/// One entry of the `key` bucket as a record.
fn record(file: &BoltFile, entry: &Entry) -> Result<Record> {
    let Some((revision, tombstone)) = Revision::from_key(&entry.key) else {
        let key = format!("key {:?}", String::from_utf8_lossy(&entry.key));
        return Err(bad_record(file, &key, entry, "not a revision key"));
    };
    let at = IndexedRevision {
        revision,
        tombstone,
    };
    if entry.is_bucket {
        return Err(bad_record(
            file,
            &describe(at),
            entry,
            "a bucket, not a value",
        ));
    }
    let kv = decode_key_value(&entry.value).map_err(|problem| {
        bad_record(
            file,
            &describe(at),
            entry,
            &format!("mvccpb.KeyValue: {problem}"),
        )
    })?;
    if !tombstone && kv.mod_revision != revision.main {
        let problem = format!("its mod revision is {}", kv.mod_revision);
        return Err(bad_record(file, &describe(at), entry, &problem));
    }
    Ok(Record {
        revision,
        tombstone,
        kv,
    })
}

fn required_bucket(file: &BoltFile, root: &Bucket, name: &str) -> Result<Bucket> {
    root.bucket(file, name.as_bytes())?
        .ok_or_else(|| SnapshotError::NotEtcd {
            path: file.path().to_owned(),
            bucket: name.to_owned(),
        })
}

/// The database file `path` names: itself, or in a directory where etcd keeps it.
fn database_path(path: &Path) -> Result<PathBuf> {
    let metadata = std::fs::metadata(path).map_err(|source| SnapshotError::Io {
        path: path.to_owned(),
        source,
    })?;
    if !metadata.is_dir() {
        return Ok(path.to_owned());
    }
    DATABASE_PATHS
        .iter()
        .map(|relative| path.join(relative))
        .find(|candidate| candidate.is_file())
        .ok_or_else(|| SnapshotError::NoDatabase {
            path: path.to_owned(),
            looked_for: DATABASE_PATHS.join(", "),
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::io::Write;

    use super::*;
    use crate::bolt::testfile::{TestBolt, Value, bucket_at, inline_bucket};

    fn write(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(bytes).unwrap();
        file
    }

    fn kv(key: &[u8], rev: i64, value: &[u8]) -> Vec<u8> {
        let mut raw = vec![0x0a, key.len() as u8];
        raw.extend_from_slice(key);
        raw.extend_from_slice(&[0x10, rev as u8, 0x18, rev as u8, 0x20, 1, 0x2a]);
        raw.push(value.len() as u8);
        raw.extend_from_slice(value);
        raw
    }

    #[test]
    fn a_bbolt_file_without_etcds_buckets_is_not_etcd() {
        let mut bolt = TestBolt::new(4096);
        let other = inline_bucket(&[(b"x", Value::Plain(b"y"))]);
        let root = bolt.leaf(&[(b"containerd", Value::Bucket(other))]);
        let file = write(&bolt.finish(root));
        let err = Snapshot::open(file.path()).unwrap_err();
        assert!(
            matches!(&err, SnapshotError::NotEtcd { bucket, .. } if bucket == "key"),
            "{err}"
        );
    }

    #[test]
    fn revisions_tombstones_and_compaction_from_built_buckets() {
        let mut bolt = TestBolt::new(4096);
        let r2 = Revision { main: 2, sub: 0 }.to_key(false);
        let r3 = Revision { main: 3, sub: 0 }.to_key(false);
        let r4 = Revision { main: 4, sub: 0 }.to_key(true);
        let (v2, v3) = (kv(b"/a", 2, b"one"), kv(b"/a", 3, b"two"));
        let mut tomb = vec![0x0a, 2];
        tomb.extend_from_slice(b"/a");
        let keys = bolt.leaf(&[
            (&r2, Value::Plain(&v2)),
            (&r3, Value::Plain(&v3)),
            (&r4, Value::Plain(&tomb)),
        ]);
        let mut compact = 3i64.to_be_bytes().to_vec();
        compact.extend_from_slice(b"_\0\0\0\0\0\0\0\0");
        let meta = inline_bucket(&[
            (b"finishedCompactRev", Value::Plain(&compact)),
            (b"scheduledCompactRev", Value::Plain(&compact)),
        ]);
        let root = bolt.leaf(&[
            (b"key", Value::Bucket(bucket_at(keys))),
            (b"meta", Value::Bucket(meta)),
        ]);
        let file = write(&bolt.finish(root));
        let snapshot = Snapshot::open(file.path()).unwrap();
        assert_eq!(snapshot.revision(), 4);
        assert_eq!(snapshot.compact_revision(), 3);
        assert_eq!(snapshot.counts(), (3, 1));
        assert_eq!(snapshot.check_revision(2), Err(RevisionError::Compacted));
        assert_eq!(snapshot.check_revision(5), Err(RevisionError::Future));
        assert_eq!(&snapshot.get(b"/a", 3).unwrap().unwrap().value[..], b"two");
        assert!(snapshot.get(b"/a", 4).unwrap().is_none());
        let history = snapshot.history(b"/a").unwrap();
        assert_eq!(history.len(), 3);
        assert!(history[2].tombstone);
        assert_eq!(snapshot.range(b"/", b"/", 0, 3).keys.len(), 1);
        assert_eq!(snapshot.range(b"/", b"/", 0, 4).count, 0);
    }
}
