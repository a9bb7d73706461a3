//! The cache's one list-then-watch of the backend (kube's reflector as the cacher
//! runs it in `startCaching`): fill the cache (`fill.rs`: a paged list, or from kube
//! 1.35 one streaming watch-list), replace the cache, watch from the fill's revision
//! with progress bookmarks (on the watch-list's own stream when there was one), apply
//! every event and dispatch them, those that arrived together as one batch.
//!
//! A watch stream that ends is re-opened from the last revision seen. An error event
//! (410 when the revision was compacted away) or a failed fill or watch ends the round:
//! the cache turns pending, its watchers are terminated, and after a pause (short after
//! a round whose fill worked, doubling up to 30 s while fills keep failing) it fills
//! again. The same loop sends the due bookmarks once a second.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use apistore_storage::{
    ListOptions, SelectionPredicate, Storage, StorageError, WatchEvent, WatchStream,
};
use tokio::time::{Instant, MissedTickBehavior};

use crate::cacher::Shared;
use crate::event::{CacheEvent, EventKind};
use crate::fill::{Filled, fill};

const FIRST_RETRY: Duration = Duration::from_millis(100);
const MAX_RETRY: Duration = Duration::from_secs(30);
const BOOKMARK_TICK: Duration = Duration::from_secs(1);

/// Runs until the task is aborted (when the cacher is dropped).
pub(crate) async fn run<S: Storage + 'static>(shared: Arc<Shared<S>>) {
    let mut failed_fills = 0u32;
    loop {
        shared.dispatcher.terminate_all();
        let mut filled = false;
        let result = list_and_watch(&shared, &mut filled).await;
        shared.ready.set(false);
        shared.dispatcher.terminate_all();
        if let Err(ended) = result {
            let err = match ended {
                RoundEnd::Start(err) => {
                    shared.metrics.record_initialization_error();
                    err
                }
                RoundEnd::Watch(err) => err,
            };
            tracing::warn!(
                resource = %shared.settings.group_resource,
                error = %err,
                "watch cache lost its watch of the backend; filling it again"
            );
        }
        failed_fills = if filled {
            0
        } else {
            failed_fills.saturating_add(1)
        };
        let pause = FIRST_RETRY
            .saturating_mul(2u32.saturating_pow(failed_fills))
            .min(MAX_RETRY);
        tokio::time::sleep(pause).await;
    }
}

/// Why a round ended. kube counts `apiserver_watch_cache_initialization_errors_total`
/// only when its reflector's `ListAndWatch` returns an error: a fill that failed or a
/// watch that could not be opened. A watch that ends later (an error event, a 410, the
/// consistency checker's re-list) only starts the next round.
enum RoundEnd {
    Start(StorageError),
    Watch(StorageError),
}

