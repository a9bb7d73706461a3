//! Watch: every change under a key after a resourceVersion, in order, exactly once, or
//! an Error event. The start rules, the checks before the initial events, the error
//! statuses and the event channel are `apistore_backend::watch`'s, shared with the
//! etcd3 store (kube-apiserver's `etcd3/watcher.go` at v0.31.1).
//!
//! Each watch runs in a task of its own feeding a channel of 100 changes. It reads the
//! key space's history from the revision it has reached, sends the changes raw (the
//! consumer's side decodes and filters them, as for the etcd3 store), and then waits
//! for the revision to move, for a progress request, or for its progress interval.
//! Dropping the stream ends the task.

use std::convert::Infallible;
use std::time::Duration;

use apistore_backend::watch::{self, Ending, Outgoing, Start, StartPlan};
use apistore_storage::{ApiObject, ListOptions, Result, StorageError, WatchStream};

use crate::event::{raw_from_history, raw_from_kv};
use crate::hub::ActiveWatch;
use crate::mvcc::Keys;
use crate::store::MemoryStore;
use apistore_backend::key::as_directory;

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
        let plan =
            StartPlan::for_request(self.layers.versioner(), &prepared, options, self.watch_list)?;
        if options.recursive {
            prepared = as_directory(prepared);
        }
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
        let (out, events) = watch::channel(self.layers.clone(), options.predicate.clone());
        // Subscribed now, not when the task first runs: a progress request made after
        // this call returns must reach the watch.
        let progress = self.hub.progress_requests();
        let task = WatchTask {
            progress,
            store: self.clone(),
            key: prepared,
            recursive: options.recursive,
            progress_notify: options.progress_notify,
            initial_rev,
            plan,
            out,
        };
        let active = self.hub.track();
        runtime.spawn(task.run(active));
        Ok(Box::pin(events))
    }

    /// The current revision as a one-item list of the resource prefix reports it
    /// (kube-apiserver's `GetCurrentResourceVersionFromStorage`).
    pub(crate) fn current_storage_revision(&self) -> Result<i64> {
        let list = self.list_objects(self.resource_prefix(), &watch::current_revision_list())?;
        watch::revision_of_list(self.layers.versioner(), &list, self.resource_prefix())
    }
}

struct WatchTask<T> {
    store: MemoryStore<T>,
    /// The prepared key; with a trailing `/` when recursive.
    key: String,
    recursive: bool,
    progress_notify: bool,
    /// The revision seen up to; changes after it are sent.
    initial_rev: i64,
    plan: StartPlan,
    /// Changes go out raw: the consumer's side decodes and filters them.
    out: Outgoing<T>,
    /// Changes with every progress request to the store.
    progress: tokio::sync::watch::Receiver<u64>,
}

impl<T> WatchTask<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    async fn run(mut self, _active: ActiveWatch) {
        let Err(ending) = self.serve().await;
        self.out.end(ending).await;
    }

    async fn serve(&mut self) -> Result<Infallible, Ending> {
        if self.plan.initial_events {
            self.initial_events().await?;
        }
        if self.plan.end_bookmark {
            let bookmark = self.store.layers.bookmark(self.initial_rev, true);
            self.out.emit(bookmark).await?;
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
            watch::check_initial_revision(&self.key, self.initial_rev, current)?;
        }
        self.store.count_read();
        let range = self
            .store
            .kv
            .read()
            .range(&self.keys(), 0, 0)
            .map_err(|err| crate::kv::revision_error(&self.key, err))?;
        let mut changes: Vec<_> = range.kvs.into_iter().map(raw_from_kv).collect();
        self.out.emit_all(&mut changes).await?;
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
            let events = events.map_err(|_| watch::watch_expired(&self.key))?;
            // Sent raw, in stretches (see `Outgoing::emit_all`): the consumer's side
            // decodes and filters them. What was read before a malformed change goes
            // before its error.
            let mut changes = Vec::with_capacity(events.len());
            for event in events {
                let rev = event.revision();
                match raw_from_history(event) {
                    Ok(raw) => changes.push(raw),
                    Err(err) => {
                        self.out.emit_all(&mut changes).await?;
                        return Err(err.into());
                    }
                }
                next_rev = next_rev.max(rev.saturating_add(1));
            }
            sent_since_tick |= !changes.is_empty();
            self.out.emit_all(&mut changes).await?;
            next_rev = next_rev.max(current.saturating_add(1));
            // Progress is reported only by a watch that has seen everything up to now:
            // one waiting for a future revision stays quiet, as etcd's does.
            let synced = next_rev == current.saturating_add(1);
            if bookmark_due && synced {
                let bookmark = self.store.layers.bookmark(current, false);
                self.out.emit(bookmark).await?;
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
}
