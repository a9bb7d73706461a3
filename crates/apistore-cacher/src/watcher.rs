//! One watch served from the cache (kube's `cache_watcher.go`): first the events of
//! its interval (the current objects from a snapshot of the store, or the window's
//! events after its resourceVersion; `interval.rs`), then what the dispatcher hands it, each turned into what this
//! watcher should see.
//!
//! The turning is kube's `convertToWatchEvent`: an event is judged on the object
//! before and after it, so an object that starts to match the selectors arrives as
//! ADDED, one that stops matching as DELETED (its last matching state at the
//! revision of the change), and changes that never match are not sent. The work is
//! done when the consumer polls, so a watcher costs no task of its own.

use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};

use apistore_storage::{
    ApiObject, INITIAL_EVENTS_END_ANNOTATION, SelectionPredicate, Status, WatchEvent,
};
use futures_core::Stream;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::dispatcher::{BOOKMARK_SENT, Batch, Dispatched, WatcherGuard};
use crate::event::{CacheEvent, EventKind, has_path_prefix};
use crate::interval::{Initial, Interval};
use crate::metrics::ResourceMetrics;

/// Which objects a watcher sees: those under its key that its predicate selects
/// (kube's `filterWithAttrsAndPrefixFunction`).
#[derive(Debug, Clone)]
pub(crate) struct WatchFilter {
    pub(crate) key: Arc<str>,
    pub(crate) predicate: SelectionPredicate,
}

impl WatchFilter {
    fn matches<T: ApiObject>(&self, key: &str, object: &T) -> bool {
        has_path_prefix(key, &self.key) && self.predicate.matches(object)
    }
}

/// What one cache event means to a watcher with `filter`, if anything.
pub(crate) fn convert<T: ApiObject + Clone>(
    event: &CacheEvent<T>,
    filter: &WatchFilter,
) -> Option<WatchEvent<T>> {
    let now_passes = event.kind != EventKind::Deleted && filter.matches(&event.key, &*event.object);
    let before_passed = event
        .prev_object
        .as_ref()
        .is_some_and(|prev| filter.matches(&event.key, &**prev));
    match (now_passes, before_passed) {
        (true, false) => Some(WatchEvent::Added((*event.object).clone())),
        (true, true) => Some(WatchEvent::Modified((*event.object).clone())),
        (false, true) => {
            let mut last = (**event.prev_object.as_ref()?).clone();
            last.set_resource_version(event.resource_version.to_string());
            Some(WatchEvent::Deleted(last))
        }
        (false, false) => None,
    }
}

/// A watch stream served from the cache.
pub(crate) struct CacheWatcher<T> {
    /// The initial events, read as the watcher is polled (for the current state, from
    /// a snapshot of the store taken when the watch was registered).
    pub(crate) initial: Interval<T>,
    pub(crate) initial_sent: u64,
    pub(crate) initial_done: bool,
    /// The revision of the initial-events-end bookmark to send right after the initial
    /// events (a watch-list at kube 1.32+); `None`: the dispatcher sends it on a tick.
    pub(crate) initial_events_end: Option<u64>,
    /// The newest revision already covered; later deliveries of older events (the
    /// dispatcher may hand over what the interval already held) are skipped.
    pub(crate) resource_version: u64,
    pub(crate) live: mpsc::Receiver<Dispatched<T>>,
    /// The batch being handed out, the index of its next event, and when the
    /// dispatcher queued it for this watcher.
    pub(crate) batch: Option<(Batch<T>, usize, Instant)>,
    pub(crate) filter: WatchFilter,
    pub(crate) bookmark_state: Arc<AtomicU8>,
    pub(crate) metrics: ResourceMetrics,
    pub(crate) _guard: WatcherGuard<T>,
}

impl<T: ApiObject + Clone + Default> CacheWatcher<T> {
    fn bookmark(&self, resource_version: u64) -> WatchEvent<T> {
        let mut object = T::default();
        object.set_resource_version(resource_version.to_string());
        if self.bookmark_state.load(Ordering::Acquire) != BOOKMARK_SENT {
            object
                .annotations_mut()
                .insert(INITIAL_EVENTS_END_ANNOTATION.to_owned(), "true".to_owned());
        }
        WatchEvent::Bookmark(object)
    }
}

