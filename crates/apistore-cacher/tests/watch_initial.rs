//! A watch's initial events come from a snapshot of the cache taken when the watch is
//! registered (kube 1.37's lazy snapshot interval): the objects in key order as they
//! were then, however many changes the cache applies before the watcher reads them,
//! and after them every one of those changes exactly once, in order. For a legacy
//! watch (resourceVersion "0") and for a streaming list (`sendInitialEvents`, with its
//! `k8s.io/initial-events-end` bookmark at the snapshot's revision or later).

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig};
use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{
    DeleteOptions, INITIAL_EVENTS_END_ANNOTATION, KubeVersion, ListOptions, ResourceVersionMatch,
    Storage, Update, UpdateOptions, WatchEvent, WatchStream,
};
use apistore_testing::suite::Pod;
use futures::StreamExt as _;

/// More objects than one chunk of the snapshot interval (256), so the watcher reads
/// the snapshot in several chunks while the cache moves on.
const PODS: usize = 600;

fn rv(pod: &Pod) -> u64 {
    pod.metadata.resource_version.parse().unwrap()
}

async fn next_event(w: &mut WatchStream<Pod>) -> WatchEvent<Pod> {
    tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .expect("no event within 10s")
        .expect("the watch ended")
}

/// A ready cache over a memory store holding `PODS` pods in `ns` and one in `other`.
async fn cached_pods(
    watch_list: bool,
    version: KubeVersion,
) -> (MemoryStore<Pod>, Cacher<MemoryStore<Pod>>) {
    let backend: MemoryStore<Pod> = MemoryStore::new(
        MemoryKv::new(KvConfig::default()),
        MemoryStoreConfig::for_resource("pods"),
    );
    for i in 0..PODS {
        let pod = Pod::new("ns", &format!("pod-{i:04}"));
        backend.create(&pod.key(), pod, 0).await.unwrap();
    }
    let other = Pod::new("other", "pod-0000");
    backend.create(&other.key(), other, 0).await.unwrap();
    let mut config = CacherConfig::new("/pods", "pods")
        .with_key_fn(Pod::key)
        .with_kube_version(version);
    config.watch_list = watch_list;
    config.consistent_reads_from_cache = true;
    let cacher = Cacher::new(backend.clone(), config);
    cacher.wait_until_ready().await.unwrap();
    (backend, cacher)
}

/// Deletes the first pod, relabels the second and creates one more, and waits for the
/// cache to apply them: the changes, in order, as (type, name, resourceVersion).
async fn change_after_registration(
    backend: &MemoryStore<Pod>,
    cacher: &Cacher<MemoryStore<Pod>>,
) -> Vec<(String, String, u64)> {
    let deleted = backend
        .delete("/pods/ns/pod-0000", DeleteOptions::default())
        .await
        .unwrap();
    let updated = backend
        .guaranteed_update(
            "/pods/ns/pod-0001",
            UpdateOptions::default(),
            |mut pod: Pod, _| {
                pod.metadata
                    .labels
                    .insert("changed".to_owned(), "yes".to_owned());
                Ok(Update::from(pod))
            },
        )
        .await
        .unwrap();
    let new = Pod::new("ns", "pod-9999");
    let created = backend.create(&new.key(), new, 0).await.unwrap();
    cacher.wait_until_fresh(rv(&created)).await.unwrap();
    vec![
        ("DELETED".to_owned(), "pod-0000".to_owned(), rv(&deleted)),
        ("MODIFIED".to_owned(), "pod-0001".to_owned(), rv(&updated)),
        ("ADDED".to_owned(), "pod-9999".to_owned(), rv(&created)),
    ]
}

