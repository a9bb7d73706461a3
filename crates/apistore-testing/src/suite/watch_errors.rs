//! Watch failures every backend must answer alike (first written for the etcd3 store,
//! in its `watch_conformance` tests): a refused resourceVersion, an undecodable value,
//! a change whose previous value compaction took, and a start below the compacted
//! revision.

use apistore_storage::{ErrorKind, ListOptions, Storage, WatchEvent};

use super::watch::{EVENT_TIMEOUT, expect_event, next_event, put_pod};
use super::{Backend, Pod};

fn from(rv: &str, recursive: bool) -> ListOptions {
    ListOptions {
        resource_version: rv.to_owned(),
        recursive,
        ..ListOptions::default()
    }
}

async fn current_rv<B: Backend>(backend: &B) -> String {
    backend
        .store()
        .list("/pods", &from("", true))
        .await
        .unwrap()
        .metadata
        .resource_version
}

/// Fails unless the watch ends (after its last event) within [`EVENT_TIMEOUT`].
async fn expect_end(watch: &mut apistore_storage::WatchStream<Pod>) {
    match tokio::time::timeout(EVENT_TIMEOUT, next_event(watch)).await {
        Ok(None) => {}
        Ok(Some(event)) => panic!("an event after the last: {event:?}"),
        Err(_) => panic!("the watch did not end"),
    }
}

/// An unparsable resourceVersion is refused (422 on `resourceVersion`) before the watch
/// starts.
pub async fn run_test_invalid_resource_version_is_refused<B: Backend>(backend: &B) {
    let before = super::watch::active_watches(backend);
    for rv in ["abc", "-1", "1.5", "99999999999999999999"] {
        let Err(err) = backend.store().watch("/pods/ns", &from(rv, true)).await else {
            panic!("watch at {rv:?} started");
        };
        assert_eq!(err.kind(), ErrorKind::Invalid, "{rv:?}: {err}");
        let status = err.status();
        assert_eq!(
            (status.code, status.reason.as_str()),
            (422, "Invalid"),
            "{rv:?}"
        );
        let cause = &status.details.unwrap().causes[0];
        assert_eq!(cause.field, "resourceVersion");
    }
    assert_eq!(super::watch::active_watches(backend), before);
}

/// A value that does not decode ends the watch with a 500 naming the key, last.
pub async fn run_test_undecodable_value_ends_watch<B: Backend>(backend: &B) {
    let rv = current_rv(backend).await;
    let mut w = backend
        .store()
        .watch("/pods/ns", &from(&rv, true))
        .await
        .unwrap();
    let key = backend.stored_key("/pods/ns/bad");
    backend.raw_put(&key, b"test!{not json".to_vec()).await;
    match expect_event(&mut w, "undecodable").await {
        WatchEvent::Error(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (500, "InternalError"),
                "{status:?}"
            );
            assert!(
                status.message.starts_with("Internal error occurred: "),
                "{status:?}"
            );
            assert!(status.message.contains(&key), "{status:?}");
        }
        other => panic!("expected an Error event, got {other:?}"),
    }
    expect_end(&mut w).await;
}

/// A modification whose previous value was compacted away arrives without it: the
/// watch cannot tell what changed and ends with a 500 (`PrevKv=nil`); a watch from a
/// compacted revision ends with 410 Expired. Compacts: needs a fresh backend.
pub async fn run_test_missing_previous_value_ends_watch<B: Backend>(backend: &B) {
    let store = backend.store();
    let pod = Pod::new("ns", "p");
    store.create(&pod.key(), pod, 0).await.unwrap();
    let mut first = Pod::new("ns", "p");
    first.metadata.annotations.insert("v".into(), "1".into());
    let second = put_pod(store, "/pods/ns/p", first).await;
    let mut third = Pod::new("ns", "p");
    third.metadata.annotations.insert("v".into(), "2".into());
    let third = put_pod(store, "/pods/ns/p", third).await;
    backend.compact(&third.metadata.resource_version).await;

    let mut w = store
        .watch(
            "/pods/ns/p",
            &from(&second.metadata.resource_version, false),
        )
        .await
        .unwrap();
    match expect_event(&mut w, "compacted previous value").await {
        WatchEvent::Error(status) => {
            assert_eq!(status.code, 500, "{status:?}");
            assert!(status.message.contains("PrevKv=nil"), "{status:?}");
            assert!(
                status.message.contains(&backend.stored_key("/pods/ns/p")),
                "{status:?}"
            );
        }
        other => panic!("expected an Error event, got {other:?}"),
    }
    expect_end(&mut w).await;

    // From a compacted revision: 410.
    let mut w = store.watch("/pods/ns/p", &from("1", false)).await.unwrap();
    match expect_event(&mut w, "compacted start").await {
        WatchEvent::Error(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (410, "Expired"),
                "{status:?}"
            );
            assert_eq!(
                status.message,
                "The resourceVersion for the provided watch is too old."
            );
        }
        other => panic!("expected an Error event, got {other:?}"),
    }
    expect_end(&mut w).await;
}
