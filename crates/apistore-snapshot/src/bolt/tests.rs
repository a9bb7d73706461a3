//! The reader against files built page by page: nested and inline buckets, overflow
//! pages, branch pages, and files broken in the ways the reader must name.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;

use super::testfile::{TestBolt, Value, bucket_at, inline_bucket};
use super::{BoltFile, Bucket};
use crate::error::SnapshotError;

fn write(bytes: &[u8]) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().unwrap();
    file.write_all(bytes).unwrap();
    file
}

/// Root: bucket "big" (a branch over two leaves, one value on overflow pages) and
/// bucket "small" (inline, with a nested inline bucket "inner").
fn sample() -> Vec<u8> {
    let mut bolt = TestBolt::new(512);
    let large = vec![7u8; 1500];
    let left = bolt.leaf(&[(b"a", Value::Plain(b"1")), (b"b", Value::Plain(&large))]);
    let right = bolt.leaf(&[(b"m", Value::Plain(b"3")), (b"z", Value::Plain(b"4"))]);
    let big = bolt.branch(&[(b"a", left), (b"m", right)]);
    let inner = inline_bucket(&[(b"deep", Value::Plain(b"yes"))]);
    let small = inline_bucket(&[(b"inner", Value::Bucket(inner)), (b"k", Value::Plain(b"v"))]);
    let root = bolt.leaf(&[
        (b"big", Value::Bucket(bucket_at(big))),
        (b"small", Value::Bucket(small)),
    ]);
    bolt.finish(root)
}

#[test]
fn reads_nested_inline_and_overflowing_buckets() {
    let file = write(&sample());
    let bolt = BoltFile::open(file.path()).unwrap();
    assert_eq!(bolt.meta().txid, 5);
    assert_eq!(bolt.meta().page, 1);
    assert_eq!(bolt.meta().page_size, 512);
    let root = Bucket::root(&bolt);
    let big = root.bucket(&bolt, b"big").unwrap().unwrap();
    assert_eq!(&big.get(&bolt, b"a").unwrap().unwrap().value[..], b"1");
    assert_eq!(big.get(&bolt, b"b").unwrap().unwrap().value.len(), 1500);
    assert_eq!(&big.get(&bolt, b"z").unwrap().unwrap().value[..], b"4");
    assert!(big.get(&bolt, b"c").unwrap().is_none());
    assert!(big.get(&bolt, b"0").unwrap().is_none());
    let mut keys = Vec::new();
    big.for_each(&bolt, |entry| {
        keys.push(entry.key.to_vec());
        Ok(true)
    })
    .unwrap();
    assert_eq!(
        keys,
        [b"a".to_vec(), b"b".to_vec(), b"m".to_vec(), b"z".to_vec()]
    );
    let small = root.bucket(&bolt, b"small").unwrap().unwrap();
    assert_eq!(&small.get(&bolt, b"k").unwrap().unwrap().value[..], b"v");
    let inner = small.bucket(&bolt, b"inner").unwrap().unwrap();
    assert_eq!(
        &inner.get(&bolt, b"deep").unwrap().unwrap().value[..],
        b"yes"
    );
    assert!(root.bucket(&bolt, b"missing").unwrap().is_none());
    // A plain key is not a bucket.
    assert!(small.bucket(&bolt, b"k").unwrap().is_none());
}

