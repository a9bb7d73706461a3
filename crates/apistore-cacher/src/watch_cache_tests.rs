//! The reference's `watch_cache_test.go`, case by case where it tests behaviour (the
//! index cases of `TestWaitUntilFreshAndList` have no counterpart: this cache keeps no
//! label or field indexes, so every list walks the key range).

use std::sync::Arc;

use apistore_storage::{DynamicObject, ErrorKind};
use tokio::time::Instant;

use super::*;
use crate::config::namespace_key_fn;
use crate::interval::Initial;

type Cache = WatchCache<DynamicObject>;

fn make_test_pod(name: &str, resource_version: u64) -> DynamicObject {
    let mut pod = DynamicObject::new("v1", "Pod", name).within("ns");
    pod.metadata.resource_version = resource_version.to_string();
    pod
}

/// kube's `newTestWatchCache`: keys `/prefix/<namespace>/<name>`, a window of
/// `capacity` that may shrink to min(capacity, 100) and grow to max(capacity, 100 Ki).
fn new_test_watch_cache(capacity: usize) -> Cache {
    let cache = WatchCache::new(
        namespace_key_fn("/prefix"),
        &[],
        capacity.min(crate::window::DEFAULT_LOWER_BOUND_CAPACITY),
        capacity.max(crate::window::DEFAULT_UPPER_BOUND_CAPACITY),
        true,
    );
    cache.write().window = EventWindow::with_capacity(
        capacity,
        capacity.min(crate::window::DEFAULT_LOWER_BOUND_CAPACITY),
        capacity.max(crate::window::DEFAULT_UPPER_BOUND_CAPACITY),
    );
    cache
}

/// A window of exactly `capacity` (the reference's "no dynamic-size cache").
fn fixed_watch_cache(capacity: usize) -> Cache {
    let cache = new_test_watch_cache(capacity);
    cache.write().window = EventWindow::with_capacity(capacity, capacity, capacity);
    cache
}

fn add(cache: &Cache, pod: DynamicObject) {
    cache
        .process(EventKind::Added, pod, Instant::now())
        .unwrap();
}

fn update(cache: &Cache, pod: DynamicObject) {
    cache
        .process(EventKind::Modified, pod, Instant::now())
        .unwrap();
}

fn delete(cache: &Cache, pod: DynamicObject) {
    cache
        .process(EventKind::Deleted, pod, Instant::now())
        .unwrap();
}

fn events_since(
    cache: &Cache,
    rv: u64,
) -> Result<Vec<Arc<CacheEvent<DynamicObject>>>, IntervalError> {
    let mut interval = WatchCache::interval(&cache.read(), rv, "", false)?;
    let mut events = Vec::new();
    while let Some(item) = interval.next() {
        match item {
            Initial::Event(event) => events.push(event),
            Initial::Object { .. } => panic!("a watch from a revision starts with events"),
        }
    }
    Ok(events)
}

fn listed(cache: &Cache) -> Vec<(String, DynamicObject)> {
    let (items, _) = cache.list("/prefix");
    items
        .into_iter()
        .map(|(key, object)| (key.to_string(), (*object).clone()))
        .collect()
}

#[test]
fn test_watch_cache_basic() {
    let store = new_test_watch_cache(2);

    let pod1 = make_test_pod("pod", 1);
    add(&store, pod1);
    let (item, _) = store.get("/prefix/ns/pod");
    assert_eq!(item.as_deref(), Some(&make_test_pod("pod", 1)));

    update(&store, make_test_pod("pod", 2));
    let (item, _) = store.get("/prefix/ns/pod");
    assert_eq!(item.as_deref(), Some(&make_test_pod("pod", 2)));

    delete(&store, make_test_pod("pod", 3));
    assert!(store.get("/prefix/ns/pod").0.is_none());

    add(&store, make_test_pod("pod1", 4));
    add(&store, make_test_pod("pod2", 5));
    add(&store, make_test_pod("pod3", 6));
    assert_eq!(
        listed(&store),
        vec![
            ("/prefix/ns/pod1".to_owned(), make_test_pod("pod1", 4)),
            ("/prefix/ns/pod2".to_owned(), make_test_pod("pod2", 5)),
            ("/prefix/ns/pod3".to_owned(), make_test_pod("pod3", 6)),
        ]
    );

    store.replace(vec![make_test_pod("pod4", 7), make_test_pod("pod5", 8)], 8);
    assert_eq!(
        listed(&store),
        vec![
            ("/prefix/ns/pod4".to_owned(), make_test_pod("pod4", 7)),
            ("/prefix/ns/pod5".to_owned(), make_test_pod("pod5", 8)),
        ]
    );
}

