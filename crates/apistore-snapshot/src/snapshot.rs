//! An etcd database read from a bbolt file: the index of every key's revisions, the
//! current and compacted revisions, and reads of any revision the file still holds.
//!
//! Opening reads the meta pages, the `meta` bucket (the compaction:
//! `finishedCompactRev`, `scheduledCompactRev`, a revision key of which the first 8
//! bytes are the main revision; and `consistent_index`) and the `key` bucket's last
//! record, whose revision is the current one: etcd's `key` bucket is ordered by
//! revision. The index of every key's revisions ([`crate::index`], etcd's `treeIndex`,
//! which etcd builds when it starts) takes a scan of the whole bucket, so it is built
//! when first needed: by a list, a count, a history, a watch. A get before that looks
//! back from the newest record, where a key's latest revision is met before its older
//! ones, and stops at the first record of its key. A key not among the newest records
//! (an eighth of the file's pages) is walked on to by the first get that needs it (a
//! walk reading keys only costs less than building the index), and builds the index for
//! each later one. Values stay in the file and are read when asked for, by their
//! revision key.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use bytes::Bytes;

use crate::bolt::{BoltFile, Bucket, Entry};
use crate::error::{Result, SnapshotError};
use crate::index::{Index, live_at};
use crate::mvcc::{KeyValue, Revision, decode_key_value, key_of};

/// Where a member's data directory keeps its database, tried in this order for a
/// directory: the data dir, the member dir, the snap dir.
const DATABASE_PATHS: [&str; 3] = ["member/snap/db", "snap/db", "db"];

/// The newest records, which a get looks back over before it builds the index instead
/// (but for the first get that goes further, see [`Snapshot::get`]): at least this many,
/// or one per eight pages of the file.
const LOOK_BACK_MIN: usize = 1024;

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
    index: OnceLock<Index>,
    /// Held while the index is built, so that two readers do not both scan the file.
    building: Mutex<()>,
    /// Whether a get has looked back past the newest records already.
    looked_far: AtomicBool,
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

        // The bucket is ordered by revision: its last record is the newest.
        let mut newest: Option<Revision> = None;
        keys.for_each_rev(&file, |entry| {
            newest = Some(record(&file, &entry)?.revision);
            Ok(false)
        })?;
        // As etcd when it restores: a compaction past the last write is the current
        // revision.
        let current = newest
            .map_or(1, |revision| revision.main.max(1))
            .max(finished_compact)
            .max(scheduled_compact);
        Ok(Self {
            file,
            keys,
            index: OnceLock::new(),
            building: Mutex::new(()),
            looked_far: AtomicBool::new(false),
            current,
            finished_compact,
            scheduled_compact,
            consistent_index,
        })
    }

    /// The index of every key's revisions, built by a scan of the whole `key` bucket
    /// the first time it is asked for.
    fn index(&self) -> Result<&Index> {
        if let Some(index) = self.index.get() {
            return Ok(index);
        }
        let _building = self.building.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(index) = self.index.get() {
            return Ok(index);
        }
        let built = Index::build(&self.file, &self.keys)?;
        Ok(self.index.get_or_init(|| built))
    }

    /// Whether the index of every key's revisions has been built.
    pub fn is_indexed(&self) -> bool {
        self.index.get().is_some()
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

    /// How many revisions of how many keys the file holds (builds the index).
    pub fn counts(&self) -> Result<(usize, usize)> {
        Ok(self.index()?.counts())
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

    /// The revisions of `key` the file holds, oldest first (builds the index).
    pub fn revisions(&self, key: &[u8]) -> Result<&[IndexedRevision]> {
        Ok(self.index()?.revisions(key))
    }

    /// The revision of `key`'s value at `rev`, `None` when it did not exist then
    /// (builds the index).
    pub fn revision_at(&self, key: &[u8], rev: i64) -> Result<Option<Revision>> {
        Ok(live_at(self.revisions(key)?, rev))
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
                problem: "indexed but gone now: the file changed".to_owned(),
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
    /// `None` when it did not exist then. Before the index is built, the file is read
    /// from its newest record back (see the module's documentation): the first get
    /// that must look past the newest records walks on to the key, each later one
    /// builds the index instead.
    pub fn get(&self, key: &[u8], rev: i64) -> Result<Option<KeyValue>> {
        if !self.is_indexed() {
            match self.look_back(key, rev)? {
                LookBack::Found(kv) => return Ok(Some(kv)),
                LookBack::Absent => return Ok(None),
                LookBack::NotAmongTheNewest => {}
            }
        }
        let Some(revision) = self.revision_at(key, rev)? else {
            return Ok(None);
        };
        let at = IndexedRevision {
            revision,
            tombstone: false,
        };
        self.read(key, at).map(|record| Some(record.kv))
    }

    /// `key` at `rev`, from the newest records back: the first record of `key` at or
    /// below `rev` is its value then, or its deletion. Each record's key is read
    /// without decoding the rest.
    ///
    /// The first get that has to look past the newest records ([`LOOK_BACK_MIN`], or
    /// one per eight pages of the file, whichever is more) walks on to the key, or to
    /// the first record: a walk that reads keys only costs about two thirds of
    /// building the index (paired on the bench's 714 MiB file), so a single get (the
    /// command's) is answered soonest that way. Each later one gives
    /// up there and builds the index, which answers every get after it: a reader
    /// making many gets pays at most one such walk more than the index.
    fn look_back(&self, key: &[u8], rev: i64) -> Result<LookBack> {
        let newest = usize::try_from(self.file.meta().high_water / 8)
            .unwrap_or(usize::MAX)
            .max(LOOK_BACK_MIN);
        let budget = if self.looked_far.load(Ordering::Relaxed) {
            newest
        } else {
            usize::MAX
        };
        let mut examined = 0;
        // What the bucket answers when the walk reaches its first record.
        let mut answer = LookBack::Absent;
        // The revision of the record read before this one, which is newer. Each record
        // passed is checked as the index build checks it (`revision_of`, `in_order`), so
        // a damaged file gives the same error whether a get looks back or the index
        // answers it.
        let mut newer: Option<Revision> = None;
        self.keys.for_each_rev(&self.file, |entry| {
            if examined == budget {
                answer = LookBack::NotAmongTheNewest;
                return Ok(false);
            }
            examined += 1;
            let at = revision_of(&self.file, &entry)?;
            if let Some(newer) = newer {
                in_order(&self.file, &entry, at.revision, newer)?;
            }
            newer = Some(at.revision);
            if at.revision.main > rev {
                return Ok(true);
            }
            let stored = key_of(&entry.value).map_err(|problem| {
                let problem = format!("mvccpb.KeyValue: {problem}");
                bad_record(&self.file, &describe(at), &entry, &problem)
            })?;
            if stored != key {
                return Ok(true);
            }
            answer = if at.tombstone {
                LookBack::Absent
            } else {
                LookBack::Found(record(&self.file, &entry)?.kv)
            };
            Ok(false)
        })?;
        if examined > newest {
            self.looked_far.store(true, Ordering::Relaxed);
        }
        Ok(answer)
    }

    /// Every revision of `key` the file holds, with its key-value, oldest first
    /// (builds the index).
    pub fn history(&self, key: &[u8]) -> Result<Vec<Record>> {
        self.revisions(key)?
            .iter()
            .map(|at| self.read(key, *at))
            .collect()
    }

    /// The keys from `start` that begin with `prefix` and exist at `rev`, at most
    /// `limit` of them (0: all), as etcd's range answers (builds the index).
    pub fn range(&self, start: &[u8], prefix: &[u8], limit: usize, rev: i64) -> Result<Range> {
        Ok(self.index()?.range(start, prefix, limit, rev))
    }

    /// Every record (every revision) of the keys under `prefix`, in the file's own
    /// order, which is by revision, handed to `visit` until it returns `false`. One
    /// pass over the key bucket: each page is read once and no record is looked up
    /// (a [`Self::read`] per record descends the bucket's tree for each). When the
    /// pass ends, it must have seen as many records under `prefix` as the index (built
    /// first, if it was not) holds; otherwise the file changed since, which is an error.
    pub fn scan_under(
        &self,
        prefix: &[u8],
        mut visit: impl FnMut(Record) -> Result<bool>,
    ) -> Result<()> {
        let indexed: usize = self
            .keys_under(prefix)?
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
                problem: format!("{seen} found, {indexed} indexed before: the file changed"),
            });
        }
        Ok(())
    }

    /// The keys holding `key` itself, or every key under `prefix`, each with its
    /// revisions (builds the index).
    pub fn keys_under<'a>(
        &'a self,
        prefix: &'a [u8],
    ) -> Result<impl Iterator<Item = (&'a Bytes, &'a [IndexedRevision])> + 'a> {
        Ok(self.index()?.keys_under(prefix))
    }
}

