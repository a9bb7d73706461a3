//! Initial events of a watch: kube-apiserver's `RunWatchSemantics`,
//! `RunWatchSemanticInitialEventsExtended`, `RunSendInitialEventsBackwardCompatibility`
//! (`watcher_tests.go`) and `TestTooLargeResourceVersionErrorForWatchList`
//! (`etcd3/watcher_test.go`).
//!
//! All but the backward-compatibility case run with the `WatchList` feature gate on,
//! through [`Backend::watch_list_store`].

use apistore_storage::{
    CAUSE_RESOURCE_VERSION_TOO_LARGE, INITIAL_EVENTS_END_ANNOTATION, ListOptions,
    SelectionPredicate, Storage, WatchEvent,
};

use super::watch::{check_no_more_results, check_results_in_order, expect_event, list_rv, watch};
use super::{Backend, Pod};

fn watch_list_store<B: Backend>(backend: &B) -> B::Store {
    backend.watch_list_store().expect(
        "the backend must offer a store with the WatchList gate on (Backend::watch_list_store)",
    )
}

/// The expected end-of-initial-events bookmark: an empty pod with the annotation, at
/// the given resourceVersion.
fn initial_events_end(resource_version: &str) -> Pod {
    let mut pod = Pod::default();
    pod.metadata.resource_version = resource_version.to_owned();
    pod.metadata
        .annotations
        .insert(INITIAL_EVENTS_END_ANNOTATION.to_owned(), "true".to_owned());
    pod
}

/// The resourceVersion a request gives.
#[derive(Debug, Clone, Copy)]
enum Rv {
    Unset,
    Zero,
    One,
    /// The storage's current resourceVersion, read after the initial pods exist.
    Current,
}

/// `RunWatchSemantics` (gate on): 3 pods exist, a recursive watch starts with each
/// combination of resourceVersion, `sendInitialEvents` and `allowWatchBookmarks`, 2 pods
/// follow. The initial events, the end bookmark (resourceVersion at least the last
/// initial pod's) and the later events come exactly as kube-apiserver sends them; then
/// nothing for 100 ms.
pub async fn run_watch_semantics<B: Backend>(backend: &B) {
    let store = watch_list_store(backend);
    // (allowWatchBookmarks, sendInitialEvents, rv, initial events, end bookmark)
    let scenarios = [
        (true, Some(true), Rv::Unset, true, true),
        (true, Some(false), Rv::Unset, false, false),
        (false, Some(false), Rv::Unset, false, false),
        (false, Some(true), Rv::Unset, true, false),
        (true, Some(true), Rv::Zero, true, true),
        (true, Some(false), Rv::Zero, false, false),
        (false, Some(false), Rv::Zero, false, false),
        (false, Some(true), Rv::Zero, true, false),
        (true, Some(true), Rv::One, true, true),
        // From revision 1 without initial events: the 3 creations are replayed.
        (true, Some(false), Rv::One, true, false),
        (false, Some(false), Rv::One, true, false),
        (false, Some(true), Rv::One, true, false),
        (true, Some(true), Rv::Current, true, true),
        (true, Some(false), Rv::Current, false, false),
        (false, Some(false), Rv::Current, false, false),
        (false, Some(true), Rv::Current, true, false),
        // Legacy.
        (false, None, Rv::Zero, true, false),
        (false, None, Rv::Unset, true, false),
    ];
    for (index, (allow_bookmarks, send_initial_events, rv, initial, bookmark)) in
        scenarios.into_iter().enumerate()
    {
        let name = format!(
            "allowWatchBookmarks={allow_bookmarks}, sendInitialEvents={send_initial_events:?}, RV={rv:?}"
        );
        let namespace = format!("ns-{index}");
        let mut created = Vec::new();
        for i in 1..=3 {
            let pod = Pod::new(&namespace, &format!("pod-{i}"));
            let out = store
                .create(&pod.key(), pod, 0)
                .await
                .unwrap_or_else(|err| panic!("{name}: create failed: {err}"));
            created.push(out);
        }
        let resource_version = match rv {
            Rv::Unset => String::new(),
            Rv::Zero => "0".to_owned(),
            Rv::One => "1".to_owned(),
            Rv::Current => current_rv(&store).await,
        };
        let options = ListOptions {
            resource_version,
            predicate: SelectionPredicate {
                allow_watch_bookmarks: allow_bookmarks,
                ..SelectionPredicate::default()
            },
            recursive: true,
            send_initial_events,
            ..ListOptions::default()
        };
        let mut w = watch(&store, &format!("/pods/{namespace}"), &options).await;
        if initial {
            let expected = created.iter().cloned().map(WatchEvent::Added).collect();
            check_results_in_order(&mut w, expected).await;
        }
        if bookmark {
            let event = expect_event(&mut w, &name).await;
            let WatchEvent::Bookmark(pod) = event else {
                panic!("{name}: expected the end-of-initial-events bookmark, got {event:?}");
            };
            let actual: u64 = pod.metadata.resource_version.parse().unwrap();
            let last_created: u64 = created[2].metadata.resource_version.parse().unwrap();
            assert!(
                actual >= last_created,
                "{name}: bookmark at {actual}, before the last initial pod at {last_created}"
            );
            assert_eq!(pod, initial_events_end(&actual.to_string()), "{name}");
        }
        let mut later = Vec::new();
        for i in 4..=5 {
            let pod = Pod::new(&namespace, &format!("pod-{i}"));
            let out = store
                .create(&pod.key(), pod, 0)
                .await
                .unwrap_or_else(|err| panic!("{name}: create failed: {err}"));
            later.push(WatchEvent::Added(out));
        }
        check_results_in_order(&mut w, later).await;
        check_no_more_results(&mut w).await;
    }
}

