//! kube-apiserver's watch cases (`watcher_tests.go` through `etcd3/watcher_test.go`;
//! the watch list of `apistore-testing`, which the in-memory store runs too) against
//! the etcd3 store and a real etcd, plus the etcd-only ones: the initial sync's paging
//! (`TestWatchChanSync`), the shared etcd watch stream's lifetimes and back-pressure, a
//! lost etcd, progress requests and the feature support check on etcd's versions.
//!
//! Cases that compact, need etcd flags or a fresh revision counter get an etcd of their
//! own; the others share one, each under a prefix of its own.

// Helpers of a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apistore_etcd3::{SyncPageHook, next_event};
use apistore_storage::{ListOptions, Storage, WatchEvent, WatchStream};
use apistore_testing::etcd::EtcdOptions;
use apistore_testing::suite::{Backend, Pod};
use common::Etcd3Backend;

const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

// The watch list of `apistore-testing`, which the in-memory store runs too: cases
// that compact, need progress notifications or a fresh revision counter get an etcd of
// their own, the others share one.
apistore_testing::watch_conformance!(common::backend);

// ---------------------------------------------------------------------------------
// etcd3-specific cases.

async fn expect_event(watch: &mut WatchStream<Pod>, what: &str) -> WatchEvent<Pod> {
    match tokio::time::timeout(EVENT_TIMEOUT, next_event(watch)).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("{what}: the watch ended"),
        Err(_) => panic!("{what}: no event within {EVENT_TIMEOUT:?}"),
    }
}

async fn expect_no_more(watch: &mut WatchStream<Pod>) {
    if let Ok(event) = tokio::time::timeout(Duration::from_millis(100), next_event(watch)).await {
        panic!("unexpected {event:?}");
    }
}

fn from(rv: &str, recursive: bool) -> ListOptions {
    ListOptions {
        resource_version: rv.to_owned(),
        recursive,
        ..ListOptions::default()
    }
}

async fn current_rv(store: &impl Storage<Object = Pod>) -> String {
    store
        .list("/pods", &from("", true))
        .await
        .unwrap()
        .metadata
        .resource_version
}

async fn create(store: &impl Storage<Object = Pod>, namespace: &str, name: &str) -> Pod {
    let pod = Pod::new(namespace, name);
    store.create(&pod.key(), pod, 0).await.unwrap()
}

/// The sum of a counter or gauge of the backend's registry for `resource="pods"`.
fn metric(backend: &Etcd3Backend, name: &str) -> f64 {
    backend
        .registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "resource" && l.value() == "pods")
        })
        .map(|m| {
            if m.get_counter().get_value() != 0.0 {
                m.get_counter().get_value()
            } else {
                m.get_gauge().get_value()
            }
        })
        .sum()
}

/// `TestWatchChanSync`: the initial sync of a recursive watch reads pages pinned to the
/// first page's revision, so a pod created after the first page comes once, from the
/// watch that follows, not from the sync; the etcd reads are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn watch_chan_sync() {
    // (name, watch key, page size, initial pods seen, reads)
    let cases = [
        ("empty_page", "/pods/test/", 1, 0, 1),
        ("one_page", "/pods/", 3, 2, 1),
        ("two_pages_pinned", "/pods/", 1, 2, 2),
    ];
    for (name, watch_key, page_size, initial, reads) in cases {
        let backend = Etcd3Backend::new(&format!("watch_chan_sync_{name}")).await;
        let first = create(&backend.store, "first", "bar").await;
        let second = create(&backend.store, "second", "bar").await;

        // After the first page: a pod no page of this sync may show.
        let hook_store = backend.store.clone();
        let hook: SyncPageHook = Arc::new(move |page| {
            let store = hook_store.clone();
            Box::pin(async move {
                if page == 0 {
                    create(&store, "third", "bar").await;
                }
            })
        });
        let store = backend
            .store
            .clone()
            .with_watch_sync_paging(page_size, Some(hook));
        backend.take_storage_reads();
        let mut w = store.watch(watch_key, &from("0", true)).await.unwrap();
        let initial_pods = [first, second];
        for pod in &initial_pods[..initial] {
            assert_eq!(
                expect_event(&mut w, name).await,
                WatchEvent::Added(pod.clone()),
                "{name}"
            );
        }
        if watch_key == "/pods/" {
            // The third pod, exactly once, from the watch.
            match expect_event(&mut w, name).await {
                WatchEvent::Added(pod) => assert_eq!(pod.key(), "/pods/third/bar", "{name}"),
                other => panic!("{name}: {other:?}"),
            }
        } else {
            let late = create(&backend.store, "test", "late").await;
            assert_eq!(
                expect_event(&mut w, name).await,
                WatchEvent::Added(late),
                "{name}"
            );
        }
        expect_no_more(&mut w).await;
        assert_eq!(
            backend.take_storage_reads(),
            reads,
            "{name}: etcd reads of the sync"
        );
    }
}