/// Reads `w` until it has seen `PODS` initial objects and every change in `changes`;
/// checks the initial objects are the pods as created, in key order, and the changes
/// follow in order. Returns the revisions of the bookmarks seen and whether each
/// carried the initial-events-end annotation, with how many events preceded it.
async fn read_and_check(
    w: &mut WatchStream<Pod>,
    snapshot_rv: u64,
    changes: &[(String, String, u64)],
) -> Vec<(u64, bool, usize)> {
    let mut initial = Vec::new();
    let mut later = Vec::new();
    let mut bookmarks = Vec::new();
    while later.len() < changes.len() {
        let event = next_event(w).await;
        if let WatchEvent::Bookmark(object) = &event {
            let end = object
                .metadata
                .annotations
                .contains_key(INITIAL_EVENTS_END_ANNOTATION);
            bookmarks.push((rv(object), end, initial.len() + later.len()));
            continue;
        }
        let pod = event.object().unwrap();
        let seen = (
            event.type_name().to_owned(),
            pod.metadata.name.clone(),
            rv(pod),
        );
        if initial.len() < PODS {
            initial.push(seen);
        } else {
            later.push(seen);
        }
    }
    let names: Vec<String> = (0..PODS).map(|i| format!("pod-{i:04}")).collect();
    assert_eq!(
        initial.iter().map(|(_, name, _)| name).collect::<Vec<_>>(),
        names.iter().collect::<Vec<_>>(),
        "the initial objects, in key order, as they were when the watch was registered"
    );
    for (kind, name, at) in &initial {
        assert_eq!(kind, "ADDED", "{name}");
        assert!(
            *at <= snapshot_rv,
            "{name} at {at}, after the snapshot at {snapshot_rv}"
        );
    }
    assert_eq!(
        later, changes,
        "the changes after the snapshot, once each, in order"
    );
    bookmarks
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_0_starts_with_the_objects_as_they_were_when_it_was_registered() {
    let (backend, cacher) = cached_pods(false, KubeVersion::V1_37).await;
    let snapshot_rv = cacher.resource_version();
    let options = ListOptions::prefix().at("0", ResourceVersionMatch::Unset);
    let mut w = cacher.watch("/pods/ns", &options).await.unwrap();
    let changes = change_after_registration(&backend, &cacher).await;
    let bookmarks = read_and_check(&mut w, snapshot_rv, &changes).await;
    assert!(
        bookmarks.is_empty(),
        "no bookmarks asked for: {bookmarks:?}"
    );
}

/// A streaming list of the cache of kube `version`: the bookmarks it saw (revision,
/// end annotation, events before it), up to its initial-events-end bookmark, and the
/// cache's revision when it was registered.
async fn streaming_list(version: KubeVersion) -> (Vec<(u64, bool, usize)>, u64) {
    let (backend, cacher) = cached_pods(true, version).await;
    let snapshot_rv = cacher.resource_version();
    let mut options = ListOptions::prefix();
    options.send_initial_events = Some(true);
    options.predicate.allow_watch_bookmarks = true;
    let mut w = cacher.watch("/pods/ns", &options).await.unwrap();
    let changes = change_after_registration(&backend, &cacher).await;
    let mut bookmarks = read_and_check(&mut w, snapshot_rv, &changes).await;
    if !bookmarks.iter().any(|(_, end, _)| *end) {
        // Before kube 1.32 the end bookmark goes out on the cacher's next bookmark tick
        // (once a second).
        loop {
            if let WatchEvent::Bookmark(object) = next_event(&mut w).await {
                let end = object
                    .metadata
                    .annotations
                    .contains_key(INITIAL_EVENTS_END_ANNOTATION);
                bookmarks.push((rv(&object), end, PODS + changes.len()));
                break;
            }
        }
    }
    assert_eq!(
        bookmarks.iter().filter(|(_, end, _)| *end).count(),
        1,
        "one end bookmark: {bookmarks:?}"
    );
    (bookmarks, snapshot_rv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_starts_with_the_snapshot_then_its_end_bookmark() {
    // kube 1.32+: the end bookmark follows the initial events at once, at the revision
    // the watch was registered at, before any later change.
    let (bookmarks, snapshot_rv) = streaming_list(KubeVersion::V1_37).await;
    assert_eq!(
        bookmarks[0],
        (snapshot_rv, true, PODS),
        "the first bookmark ends the initial events right after them: {bookmarks:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streaming_list_at_kube_1_31_gets_its_end_bookmark_on_a_tick() {
    let (bookmarks, snapshot_rv) = streaming_list(KubeVersion::V1_31).await;
    let (at, end, after) = bookmarks[0];
    assert!(
        end,
        "the first bookmark ends the initial events: {bookmarks:?}"
    );
    assert!(at >= snapshot_rv, "{bookmarks:?}");
    assert!(after >= PODS, "after every initial event: {bookmarks:?}");
}
