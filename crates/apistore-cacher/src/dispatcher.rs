//! The watchers of one cacher and how events reach them (kube's `dispatchEvent`,
//! `cacheWatcher.add`, `timeBudget` and the bookmark time buckets of `cacher.go`).
//!
//! Every event goes to every watcher whose key it falls under, without waiting, into
//! the watcher's own buffer. Events that reached the cache together (etcd sends a
//! watch response of many events under load) go as one batch: one send and one
//! wake-up per watcher for the batch instead of one per event, which is what lets a
//! thousand watchers keep up with etcd's write rate; a buffer slot holds one batch.
//! Watchers whose buffer is full get the rest of a shared time budget (at most
//! 100 ms, refilled at 50 ms per second) to make room; those that still have none are
//! terminated: their stream ends and they re-watch, while the others are never held
//! up by more than the budget.
//!
//! Bookmarks go, once a second, to the watchers that asked for them and are due: a
//! minute after the previous one, or at once for a watch-list watcher still waiting
//! for its initial-events-end bookmark.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::event::{CacheEvent, has_path_prefix};
use crate::metrics::ResourceMetrics;

/// What a watcher's buffer carries.
#[derive(Debug)]
pub(crate) enum Dispatched<T> {
    /// Events in revision order, and when they were handed over; the watcher skips
    /// those it already covers and those its filter does not select.
    Events(Batch<T>, Instant),
    Bookmark(u64),
}

/// Events that reached the cache together, shared by every watcher they go to.
pub(crate) type Batch<T> = Arc<[Arc<CacheEvent<T>>]>;

/// The initial-events-end bookmark of a watch-list watcher: still waited for, handed
/// to its buffer, or sent (kube's `cacheWatcherWaitingForBookmark`, `...Received`,
/// `...Sent`). A watcher that asked for none starts as sent.
pub(crate) const BOOKMARK_WAITING: u8 = 0;
pub(crate) const BOOKMARK_RECEIVED: u8 = 1;
pub(crate) const BOOKMARK_SENT: u8 = 2;

const MAX_BUDGET: Duration = Duration::from_millis(100);
const REFRESH_PER_SECOND: Duration = Duration::from_millis(50);

/// kube's `timeBudget`: how long blocked watchers may hold up dispatching, shared
/// across events and refilled with time.
#[derive(Debug)]
struct TimeBudget {
    available: Duration,
    last: Instant,
}

impl TimeBudget {
    fn take_available(&mut self) -> Duration {
        let now = Instant::now();
        let refill =
            REFRESH_PER_SECOND.mul_f64(now.saturating_duration_since(self.last).as_secs_f64());
        self.available = (self.available + refill).min(MAX_BUDGET);
        self.last = now;
        std::mem::take(&mut self.available)
    }

    fn return_unused(&mut self, unused: Duration) {
        self.available = (self.available + unused).min(MAX_BUDGET);
    }
}

struct Entry<T> {
    sender: mpsc::Sender<Dispatched<T>>,
    /// The revision its interval covers: older events are already on their way to it.
    start_resource_version: u64,
    key: Arc<str>,
    allow_bookmarks: bool,
    bookmark_after_resource_version: u64,
    bookmark_state: Arc<AtomicU8>,
    next_bookmark: Instant,
}

struct Registry<T> {
    next_id: u64,
    watchers: BTreeMap<u64, Entry<T>>,
}

/// A new watcher, as the cacher hands it over.
pub(crate) struct NewWatcher<T> {
    pub(crate) sender: mpsc::Sender<Dispatched<T>>,
    pub(crate) start_resource_version: u64,
    pub(crate) key: Arc<str>,
    pub(crate) allow_bookmarks: bool,
    pub(crate) bookmark_after_resource_version: u64,
    pub(crate) bookmark_state: Arc<AtomicU8>,
}