/// Reads etcd's `etcd_debugging_mvcc_watcher_total` from its metrics endpoint.
fn etcd_watchers(endpoint: &str) -> u64 {
    let address = endpoint.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut body = String::new();
    stream.read_to_string(&mut body).unwrap();
    body.lines()
        .find_map(|line| line.strip_prefix("etcd_debugging_mvcc_watcher_total "))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map(|value| value as u64)
        .expect("etcd_debugging_mvcc_watcher_total in etcd's metrics")
}

async fn wait_for_etcd_watchers(endpoint: &str, count: u64) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let endpoint_owned = endpoint.to_owned();
        let now = tokio::task::spawn_blocking(move || etcd_watchers(&endpoint_owned))
            .await
            .unwrap();
        if now == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "etcd has {now} watchers, expected {count}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Dropping a watch ends its task and cancels its etcd watcher; all watches of a store
/// share one etcd watch stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dropped_watches_cancel_their_etcd_watchers() {
    let backend = Etcd3Backend::dedicated("dropped_watches", EtcdOptions::default()).await;
    let base = etcd_watchers(&backend.endpoint);
    let rv = current_rv(&backend.store).await;
    let mut watches = Vec::new();
    for i in 0..5 {
        watches.push(
            backend
                .store
                .watch(&format!("/pods/ns-{i}"), &from(&rv, true))
                .await
                .unwrap(),
        );
    }
    assert_eq!(backend.store.active_watches(), 5);
    wait_for_etcd_watchers(&backend.endpoint, base + 5).await;

    watches.truncate(2);
    wait_for_etcd_watchers(&backend.endpoint, base + 2).await;
    drop(watches);
    wait_for_etcd_watchers(&backend.endpoint, base).await;
    let deadline = Instant::now() + EVENT_TIMEOUT;
    while backend.store.active_watches() != 0 {
        assert!(Instant::now() < deadline, "watch tasks still running");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A consumer that does not read holds up only its own watch; once it reads, it gets
/// every event, in order, exactly once. Four hundred small events fit in what a watch
/// buffers, so it never fell behind the shared stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_consumer_blocks_only_itself_and_loses_nothing() {
    let backend = Etcd3Backend::new("slow_consumer").await;
    slow_and_fast_watches(&backend, 400, 0).await;
    assert_eq!(backend.store.watch_overflows(), 0);
}

/// The same with 64 KiB objects: past 4 MiB buffered, the slow watch falls behind the
/// shared stream and re-watches from where it was; its consumer still gets every event,
/// in order, exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_consumer_of_large_objects_rewatches_and_loses_nothing() {
    let backend = Etcd3Backend::new("slow_consumer_large").await;
    slow_and_fast_watches(&backend, 200, 64 * 1024).await;
    let overflows = backend.store.watch_overflows();
    assert!(overflows >= 1, "the slow watch never fell behind");
}

