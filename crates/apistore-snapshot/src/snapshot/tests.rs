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
    assert_eq!(snapshot.check_revision(2), Err(RevisionError::Compacted));
    assert_eq!(snapshot.check_revision(5), Err(RevisionError::Future));
    // Got twice: looked back for from the newest record, then from the index.
    for indexed in [false, true] {
        assert_eq!(snapshot.is_indexed(), indexed);
        assert_eq!(&snapshot.get(b"/a", 3).unwrap().unwrap().value[..], b"two");
        assert_eq!(&snapshot.get(b"/a", 2).unwrap().unwrap().value[..], b"one");
        assert!(snapshot.get(b"/a", 4).unwrap().is_none(), "deleted at 4");
        assert!(snapshot.get(b"/b", 4).unwrap().is_none(), "never written");
        assert!(snapshot.get(b"/a", 1).unwrap().is_none(), "not yet written");
        assert_eq!(snapshot.counts().unwrap(), (3, 1));
    }
    let history = snapshot.history(b"/a").unwrap();
    assert_eq!(history.len(), 3);
    assert!(history[2].tombstone);
    assert_eq!(snapshot.range(b"/", b"/", 0, 3).unwrap().keys.len(), 1);
    assert_eq!(snapshot.range(b"/", b"/", 0, 4).unwrap().count, 0);
}

/// A file whose `key` bucket holds `records` in the order given, and an empty `meta`.
fn key_bucket_of(records: &[(Vec<u8>, Value<'_>)]) -> tempfile::NamedTempFile {
    let mut bolt = TestBolt::new(4096);
    let entries: Vec<(&[u8], Value<'_>)> = records
        .iter()
        .map(|(key, value)| (key.as_slice(), value.clone()))
        .collect();
    let keys = bolt.leaf(&entries);
    let root = bolt.leaf(&[
        (b"key", Value::Bucket(bucket_at(keys))),
        (b"meta", Value::Bucket(inline_bucket(&[]))),
    ]);
    write(&bolt.finish(root))
}

/// The error of a get before the index and of the index build, which must agree.
fn get_and_index_errors(file: &tempfile::NamedTempFile, key: &[u8], rev: i64) -> [String; 2] {
    let snapshot = Snapshot::open(file.path()).unwrap();
    let looked_back = snapshot.get(key, rev).unwrap_err().to_string();
    assert!(!snapshot.is_indexed());
    let indexed = snapshot.counts().unwrap_err().to_string();
    [looked_back, indexed]
}

#[test]
fn a_damaged_key_bucket_is_the_same_error_looked_back_or_indexed() {
    let (v2, v4) = (kv(b"/a", 2, b"one"), kv(b"/b", 4, b"two"));
    let r = |main| Revision { main, sub: 0 }.to_key(false);
    // A nested bucket where a value belongs, between the newest record (which
    // opening reads whole) and the one the get wants.
    let nested = key_bucket_of(&[
        (r(2), Value::Plain(&v2)),
        (
            r(3),
            Value::Bucket(inline_bucket(&[(b"x", Value::Plain(b"y"))])),
        ),
        (r(4), Value::Plain(&v4)),
    ]);
    for err in get_and_index_errors(&nested, b"/a", 4) {
        assert!(err.contains("a bucket, not a value"), "{err}");
    }
    // Revision 4 stored before revision 2: the look back meets 2 first, then 4.
    let disordered = key_bucket_of(&[(r(4), Value::Plain(&v4)), (r(2), Value::Plain(&v2))]);
    for err in get_and_index_errors(&disordered, b"/b", 2) {
        assert!(err.contains("revisions out of order"), "{err}");
    }
}

/// A file of `records` revisions, each a put of its own key `/k{i}` except that
/// `/first` is written at revision 2 and `/last` at the last; leaves of 40 records
/// under one branch.
fn many_revisions(records: usize) -> tempfile::NamedTempFile {
    let mut bolt = TestBolt::new(4096);
    let mut entries = Vec::new();
    for i in 0..records {
        let rev = i as i64 + 2;
        let key = match i {
            0 => "/first".to_owned(),
            i if i + 1 == records => "/last".to_owned(),
            i => format!("/k{i}"),
        };
        let mut value = vec![0x0a, key.len() as u8];
        value.extend_from_slice(key.as_bytes());
        value.push(0x18);
        value.extend_from_slice(&varint(rev as u64));
        entries.push((Revision { main: rev, sub: 0 }.to_key(false), value));
    }
    let mut children = Vec::new();
    for chunk in entries.chunks(40) {
        let leaf: Vec<(&[u8], Value<'_>)> = chunk
            .iter()
            .map(|(k, v)| (k.as_slice(), Value::Plain(v)))
            .collect();
        children.push((chunk[0].0.clone(), bolt.leaf(&leaf)));
    }
    let children: Vec<(&[u8], u64)> = children.iter().map(|(k, id)| (k.as_slice(), *id)).collect();
    let keys = bolt.branch(&children);
    let meta = inline_bucket(&[]);
    let root = bolt.leaf(&[
        (b"key", Value::Bucket(bucket_at(keys))),
        (b"meta", Value::Bucket(meta)),
    ]);
    write(&bolt.finish(root))
}

fn varint(mut n: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out
}

#[test]
fn a_get_looks_back_from_the_newest_records_then_builds_the_index() {
    let records = LOOK_BACK_MIN * 2;
    let file = many_revisions(records);
    let snapshot = Snapshot::open(file.path()).unwrap();
    let last_rev = records as i64 + 1;
    assert_eq!(snapshot.revision(), last_rev);
    // The newest key is among the newest records: no index.
    let last = snapshot.get(b"/last", last_rev).unwrap().unwrap();
    assert_eq!(last.mod_revision, last_rev);
    let recent = format!("/k{}", records - 10);
    assert!(snapshot.get(recent.as_bytes(), last_rev).unwrap().is_some());
    assert!(!snapshot.is_indexed());
    // The oldest is past the newest records: the first such get walks on to it,
    // the next builds the index, which answers from then on.
    for indexed in [false, true] {
        let first = snapshot.get(b"/first", last_rev).unwrap().unwrap();
        assert_eq!(first.mod_revision, 2);
        assert_eq!(snapshot.is_indexed(), indexed);
    }
    assert_eq!(snapshot.counts().unwrap(), (records, records));
    assert!(snapshot.get(b"/last", last_rev - 1).unwrap().is_none());
    // A key never written, on a fresh open: the first get walks to the first
    // record, the second builds the index; both answer none.
    let fresh = Snapshot::open(file.path()).unwrap();
    for indexed in [false, true] {
        assert!(fresh.get(b"/never", last_rev).unwrap().is_none());
        assert_eq!(fresh.is_indexed(), indexed);
    }
    // On a file smaller than the look back, it finds each key without the index.
    let small = many_revisions(LOOK_BACK_MIN / 2);
    let small = Snapshot::open(small.path()).unwrap();
    assert_eq!(
        small
            .get(b"/first", small.revision())
            .unwrap()
            .unwrap()
            .mod_revision,
        2
    );
    assert!(small.get(b"/never", small.revision()).unwrap().is_none());
    assert!(!small.is_indexed());
}
