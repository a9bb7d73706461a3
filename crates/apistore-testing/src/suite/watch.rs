//! Watch cases of kube-apiserver's `pkg/storage/testing/watcher_tests.go` (`RunTestWatch`
//! and friends), with the event helpers of `utils.go` (`testCheckResult`,
//! `testCheckNoMoreResults`, ...) the other watch files use too; the scoped watch
//! tables are in `watch_scoped.rs`.
//!
//! Where the reference calls `Stop()` on a watcher, a Rust watch is dropped; the
//! reference's "the result channel closes" becomes "the watch's task ends", observed
//! through [`Backend::active_watches`].

use std::time::{Duration, Instant};

use apistore_storage::{
    DeleteOptions, FieldSelector, LabelSelector, ListOptions, Preconditions, SelectionPredicate,
    Storage, Update, UpdateOptions, WatchEvent, WatchStream,
};
use futures::StreamExt;

use super::{Backend, Pod};

/// How long a case waits for one event (the reference's `wait.ForeverTestTimeout`).
pub(crate) const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// How long "no more events" waits (the reference's `testCheckNoMoreResults`).
pub(crate) const NO_MORE_TIMEOUT: Duration = Duration::from_millis(100);

/// The next event of a watch, `None` once it has ended.
pub(crate) async fn next_event(watch: &mut WatchStream<Pod>) -> Option<WatchEvent<Pod>> {
    watch.next().await
}

/// The next event, failing the case if none comes within [`EVENT_TIMEOUT`] or the watch
/// ended.
pub(crate) async fn expect_event(watch: &mut WatchStream<Pod>, what: &str) -> WatchEvent<Pod> {
    match tokio::time::timeout(EVENT_TIMEOUT, next_event(watch)).await {
        Ok(Some(event)) => event,
        Ok(None) => panic!("{what}: the watch ended instead of sending an event"),
        Err(_) => panic!("{what}: no event within {EVENT_TIMEOUT:?}"),
    }
}

/// `testCheckResult`: the next event is exactly `expected`.
pub(crate) async fn check_result(watch: &mut WatchStream<Pod>, expected: WatchEvent<Pod>) {
    let actual = expect_event(watch, "check_result").await;
    assert_eq!(actual, expected, "incorrect event");
}

/// `testCheckResultsInStrictOrder`.
pub(crate) async fn check_results_in_order(
    watch: &mut WatchStream<Pod>,
    expected: Vec<WatchEvent<Pod>>,
) {
    for event in expected {
        check_result(watch, event).await;
    }
}

/// `testCheckEventType`: the next event has this wire type (`ADDED`, `ERROR`, ...).
pub(crate) async fn check_event_type(
    watch: &mut WatchStream<Pod>,
    type_name: &str,
) -> WatchEvent<Pod> {
    let actual = expect_event(watch, "check_event_type").await;
    assert_eq!(actual.type_name(), type_name, "event type of {actual:?}");
    actual
}

/// `testCheckNoMoreResults`: nothing arrives (and the watch does not end) within
/// [`NO_MORE_TIMEOUT`].
pub(crate) async fn check_no_more_results(watch: &mut WatchStream<Pod>) {
    if let Ok(event) = tokio::time::timeout(NO_MORE_TIMEOUT, next_event(watch)).await {
        panic!("unexpected {event:?}, expected no events");
    }
}

/// How many watches the backend runs; the case fails if it cannot tell.
pub(crate) fn active_watches<B: Backend>(backend: &B) -> usize {
    backend
        .active_watches()
        .expect("the backend must count its running watches (Backend::active_watches)")
}

/// `testCheckStop`: after the watch is dropped, its task ends (the count of running
/// watches falls back to `before`) within [`EVENT_TIMEOUT`].
pub(crate) async fn check_stop<B: Backend>(backend: &B, watch: WatchStream<Pod>, before: usize) {
    drop(watch);
    wait_for_active_watches(backend, before).await;
}