/// The watchers of one cacher.
pub(crate) struct Dispatcher<T> {
    registry: Mutex<Registry<T>>,
    budget: Mutex<TimeBudget>,
    bookmark_frequency: Duration,
    metrics: ResourceMetrics,
}

/// Removes its watcher when the watch stream is dropped.
pub(crate) struct WatcherGuard<T> {
    id: u64,
    dispatcher: Weak<Dispatcher<T>>,
}

impl<T> Drop for WatcherGuard<T> {
    fn drop(&mut self) {
        if let Some(dispatcher) = self.dispatcher.upgrade() {
            dispatcher.lock().watchers.remove(&self.id);
        }
    }
}

impl<T> Dispatcher<T> {
    pub(crate) fn new(bookmark_frequency: Duration, metrics: ResourceMetrics) -> Self {
        Self {
            registry: Mutex::new(Registry {
                next_id: 0,
                watchers: BTreeMap::new(),
            }),
            budget: Mutex::new(TimeBudget {
                available: MAX_BUDGET,
                last: Instant::now(),
            }),
            bookmark_frequency,
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Registry<T>> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many watchers are registered.
    pub(crate) fn len(&self) -> usize {
        self.lock().watchers.len()
    }

    /// Registers a watcher; dropping the guard unregisters it.
    pub(crate) fn add(self: &Arc<Self>, watcher: NewWatcher<T>) -> WatcherGuard<T> {
        let now = Instant::now();
        let waiting = watcher.bookmark_state.load(Ordering::Acquire) == BOOKMARK_WAITING;
        let next_bookmark = if waiting {
            now
        } else {
            now + self.bookmark_frequency
        };
        let mut registry = self.lock();
        let id = registry.next_id;
        registry.next_id += 1;
        registry.watchers.insert(
            id,
            Entry {
                sender: watcher.sender,
                start_resource_version: watcher.start_resource_version,
                key: watcher.key,
                allow_bookmarks: watcher.allow_bookmarks,
                bookmark_after_resource_version: watcher.bookmark_after_resource_version,
                bookmark_state: watcher.bookmark_state,
                next_bookmark,
            },
        );
        WatcherGuard {
            id,
            dispatcher: Arc::downgrade(self),
        }
    }

    /// Ends every watch (after the underlying watch broke: the cache re-lists, and
    /// its watchers must start again).
    pub(crate) fn terminate_all(&self) {
        self.lock().watchers.clear();
    }

    /// Sends `batch` (events in revision order) to every watcher under whose key one
    /// of them falls; see the module docs for what happens to watchers that cannot
    /// take it.
    pub(crate) async fn dispatch(&self, batch: &Batch<T>) {
        let Some(last) = batch.last() else {
            return;
        };
        let mut blocked = Vec::new();
        let queued = Instant::now();
        {
            let mut registry = self.lock();
            let mut closed = Vec::new();
            for (id, watcher) in &registry.watchers {
                if last.resource_version <= watcher.start_resource_version {
                    continue;
                }
                if !batch
                    .iter()
                    .any(|event| has_path_prefix(&event.key, &watcher.key))
                {
                    continue;
                }
                match watcher
                    .sender
                    .try_send(Dispatched::Events(Arc::clone(batch), queued))
                {
                    Ok(()) => {}
                    Err(mpsc::error::TrySendError::Full(_)) => {
                        blocked.push((*id, watcher.sender.clone()));
                    }
                    Err(mpsc::error::TrySendError::Closed(_)) => closed.push(*id),
                }
            }
            for id in closed {
                registry.watchers.remove(&id);
            }
        }
        self.metrics.events_dispatched.inc_by(batch.len() as u64);
        if blocked.is_empty() {
            return;
        }
        let budget = self
            .budget
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_available();
        let start = Instant::now();
        let deadline = start + budget;
        let mut terminated = Vec::new();
        for (id, sender) in blocked {
            let sent = tokio::time::timeout_at(
                deadline,
                sender.send(Dispatched::Events(Arc::clone(batch), queued)),
            )
            .await;
            if !matches!(sent, Ok(Ok(()))) {
                terminated.push(id);
            }
        }
        let unused = budget.saturating_sub(start.elapsed());
        self.budget
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .return_unused(unused);
        if !terminated.is_empty() {
            let mut registry = self.lock();
            for id in terminated {
                if registry.watchers.remove(&id).is_some() {
                    self.metrics.terminated_watchers.inc();
                    tracing::debug!(watcher = id, "terminating a watcher that does not keep up");
                }
            }
        }
    }

    /// Sends a bookmark at `resource_version` to the watchers that are due one.
    pub(crate) fn bookmark(&self, resource_version: u64) {
        if resource_version == 0 {
            return;
        }
        let now = Instant::now();
        let mut registry = self.lock();
        for watcher in registry.watchers.values_mut() {
            if !watcher.allow_bookmarks || watcher.next_bookmark > now {
                continue;
            }
            if resource_version >= watcher.bookmark_after_resource_version
                && watcher
                    .sender
                    .try_send(Dispatched::Bookmark(resource_version))
                    .is_ok()
            {
                let _ = watcher.bookmark_state.compare_exchange(
                    BOOKMARK_WAITING,
                    BOOKMARK_RECEIVED,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
            }
            watcher.next_bookmark =
                if watcher.bookmark_state.load(Ordering::Acquire) == BOOKMARK_WAITING {
                    now
                } else {
                    now + self.bookmark_frequency
                };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventKind;
    use crate::metrics::CacherMetrics;

    fn event(name: &str, resource_version: u64) -> Arc<CacheEvent<String>> {
        Arc::new(CacheEvent {
            kind: EventKind::Added,
            key: Arc::from(format!("/pods/ns/{name}")),
            object: Arc::new(name.to_owned()),
            prev_object: None,
            resource_version,
            record_time: Instant::now(),
        })
    }

    fn watcher(
        dispatcher: &Arc<Dispatcher<String>>,
        key: &str,
        buffer: usize,
    ) -> (mpsc::Receiver<Dispatched<String>>, WatcherGuard<String>) {
        let (sender, receiver) = mpsc::channel(buffer);
        let guard = dispatcher.add(NewWatcher {
            sender,
            start_resource_version: 0,
            key: Arc::from(key),
            allow_bookmarks: false,
            bookmark_after_resource_version: 0,
            bookmark_state: Arc::new(AtomicU8::new(BOOKMARK_SENT)),
        });
        (receiver, guard)
    }

    #[tokio::test]
    async fn events_that_arrive_together_take_one_buffer_slot() {
        let metrics = CacherMetrics::unregistered().for_resource("pods", "/pods");
        let dispatcher = Arc::new(Dispatcher::new(Duration::from_secs(60), metrics.clone()));
        let (mut under, _under_guard) = watcher(&dispatcher, "/pods/ns", 1);
        let (mut elsewhere, _elsewhere_guard) = watcher(&dispatcher, "/pods/other", 1);
        let batch: Batch<String> = (1..=50).map(|rv| event(&format!("p{rv}"), rv)).collect();
        dispatcher.dispatch(&batch).await;

        // Fifty events, a buffer of one: one send, nobody blocked or terminated.
        let Ok(Dispatched::Events(received, _)) = under.try_recv() else {
            panic!("the watcher under the events' key got no batch");
        };
        assert_eq!(received.len(), 50);
        assert!(
            Arc::ptr_eq(&received, &batch),
            "every watcher shares the batch"
        );
        assert!(under.try_recv().is_err(), "one buffer slot for the batch");
        assert!(
            elsewhere.try_recv().is_err(),
            "a watcher under another key gets nothing"
        );
        assert_eq!(metrics.events_dispatched.get(), 50, "counted per event");
        assert_eq!(metrics.terminated_watchers.get(), 0);
        assert_eq!(dispatcher.lock().watchers.len(), 2);
    }
}
