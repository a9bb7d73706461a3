//! Watch: every change under a key after a resourceVersion, in order, exactly once, or
//! an Error event; the etcd3 store's start rules, initial events and error statuses
//! (kube-apiserver's `etcd3/watcher.go` at v0.31.1).
//!
//! Each watch runs in a task of its own feeding a channel of 100 events. It reads the
//! key space's history from the revision it has reached, sends what matches, and then
//! waits for the revision to move, for a progress request, or for its progress
//! interval. Dropping the stream ends the task.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use apistore_storage::{
    ApiObject, ErrorKind, ListOptions, Result, SelectionPredicate, Status, StatusCause,
    StatusDetails, StatusReason, StorageError, Versioner, WatchEvent, WatchStream,
};
use futures::Stream;
use tokio::sync::{mpsc, watch};

use crate::event::{raw_from_history, raw_from_kv};
use crate::hub::ActiveWatch;
use crate::key::as_directory;
use crate::mvcc::Keys;
use crate::start::{Start, StartPlan};
use crate::store::MemoryStore;

/// Events buffered between a watch's task and its consumer (the reference's
/// `outgoingBufSize`).
const OUTGOING_BUFFER: usize = 100;

pub(crate) const WATCH_EXPIRED: &str = "The resourceVersion for the provided watch is too old.";

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// How many watches of this store (and its clones) are running: from the call that
    /// starts one until its stream is dropped or has ended.
    pub fn active_watches(&self) -> usize {
        self.hub.active()
    }

    pub(crate) async fn watch_objects(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<WatchStream<T>> {
        let mut prepared = self.prepare_key(key)?;
        let rev = self
            .layers
            .versioner()
            .parse_resource_version(&options.resource_version)
            .map_err(|err| err.with_key(prepared.clone()))?;
        let rev = i64::try_from(rev).map_err(|_| StorageError::Invalid {
            key: prepared.clone(),
            field: "resourceVersion".to_owned(),
            value: options.resource_version.clone(),
            message: "must not exceed etcd's largest revision".to_owned(),
        })?;
        if options.recursive {
            prepared = as_directory(prepared);
        }
        let plan = StartPlan::new(
            rev,
            options.send_initial_events,
            options.predicate.allow_watch_bookmarks,
            self.watch_list,
        );
        let initial_rev = match plan.start {
            Start::At(rev) => rev,
            Start::CurrentStorage => self.current_storage_revision()?,
        };
        let runtime =
            tokio::runtime::Handle::try_current().map_err(|err| StorageError::Internal {
                key: prepared.clone(),
                message: format!("a watch needs a tokio runtime: {err}"),
                source: None,
            })?;
        let (out, events) = mpsc::channel(OUTGOING_BUFFER);
        // Subscribed now, not when the task first runs: a progress request made after
        // this call returns must reach the watch.
        let progress = self.hub.progress_requests();
        let task = WatchTask {
            progress,
            store: self.clone(),
            key: prepared,
            recursive: options.recursive,
            progress_notify: options.progress_notify,
            predicate: options.predicate.clone(),
            initial_rev,
            plan,
            out,
        };
        let active = self.hub.track();
        runtime.spawn(task.run(active));
        Ok(Box::pin(EventStream { events }))
    }

    /// The current revision as a one-item list of the resource prefix reports it
    /// (kube-apiserver's `GetCurrentResourceVersionFromStorage`).
    pub(crate) fn current_storage_revision(&self) -> Result<i64> {
        let mut options = ListOptions::default();
        options.predicate.limit = 1;
        let list = self.list_objects(&self.resource_prefix, &options)?;
        let rv = self
            .layers
            .versioner()
            .parse_resource_version(&list.metadata.resource_version)
            .map_err(|err| err.with_key(self.resource_prefix.to_string()))?;
        Ok(i64::try_from(rv).unwrap_or(i64::MAX))
    }
}

/// The consumer's side of a watch.
struct EventStream<T> {
    events: mpsc::Receiver<WatchEvent<T>>,
}

impl<T> Stream for EventStream<T> {
    type Item = WatchEvent<T>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.events.poll_recv(cx)
    }
}

/// Why a watch task stops.
enum Ending {
    /// The stream was dropped: nothing more to say.
    ConsumerGone,
    /// The watch failed: the consumer gets this error event last.
    Failed(Status),
}

impl From<StorageError> for Ending {
    fn from(err: StorageError) -> Self {
        Self::Failed(watch_error_status(&err))
    }
}

/// API statuses (410, 504, ...) pass through; anything else is a 500, as
/// kube-apiserver's `transformErrorToEvent`.
fn watch_error_status(err: &StorageError) -> Status {
    match err.kind() {
        ErrorKind::Expired
        | ErrorKind::ResourceVersionTooLarge
        | ErrorKind::Api
        | ErrorKind::Invalid
        | ErrorKind::BadRequest => err.status(),
        _ => {
            let message = err.to_string();
            let mut status = Status::failure(
                500,
                StatusReason::InternalError,
                format!("Internal error occurred: {message}"),
            );
            status.details = Some(StatusDetails {
                causes: vec![StatusCause {
                    message,
                    ..StatusCause::default()
                }],
                retry_after_seconds: None,
            });
            status
        }
    }
}

