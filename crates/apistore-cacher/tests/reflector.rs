//! The cache's own list-then-watch: when its watch of the backend breaks and cannot be
//! resumed (the revision was compacted away meanwhile: 410), it lists again, ends its
//! watchers, and serves the new state (kube's cacher re-initializing, as in the
//! reference's `TestCacherDontMissEventsOnReinitialization`).
//!
//! How it fills, over the etcd3 store and a real etcd, seen from a recording wrapper
//! around the store and from the store's etcd request metrics: at kube 1.37 through one
//! streaming watch-list that it then keeps watching on, also after a 410; at 1.31 with
//! a paged list and then a watch; at 1.37 with a paged list when the backend refuses
//! the streaming watch, or when the cacher's own `WatchList` gate is off.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../apistore-etcd3/tests/common/mod.rs"]
mod etcd3;

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_etcd3::Etcd3Store;
use apistore_memory::KvConfig;
use apistore_storage::{
    DeleteOptions, KubeVersion, ListOptions, ObjectList, ResourceVersionMatch, Storage,
};
use apistore_testing::metrics::counter;
use apistore_testing::suite::{Backend as _, Needs, Pod};
use common::wrapped::Wrapped;
use futures::StreamExt as _;
use tokio::sync::Semaphore;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_cacher_relists_after_its_watch_is_gone() {
    let gate = Arc::new(Semaphore::new(0));
    let backend = Wrapped {
        gate: Some(Arc::clone(&gate)),
        ..Wrapped::new(KvConfig {
            history_limit: 0,
            ..KvConfig::default()
        })
    };
    let kv = backend.store.kv().clone();
    let before = backend
        .create("/pods/ns/before", Pod::new("ns", "before"), 0)
        .await
        .unwrap();
    let registry = prometheus::Registry::new();
    let mut config = CacherConfig::new("/pods", "pods").with_key_fn(Pod::key);
    config.metrics = Some(CacherMetrics::register(&registry).unwrap());
    let cacher = Cacher::new(backend.clone(), config);
    cacher.wait_until_ready().await.unwrap();
    assert_eq!(
        counter(
            &registry,
            "apiserver_watch_cache_initializations_total",
            &[]
        ),
        1.0
    );
    let (watcher, after) = break_the_watch(&cacher, &backend).await;
    kv.compact(after.metadata.resource_version.parse().unwrap())
        .unwrap();
    gate.add_permits(100);

    // The watcher of the old generation ends; the cache lists again and has both.
    wait_for_second_fill(watcher, &registry).await;
    cacher.wait_until_ready().await.unwrap();
    let list = cacher
        .list(
            "/pods",
            &ListOptions::prefix().at("0", ResourceVersionMatch::Unset),
        )
        .await
        .unwrap();
    assert_eq!(list.items, [after.clone(), before]);
    assert!(cacher.resource_version() >= rv(&after));
}

/// Opens a watcher of everything on `cacher` and takes its initial ADDED; then ends
/// the cache's stream of `backend` and, while the cache's next watch waits at the
/// backend's gate, writes a history past the cache's revision (a pod created and
/// deleted, then `after`, returned with the watcher) for the caller to compact away.
async fn break_the_watch<S: Storage<Object = Pod> + 'static>(
    cacher: &Cacher<Wrapped<S>>,
    backend: &Wrapped<S>,
) -> (apistore_storage::WatchStream<Pod>, Pod) {
    let mut watcher = cacher
        .watch(
            "/pods",
            &ListOptions::prefix().at("0", ResourceVersionMatch::Unset),
        )
        .await
        .unwrap();
    assert!(watcher.next().await.is_some(), "the initial ADDED");
    // The cache turns ready before it asks for its watch after a paged list: the cut
    // must come after that, or it ends nothing.
    backend.wait_for_a_watch().await;
    backend.cut.notify_waiters();
    let gone = backend
        .create("/pods/ns/gone", Pod::new("ns", "gone"), 0)
        .await
        .unwrap();
    backend
        .delete("/pods/ns/gone", DeleteOptions::default())
        .await
        .unwrap();
    let after = backend
        .create("/pods/ns/after", Pod::new("ns", "after"), 0)
        .await
        .unwrap();
    assert!(
        rv(&gone) + 1 < rv(&after),
        "the history between them is what goes"
    );
    (watcher, after)
}