/// Keys and values, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A bucket of `leaves` leaf pages under one branch, each leaf one small value and one
/// of a few pages (its overflow straddling the reads ahead), the leaves in file order
/// or, with `reversed`, against it. Returns the file and every (key, value) in key order.
fn many_leaves(leaves: usize, reversed: bool) -> (Vec<u8>, Entries) {
    let mut bolt = TestBolt::new(4096);
    let mut entries = Vec::new();
    for i in 0..leaves {
        let small = (
            format!("k{i:04}a").into_bytes(),
            format!("v{i}").into_bytes(),
        );
        let large = (
            format!("k{i:04}b").into_bytes(),
            vec![(i % 251) as u8; 5_000 + (i * 977) % 9_000],
        );
        entries.push(vec![small, large]);
    }
    let order: Vec<usize> = if reversed {
        (0..leaves).rev().collect()
    } else {
        (0..leaves).collect()
    };
    let mut ids = vec![0; leaves];
    for &i in &order {
        let leaf: Vec<(&[u8], Value<'_>)> = entries[i]
            .iter()
            .map(|(k, v)| (k.as_slice(), Value::Plain(v)))
            .collect();
        ids[i] = bolt.leaf(&leaf);
    }
    let children: Vec<(&[u8], u64)> = (0..leaves)
        .map(|i| (entries[i][0].0.as_slice(), ids[i]))
        .collect();
    let branch = bolt.branch(&children);
    let root = bolt.leaf(&[(b"big", Value::Bucket(bucket_at(branch)))]);
    (bolt.finish(root), entries.into_iter().flatten().collect())
}

#[test]
fn pages_read_ahead_are_the_pages_read_one_by_one() {
    // 200 leaves of one page plus two to four overflow pages: about 3 MiB, a dozen
    // reads ahead, read in file order and against it, scanned and looked up.
    for reversed in [false, true] {
        let (bytes, want) = many_leaves(200, reversed);
        let file = write(&bytes);
        let bolt = BoltFile::open(file.path()).unwrap();
        let big = Bucket::root(&bolt).bucket(&bolt, b"big").unwrap().unwrap();
        let mut scanned = Vec::new();
        big.for_each(&bolt, |entry| {
            scanned.push((entry.key.to_vec(), entry.value.to_vec()));
            Ok(true)
        })
        .unwrap();
        assert!(scanned == want, "scan, reversed: {reversed}");
        // Walked from the last key back: the same entries, the other way round; and a
        // walk stopped early visits only what it asked for.
        let mut backward = Vec::new();
        big.for_each_rev(&bolt, |entry| {
            backward.push((entry.key.to_vec(), entry.value.to_vec()));
            Ok(true)
        })
        .unwrap();
        backward.reverse();
        assert!(backward == want, "backward, reversed: {reversed}");
        let mut newest = Vec::new();
        big.for_each_rev(&bolt, |entry| {
            newest.push(entry.key.to_vec());
            Ok(newest.len() < 3)
        })
        .unwrap();
        let last_three: Vec<_> = want.iter().rev().take(3).map(|(k, _)| k.clone()).collect();
        assert_eq!(newest, last_three);
        // Looked up out of order, then scanned again: the same bytes.
        for (key, value) in want.iter().rev().step_by(7) {
            let entry = big.get(&bolt, key).unwrap().unwrap();
            assert!(
                entry.value[..] == value[..],
                "get {key:?}, reversed: {reversed}"
            );
        }
        let mut again = 0;
        big.for_each(&bolt, |entry| {
            assert!(entry.value[..] == want[again].1[..], "rescan {again}");
            again += 1;
            Ok(true)
        })
        .unwrap();
        assert_eq!(again, want.len());
    }
}

#[test]
fn the_newer_valid_meta_wins_and_a_broken_one_is_skipped() {
    let mut bytes = sample();
    // Break meta page 1's checksum: meta 0 (txid 4) is current.
    bytes[512 + 16 + 56] ^= 0xff;
    let file = write(&bytes);
    let bolt = BoltFile::open(file.path()).unwrap();
    assert_eq!((bolt.meta().page, bolt.meta().txid), (0, 4));
    // Both broken: corrupt page 0, naming both reasons.
    bytes[16 + 56] ^= 0xff;
    let file = write(&bytes);
    let err = BoltFile::open(file.path()).unwrap_err();
    assert!(
        matches!(err, SnapshotError::CorruptPage { page: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("checksum"), "{err}");
}

#[test]
fn a_snapshot_hash_is_found_and_checked() {
    let mut bytes = sample();
    use sha2::Digest;
    let hash: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    bytes.extend_from_slice(&hash);
    let file = write(&bytes);
    let bolt = BoltFile::open(file.path()).unwrap();
    assert!(bolt.has_hash());
    assert!(bolt.verify_hash().unwrap());
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let file = write(&bytes);
    let err = BoltFile::open(file.path())
        .unwrap()
        .verify_hash()
        .unwrap_err();
    assert!(matches!(err, SnapshotError::HashMismatch { .. }), "{err}");
}

#[test]
fn not_bbolt_and_truncated_files_are_named() {
    let file = write(b"hello, this is not a database at all, just some text that is long enough to read a meta page from");
    let err = BoltFile::open(file.path()).unwrap_err();
    assert!(matches!(err, SnapshotError::NotBbolt { .. }), "{err}");
    let file = write(b"");
    assert!(matches!(
        BoltFile::open(file.path()).unwrap_err(),
        SnapshotError::NotBbolt { .. }
    ));
    let bytes = sample();
    let file = write(&bytes[..bytes.len() - 512]);
    let err = BoltFile::open(file.path()).unwrap_err();
    assert!(matches!(err, SnapshotError::Truncated { .. }), "{err}");
    let file = write(&bytes[..40]);
    let err = BoltFile::open(file.path()).unwrap_err();
    assert!(matches!(err, SnapshotError::Truncated { .. }), "{err}");
    let file = write(&bytes[..10]);
    let err = BoltFile::open(file.path()).unwrap_err();
    assert!(matches!(err, SnapshotError::NotBbolt { .. }), "{err}");
}

#[test]
fn a_page_cycle_is_an_error_not_a_hang() {
    let mut bolt = TestBolt::new(512);
    let leaf = bolt.leaf(&[(b"a", Value::Plain(b"1"))]);
    // The branch will be page 4: it names itself as its second child.
    let branch = bolt.branch(&[(b"a", leaf), (b"b", 4)]);
    assert_eq!(branch, 4);
    let root = bolt.leaf(&[(b"loop", Value::Bucket(bucket_at(branch)))]);
    let file = write(&bolt.finish(root));
    let bolt = BoltFile::open(file.path()).unwrap();
    let bucket = Bucket::root(&bolt).bucket(&bolt, b"loop").unwrap().unwrap();
    let err = bucket.for_each(&bolt, |_| Ok(true)).unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
    let err = bucket.for_each_rev(&bolt, |_| Ok(true)).unwrap_err();
    assert!(err.to_string().contains("cycle"), "backward: {err}");
    let err = bucket.get(&bolt, b"zzz").unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
}

#[test]
fn bad_elements_and_pages_name_the_page_and_offset() {
    let bytes = sample();
    // Page 3 is the left leaf: make its second element point far past the page.
    let mut broken = bytes.clone();
    let element = 3 * 512 + 16 + 16;
    broken[element + 4..element + 8].copy_from_slice(&100_000u32.to_le_bytes());
    let file = write(&broken);
    let bolt = BoltFile::open(file.path()).unwrap();
    let big = Bucket::root(&bolt).bucket(&bolt, b"big").unwrap().unwrap();
    for backward in [false, true] {
        let err = if backward {
            big.for_each_rev(&bolt, |_| Ok(true)).unwrap_err()
        } else {
            big.for_each(&bolt, |_| Ok(true)).unwrap_err()
        };
        match &err {
            SnapshotError::CorruptPage { page, offset, .. } => {
                assert_eq!((*page, *offset), (3, element as u64), "{err}");
            }
            other => panic!("{other}"),
        }
    }
    // A page whose header names another page.
    let mut broken = bytes;
    broken[3 * 512] = 9;
    let file = write(&broken);
    let bolt = BoltFile::open(file.path()).unwrap();
    let big = Bucket::root(&bolt).bucket(&bolt, b"big").unwrap().unwrap();
    let err = big.get(&bolt, b"a").unwrap_err();
    assert!(err.to_string().contains("says it is page 9"), "{err}");
}

proptest::proptest! {
    /// Any bytes written anywhere over a valid file: opening and walking every
    /// bucket answers or errs, never panics.
    #[test]
    fn arbitrary_damage_is_an_error_never_a_panic(
        damage in proptest::collection::vec((0usize..8192, proptest::prelude::any::<u8>()), 1..16),
    ) {
        let mut bytes = sample();
        for (at, byte) in damage {
            let at = at % bytes.len();
            bytes[at] = byte;
        }
        let file = write(&bytes);
        if let Ok(bolt) = BoltFile::open(file.path()) {
            let root = Bucket::root(&bolt);
            for name in [&b"big"[..], b"small"] {
                if let Ok(Some(bucket)) = root.bucket(&bolt, name) {
                    let _ = bucket.for_each(&bolt, |_| Ok(true));
                    let _ = bucket.for_each_rev(&bolt, |_| Ok(true));
                    let _ = bucket.get(&bolt, b"m");
                    let _ = bucket.bucket(&bolt, b"inner");
                }
            }
        }
    }
}