async fn list_and_watch<S: Storage>(shared: &Shared<S>, filled: &mut bool) -> Result<(), RoundEnd> {
    let prefix = shared.settings.resource_prefix.as_str();
    let started = Instant::now();
    let Filled {
        objects,
        revision: list_rv,
        stream: mut streamed,
    } = fill(shared).await.map_err(RoundEnd::Start)?;
    // A fresh fill is consistent with the backend by construction: snapshots start
    // again even if the consistency checker turned them off.
    shared
        .cache
        .set_snapshots_enabled(shared.settings.list_from_cache_snapshot);
    shared.cache.replace(objects, list_rv);
    *filled = true;
    // The metrics move before readiness does: whoever waited for the cache to be ready
    // must find the initialization already counted.
    shared.metrics.record_initialization(started.elapsed());
    shared.metrics.record_resource_version(list_rv);
    shared.metrics.capacity.set(shared.cache.capacity() as i64);
    shared.ready.set(true);
    tracing::debug!(resource = %shared.settings.group_resource, revision = list_rv, "watch cache initialized");

    let mut ticker = tokio::time::interval(BOOKMARK_TICK);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        // A streaming watch-list goes on as the watch: its next events follow the
        // revision its initial events were read at.
        let mut stream = match streamed.take() {
            Some(stream) => stream,
            None => {
                let options = ListOptions {
                    resource_version: shared.cache.resource_version().to_string(),
                    recursive: true,
                    progress_notify: true,
                    predicate: SelectionPredicate {
                        allow_watch_bookmarks: true,
                        ..SelectionPredicate::default()
                    },
                    ..ListOptions::default()
                };
                shared
                    .storage
                    .watch(prefix, &options)
                    .await
                    .map_err(RoundEnd::Start)?
            }
        };
        loop {
            let event = tokio::select! {
                event = poll_fn(|cx| stream.as_mut().poll_next(cx)) => event,
                () = shared.relist.notified() => {
                    return Err(RoundEnd::Watch(StorageError::Internal {
                        key: prefix.to_owned(),
                        message: "the cache is not consistent with the backend".to_owned(),
                        source: None,
                    }));
                }
                _ = ticker.tick() => {
                    shared.dispatcher.bookmark(shared.cache.resource_version());
                    // Snapshots below the backend's compaction are dropped even while
                    // no list asks for one, so their memory goes.
                    shared.sync_compaction();
                    continue;
                }
            };
            // The events already waiting go with this one, as one batch.
            let mut batch = Vec::new();
            let mut polled = Some(event);
            let mut flow = Flow::Continue;
            let mut yielded = false;
            while let Some(event) = polled.take() {
                match absorb(shared, prefix, event) {
                    Absorbed::Event(event) => batch.push(event),
                    Absorbed::Nothing => {}
                    Absorbed::End => {
                        flow = Flow::Reopen;
                        break;
                    }
                    Absorbed::Failed(err) => {
                        flow = Flow::Fail(err);
                        break;
                    }
                }
                if batch.len() >= MAX_BATCH {
                    break;
                }
                polled = poll_now(&mut stream).await;
                if polled.is_none() && !yielded {
                    // Once per batch, the tasks already runnable (the watchers taking
                    // the previous batch, the backend's watch) go first: under load
                    // more events are then waiting, and every watcher wakes once for
                    // all of them. Idle, this costs one turn of the scheduler.
                    yielded = true;
                    tokio::task::yield_now().await;
                    polled = poll_now(&mut stream).await;
                }
            }
            if !batch.is_empty() {
                shared.dispatcher.dispatch(&Arc::from(batch)).await;
            }
            match flow {
                Flow::Continue => {}
                Flow::Reopen => break,
                Flow::Fail(err) => return Err(RoundEnd::Watch(err)),
            }
        }
    }
}

/// The next item of `stream` if it is ready now (`Some(None)`: the stream ended).
async fn poll_now<T>(stream: &mut WatchStream<T>) -> Option<Option<WatchEvent<T>>> {
    poll_fn(|cx| {
        Poll::Ready(match stream.as_mut().poll_next(cx) {
            Poll::Ready(event) => Some(event),
            Poll::Pending => None,
        })
    })
    .await
}

/// The most events one batch carries to the watchers.
const MAX_BATCH: usize = 256;

/// What the reflector does after a batch.
enum Flow {
    Continue,
    /// The backend's watch stream ended: open another from the cache's revision.
    Reopen,
    Fail(StorageError),
}

/// What one item of the backend's watch stream did to the cache.
enum Absorbed<T> {
    /// A change, applied to the cache, to dispatch.
    Event(Arc<CacheEvent<T>>),
    /// A bookmark, or an event without a usable resourceVersion (logged).
    Nothing,
    /// The stream ended.
    End,
    /// An error event: the round ends.
    Failed(StorageError),
}

/// Applies one item of the backend's watch stream (`None`: its end) to the cache.
fn absorb<S: Storage>(
    shared: &Shared<S>,
    prefix: &str,
    event: Option<WatchEvent<S::Object>>,
) -> Absorbed<S::Object> {
    let (kind, object) = match event {
        None => return Absorbed::End,
        Some(WatchEvent::Added(object)) => (EventKind::Added, object),
        Some(WatchEvent::Modified(object)) => (EventKind::Modified, object),
        Some(WatchEvent::Deleted(object)) => (EventKind::Deleted, object),
        Some(WatchEvent::Bookmark(object)) => {
            match shared.storage.versioner().object_resource_version(&object) {
                Ok(rv) => {
                    shared.cache.update_resource_version(rv);
                    shared.metrics.record_resource_version(rv);
                }
                Err(err) => {
                    tracing::warn!(error = %err, "bookmark without a usable resourceVersion")
                }
            }
            return Absorbed::Nothing;
        }
        Some(WatchEvent::Error(status)) => {
            return Absorbed::Failed(StorageError::Api {
                key: prefix.to_owned(),
                status,
            });
        }
    };
    shared.metrics.events_received.inc();
    match shared.cache.process(kind, object, Instant::now()) {
        Ok(processed) => {
            if let Some((old, new)) = processed.window.resized {
                shared.metrics.record_capacity_change(old, new);
            }
            shared
                .metrics
                .record_resource_version(processed.event.resource_version);
            Absorbed::Event(processed.event)
        }
        Err(err) => {
            tracing::warn!(error = %err, "watch event without a usable resourceVersion");
            Absorbed::Nothing
        }
    }
}