/// Waits until the backend runs exactly `count` watches.
pub(crate) async fn wait_for_active_watches<B: Backend>(backend: &B, count: usize) {
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        let now = active_watches(backend);
        if now == count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{now} watches still running after {EVENT_TIMEOUT:?}, expected {count}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Starts a watch, failing the case on an error.
pub(crate) async fn watch<S: Storage<Object = Pod>>(
    store: &S,
    key: &str,
    options: &ListOptions,
) -> WatchStream<Pod> {
    store
        .watch(key, options)
        .await
        .unwrap_or_else(|err| panic!("watch of {key} failed: {err}"))
}

/// Writes `pod` under `key` by guaranteed update (creating it if absent) and returns the
/// stored object.
pub(crate) async fn put_pod<S: Storage<Object = Pod>>(store: &S, key: &str, pod: Pod) -> Pod {
    let options = UpdateOptions {
        ignore_not_found: true,
        ..UpdateOptions::default()
    };
    store
        .guaranteed_update(key, options, move |_, _| Ok(Update::new(pod.clone())))
        .await
        .unwrap_or_else(|err| panic!("guaranteed update of {key} failed: {err}"))
}

/// Deletes `key` and returns the object as deleted (with the deletion's revision).
pub(crate) async fn delete_pod<S: Storage<Object = Pod>>(store: &S, key: &str) -> Pod {
    store
        .delete(key, DeleteOptions::default())
        .await
        .unwrap_or_else(|err| panic!("delete of {key} failed: {err}"))
}

/// The resourceVersion of a consistent list of `key`.
pub(crate) async fn list_rv<S: Storage<Object = Pod>>(
    store: &S,
    key: &str,
    predicate: &SelectionPredicate,
    recursive: bool,
) -> String {
    let options = ListOptions {
        predicate: predicate.clone(),
        recursive,
        ..ListOptions::default()
    };
    store
        .list(key, &options)
        .await
        .unwrap_or_else(|err| panic!("list of {key} failed: {err}"))
        .metadata
        .resource_version
}

pub(crate) fn field_predicate(field: &str) -> SelectionPredicate {
    SelectionPredicate {
        field: FieldSelector::parse(field).unwrap(),
        ..SelectionPredicate::default()
    }
}

fn label_predicate(label: &str) -> SelectionPredicate {
    SelectionPredicate {
        label: LabelSelector::parse(label).unwrap(),
        ..SelectionPredicate::default()
    }
}

/// The event a step of a case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Added,
    Modified,
    Deleted,
}

impl Kind {
    pub(crate) fn event(self, pod: Pod) -> WatchEvent<Pod> {
        match self {
            Self::Added => WatchEvent::Added(pod),
            Self::Modified => WatchEvent::Modified(pod),
            Self::Deleted => WatchEvent::Deleted(pod),
        }
    }
}

/// One write of a case and the event it should cause: `None` as the pod deletes.
struct Step {
    pod: Option<Pod>,
    expect: Option<Kind>,
}

fn step(pod: Pod, expect: Option<Kind>) -> Step {
    Step {
        pod: Some(pod),
        expect,
    }
}

/// `RunTestWatch`: recursive and single-key watches from a list's resourceVersion see
/// creates as Added, updates as Modified, updates into and out of the predicate as
/// Added and Deleted (the latter with the previous object at the new revision), and
/// nothing of a sibling namespace `<ns>-bad`.
pub async fn run_test_watch<B: Backend>(backend: &B) {
    test_watch(backend, false).await;
    test_watch(backend, true).await;
}

