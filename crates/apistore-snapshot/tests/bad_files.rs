//! Bad files: a real snapshot truncated at every page boundary and inside pages, and
//! with bits flipped all over it, is read as far as it goes; every problem is an
//! error naming the file and where, never a panic and never a hang.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use apistore_snapshot::{Snapshot, SnapshotError, SnapshotStore, SnapshotStoreConfig};
use apistore_storage::{DynamicObject, ListOptions, Storage};

/// Everything a reader can ask of a snapshot: every key's history, every key at the
/// current revision, a list through the store. Errors are fine; panics are not.
async fn read_everything(path: &std::path::Path) -> Result<(), String> {
    let snapshot = Arc::new(Snapshot::open(path).map_err(|e| e.to_string())?);
    let keys: Vec<_> = snapshot
        .keys_under(b"")
        .map_err(|e| e.to_string())?
        .map(|(k, _)| k.clone())
        .collect();
    // Each key got from a file not yet indexed: looked back for from the newest record.
    let unindexed = Snapshot::open(path).map_err(|e| e.to_string())?;
    for key in &keys {
        unindexed
            .get(key, unindexed.revision())
            .map_err(|e| e.to_string())?;
    }
    for key in &keys {
        snapshot.history(key).map_err(|e| e.to_string())?;
        snapshot
            .get(key, snapshot.revision())
            .map_err(|e| e.to_string())?;
    }
    let store: SnapshotStore<DynamicObject> =
        SnapshotStore::new(snapshot, SnapshotStoreConfig::default());
    store
        .list("configmaps", &ListOptions::prefix())
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread")]
async fn truncated_and_bit_flipped_snapshots_are_errors_never_panics() {
    let fx = common::fixture().await;
    let bytes = std::fs::read(&fx.snapshot).unwrap();
    let page_size = 4096;
    let data_len = bytes.len() - 32;
    assert_eq!(data_len % page_size, 0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.db");
    let started = Instant::now();

    // Truncations: at every page boundary and in the middle of every page. Any cut
    // into the pages is a truncation error at open, naming the bytes it needs.
    let mut cuts: Vec<usize> = (0..data_len / page_size)
        .flat_map(|page| [page * page_size, page * page_size + 100])
        .collect();
    cuts.extend([1, 79, 80, data_len + 1, data_len + 31]);
    for cut in cuts {
        std::fs::write(&path, &bytes[..cut]).unwrap();
        let err = match Snapshot::open(&path) {
            Ok(_) if cut >= data_len => continue,
            Ok(_) => panic!("a snapshot cut at {cut} of {data_len} opened"),
            Err(err) => err,
        };
        let text = err.to_string();
        assert!(text.contains("broken.db"), "{text}");
        match err {
            SnapshotError::Truncated { .. } | SnapshotError::NotBbolt { .. } => {}
            other => panic!("cut at {cut}: {other}"),
        }
        assert!(
            Snapshot::open(&path).is_err(),
            "opening twice answers the same"
        );
    }

    // Bit flips all over the file, from a fixed seed: read everything each time.
    let mut seed: u64 = 0x5eed_cafe_f00d_d00d;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut errors, mut fine) = (0, 0);
    for _ in 0..400 {
        let mut broken = bytes.clone();
        let at = (next() % data_len as u64) as usize;
        broken[at] ^= 1 << (next() % 8);
        std::fs::write(&path, &broken).unwrap();
        match read_everything(&path).await {
            Ok(()) => fine += 1,
            Err(text) => {
                assert!(
                    text.contains("broken.db") || text.contains("/registry/"),
                    "{text}"
                );
                errors += 1;
            }
        }
    }
    // Flips in unused or freed space are harmless; many others are found.
    assert!(errors > 0 && fine > 0, "{errors} errors, {fine} fine");

    // Whole pages overwritten: with zeros, with another page, with garbage.
    let pages = data_len / page_size;
    for page in 2..pages {
        for filler in 0..3u8 {
            let mut broken = bytes.clone();
            let range = page * page_size..(page + 1) * page_size;
            match filler {
                0 => broken[range].fill(0),
                1 => {
                    let other = (page + 1) % pages * page_size;
                    let copy = bytes[other..other + page_size].to_vec();
                    broken[range].copy_from_slice(&copy);
                }
                _ => broken[range].fill(0xa5),
            }
            std::fs::write(&path, &broken).unwrap();
            let _ = read_everything(&path).await;
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn not_a_file_and_empty_directories_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let err = Snapshot::open(dir.path()).unwrap_err();
    assert!(matches!(err, SnapshotError::NoDatabase { .. }), "{err}");
    assert!(err.to_string().contains("member/snap/db"), "{err}");
    let err = Snapshot::open(dir.path().join("missing")).unwrap_err();
    assert!(matches!(err, SnapshotError::Io { .. }), "{err}");
    let text = dir.path().join("text");
    std::fs::write(
        &text,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-a-database\n",
    )
    .unwrap();
    let err = Snapshot::open(&text).unwrap_err();
    assert!(matches!(err, SnapshotError::NotBbolt { .. }), "{err}");
}