/// What looking back from the newest records found.
enum LookBack {
    /// The key's value at the revision.
    Found(KeyValue),
    /// The key was deleted at or before the revision, or the whole bucket holds no
    /// record of it.
    Absent,
    /// None of the newest records is the key's: the index answers.
    NotAmongTheNewest,
}

pub(crate) fn describe(at: IndexedRevision) -> String {
    let mark = if at.tombstone { " (deletion)" } else { "" };
    format!("revision {}_{}{mark}", at.revision.main, at.revision.sub)
}

pub(crate) fn bad_record(
    file: &BoltFile,
    record: &str,
    entry: &Entry,
    problem: &str,
) -> SnapshotError {
    SnapshotError::CorruptRecord {
        path: file.path().to_owned(),
        record: record.to_owned(),
        page: entry.page,
        offset: entry.offset,
        problem: problem.to_owned(),
    }
}

/// The revision an entry of the `key` bucket is stored under, once it is known to hold
/// a value (not a nested bucket); its value is not decoded.
pub(crate) fn revision_of(file: &BoltFile, entry: &Entry) -> Result<IndexedRevision> {
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
    Ok(at)
}

/// Fails unless `earlier` comes before `later` in the `key` bucket, as etcd writes it;
/// `entry` is the one of the two read second.
pub(crate) fn in_order(
    file: &BoltFile,
    entry: &Entry,
    earlier: Revision,
    later: Revision,
) -> Result<()> {
    if earlier >= later {
        return Err(bad_record(
            file,
            "in the key bucket",
            entry,
            "revisions out of order",
        ));
    }
    Ok(())
}

/// One entry of the `key` bucket as a record.
pub(crate) fn record(file: &BoltFile, entry: &Entry) -> Result<Record> {
    let at = revision_of(file, entry)?;
    let IndexedRevision {
        revision,
        tombstone,
    } = at;
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
mod tests;