#[test]
fn test_events() {
    let store = fixed_watch_cache(5);

    add(&store, make_test_pod("pod", 3));

    // Added event.
    let err = events_since(&store, 1).unwrap_err();
    assert!(matches!(err, IntervalError::TooOld { .. }), "{err:?}");
    assert!(err.into_storage_error("k").is_expired());
    let result = events_since(&store, 2).unwrap();
    assert_eq!(result.len(), 1);
    assert_eq!(result[0].kind, EventKind::Added);
    assert_eq!(*result[0].object, make_test_pod("pod", 3));
    assert!(result[0].prev_object.is_none());

    update(&store, make_test_pod("pod", 4));
    update(&store, make_test_pod("pod", 5));

    // A cache that is not full.
    assert!(events_since(&store, 1).is_err());
    let result = events_since(&store, 3).unwrap();
    assert_eq!(result.len(), 2);
    for (i, event) in result.iter().enumerate() {
        assert_eq!(event.kind, EventKind::Modified);
        assert_eq!(*event.object, make_test_pod("pod", i as u64 + 4));
        assert_eq!(
            event.prev_object.as_deref(),
            Some(&make_test_pod("pod", i as u64 + 3))
        );
    }

    for i in 6..10 {
        update(&store, make_test_pod("pod", i));
    }

    // A full cache: events 5 to 9.
    assert!(events_since(&store, 3).is_err());
    let result = events_since(&store, 4).unwrap();
    assert_eq!(result.len(), 5);
    for (i, event) in result.iter().enumerate() {
        assert_eq!(*event.object, make_test_pod("pod", i as u64 + 5));
    }

    // A delete event.
    delete(&store, make_test_pod("pod", 10));
    let result = events_since(&store, 9).unwrap();
    assert_eq!(result.len(), 1);
    assert_eq!(result[0].kind, EventKind::Deleted);
    assert_eq!(*result[0].object, make_test_pod("pod", 10));
    assert_eq!(
        result[0].prev_object.as_deref(),
        Some(&make_test_pod("pod", 9))
    );
}

#[test]
fn test_marker() {
    let store = new_test_watch_cache(3);

    // The first thing a watch of the storage delivers is the list.
    store.replace(vec![make_test_pod("pod1", 5), make_test_pod("pod2", 9)], 9);

    let err = events_since(&store, 8).unwrap_err();
    assert!(
        err.clone()
            .into_storage_error("k")
            .to_string()
            .contains("too old resource version"),
        "{err:?}"
    );
    // No events from 9, though the list is there.
    assert!(events_since(&store, 9).unwrap().is_empty());

    let pod = make_test_pod("pods", 12);
    add(&store, pod.clone());
    let result = events_since(&store, 9).unwrap();
    assert_eq!(result.len(), 1);
    assert_eq!(*result[0].object, pod);
}

#[tokio::test]
async fn test_wait_until_fresh_and_list() {
    let store = Arc::new(new_test_watch_cache(3));
    let writer = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            let mut pod1 = make_test_pod("pod1", 2);
            pod1.metadata.labels.insert("label".into(), "value1".into());
            add(&store, pod1);
            add(&store, make_test_pod("pod2", 3));
            add(&store, make_test_pod("pod3", 5));
        }
    });
    store.wait_until_fresh(5, "/prefix/").await.unwrap();
    let (list, resource_version) = store.list("/prefix/");
    assert_eq!(resource_version, 5);
    assert_eq!(list.len(), 3);
    writer.await.unwrap();
}

#[tokio::test]
async fn test_wait_until_fresh_and_list_from_cache() {
    let store = Arc::new(new_test_watch_cache(3));
    let writer = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            add(&store, make_test_pod("pod1", 2));
            // What a progress bookmark at 3 does.
            store.update_resource_version(3);
        }
    });
    store.wait_until_fresh(3, "/prefix/").await.unwrap();
    let (list, resource_version) = store.list("/prefix/");
    assert_eq!(resource_version, 3);
    assert_eq!(list.len(), 1);
    writer.await.unwrap();
}

#[tokio::test]
async fn test_wait_until_fresh_and_get() {
    let store = Arc::new(new_test_watch_cache(3));
    let writer = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            add(&store, make_test_pod("foo", 2));
            add(&store, make_test_pod("bar", 5));
        }
    });
    store.wait_until_fresh(5, "/prefix/ns/bar").await.unwrap();
    let (object, resource_version) = store.get("/prefix/ns/bar");
    assert_eq!(resource_version, 5);
    assert_eq!(object.as_deref(), Some(&make_test_pod("bar", 5)));
    writer.await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn test_wait_until_fresh_and_list_timeout() {
    let store = Arc::new(new_test_watch_cache(3));
    let writer = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            add(&store, make_test_pod("foo", 2));
            store.update_resource_version(3);
            // After the timeout, so that the test fails instead of waiting forever.
            tokio::time::sleep(Duration::from_secs(30)).await;
            add(&store, make_test_pod("bar", 4));
        }
    });
    let err = store.wait_until_fresh(4, "").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::ResourceVersionTooLarge);
    assert!(err.is_too_large_resource_version());
    assert_eq!(err.status().code, 504);
    assert!(
        err.to_string()
            .contains("Too large resource version: 4, current: 3"),
        "{err}"
    );
    writer.abort();
}

