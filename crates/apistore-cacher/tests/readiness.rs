//! Initialization that does not block (kube's `WatchCacheInitializationPostStartHook`):
//! a cacher starts listing in the background and answers at once, 429 for what only a
//! ready cache may serve and from the backend what kube delegates; a server waits for
//! every cache together, with a deadline, through their `Readiness` handles, and is
//! told which were not ready by then.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

mod common;

use apistore_cacher::{Cacher, CacherConfig, wait_all_ready};
use apistore_memory::KvConfig;
use apistore_storage::{
    ErrorKind, GetOptions, ListOptions, ResourceVersionMatch, Storage, StorageError,
};
use apistore_testing::suite::Pod;
use common::wrapped::Wrapped;
use tokio::sync::Semaphore;

fn status_code(err: &StorageError) -> u16 {
    err.status().code
}

/// A backend holding one pod whose cache's first list waits at the returned gate.
async fn held_backend() -> (Wrapped, Arc<Semaphore>) {
    let mut backend = Wrapped::new(KvConfig::default());
    let gate = Arc::new(Semaphore::new(0));
    backend.list_gate = Some(Arc::clone(&gate));
    let pod = Pod::new("ns", "pod-0");
    backend.store.create(&pod.key(), pod, 0).await.unwrap();
    (backend, gate)
}

fn cacher(backend: &Wrapped, resource: &str) -> Cacher<Wrapped> {
    Cacher::new(
        backend.clone(),
        CacherConfig::new("/pods", resource).with_key_fn(Pod::key),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_initializing_cache_answers_at_once_and_is_waited_for_with_a_deadline() {
    let (backend, gate) = held_backend().await;
    let cacher = cacher(&backend, "pods");
    assert!(!cacher.is_ready());

    // Waiting gives up at the deadline; the cache goes on initializing.
    let err = cacher
        .wait_ready(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("pods"), "{err}");

    // Meanwhile: 429 for a list at "0" and for a watch; a get and an unfiltered paged
    // list from the backend (kube's `shouldDelegateListOnNotReadyCache`).
    let at_zero = ListOptions::prefix().at("0", ResourceVersionMatch::Unset);
    let err = cacher.list("/pods", &at_zero).await.unwrap_err();
    assert_eq!(status_code(&err), 429, "{err}");
    let Err(err) = cacher.watch("/pods", &at_zero).await else {
        panic!("a watch of an initializing cache is refused");
    };
    assert_eq!(status_code(&err), 429, "{err}");
    let got = cacher
        .get("/pods/ns/pod-0", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(got.metadata.name, "pod-0");
    let paged = cacher
        .list("/pods/ns", &ListOptions::prefix().limit(10))
        .await
        .unwrap();
    assert_eq!(paged.items.len(), 1);

    // The server's hook: every cache together, one deadline, the laggards named.
    let other = cacher_over_same(&backend);
    let caches = [cacher.readiness(), other.readiness()];
    let not_ready = wait_all_ready(&caches, Duration::from_millis(300)).await;
    assert_eq!(not_ready, ["pods", "pods.other"]);

    // The lists go through: both caches become ready, and serve.
    gate.add_permits(2);
    let not_ready = wait_all_ready(&caches, Duration::from_secs(10)).await;
    assert!(not_ready.is_empty(), "{not_ready:?}");
    // A deadline too far to compute is no panic: ready caches answer at once.
    assert!(wait_all_ready(&caches, Duration::MAX).await.is_empty());
    assert!(caches.iter().all(|cache| cache.is_ready()));
    cacher.wait_ready(Duration::from_millis(1)).await.unwrap();
    let listed = cacher.list("/pods", &at_zero).await.unwrap();
    assert_eq!(listed.items.len(), 1);
}

/// A second cacher over the same backend, under another group-resource name.
fn cacher_over_same(backend: &Wrapped) -> Cacher<Wrapped> {
    cacher(backend, "pods.other")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readiness_of_a_dropped_cacher_ends_the_wait_at_once() {
    let (backend, _gate) = held_backend().await;
    let cacher = cacher(&backend, "pods");
    let readiness = cacher.readiness();
    drop(cacher);
    assert!(!readiness.is_ready());
    let started = tokio::time::Instant::now();
    let err = readiness.wait(Duration::from_secs(30)).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));
}