/// Waits for `watcher`, of the cache's first generation, to be ended, and for the
/// cache recording into `registry` to be filled a second time.
async fn wait_for_second_fill(
    mut watcher: apistore_storage::WatchStream<Pod>,
    registry: &prometheus::Registry,
) {
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while watcher.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the watcher was not ended by the new fill");
    let initializations = "apiserver_watch_cache_initializations_total";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while counter(registry, initializations, &[]) < 2.0 {
        assert!(tokio::time::Instant::now() < deadline, "no new fill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The page size of the caches' paged lists in these tests: 25 pods are three pages.
const PAGE: i64 = 10;

/// A cache of `backend` behaving as kube `version`'s, with the `WatchList` gate as
/// `watch_list` says, recording kube 1.37's metrics into a registry of its own.
fn cacher_at<S: Storage<Object = Pod> + 'static>(
    backend: S,
    version: KubeVersion,
    watch_list: bool,
) -> (Cacher<S>, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let mut config = CacherConfig::new("/pods", "pods")
        .with_key_fn(Pod::key)
        .with_kube_version(version);
    config.watch_list = watch_list;
    config.list_page_size = PAGE;
    config.metrics = Some(CacherMetrics::register_for(&registry, KubeVersion::V1_37).unwrap());
    (Cacher::new(backend, config), registry)
}

/// Writes `count` pods in two namespaces, updates one and deletes another; the
/// revision of the last write.
async fn write_pods(store: &impl Storage<Object = Pod>, count: usize) -> u64 {
    for i in 0..count {
        let pod = Pod::new(["a", "b"][i % 2], &format!("pod-{i}"));
        store.create(&pod.key(), pod, 0).await.unwrap();
    }
    store
        .guaranteed_update("/pods/a/pod-0", Default::default(), |mut pod: Pod, _| {
            pod.metadata.labels.insert("rev".to_owned(), "2".to_owned());
            Ok(pod.into())
        })
        .await
        .unwrap();
    let deleted = store
        .delete("/pods/b/pod-1", DeleteOptions::default())
        .await
        .unwrap();
    rv(&deleted)
}

fn rv(pod: &Pod) -> u64 {
    pod.metadata.resource_version.parse().unwrap()
}

/// Everything the cache holds once it has reached `at`.
async fn cached(cacher: &impl Storage<Object = Pod>, at: u64) -> ObjectList<Pod> {
    cacher
        .list(
            "/pods",
            &ListOptions::prefix().at(at.to_string(), ResourceVersionMatch::NotOlderThan),
        )
        .await
        .unwrap()
}

/// Whether a recorded watch is a streaming watch-list, as client-go asks for one.
fn is_watch_list(options: &ListOptions) -> bool {
    options.send_initial_events == Some(true)
        && options.resource_version_match == ResourceVersionMatch::NotOlderThan
        && options.predicate.allow_watch_bookmarks
        && options.resource_version.is_empty()
        && options.recursive
}

/// Checks that `backend` saw a paged list (`pages` pages, the later ones continued) and
/// then one plain watch from the list's revision (waited for: the cache is ready
/// before it asks for the watch).
async fn assert_paged_fill(backend: &Wrapped<Etcd3Store<Pod>>, pages: usize, cached_rv: u64) {
    let lists = backend.take_resource_lists();
    assert_eq!(lists.len(), pages, "{lists:?}");
    assert!(lists.iter().all(|page| page.predicate.limit == PAGE));
    assert!(lists[0].predicate.continue_token.is_empty());
    assert!(
        lists[1..]
            .iter()
            .all(|page| !page.predicate.continue_token.is_empty())
    );
    backend.wait_for_a_watch().await;
    let watches = backend.take_watch_requests();
    let plain: Vec<_> = watches
        .iter()
        .filter(|options| options.send_initial_events.is_none())
        .collect();
    assert_eq!(plain.len(), 1, "{watches:?}");
    let from: u64 = plain[0].resource_version.parse().unwrap();
    assert!(from > 0 && from <= cached_rv, "watch from {from}");
}

/// A store of `test_name`'s own over the shared etcd, with the `WatchList` gate on,
/// holding [`write_pods`]'s 25 pods (24 after the deletion): the test's backend, the
/// store recorded from now on, and the revision of the last write.
async fn pods_in_etcd(test_name: &str) -> (etcd3::Etcd3Backend, Wrapped<Etcd3Store<Pod>>, u64) {
    let backend = etcd3::backend(test_name, Needs::Shared).await;
    let store = backend.store.clone().with_watch_list(true);
    let last = write_pods(&store, 25).await;
    (backend, Wrapped::over(store), last)
}

/// Checks that `cacher` was filled from `backend` by a paged list of the 25 pods of
/// [`write_pods`], and that it serves what `backend` holds at `last`.
async fn assert_filled_by_pages(
    backend: &Wrapped<Etcd3Store<Pod>>,
    cacher: &Cacher<Wrapped<Etcd3Store<Pod>>>,
    last: u64,
) {
    assert_paged_fill(backend, 3, cacher.resource_version()).await;
    let from_backend = backend
        .store
        .list("/pods", &ListOptions::prefix())
        .await
        .unwrap();
    assert_eq!(cached(cacher, last).await.items, from_backend.items);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_at_1_37_fills_through_one_streaming_watch_with_what_a_paged_fill_has() {
    let (backend, streamed, last) = pods_in_etcd("reflector_watch_list_1_37").await;
    let store = streamed.store.clone();
    let from_backend = store.list("/pods", &ListOptions::prefix()).await.unwrap();
    assert_eq!(from_backend.items.len(), 24);

    // kube 1.37: one watch with sendInitialEvents, no list of the resource; etcd sees
    // the one range of the watch's initial sync (its pages hold 10,000).
    let etcd_lists = backend.requests_total(&["list"]);
    let (cache_1_37, registry_1_37) = cacher_at(streamed.clone(), KubeVersion::V1_37, true);
    cache_1_37.wait_until_ready().await.unwrap();
    assert_eq!(backend.requests_total(&["list"]) - etcd_lists, 1);
    let watches = streamed.take_watch_requests();
    assert_eq!(watches.len(), 1, "{watches:?}");
    assert!(is_watch_list(&watches[0]), "{:?}", watches[0]);
    assert!(streamed.take_resource_lists().is_empty());

    // kube 1.31 over the same store: three pages, three ranges, then a watch.
    let paged = Wrapped::over(store.clone());
    let etcd_lists = backend.requests_total(&["list"]);
    let (cache_1_31, registry_1_31) = cacher_at(paged.clone(), KubeVersion::V1_31, true);
    cache_1_31.wait_until_ready().await.unwrap();
    assert_eq!(backend.requests_total(&["list"]) - etcd_lists, 3);
    assert_paged_fill(&paged, 3, cache_1_31.resource_version()).await;

    // Both serve what the backend holds, and each was initialized once, cleanly.
    assert_eq!(cached(&cache_1_37, last).await.items, from_backend.items);
    assert_eq!(cached(&cache_1_31, last).await.items, from_backend.items);
    for registry in [&registry_1_37, &registry_1_31] {
        let initializations = "apiserver_watch_cache_initializations_total";
        assert_eq!(counter(registry, initializations, &[]), 1.0);
        let errors = "apiserver_watch_cache_initialization_errors_total";
        assert_eq!(counter(registry, errors, &[]), 0.0);
    }

    // The 1.37 cache goes on watching on the stream it filled from.
    let late = store
        .create("/pods/a/late", Pod::new("a", "late"), 0)
        .await
        .unwrap();
    let items = cached(&cache_1_37, rv(&late)).await.items;
    assert!(items.contains(&late), "{items:?}");
    assert!(streamed.take_watch_requests().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_at_1_37_fills_again_through_a_streaming_watch_after_a_410() {
    let backend = etcd3::backend("reflector_watch_list_410", Needs::Fresh).await;
    let store = backend.store.clone().with_watch_list(true);
    let before = store
        .create("/pods/ns/before", Pod::new("ns", "before"), 0)
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let wrapped = Wrapped {
        gate: Some(Arc::clone(&gate)),
        ..Wrapped::over(store.clone())
    };
    let (cacher, registry) = cacher_at(wrapped.clone(), KubeVersion::V1_37, true);
    cacher.wait_until_ready().await.unwrap();
    let (watcher, after) = break_the_watch(&cacher, &wrapped).await;
    backend.compact(&after.metadata.resource_version).await;
    gate.add_permits(100);

    // The watch from the compacted revision fails; the cache fills again through a
    // second streaming watch-list, never a list, and has both.
    wait_for_second_fill(watcher, &registry).await;
    cacher.wait_until_ready().await.unwrap();
    // A watch that ends in a 410 is no failed initialization (kube's reflector
    // returns nil from ListAndWatch then): the counter stays at 0.
    assert_eq!(
        counter(
            &registry,
            "apiserver_watch_cache_initialization_errors_total",
            &[]
        ),
        0.0
    );
    assert_eq!(cached(&cacher, rv(&after)).await.items, [after, before]);
    let watches = wrapped.take_watch_requests();
    assert_eq!(watches.len(), 3, "{watches:?}");
    assert!(is_watch_list(&watches[0]) && is_watch_list(&watches[2]));
    assert_eq!(watches[1].send_initial_events, None);
    assert!(wrapped.take_resource_lists().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_at_1_37_lists_in_pages_when_the_backend_refuses_the_streaming_watch() {
    let (_backend, refusing, last) = pods_in_etcd("reflector_watch_list_refused").await;
    refusing.refuse_watch_list.store(true, Ordering::SeqCst);
    let (cacher, registry) = cacher_at(refusing.clone(), KubeVersion::V1_37, true);
    cacher.wait_until_ready().await.unwrap();

    // It asked for the streaming watch once, was refused, and listed in pages; the
    // refusal is not a failed initialization.
    let watches = refusing.watch_requests.lock().unwrap().clone();
    assert_eq!(watches.iter().filter(|o| is_watch_list(o)).count(), 1);
    assert!(is_watch_list(&watches[0]), "{watches:?}");
    assert_filled_by_pages(&refusing, &cacher, last).await;
    assert_eq!(
        counter(
            &registry,
            "apiserver_watch_cache_initialization_errors_total",
            &[]
        ),
        0.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_at_1_37_lists_in_pages_without_asking_while_a_watch_list_gate_is_off() {
    // kube's cacher refuses its own watch-list with the gate off; a backend with its
    // own gate off does not serve one (it would ignore sendInitialEvents). Either way
    // the backend is never asked for one.
    for (cacher_gate, backend_gate) in [(false, true), (true, false)] {
        let name = format!("reflector_watch_list_gates_{cacher_gate}_{backend_gate}");
        let (_backend, wrapped, last) = pods_in_etcd(&name).await;
        let wrapped = Wrapped::over(wrapped.store.clone().with_watch_list(backend_gate));
        assert_eq!(wrapped.supports_watch_list(), backend_gate);
        let (cacher, _registry) = cacher_at(wrapped.clone(), KubeVersion::V1_37, cacher_gate);
        cacher.wait_until_ready().await.unwrap();
        let watches = wrapped.watch_requests.lock().unwrap().clone();
        assert!(
            watches.iter().all(|o| o.send_initial_events.is_none()),
            "{watches:?}"
        );
        assert_filled_by_pages(&wrapped, &cacher, last).await;
    }
}