async fn test_watch<B: Backend>(backend: &B, recursive: bool) {
    let store = backend.store();
    let base = Pod::new("", "foo");
    let assigned = Pod::new("", "foo").on_node("bar");
    let selected = |pod: &Pod| pod.clone().with_label("select", "true");
    let cases = vec![
        (
            "create a key",
            format!("test-ns-1-{recursive}"),
            SelectionPredicate::everything(),
            vec![step(base.clone(), Some(Kind::Added))],
        ),
        (
            "key updated to match predicate",
            format!("test-ns-2-{recursive}"),
            field_predicate("spec.nodeName=bar"),
            vec![
                step(base.clone(), None),
                step(assigned.clone(), Some(Kind::Added)),
            ],
        ),
        (
            "update",
            format!("test-ns-3-{recursive}"),
            SelectionPredicate::everything(),
            vec![
                step(base.clone(), Some(Kind::Added)),
                step(assigned.clone(), Some(Kind::Modified)),
            ],
        ),
        (
            "delete because of being filtered",
            format!("test-ns-4-{recursive}"),
            field_predicate("spec.nodeName!=bar"),
            vec![
                step(base.clone(), Some(Kind::Added)),
                step(assigned.clone(), Some(Kind::Deleted)),
            ],
        ),
        (
            "filtering",
            format!("test-ns-5-{recursive}"),
            label_predicate("select=true"),
            vec![
                step(selected(&base), Some(Kind::Added)),
                step(base.clone(), Some(Kind::Deleted)),
                step(selected(&base), Some(Kind::Added)),
                step(selected(&assigned), Some(Kind::Modified)),
                Step {
                    pod: None,
                    expect: Some(Kind::Deleted),
                },
            ],
        ),
    ];
    for (name, namespace, predicate, steps) in cases {
        let key = format!("/pods/{namespace}/foo");
        let watch_key = if recursive {
            format!("/pods/{namespace}")
        } else {
            key.clone()
        };
        let rv = list_rv(store, &watch_key, &predicate, recursive).await;
        let before = active_watches(backend);
        let options = ListOptions {
            resource_version: rv,
            predicate,
            recursive,
            ..ListOptions::default()
        };
        let mut w = watch(store, &watch_key, &options).await;

        // A pod in a sibling namespace first: its event must not reach the watch.
        let mut bad = base.clone();
        bad.metadata.namespace = format!("{namespace}-bad");
        put_pod(store, &format!("/pods/{namespace}-bad/foo"), bad).await;

        let mut previous: Option<Pod> = None;
        for step in steps {
            let out = match step.pod {
                Some(mut pod) => {
                    pod.metadata.namespace = namespace.clone();
                    put_pod(store, &key, pod).await
                }
                None => delete_pod(store, &key).await,
            };
            if let Some(kind) = step.expect {
                let expected = if kind == Kind::Deleted {
                    let mut last = previous.clone().expect("a previous object to delete");
                    last.metadata.resource_version = out.metadata.resource_version.clone();
                    last
                } else {
                    out.clone()
                };
                let actual = expect_event(&mut w, name).await;
                assert_eq!(
                    actual,
                    kind.event(expected),
                    "{name} (recursive={recursive})"
                );
            }
            previous = Some(out);
        }
        check_stop(backend, w, before).await;
    }
}

/// `RunTestWatchFromZero`: a watch at resourceVersion 0 first sends the current object
/// as Added, then changes; after a compaction it still works, while a watch from a
/// compacted resourceVersion ends with an Error event: 410 Expired (or, as the
/// reference tolerates, 500 when the compacted revision was the previous value of the
/// first event). Needs a backend whose etcd this test alone compacts.
pub async fn run_test_watch_from_zero<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let from_zero = ListOptions {
        resource_version: "0".to_owned(),
        ..ListOptions::default()
    };
    let mut w = watch(store, &key, &from_zero).await;
    check_result(&mut w, WatchEvent::Added(stored)).await;

    let mut annotated = Pod::new("test-ns", "foo");
    annotated
        .metadata
        .annotations
        .insert("a".to_owned(), "1".to_owned());
    let out = put_pod(store, &key, annotated).await;
    check_result(&mut w, WatchEvent::Modified(out.clone())).await;
    drop(w);

    let mut w = watch(store, &key, &from_zero).await;
    check_result(&mut w, WatchEvent::Added(out.clone())).await;
    drop(w);

    let new_out = put_pod(store, &key, Pod::new("test-ns", "foo")).await;
    backend.compact(&new_out.metadata.resource_version).await;

    let mut w = watch(store, &key, &from_zero).await;
    check_result(&mut w, WatchEvent::Added(new_out)).await;

    let too_old = ListOptions {
        resource_version: out.metadata.resource_version.clone(),
        ..ListOptions::default()
    };
    let mut too_old_watch = watch(store, &key, &too_old).await;
    match expect_event(&mut too_old_watch, "watch from a compacted resourceVersion").await {
        WatchEvent::Error(status) => {
            let expired = (status.code, status.reason.as_str()) == (410, "Expired");
            let internal = (status.code, status.reason.as_str()) == (500, "InternalError");
            assert!(expired || internal, "expected 410 Expired, got {status:?}");
            assert_eq!(status.status, "Failure");
        }
        other => panic!("expected an Error event, got {other:?}"),
    }
}

