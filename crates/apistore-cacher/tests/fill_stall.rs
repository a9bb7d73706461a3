//! The cache's streaming fill against a backend that says it serves watch-lists but
//! stalls: it sends no initial events, or a few, and then nothing, never ending them
//! and never ending the stream. After [`CacherConfig::fill_watch_list_timeout`] the
//! cache drops the stalled stream and fills by a paged list instead, and becomes ready
//! with every object; a backend that does not stall is still streamed from, with no
//! list.
//!
//! The backend is the in-memory store with its `WatchList` gate on, behind the
//! recording wrapper of `common/wrapped.rs`, which stalls the watch-lists when told.
//! The limit is short (200 ms) so the fallback comes quickly, but nothing asserted here
//! depends on timing tighter than the 30 s the cache is given to become ready.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig};
use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{KubeVersion, ListOptions, ResourceVersionMatch, Storage};
use apistore_testing::suite::Pod;
use common::wrapped::Wrapped;

/// The pods in the backend; a stalled watch-list passes on fewer initial events.
const PODS: usize = 5;

/// The limit on the streaming fill in the stalled cases.
const SHORT_LIMIT: Duration = Duration::from_millis(200);

/// How long the cache may take to become ready: far beyond the limit and a list of a
/// few pods, however busy the machine.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// The in-memory store of pods, `WatchList` gate on, holding [`PODS`] pods, behind the
/// recording wrapper; the wrapper stalls watch-lists after `stall_after` events if
/// given, and records from the moment it is returned.
async fn backend(stall_after: Option<usize>) -> Wrapped {
    let store: MemoryStore<Pod> = MemoryStore::new(
        MemoryKv::new(KvConfig::default()),
        MemoryStoreConfig::for_resource("pods"),
    )
    .with_watch_list(true);
    for i in 0..PODS {
        let pod = Pod::new(["a", "b"][i % 2], &format!("pod-{i}"));
        store.create(&pod.key(), pod, 0).await.unwrap();
    }
    Wrapped {
        stall_watch_list: stall_after,
        ..Wrapped::over(store)
    }
}

/// A cache of kube 1.37 (the `WatchList` gate on, the fill through a streaming
/// watch-list) over `backend`, with `limit` on the streaming fill and no consistency
/// checks (whose own lists of the backend would blur which lists the fill made).
fn cacher(backend: &Wrapped, limit: Duration) -> Cacher<Wrapped> {
    let mut config = CacherConfig::new("/pods", "pods")
        .with_key_fn(Pod::key)
        .with_kube_version(KubeVersion::V1_37);
    assert!(config.watch_list && config.fill_with_watch_list);
    config.fill_watch_list_timeout = limit;
    config.consistency_check_period = None;
    Cacher::new(backend.clone(), config)
}

/// Waits (up to [`READY_WITHIN`]) for the cache to become ready, and checks that it
/// serves every pod the backend holds.
async fn assert_ready_with_every_pod(cacher: &Cacher<Wrapped>, backend: &Wrapped) {
    tokio::time::timeout(READY_WITHIN, cacher.wait_until_ready())
        .await
        .expect("the cache became ready in time")
        .unwrap();
    let held = backend
        .store
        .list("/pods", &ListOptions::prefix())
        .await
        .unwrap();
    assert_eq!(held.items.len(), PODS);
    let cached = cacher
        .list(
            "/pods",
            &ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan),
        )
        .await
        .unwrap();
    assert_eq!(cached.items, held.items);
}

/// Whether a recorded watch is the cache's streaming watch-list.
fn is_watch_list(options: &ListOptions) -> bool {
    options.send_initial_events == Some(true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_watch_list_fill_falls_back_to_a_paged_list() {
    // Nothing at all, and some of the initial events but not their end.
    for stall_after in [0, 2] {
        let backend = backend(Some(stall_after)).await;
        let cacher = cacher(&backend, SHORT_LIMIT);
        assert_ready_with_every_pod(&cacher, &backend).await;

        // The cache asked for the watch-list first, then listed.
        let watches = backend.take_watch_requests();
        assert!(
            watches.first().is_some_and(is_watch_list),
            "stalled after {stall_after}: {watches:?}"
        );
        let lists = backend.take_resource_lists();
        assert_eq!(lists.len(), 1, "stalled after {stall_after}: {lists:?}");
        assert!(lists[0].predicate.continue_token.is_empty());
        // The stalled stream was given up before the list: the fill returns (and drops
        // it) before it lists.
        assert_eq!(
            backend.stalled_dropped.load(Ordering::SeqCst),
            1,
            "stalled after {stall_after}: the stalled stream was dropped"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_list_fill_that_does_not_stall_lists_nothing() {
    let backend = backend(None).await;
    // A limit still, but one five pods from memory always come well within, however
    // busy the machine.
    let cacher = cacher(&backend, READY_WITHIN);
    assert_ready_with_every_pod(&cacher, &backend).await;

    let watches = backend.take_watch_requests();
    assert_eq!(watches.len(), 1, "{watches:?}");
    assert!(is_watch_list(&watches[0]), "{watches:?}");
    assert!(backend.take_resource_lists().is_empty());
    assert_eq!(backend.stalled_dropped.load(Ordering::SeqCst), 0);
}