impl<T: ApiObject + Clone + Default> Stream for CacheWatcher<T> {
    type Item = WatchEvent<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if !this.initial_done {
            while let Some(item) = this.initial.next() {
                let converted = match item {
                    Initial::Event(event) => {
                        this.resource_version = this.resource_version.max(event.resource_version);
                        convert(&event, &this.filter)
                    }
                    Initial::Object {
                        key,
                        object,
                        resource_version,
                    } => {
                        this.resource_version = this.resource_version.max(resource_version);
                        this.filter
                            .matches(&key, &*object)
                            .then(|| WatchEvent::Added((*object).clone()))
                    }
                };
                if let Some(converted) = converted {
                    this.initial_sent += 1;
                    return Poll::Ready(Some(converted));
                }
            }
            this.initial_done = true;
            if this.initial_sent > 0 {
                this.metrics.init_events.inc_by(this.initial_sent);
            }
            if let Some(resource_version) = this.initial_events_end.take()
                && this.bookmark_state.load(Ordering::Acquire) != BOOKMARK_SENT
            {
                let bookmark = this.bookmark(resource_version);
                this.bookmark_state.store(BOOKMARK_SENT, Ordering::Release);
                this.resource_version = this.resource_version.max(resource_version);
                return Poll::Ready(Some(bookmark));
            }
        }
        loop {
            if let Some((batch, next, queued)) = &mut this.batch {
                while let Some(event) = batch.get(*next) {
                    *next += 1;
                    if event.resource_version <= this.resource_version {
                        continue;
                    }
                    this.resource_version = event.resource_version;
                    if let Some(converted) = convert(event, &this.filter) {
                        this.metrics.observe_dispatch(event.record_time, *queued);
                        return Poll::Ready(Some(converted));
                    }
                }
                this.batch = None;
            }
            match this.live.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Dispatched::Events(batch, queued))) => {
                    this.batch = Some((batch, 0, queued));
                }
                Poll::Ready(Some(Dispatched::Bookmark(resource_version))) => {
                    let unsent = this.bookmark_state.load(Ordering::Acquire) != BOOKMARK_SENT;
                    if resource_version > this.resource_version
                        || (resource_version == this.resource_version && unsent)
                    {
                        let bookmark = this.bookmark(resource_version);
                        this.bookmark_state.store(BOOKMARK_SENT, Ordering::Release);
                        return Poll::Ready(Some(bookmark));
                    }
                }
            }
        }
    }
}

/// A watch that fails at once: one ERROR event, then the end (kube's `errWatcher`;
/// after a watch was accepted, failures are reported in the stream).
pub(crate) struct ErrorWatcher<T>(pub(crate) Option<Status>, pub(crate) PhantomData<fn() -> T>);

impl<T> ErrorWatcher<T> {
    pub(crate) fn new(status: Option<Status>) -> Self {
        Self(status, PhantomData)
    }
}

impl<T> Stream for ErrorWatcher<T> {
    type Item = WatchEvent<T>;

    fn poll_next(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        Poll::Ready(self.get_mut().0.take().map(WatchEvent::error))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apistore_storage::DynamicObject;
    use tokio::time::Instant;

    fn pod(name: &str, rv: u64, node: &str) -> Arc<DynamicObject> {
        let mut pod = DynamicObject::new("v1", "Pod", name).within("ns");
        pod.metadata.resource_version = rv.to_string();
        pod.metadata
            .labels
            .insert("node".to_owned(), node.to_owned());
        Arc::new(pod)
    }

    fn event(
        kind: EventKind,
        object: Arc<DynamicObject>,
        prev: Option<Arc<DynamicObject>>,
        rv: u64,
    ) -> CacheEvent<DynamicObject> {
        CacheEvent {
            kind,
            key: Arc::from("/pods/ns/pod"),
            object,
            prev_object: prev,
            resource_version: rv,
            record_time: Instant::now(),
        }
    }

    // The reference's TestCacheWatcherHandlesFiltering, its table of updates seen by
    // a watcher selecting `node=host`: ADDED when a pod starts to match, MODIFIED
    // while it matches, DELETED (at the change's revision) when it stops, nothing
    // while it never matches.
    #[test]
    fn test_cache_watcher_handles_filtering() {
        let filter = WatchFilter {
            key: Arc::from("/pods"),
            predicate: SelectionPredicate {
                label: apistore_storage::LabelSelector::parse("node=host").unwrap(),
                ..SelectionPredicate::default()
            },
        };
        let events = [
            event(EventKind::Added, pod("pod", 1, "host"), None, 1),
            event(
                EventKind::Modified,
                pod("pod", 2, ""),
                Some(pod("pod", 1, "host")),
                2,
            ),
            event(
                EventKind::Modified,
                pod("pod", 3, ""),
                Some(pod("pod", 2, "")),
                3,
            ),
            event(
                EventKind::Modified,
                pod("pod", 4, "host"),
                Some(pod("pod", 3, "")),
                4,
            ),
            event(
                EventKind::Modified,
                pod("pod", 5, "host"),
                Some(pod("pod", 4, "host")),
                5,
            ),
            event(
                EventKind::Deleted,
                pod("pod", 6, "host"),
                Some(pod("pod", 5, "host")),
                6,
            ),
            event(EventKind::Added, pod("pod", 7, "other"), None, 7),
        ];
        let seen: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| convert(e, &filter))
            .map(|e| {
                let rv = e.object().unwrap().metadata.resource_version.clone();
                (e.type_name().to_owned(), rv)
            })
            .collect();
        let expected = [
            ("ADDED", "1"),
            ("DELETED", "2"),
            ("ADDED", "4"),
            ("MODIFIED", "5"),
            ("DELETED", "6"),
        ];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(t, rv)| ((*t).to_owned(), (*rv).to_owned()))
            .collect();
        assert_eq!(seen, expected);
    }

    #[test]
    fn events_outside_the_watch_key_are_not_seen() {
        let filter = WatchFilter {
            key: Arc::from("/pods/other"),
            predicate: SelectionPredicate::everything(),
        };
        let added = event(EventKind::Added, pod("pod", 1, "host"), None, 1);
        assert!(convert(&added, &filter).is_none());
    }
}