/// One watch read as events come, one read only after `total` creates of objects with
/// `padding` bytes of annotation each.
async fn slow_and_fast_watches(backend: &Etcd3Backend, total: u32, padding: usize) {
    let store = &backend.store;
    let rv = current_rv(store).await;
    let mut slow = store.watch("/pods/slow", &from(&rv, true)).await.unwrap();
    let mut fast = store.watch("/pods/slow", &from(&rv, true)).await.unwrap();
    let mut created = Vec::new();
    for i in 0..total {
        let mut pod = Pod::new("slow", &format!("pod-{i:04}"));
        if padding > 0 {
            pod.metadata
                .annotations
                .insert("padding".to_owned(), "x".repeat(padding));
        }
        let pod = store.create(&pod.key(), pod, 0).await.unwrap();
        assert_eq!(
            expect_event(&mut fast, "fast watch").await,
            WatchEvent::Added(pod.clone())
        );
        created.push(pod);
    }
    for pod in created {
        assert_eq!(
            expect_event(&mut slow, "slow watch").await,
            WatchEvent::Added(pod)
        );
    }
    expect_no_more(&mut slow).await;
    // Each watch took every event from etcd exactly once: a re-watch resumes after the
    // last response its watch took, and responses it dropped never counted.
    let events = metric(backend, "apiserver_storage_events_received_total");
    assert_eq!(events, 2.0 * f64::from(total), "events received");
}

/// An etcd that goes away and comes back does not end a watch: it resumes from the
/// revision after its last event, and sees what is written once etcd is back, with no
/// error event. (A watch whose etcd stays away past the store's limit ends with a 503:
/// `tests/faults.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn lost_etcd_resumes_the_watch_once_it_is_back() {
    let mut backend = Etcd3Backend::dedicated("lost_etcd", EtcdOptions::default()).await;
    let rv = current_rv(&backend.store).await;
    let mut w = backend
        .store
        .watch("/pods/ns", &from(&rv, true))
        .await
        .unwrap();
    let pod = create(&backend.store, "ns", "before").await;
    assert_eq!(expect_event(&mut w, "before").await, WatchEvent::Added(pod));

    backend.server.as_mut().unwrap().kill();
    tokio::time::sleep(Duration::from_millis(500)).await;
    backend.server.as_mut().unwrap().restart().unwrap();
    let pod = create(&backend.store, "ns", "after").await;
    assert_eq!(
        expect_event(&mut w, "after restart").await,
        WatchEvent::Added(pod)
    );
    expect_no_more(&mut w).await;
    assert!(
        backend.store.watch_resumptions() >= 1,
        "the watch resumed on a new stream"
    );
}

/// `RequestWatchProgress` on whichever etcd runs (`cargo xtask test --etcd 3.4|3.5|3.6`):
/// the feature support checker takes its supported path on 3.5.13 and later and on 3.6,
/// and says unsupported on 3.4.23 (fixed in 3.4.31 and 3.5.13: etcd issues 15220 and
/// 17507); the expectation comes from the version etcd reports, so every version
/// asserts its own outcome. The store forwards the request whatever the version, as
/// kube-apiserver's does: each watch of the store gets a bookmark at etcd's revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_watch_progress_on_this_etcd() {
    let backend = Etcd3Backend::new("request_watch_progress").await;
    let store = &backend.store;
    assert!(
        !store.supports_request_watch_progress(),
        "nothing is supported before a check"
    );
    let (version, release) = etcd_release(&backend).await;
    let fixed = match release {
        (3, 4, patch) => patch >= 31,
        (3, 5, patch) => patch >= 13,
        (major, minor, _) => (major, minor) > (3, 5),
    };
    assert_eq!(
        store.check_request_watch_progress_support().await.unwrap(),
        fixed,
        "etcd {version}"
    );
    assert_eq!(store.supports_request_watch_progress(), fixed);

    // Without a watch there is no one to tell.
    store.request_watch_progress().await.unwrap();

    let rv = current_rv(store).await;
    let mut w = store.watch("/pods/ns", &from(&rv, true)).await.unwrap();
    let pod = create(store, "ns", "p").await;
    assert_eq!(
        expect_event(&mut w, "created").await,
        WatchEvent::Added(pod.clone())
    );
    let bookmarks = metric(&backend, "etcd_bookmark_counts");
    store.request_watch_progress().await.unwrap();
    match expect_event(&mut w, "progress").await {
        WatchEvent::Bookmark(mut bookmark) => {
            let at: u64 = bookmark.metadata.resource_version.parse().unwrap();
            let created: u64 = pod.metadata.resource_version.parse().unwrap();
            assert!(at >= created, "bookmark at {at}, before {created}");
            bookmark.metadata.resource_version.clear();
            assert_eq!(bookmark, Pod::default(), "no annotation, no field");
        }
        other => panic!("expected a Bookmark, got {other:?}"),
    }
    assert_eq!(metric(&backend, "etcd_bookmark_counts"), bookmarks + 1.0);
}