/// `RunTestDeleteTriggerWatch`: a delete after the watch's resourceVersion is a Deleted
/// event.
pub async fn run_test_delete_trigger_watch<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let options = ListOptions {
        resource_version: stored.metadata.resource_version.clone(),
        ..ListOptions::default()
    };
    let mut w = watch(store, &key, &options).await;
    delete_pod(store, &key).await;
    check_event_type(&mut w, "DELETED").await;
}

/// `RunTestWatchFromNonZero`: a watch from an object's resourceVersion sends only later
/// changes.
pub async fn run_test_watch_from_non_zero<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let options = ListOptions {
        resource_version: stored.metadata.resource_version.clone(),
        ..ListOptions::default()
    };
    let mut w = watch(store, &key, &options).await;
    let mut updated = stored.clone();
    updated.metadata.resource_version.clear();
    updated
        .metadata
        .annotations
        .insert("version".to_owned(), "2".to_owned());
    let out = put_pod(store, &key, updated).await;
    check_result(&mut w, WatchEvent::Modified(out)).await;
}

/// `RunTestDelayedWatchDelivery`: 21 creates under a watched prefix, read only after all
/// were made, arrive in order, at least the first 10 of them. A store may end a watcher
/// that stops reading rather than drop its events (the watch cache does, once the
/// watcher's buffer of 10 is full past its time budget: kube's "forcing watcher close
/// due to unresponsiveness"); the reference allows for it with "at least 10". A watch
/// that ends cleanly therefore ends the reading; an Error event fails the case. (The
/// reference stops the watcher before draining it; a dropped Rust watch cannot be read,
/// so this one reads first.)
pub async fn run_test_delayed_watch_delivery<B: Backend>(backend: &B) {
    let store = backend.store();
    let (_, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let before = active_watches(backend);
    let options = ListOptions {
        resource_version: stored.metadata.resource_version.clone(),
        recursive: true,
        ..ListOptions::default()
    };
    let mut w = watch(store, "/pods/test-ns", &options).await;
    let total = 21;
    for i in 0..total {
        let pod = Pod::new("test-ns", &format!("foo-{i}"));
        put_pod(store, &pod.key(), pod.clone()).await;
    }
    let mut watched = 0;
    while watched < total {
        let event = match tokio::time::timeout(EVENT_TIMEOUT, next_event(&mut w)).await {
            Ok(Some(event)) => event,
            // Ended by the store for not reading: what came before must be in order.
            Ok(None) => break,
            Err(_) => panic!("delayed delivery: no event {watched} within {EVENT_TIMEOUT:?}"),
        };
        let name = event.object().map(|pod| pod.metadata.name.clone());
        assert_eq!(
            name,
            Some(format!("foo-{watched}")),
            "event {watched}: {event:?}"
        );
        watched += 1;
    }
    assert!(
        watched >= 10,
        "delayed delivery: the watch ended after {watched} of {total} events, expected at least 10"
    );
    check_stop(backend, w, before).await;
}

/// `RunTestWatchError`: when the stored value cannot be read back (the transformer
/// fails), the watch sends an Error event.
pub async fn run_test_watch_error<B: Backend>(backend: &B) {
    let store = backend.store();
    let pod = Pod::new("test-ns", "foo");
    let key = pod.key();
    let options = ListOptions {
        resource_version: "0".to_owned(),
        recursive: true,
        ..ListOptions::default()
    };
    let rv = store
        .list("/pods", &options)
        .await
        .unwrap_or_else(|err| panic!("list failed: {err}"))
        .metadata
        .resource_version;
    put_pod(store, &key, pod).await;

    assert!(
        backend.set_transformer_failing(true),
        "the backend must be able to make its transformer fail (Backend::set_transformer_failing)"
    );
    let options = ListOptions {
        resource_version: rv,
        ..ListOptions::default()
    };
    let mut w = watch(store, &key, &options).await;
    let event = check_event_type(&mut w, "ERROR").await;
    backend.set_transformer_failing(false);
    if let WatchEvent::Error(status) = event {
        assert_eq!(status.code, 500, "{status:?}");
        assert!(
            status.message.contains(&backend.stored_key(&key)),
            "the error names the key: {status:?}"
        );
    }
    // The Error event is the last one.
    match tokio::time::timeout(EVENT_TIMEOUT, next_event(&mut w)).await {
        Ok(None) => {}
        Ok(Some(event)) => panic!("an event after the Error event: {event:?}"),
        Err(_) => panic!("the watch did not end after its Error event"),
    }
}

/// `RunTestWatchContextCancel`, as a Rust watch has it: a watch dropped right after it
/// was started ends without doing anything more, and so does one dropped while its
/// consumer had stopped reading and its task was blocked handing over events (the
/// reference's `TestWatchErrResultNotBlockAfterCancel`).
pub async fn run_test_watch_context_cancel<B: Backend>(backend: &B) {
    let store = backend.store();
    let before = active_watches(backend);
    let options = ListOptions {
        resource_version: "0".to_owned(),
        ..ListOptions::default()
    };
    let w = watch(store, "/pods/not-existing", &options).await;
    check_stop(backend, w, before).await;

    // A consumer that stopped reading: more events than the watch buffers are pending
    // when it is dropped.
    let rv = list_rv(
        store,
        "/pods/stalled",
        &SelectionPredicate::everything(),
        true,
    )
    .await;
    let options = ListOptions {
        resource_version: rv,
        recursive: true,
        ..ListOptions::default()
    };
    let mut stalled = watch(store, "/pods/stalled", &options).await;
    let mut first_pod = None;
    for i in 0..150 {
        let pod = Pod::new("stalled", &format!("pod-{i}"));
        let out = store
            .create(&pod.key(), pod, 0)
            .await
            .unwrap_or_else(|err| panic!("create failed: {err}"));
        first_pod.get_or_insert(out);
    }
    // The first event shows the watch is delivering; the rest stay unread.
    check_result(&mut stalled, WatchEvent::Added(first_pod.unwrap())).await;
    check_stop(backend, stalled, before).await;
}

/// `RunTestWatcherTimeout`: 50 watchers that never read do not hold up one that does:
/// each of 22 creates reaches the reader promptly.
pub async fn run_test_watcher_timeout<B: Backend>(backend: &B) {
    let store = backend.store();
    let rv = list_rv(store, "/pods", &SelectionPredicate::everything(), true).await;
    let options = ListOptions {
        resource_version: rv,
        recursive: true,
        ..ListOptions::default()
    };
    let non_reading_count = 50;
    let mut non_reading = Vec::new();
    for _ in 0..non_reading_count {
        non_reading.push(watch(store, "/pods/test-ns", &options).await);
    }
    let mut reading = watch(store, "/pods/test-ns", &options).await;
    let started = Instant::now();
    for i in 0..22 {
        let pod = Pod::new("test-ns", &format!("foo-{i}"));
        let out = store
            .create(&pod.key(), pod, 0)
            .await
            .unwrap_or_else(|err| panic!("create failed: {err}"));
        check_result(&mut reading, WatchEvent::Added(out)).await;
    }
    let limit = Duration::from_millis(250 * non_reading_count);
    assert!(
        started.elapsed() <= limit,
        "waiting for events took too long: {:?}",
        started.elapsed()
    );
    drop(non_reading);
}

/// `RunTestWatchDeleteEventObjectHaveLatestRV`: the Deleted event carries exactly what
/// the delete returned, with the deletion's resourceVersion.
pub async fn run_test_watch_delete_event_object_have_latest_rv<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let options = ListOptions {
        resource_version: stored.metadata.resource_version.clone(),
        ..ListOptions::default()
    };
    let mut w = watch(store, &key, &options).await;
    let deleted = store
        .delete(
            &key,
            DeleteOptions {
                preconditions: Some(Preconditions::default()),
                ..DeleteOptions::default()
            },
        )
        .await
        .unwrap_or_else(|err| panic!("delete failed: {err}"));
    assert_ne!(
        stored.metadata.resource_version, deleted.metadata.resource_version,
        "resourceVersion did not change on deletion"
    );
    check_result(&mut w, WatchEvent::Deleted(deleted)).await;
}

