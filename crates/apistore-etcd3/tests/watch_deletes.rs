//! A watch that sees a delete delivers DELETED, however the server shapes its delete
//! event: kube's `parseEvent` (`etcd3/event.go`) tells a delete by the event's type.
//!
//! etcd's DELETE carries a key-value with no create revision. kine's (k3s-io/kine, the
//! etcd shim k3s runs kube-apiserver on) carries the deleted object's create revision
//! and an empty value; apistore once told a delete by the missing create revision, read
//! kine's as a modification to an empty value, and ended the watch with `unable to
//! decode value: decode failed: EOF while parsing a value`. These run on the shared
//! endpoint: etcd under `cargo xtask test`, kine under `cargo xtask kine`.

// Helpers of a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use apistore_etcd3::next_event;
use apistore_storage::{
    DeleteOptions, ListOptions, Storage, Update, UpdateOptions, WatchEvent, WatchStream,
};
use apistore_testing::suite::Pod;
use common::Etcd3Backend;

const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

async fn expect_event(watch: &mut WatchStream<Pod>, what: &str) -> WatchEvent<Pod> {
    match tokio::time::timeout(EVENT_TIMEOUT, next_event(watch)).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("{what}: the watch ended"),
        Err(_) => panic!("{what}: no event within {EVENT_TIMEOUT:?}"),
    }
}

fn from(resource_version: &str, recursive: bool) -> ListOptions {
    ListOptions {
        resource_version: resource_version.to_owned(),
        recursive,
        ..ListOptions::default()
    }
}

/// Creates a pod, labels it, deletes it; returns the created, updated and deleted
/// states.
async fn create_update_delete(store: &impl Storage<Object = Pod>, name: &str) -> [Pod; 3] {
    let pod = Pod::new("test-ns", name);
    let key = pod.key();
    let created = store.create(&key, pod, 0).await.unwrap();
    let updated = store
        .guaranteed_update(&key, UpdateOptions::default(), |mut pod, _| {
            pod.metadata
                .labels
                .insert("step".to_owned(), "updated".to_owned());
            Ok(Update::new(pod))
        })
        .await
        .unwrap();
    let deleted = store.delete(&key, DeleteOptions::default()).await.unwrap();
    [created, updated, deleted]
}

/// The case: `watch --rv N` from a revision before the delete, of the key and
/// of its namespace, replays the update and then the delete as DELETED with the object
/// as it was and the delete's resourceVersion.
#[tokio::test(flavor = "multi_thread")]
async fn a_watch_from_a_revision_before_a_delete_delivers_deleted() {
    let backend = Etcd3Backend::new("watch_from_rev_sees_delete").await;
    let store = &backend.store;
    let [created, updated, deleted] = create_update_delete(store, "gone").await;
    assert_ne!(
        deleted.metadata.resource_version,
        updated.metadata.resource_version
    );
    let rv = &created.metadata.resource_version;
    for (key, recursive) in [(created.key(), false), ("/pods/test-ns".to_owned(), true)] {
        let mut watch = store.watch(&key, &from(rv, recursive)).await.unwrap();
        let what = format!("watch {key} from {rv}");
        assert_eq!(
            expect_event(&mut watch, &what).await,
            WatchEvent::Modified(updated.clone()),
            "{what}"
        );
        assert_eq!(
            expect_event(&mut watch, &what).await,
            WatchEvent::Deleted(deleted.clone()),
            "{what}"
        );
    }
}

/// A delete after the watch started is DELETED too.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_watch_delivers_a_delete_as_deleted() {
    let backend = Etcd3Backend::new("live_watch_sees_delete").await;
    let store = &backend.store;
    let pod = Pod::new("test-ns", "live");
    let key = pod.key();
    let created = store.create(&key, pod, 0).await.unwrap();
    let mut watch = store
        .watch(
            "/pods/test-ns",
            &from(&created.metadata.resource_version, true),
        )
        .await
        .unwrap();
    let deleted = store.delete(&key, DeleteOptions::default()).await.unwrap();
    assert_eq!(
        expect_event(&mut watch, "live watch").await,
        WatchEvent::Deleted(deleted)
    );
}