/// The version etcd reports (maintenance status), as text and as numbers.
async fn etcd_release(backend: &Etcd3Backend) -> (String, (u64, u64, u64)) {
    let version = backend
        .raw
        .maintenance_client()
        .status()
        .await
        .unwrap()
        .version()
        .to_owned();
    let numbers: Vec<u64> = version
        .split(['.', '-', '+'])
        .take(3)
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("etcd version {version:?}"))
        })
        .collect();
    let release = (numbers[0], numbers[1], numbers[2]);
    (version, release)
}

/// How an etcd answers a progress request while a watch on the stream waits for a
/// revision it has not reached yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FutureWatchProgress {
    /// At once, at its current revision (before etcd-io/etcd#15220's fix, 3.4.25 and
    /// 3.5.8, the stream answered by itself).
    AtOnce,
    /// Not at all until its revision reaches every watch's start (etcd-io/etcd#20241:
    /// 3.5.23 and later, 3.6.2 and later; 3.5.21 still answered).
    Withheld,
    /// The releases in between, which these tests do not run on: either.
    Either,
}

fn future_watch_progress(release: (u64, u64, u64)) -> FutureWatchProgress {
    match release {
        (3, 4, patch) if patch < 25 => FutureWatchProgress::AtOnce,
        (3, 5, patch) if patch >= 23 => FutureWatchProgress::Withheld,
        (3, 6, patch) if patch >= 2 => FutureWatchProgress::Withheld,
        (major, minor, _) if (major, minor) > (3, 6) => FutureWatchProgress::Withheld,
        _ => FutureWatchProgress::Either,
    }
}

/// A watch from the current resourceVersion is an etcd watch from the next revision.
/// A progress request before any write: etcd 3.4.23 answers at once with a bookmark at
/// the current revision; etcd 3.5.35 and 3.6.16 answer nothing (etcd checks every watch
/// of the stream, so one such watch silences the request for all the store's watches),
/// as kube's own `TestProgressNotify` allows for since etcd 3.6.2. After one write
/// elsewhere every version answers, at that write's revision. On an etcd of its own, so
/// that no other test's write moves the revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn request_watch_progress_with_a_watch_at_a_future_revision() {
    let backend = Etcd3Backend::dedicated("progress_future", EtcdOptions::default()).await;
    let store = &backend.store;
    let (version, release) = etcd_release(&backend).await;
    let expected = future_watch_progress(release);
    let rv = current_rv(store).await;
    let mut w = store.watch("/pods/ns", &from(&rv, true)).await.unwrap();
    // The watch must be on etcd's stream before the request is.
    wait_for_etcd_watchers(&backend.endpoint, 1).await;

    store.request_watch_progress().await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(2), next_event(&mut w)).await;
    match (expected, answer) {
        (FutureWatchProgress::AtOnce | FutureWatchProgress::Either, Ok(Some(event))) => {
            let WatchEvent::Bookmark(bookmark) = event else {
                panic!("etcd {version}: expected a Bookmark, got {event:?}");
            };
            assert_eq!(bookmark.metadata.resource_version, rv, "etcd {version}");
        }
        (FutureWatchProgress::Withheld | FutureWatchProgress::Either, Err(_)) => {}
        (expected, answer) => panic!("etcd {version}: expected {expected:?}, got {answer:?}"),
    }

    let key = backend.etcd_key("/increaseRV");
    let written = backend
        .raw
        .kv_client()
        .put(key, "ok", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    store.request_watch_progress().await.unwrap();
    match expect_event(&mut w, "progress after a write").await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(
                bookmark.metadata.resource_version,
                written.to_string(),
                "etcd {version}"
            );
        }
        other => panic!("etcd {version}: expected a Bookmark, got {other:?}"),
    }
    expect_no_more(&mut w).await;
}