#[test]
fn test_cache_increase_does_not_break_watch() {
    let store = new_test_watch_cache(2);
    let now = Instant::now();
    let add_event = |key: &str, rv: u64, at: Instant| {
        let mut state = store.write();
        let event = Arc::new(CacheEvent {
            kind: EventKind::Added,
            key: Arc::from(key),
            object: Arc::new(make_test_pod(key, rv)),
            prev_object: None,
            resource_version: rv,
            record_time: at,
        });
        if state.window.push(event).dropped {
            state.removed_event_since_relist = true;
        }
        state.resource_version = rv;
    };

    // The initial list is from revision 10.
    store.replace(Vec::new(), 10);
    add_event("key1", 20, now);
    // key1 falls out of the window.
    let later = now + 2 * EVENT_FRESH_DURATION;
    add_event("key2", 30, later);
    add_event("key3", 40, later);
    // The window grows.
    add_event("key4", 50, later + Duration::from_secs(1));

    let err = events_since(&store, 15).unwrap_err();
    assert!(
        err.into_storage_error("k")
            .to_string()
            .contains("too old resource version"),
    );
}

#[test]
fn test_suggested_watch_channel_size() {
    // The reference's cases without an index (this cache has none).
    for (capacity, expected) in [(100, 10), (750, 10), (7500, 100), (75000, 100)] {
        assert_eq!(
            suggested_watch_channel_size(capacity),
            expected,
            "capacity={capacity}, !indexExists"
        );
    }
}

#[test]
fn uninitialized_cache_cannot_serve_a_watch() {
    let store = new_test_watch_cache(3);
    assert_eq!(
        events_since(&store, 5).unwrap_err(),
        IntervalError::Uninitialized
    );
}

/// The names and resourceVersions under `/prefix` at `rv`, from the snapshots.
fn names_at(store: &Cache, rv: u64) -> Option<Vec<(String, String)>> {
    store.snapshot_at(rv).map(|snapshot| {
        range_from(&snapshot, "/prefix/", "/prefix/")
            .map(|(_, o)| (o.metadata.name.clone(), o.metadata.resource_version.clone()))
            .collect()
    })
}

fn pair(name: &str, rv: &str) -> (String, String) {
    (name.to_owned(), rv.to_owned())
}

#[test]
fn snapshots_keep_every_revision_since_the_list() {
    let store = new_test_watch_cache(10);
    store.replace(vec![make_test_pod("a", 5)], 5);
    update(&store, make_test_pod("a", 6));
    add(&store, make_test_pod("b", 7));
    delete(&store, make_test_pod("a", 8));

    assert_eq!(names_at(&store, 5), Some(vec![pair("a", "5")]));
    assert_eq!(names_at(&store, 6), Some(vec![pair("a", "6")]));
    assert_eq!(
        names_at(&store, 7),
        Some(vec![pair("a", "6"), pair("b", "7")])
    );
    assert_eq!(names_at(&store, 8), Some(vec![pair("b", "7")]));
    assert_eq!(names_at(&store, 4), None, "before the list");
    assert_eq!(names_at(&store, 9), None, "not reached yet");
    store.update_resource_version(9);
    assert_eq!(
        names_at(&store, 9),
        Some(vec![pair("b", "7")]),
        "a bookmark moves the revision, not the objects"
    );

    store.forget_events_through(7);
    assert_eq!(names_at(&store, 6), None, "forgotten");
    assert_eq!(
        names_at(&store, 7),
        Some(vec![pair("a", "6"), pair("b", "7")])
    );
    store.compact(8);
    assert_eq!(names_at(&store, 7), None, "compacted");
    assert_eq!(names_at(&store, 8), Some(vec![pair("b", "7")]));

    store.replace(vec![make_test_pod("c", 20)], 20);
    assert_eq!(names_at(&store, 8), None, "a re-list forgets the past");
    assert_eq!(names_at(&store, 20), Some(vec![pair("c", "20")]));
}

#[test]
fn snapshots_leave_with_the_events_the_window_drops() {
    let store = fixed_watch_cache(3);
    store.replace(Vec::new(), 1);
    for rv in 2..=6 {
        add(&store, make_test_pod(&format!("p{rv}"), rv));
    }
    // The window holds the events at 4, 5 and 6: a watch may start at 3, and the
    // state at 3 is still known; before it, nothing.
    assert_eq!(store.read().oldest_watchable(), Some(4));
    assert_eq!(names_at(&store, 2), None);
    assert_eq!(
        names_at(&store, 3),
        Some(vec![pair("p2", "2"), pair("p3", "3")])
    );
    assert_eq!(store.snapshot_count(), 4, "at 3, 4, 5 and 6");
}

#[test]
fn without_snapshots_no_past_revision_is_served() {
    let store = WatchCache::new(namespace_key_fn("/prefix"), &[], 10, 10, false);
    store.replace(vec![make_test_pod("a", 5)], 5);
    add(&store, make_test_pod("b", 6));
    assert_eq!(names_at(&store, 5), None);
    assert_eq!(names_at(&store, 6), None);
    assert_eq!(store.snapshot_count(), 0);
}