/// kube-apiserver's `wait.Jitter(1s, 3)` in whole seconds: 1, 2 or 3.
fn jittered_retry_seconds() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    1 + u32::try_from(random % 3).unwrap_or(0)
}

struct WatchTask<T> {
    store: MemoryStore<T>,
    /// The prepared key; with a trailing `/` when recursive.
    key: String,
    recursive: bool,
    progress_notify: bool,
    predicate: SelectionPredicate,
    /// The revision seen up to; changes after it are sent.
    initial_rev: i64,
    plan: StartPlan,
    out: mpsc::Sender<WatchEvent<T>>,
    /// Changes with every progress request to the store.
    progress: watch::Receiver<u64>,
}

impl<T> WatchTask<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    async fn run(mut self, _active: ActiveWatch) {
        let Err(ending) = self.serve().await;
        if let Ending::Failed(status) = ending {
            let _ = self.out.send(WatchEvent::Error(status)).await;
        }
    }

    async fn serve(&mut self) -> Result<Infallible, Ending> {
        if self.plan.initial_events {
            self.initial_events().await?;
        }
        if self.plan.end_bookmark {
            let bookmark = self.store.layers.bookmark(self.initial_rev, true);
            self.emit(bookmark).await?;
        }
        self.follow().await
    }

    fn keys(&self) -> Keys<'_> {
        if self.recursive {
            Keys::Prefix {
                start: &self.key,
                prefix: &self.key,
            }
        } else {
            Keys::One(&self.key)
        }
    }

    /// The current state as Added events, after checking that a requested revision is
    /// not in the future; the start moves to the revision it was read at.
    async fn initial_events(&mut self) -> Result<(), Ending> {
        if self.initial_rev > 0 {
            let current = self.store.current_storage_revision()?;
            if self.initial_rev > current {
                return Err(StorageError::ResourceVersionTooLarge {
                    key: self.key.clone(),
                    requested: self.initial_rev.unsigned_abs(),
                    current: current.max(0).unsigned_abs(),
                    retry_after_seconds: jittered_retry_seconds(),
                }
                .into());
            }
        }
        self.store.count_read();
        let range = self
            .store
            .kv
            .read()
            .range(&self.keys(), 0, 0)
            .map_err(|err| crate::kv::revision_error(&self.key, err))?;
        for kv in range.kvs {
            let event = self
                .store
                .layers
                .watch_event(raw_from_kv(kv), &self.predicate)?;
            if let Some(event) = event {
                self.emit(event).await?;
            }
        }
        self.initial_rev = range.revision;
        Ok(())
    }

    /// Follows the history from the start revision on.
    async fn follow(&mut self) -> Result<Infallible, Ending> {
        let kv = self.store.kv.clone();
        let mut revisions = kv.subscribe();
        // A zero interval would make tokio's timer panic: a millisecond is as often as
        // notifications can usefully come.
        let period = kv
            .shared
            .config
            .progress_notify_interval
            .max(Duration::from_millis(1));
        let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        let mut next_rev = self.initial_rev.saturating_add(1);
        let mut bookmark_due = false;
        let mut sent_since_tick = false;
        loop {
            revisions.borrow_and_update();
            let (events, current) = {
                let mvcc = kv.read();
                (mvcc.events_since(&self.keys(), next_rev), mvcc.revision())
            };
            let events = events.map_err(|_| StorageError::Expired {
                key: self.key.clone(),
                message: WATCH_EXPIRED.to_owned(),
                continue_token: None,
            })?;
            for event in events {
                let rev = event.revision();
                let raw = raw_from_history(event)?;
                if let Some(event) = self.store.layers.watch_event(raw, &self.predicate)? {
                    self.emit(event).await?;
                    sent_since_tick = true;
                }
                next_rev = next_rev.max(rev.saturating_add(1));
            }
            next_rev = next_rev.max(current.saturating_add(1));
            // Progress is reported only by a watch that has seen everything up to now:
            // one waiting for a future revision stays quiet, as etcd's does.
            let synced = next_rev == current.saturating_add(1);
            if bookmark_due && synced {
                let bookmark = self.store.layers.bookmark(current, false);
                self.emit(bookmark).await?;
            }
            bookmark_due = false;
            tokio::select! {
                () = self.out.closed() => return Err(Ending::ConsumerGone),
                _ = revisions.changed() => {}
                _ = self.progress.changed() => bookmark_due = true,
                _ = ticks.tick(), if self.progress_notify => {
                    bookmark_due = !sent_since_tick;
                    sent_since_tick = false;
                }
            }
        }
    }

    async fn emit(&self, event: WatchEvent<T>) -> Result<(), Ending> {
        self.out.send(event).await.map_err(|_| Ending::ConsumerGone)
    }
}