/// `RunOptionalTestProgressNotify`: with progress notifications asked for (and a
/// backend that sends them every second), a quiet watch gets a Bookmark: an empty pod
/// with only a resourceVersion, not older than the last write.
///
/// As the reference does since etcd 3.6.2 (kubernetes commit b82f4b24a, "Fix
/// TestProgressNotify for etcd v3.6.2", after etcd-io/etcd#20241): one write elsewhere
/// first (its `increaseRV`). A watch from the create's resourceVersion is an etcd watch
/// from the next revision; etcd 3.5.23 and later 3.5 releases (3.5.21 did not yet) and
/// 3.6.2 and later send no progress notification to a watch whose start revision etcd
/// has not reached, so without that write the bookmark would never come.
pub async fn run_test_progress_notify<B: Backend>(backend: &B) {
    let store = backend.store();
    let input = Pod::new("test-ns", "name");
    let key = input.key();
    let out = store
        .create(&key, input, 0)
        .await
        .unwrap_or_else(|err| panic!("create failed: {err}"));
    backend
        .raw_put(&backend.stored_key("/increaseRV"), b"ok".to_vec())
        .await;
    let options = ListOptions {
        resource_version: out.metadata.resource_version.clone(),
        progress_notify: true,
        ..ListOptions::default()
    };
    let mut w = watch(store, &key, &options).await;
    match expect_event(&mut w, "progress notification").await {
        WatchEvent::Bookmark(mut pod) => {
            let rv: u64 = pod.metadata.resource_version.parse().unwrap();
            let created: u64 = out.metadata.resource_version.parse().unwrap();
            assert!(rv >= created, "bookmark at {rv} is older than {created}");
            pod.metadata.resource_version.clear();
            assert_eq!(
                pod,
                Pod::default(),
                "a bookmark carries no field but the resourceVersion"
            );
        }
        other => panic!("expected a Bookmark, got {other:?}"),
    }
}

