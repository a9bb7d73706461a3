//! The cache's own list-then-watch: when its watch of the backend breaks and cannot be
//! resumed (the revision was compacted away meanwhile: 410), it lists again, ends its
//! watchers, and serves the new state (kube's cacher re-initializing, as in the
//! reference's `TestCacherDontMissEventsOnReinitialization`).

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_memory::KvConfig;
use apistore_storage::{DeleteOptions, ListOptions, ResourceVersionMatch, Storage};
use apistore_testing::metrics::counter;
use apistore_testing::suite::Pod;
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
    let mut watcher = cacher
        .watch(
            "/pods",
            &ListOptions::prefix().at("0", ResourceVersionMatch::Unset),
        )
        .await
        .unwrap();
    assert!(watcher.next().await.is_some(), "the initial ADDED");

    // The cache's watch breaks; while it tries to resume, the history it would resume
    // from is compacted away.
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
    let rv = |pod: &Pod| pod.metadata.resource_version.parse::<u64>().unwrap();
    assert!(
        rv(&gone) + 1 < rv(&after),
        "the history between them is what goes"
    );
    kv.compact(after.metadata.resource_version.parse().unwrap())
        .unwrap();
    gate.add_permits(100);

    // The watcher of the old generation ends; the cache lists again and has both.
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while watcher.next().await.is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "the watcher was not ended by the re-list");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while counter(
        &registry,
        "apiserver_watch_cache_initializations_total",
        &[],
    ) < 2.0
    {
        assert!(tokio::time::Instant::now() < deadline, "no re-list");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cacher.wait_until_ready().await.unwrap();
    let list = cacher
        .list(
            "/pods",
            &ListOptions::prefix().at("0", ResourceVersionMatch::Unset),
        )
        .await
        .unwrap();
    assert_eq!(list.items, [after.clone(), before]);
    assert!(cacher.resource_version() >= after.metadata.resource_version.parse().unwrap());
}
