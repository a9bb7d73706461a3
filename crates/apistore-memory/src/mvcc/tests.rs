//! The revision log on its own: revisions, compaction, bounded history, expiry.
use super::*;

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

#[test]
fn revisions_versions_and_reads_in_the_past() {
    let mut mvcc = Mvcc::new(0);
    assert_eq!(mvcc.revision(), 1);
    assert_eq!(mvcc.put_if("/a", 0, b("1"), None), Ok(2));
    assert_eq!(
        mvcc.put_if("/a", 0, b("x"), None)
            .map_err(|kv| kv.map(|kv| kv.mod_revision)),
        Err(Some(2))
    );
    assert_eq!(mvcc.put_if("/a", 2, b("2"), None), Ok(3));
    let kv = mvcc.get("/a").unwrap();
    assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
    assert_eq!(mvcc.delete_if("/a", 3), Ok(4));
    assert!(mvcc.get("/a").is_none());
    let past = mvcc.range(&Keys::One("/a"), 0, 2).unwrap();
    assert_eq!(past.kvs[0].value, b("1"));
    assert_eq!(
        mvcc.range(&Keys::One("/a"), 0, 9).unwrap_err(),
        RevisionError::Future
    );
}

#[test]
fn compaction_keeps_its_revision_and_forgets_before() {
    let mut mvcc = Mvcc::new(0);
    mvcc.put_if("/p/a", 0, b("1"), None).unwrap();
    mvcc.put_if("/p/a", 2, b("2"), None).unwrap();
    mvcc.put_if("/p/b", 0, b("3"), None).unwrap();
    mvcc.compact(3).unwrap();
    assert_eq!(
        mvcc.range(&Keys::One("/p/a"), 0, 2).unwrap_err(),
        RevisionError::Compacted
    );
    let at = mvcc
        .range(
            &Keys::Prefix {
                start: "/p/",
                prefix: "/p/",
            },
            0,
            3,
        )
        .unwrap();
    assert_eq!(at.kvs.len(), 1);
    assert_eq!(mvcc.compact(3), Err(RevisionError::Compacted));
    let events = mvcc.events_since(&Keys::One("/p/a"), 3).unwrap();
    assert_eq!(
        events[0].prev_value, None,
        "the event at the compaction lost its previous value"
    );
    assert!(mvcc.events_since(&Keys::One("/p/a"), 2).is_err());
}

#[test]
fn bounded_history_compacts_the_oldest_revisions() {
    let mut mvcc = Mvcc::new(3);
    for i in 0..10 {
        mvcc.put_unconditionally("/k", b(&i.to_string()));
    }
    assert_eq!(mvcc.revision(), 11);
    assert_eq!(mvcc.compacted(), 8);
}

#[test]
fn expiry_deletes_at_one_revision() {
    let mut mvcc = Mvcc::new(0);
    mvcc.put_if("/a", 0, b("1"), Some(Duration::from_secs(1)))
        .unwrap();
    mvcc.put_if("/b", 0, b("1"), Some(Duration::from_secs(1)))
        .unwrap();
    assert_eq!(mvcc.expire(Duration::from_millis(500)), None);
    assert_eq!(mvcc.expire(Duration::from_secs(1)), Some(4));
    assert!(mvcc.get("/a").is_none() && mvcc.get("/b").is_none());
}