/// `RunTestWatchDispatchBookmarkEvents` with `expectedWatchBookmarks=false`, as etcd3
/// runs it: allowing bookmarks without asking for progress notifications brings none,
/// even from a backend that sends them every second, and writes elsewhere bring no
/// event within 3 s.
pub async fn run_test_watch_dispatch_bookmark_events<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let quiet = |allow_watch_bookmarks: bool, i: usize| {
        let key = key.clone();
        let rv = stored.metadata.resource_version.clone();
        async move {
            let options = ListOptions {
                resource_version: rv,
                predicate: SelectionPredicate {
                    allow_watch_bookmarks,
                    ..SelectionPredicate::default()
                },
                ..ListOptions::default()
            };
            let mut w = watch(store, &key, &options).await;
            let other = Pod::new(&format!("other-ns-{i}"), "foo");
            store
                .create(&other.key(), other, 0)
                .await
                .unwrap_or_else(|err| panic!("create failed: {err}"));
            if let Ok(event) =
                tokio::time::timeout(Duration::from_secs(3), next_event(&mut w)).await
            {
                panic!("allowWatchBookmarks={allow_watch_bookmarks}: unexpected {event:?}");
            }
        }
    };
    // Both sub-cases wait 3 s; they do it side by side.
    tokio::join!(quiet(false, 0), quiet(true, 1));
}