/// The storage's current resourceVersion, as kube-apiserver's
/// `GetCurrentResourceVersionFromStorage` reads it: a one-item list of `/pods`.
async fn current_rv<S: Storage<Object = Pod>>(store: &S) -> String {
    let mut options = ListOptions::default();
    options.predicate.limit = 1;
    store
        .list("/pods", &options)
        .await
        .unwrap_or_else(|err| panic!("list failed: {err}"))
        .metadata
        .resource_version
}

/// `RunWatchSemanticInitialEventsExtended` (gate on): the end bookmark of a namespace's
/// initial events carries the global revision, here that of a later pod in another
/// namespace, not the last initial pod's.
pub async fn run_watch_semantic_initial_events_extended<B: Backend>(backend: &B) {
    let store = watch_list_store(backend);
    let namespace = "ns-foo";
    let mut initial = Vec::new();
    for i in 1..=5 {
        let pod = Pod::new(namespace, &format!("pod-{i}"));
        let out = store
            .create(&pod.key(), pod, 0)
            .await
            .unwrap_or_else(|err| panic!("create failed: {err}"));
        initial.push(WatchEvent::Added(out));
    }
    let other = Pod::new("other-ns-foo", "pod-1");
    let other = store
        .create(&other.key(), other, 0)
        .await
        .unwrap_or_else(|err| panic!("create failed: {err}"));
    let options = ListOptions {
        predicate: SelectionPredicate {
            allow_watch_bookmarks: true,
            ..SelectionPredicate::default()
        },
        recursive: true,
        send_initial_events: Some(true),
        ..ListOptions::default()
    };
    let mut w = watch(&store, &format!("/pods/{namespace}"), &options).await;
    initial.push(WatchEvent::Bookmark(initial_events_end(
        &other.metadata.resource_version,
    )));
    check_results_in_order(&mut w, initial).await;
    check_no_more_results(&mut w).await;
}

/// `RunSendInitialEventsBackwardCompatibility` (gate off): `sendInitialEvents=true`
/// without a resourceVersion is accepted.
pub async fn run_send_initial_events_backward_compatibility<B: Backend>(backend: &B) {
    let options = ListOptions {
        send_initial_events: Some(true),
        ..ListOptions::default()
    };
    let w = backend
        .store()
        .watch("/pods", &options)
        .await
        .unwrap_or_else(|err| panic!("watch failed: {err}"));
    drop(w);
}

/// `TestTooLargeResourceVersionErrorForWatchList` (gate on): a watch-list request for a
/// resourceVersion 101 past the storage's is accepted, then ends with an Error event:
/// 504 Timeout "Too large resource version", its cause, and a retry after 1 to 3 s. On
/// a fresh etcd (revision 1) this is the reference's "102, current: 1".
pub async fn run_test_too_large_resource_version_error_for_watch_list<B: Backend>(backend: &B) {
    let store = watch_list_store(backend);
    let current: u64 = list_rv(&store, "/pods", &SelectionPredicate::everything(), true)
        .await
        .parse()
        .unwrap();
    let requested = current + 101;
    let options = ListOptions {
        resource_version: requested.to_string(),
        predicate: SelectionPredicate {
            allow_watch_bookmarks: true,
            ..SelectionPredicate::default()
        },
        recursive: true,
        send_initial_events: Some(true),
        ..ListOptions::default()
    };
    let mut w = watch(&store, "/abc", &options).await;
    let event = expect_event(&mut w, "too large resourceVersion").await;
    let WatchEvent::Error(status) = event else {
        panic!("expected an Error event, got {event:?}");
    };
    assert_eq!(status.code, 504, "{status:?}");
    assert_eq!(status.reason, "Timeout", "{status:?}");
    assert_eq!(status.status, "Failure", "{status:?}");
    assert_eq!(
        status.message,
        format!("Timeout: Too large resource version: {requested}, current: {current}")
    );
    let details = status.details.expect("status details");
    let retry = details.retry_after_seconds.unwrap_or(0);
    assert!((1..=3).contains(&retry), "retryAfterSeconds {retry}");
    assert_eq!(details.causes.len(), 1, "{:?}", details.causes);
    assert_eq!(details.causes[0].reason, CAUSE_RESOURCE_VERSION_TOO_LARGE);
    assert_eq!(details.causes[0].message, "Too large resource version");
}
