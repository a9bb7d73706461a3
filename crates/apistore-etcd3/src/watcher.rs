//! Watch: every change under a key after a resourceVersion, in order, exactly once, or
//! an error event.
//!
//! Follows `etcd3/watcher.go` and `Watch`/`RequestWatchProgress` of `etcd3/store.go`
//! in k8s.io/apiserver v0.31.1:
//!
//! - where a watch starts depends on the resourceVersion, `sendInitialEvents` and the
//!   `WatchList` feature gate (here [`ResourceConfig::watch_list`], off by default as in
//!   v0.31.1), including the reference's quirks with the gate off: the start plan,
//!   error statuses and the event channel are `apistore_backend::watch`'s, shared with
//!   the memory store;
//! - an initial sync sends the current state as Added events (pages of 10,000 pinned
//!   to the revision of the first page; from kube 1.37, over a prefix, one
//!   `RangeStream` where etcd has it, as 1.37's `syncStreamRecursive`), optionally
//!   followed by the bookmark that ends the initial events;
//! - then an etcd watch from the next revision, with previous values, turned into
//!   typed events by [`crate::event`];
//! - a transient failure of the shared stream (a member's death, a broken connection)
//!   resumes the etcd watch on a new stream from the revision after the last event
//!   delivered ([`crate::watch_mux`]), without an event lost or repeated;
//! - any other failure ends the stream with one Error event (410 when the revision was
//!   compacted away, 503 when no member was reachable for longer than the store's
//!   limit, 500 for undecodable data).
//!
//! Each watch runs in a task of its own feeding a channel of 100 changes; the etcd side
//! is the store's shared watch stream ([`crate::watch_mux`]). The task only reads: it
//! sends each response's changes raw, their values left inside the response, and the
//! consumer's side of the channel decodes and filters them as it takes them
//! (`apistore_backend::watch::channel` says why). Dropping the stream ends the task
//! and cancels the etcd watch.
//!
//! [`ResourceConfig::watch_list`]: crate::ResourceConfig::watch_list

use std::convert::Infallible;
use std::sync::Arc;

use apistore_backend::watch::{self, Ending, Outgoing, Start, StartPlan};
use apistore_storage::{ApiObject, ListOptions, Result, StorageError, WatchEvent, WatchStream};
use etcd_client::{WatchOptions, WatchResponse};

use crate::error::internal;
use crate::event::{raw_from_etcd, raw_from_kv};
use crate::feature_support::EtcdFeature;
use crate::instrument::Operation;
use crate::key::{as_directory, prefix_range_end};
use crate::list::pager::{OnCompacted, Pager};
use crate::list::stream::no_revision;
use crate::store::Etcd3Store;
use crate::watch_mux::{ActiveWatch, RouteEnd, WatchSpec};
use crate::watch_settings::SyncPageHook;

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Turns kube-apiserver's `WatchList` feature gate on or off for this store (builder
    /// style; see [`ResourceConfig::watch_list`](crate::ResourceConfig::watch_list)).
    pub fn with_watch_list(mut self, enabled: bool) -> Self {
        self.watch.watch_list = enabled;
        self
    }

    /// Whether the `WatchList` feature gate is on for this store.
    pub fn watch_list(&self) -> bool {
        self.watch.watch_list
    }

    /// How many watches of this store (and its clones) are running: a watch counts
    /// from the call that starts it until its stream is dropped or has ended.
    pub fn active_watches(&self) -> usize {
        self.watch.hub.active()
    }

    /// How many times a watch of this store (and its clones) fell behind its consumer's
    /// pace and was re-created from where it was. Each costs that watch a replay from
    /// etcd's history (extra latency for its consumer, never a lost or repeated event);
    /// a count that keeps growing means a consumer that cannot keep up.
    pub fn watch_overflows(&self) -> u64 {
        self.watch.hub.overflows()
    }

    /// How many times a watch of this store (and its clones) was resumed on a new etcd
    /// watch stream, from the revision after the last event it delivered, after the
    /// shared stream failed (a member died, a connection broke) or its member stopped
    /// answering. Also `apistore_watch_resumptions_total` when metrics are on.
    pub fn watch_resumptions(&self) -> u64 {
        self.watch.hub.resumptions()
    }

    /// Test seam: the page size of the initial sync of recursive watches (10,000 by
    /// default) and a hook run after each page is read.
    #[doc(hidden)]
    pub fn with_watch_sync_paging(
        mut self,
        page_size: i64,
        after_page: Option<SyncPageHook>,
    ) -> Self {
        self.watch.sync_page_size = page_size.max(1);
        self.watch.after_sync_page = after_page;
        self
    }

    /// Whether etcd can be trusted to answer progress requests, as kube-apiserver's
    /// feature support checker decides: false until
    /// [`Self::check_request_watch_progress_support`] has seen a fixed etcd (3.4.31 or
    /// later in 3.4, 3.5.13 or later), and false for good once it has seen an older one.
    pub fn supports_request_watch_progress(&self) -> bool {
        self.watch
            .hub
            .features
            .supports(EtcdFeature::RequestWatchProgress)
    }

    /// Asks etcd for its version (a maintenance status request) and records whether it
    /// supports progress requests; returns [`Self::supports_request_watch_progress`].
    /// A failed request changes nothing and is returned.
    pub async fn check_request_watch_progress_support(&self) -> Result<bool> {
        let mut maintenance = self.client.inner.maintenance_client();
        let endpoint = self.client.endpoints().join(",");
        let answer = match maintenance.status().await {
            Ok(status) => Ok(status.version().to_owned()),
            Err(err) => Err(err.to_string()),
        };
        self.watch
            .hub
            .features
            .record_endpoint(&endpoint, answer.as_deref().map_err(Clone::clone))
            .map_err(|message| StorageError::Unreachable {
                key: endpoint.clone(),
                source: message.into(),
            })?;
        Ok(self.supports_request_watch_progress())
    }

    /// `RequestWatchProgress`: asks etcd for a progress notification on the store's
    /// watch stream, whatever its version, as the reference's store does; every watch
    /// of the store then gets a bookmark at etcd's current revision.
    pub(crate) async fn request_progress(&self) -> Result<()> {
        self.watch.hub.request_progress();
        Ok(())
    }

    pub(crate) async fn watch_objects(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<WatchStream<T>> {
        let mut prepared = self.prepare_key(key)?;
        let plan = StartPlan::for_request(
            self.layers.versioner(),
            &prepared,
            options,
            self.watch.watch_list,
        )?;
        if options.recursive {
            prepared = as_directory(prepared);
        }
        let initial_rev = match plan.start {
            Start::At(rev) => rev,
            Start::CurrentStorage => self.current_storage_revision().await?,
        };
        let runtime = tokio::runtime::Handle::try_current().map_err(|err| {
            StorageError::internal(
                prepared.clone(),
                "a watch needs a tokio runtime",
                Box::new(err),
            )
        })?;
        let (out, events) = watch::channel(self.layers.clone(), options.predicate.clone());
        let task = WatchTask {
            store: self.clone(),
            key: prepared,
            recursive: options.recursive,
            progress_notify: options.progress_notify,
            initial_rev,
            plan,
            out,
        };
        let active = self.watch.hub.track();
        runtime.spawn(task.run(active));
        Ok(Box::pin(events))
    }

    /// The storage's current revision: the revision of a one-item read of the resource
    /// prefix (kube-apiserver's `GetCurrentResourceVersionFromStorage`).
    pub(crate) async fn current_storage_revision(&self) -> Result<i64> {
        let list = self
            .list_objects(self.resource_prefix(), &watch::current_revision_list())
            .await?;
        watch::revision_of_list(self.layers.versioner(), &list, self.resource_prefix())
    }
}

/// Receives the next event of a watch, or `None` once it has ended: for callers without
/// a `Stream` extension trait at hand.
pub async fn next_event<T>(stream: &mut WatchStream<T>) -> Option<WatchEvent<T>> {
    futures::StreamExt::next(stream).await
}

struct WatchTask<T> {
    store: Etcd3Store<T>,
    /// The prepared key; with a trailing `/` when recursive.
    key: String,
    recursive: bool,
    progress_notify: bool,
    /// The revision seen up to; the etcd watch starts after it.
    initial_rev: i64,
    plan: StartPlan,
    /// Changes go out raw: the consumer's side decodes and filters them.
    out: Outgoing<T>,
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
            // Boxed: the sync's state is large and needed only once, so an idle watch
            // does not carry it.
            Box::pin(self.initial_events()).await?;
        }
        if self.plan.end_bookmark {
            let bookmark = self.store.layers.bookmark(self.initial_rev, true);
            self.out.emit(bookmark).await?;
        }
        self.follow().await
    }

    /// The initial state, after checking that a requested revision is not in the future.
    async fn initial_events(&mut self) -> Result<(), Ending> {
        if self.initial_rev > 0 {
            let current = self
                .out
                .until_closed(self.store.current_storage_revision())
                .await??;
            watch::check_initial_revision(&self.key, self.initial_rev, current)?;
        }
        self.sync().await
    }

    /// Sends the current state as Added events and moves the start to the revision it
    /// was read at: one get for a single key, pages over a prefix (kube-apiserver's
    /// `sync`), or from kube 1.37 one `RangeStream` over a prefix where etcd has it.
    async fn sync(&mut self) -> Result<(), Ending> {
        if self.recursive && self.store.streams_ranges() && self.sync_streamed().await? {
            return Ok(());
        }
        let settings = self.store.watch.clone();
        let key = self.key.clone();
        let mut pager = if self.recursive {
            let mut pager = Pager::new(&key, key.as_bytes().to_vec(), Operation::List)
                .range_end(prefix_range_end(key.as_bytes()));
            pager.set_limit(settings.sync_page_size);
            pager
        } else {
            Pager::new(&key, key.as_bytes().to_vec(), Operation::Get)
        }
        // The reference treats the sync as a paged list: a compacted revision is a 410
        // with a continue token.
        .on_compacted(OnCompacted::ContinueFromPage);
        for index in 0.. {
            let page = self
                .out
                .until_closed(pager.next_page(&self.store))
                .await??;
            if let Some(hook) = &settings.after_sync_page {
                hook(index).await;
            }
            self.initial_rev = pager.revision();
            let mut changes: Vec<_> = page.kvs.into_iter().map(raw_from_kv).collect();
            self.out.emit_all(&mut changes).await?;
            if !page.more {
                break;
            }
        }
        Ok(())
    }

    /// The current state over a prefix with one `RangeStream` at the latest revision,
    /// each chunk sent on as it arrives (kube 1.37's `syncStreamRecursive`); `false`,
    /// nothing sent, when etcd does not implement it (the sync then pages). A
    /// compaction mid-stream is a 410 without a continue token: a stream cannot go on
    /// from a page.
    async fn sync_streamed(&mut self) -> Result<bool, Ending> {
        let settings = self.store.watch.clone();
        let key = self.key.clone();
        let end = prefix_range_end(key.as_bytes());
        let opened = self
            .out
            .until_closed(self.store.open_chunks(&key, end, 0))
            .await??;
        let Some(mut chunks) = opened else {
            return Ok(false);
        };
        let mut revision = None;
        for index in 0.. {
            let next = self
                .out
                .until_closed(self.store.next_chunk(&mut chunks, &key))
                .await??;
            let Some(mut chunk) = next else {
                break;
            };
            if let Some(hook) = &settings.after_sync_page {
                hook(index).await;
            }
            // The last chunk's header: etcd's revision when the stream began, the one
            // every chunk was read at.
            if let Some(header) = chunk.header() {
                revision = Some(header.revision());
            }
            let mut changes: Vec<_> = chunk.take_kvs().into_iter().map(raw_from_kv).collect();
            drop(chunk);
            self.out.emit_all(&mut changes).await?;
        }
        self.initial_rev = revision.ok_or_else(|| no_revision(&key))?;
        chunks.finished();
        Ok(true)
    }

    /// Follows etcd from the start revision on, re-watching from where it is when the
    /// shared stream dropped it for being slow.
    async fn follow(&mut self) -> Result<Infallible, Ending> {
        let mut next_rev = self.initial_rev.saturating_add(1);
        let mut lost = 0;
        loop {
            let hub = Arc::clone(&self.store.watch.hub);
            let mut registration = hub.register(self.spec(next_rev));
            loop {
                let response = tokio::select! {
                    () = self.out.closed() => return Err(Ending::ConsumerGone),
                    response = registration.recv() => response,
                };
                if let Some(response) = response {
                    self.handle(*response, &mut next_rev).await?;
                    continue;
                }
                match registration.end.try_recv() {
                    Ok(RouteEnd::Overflowed) => break,
                    Ok(RouteEnd::Interrupted) => {
                        self.store.watch.hub.record_resumption();
                        if let Some(metrics) = self.store.instrumentation.metrics() {
                            metrics.record_watch_resumption(self.store.group_resource());
                        }
                        break;
                    }
                    Ok(RouteEnd::Unavailable(reason)) => {
                        return Err(StorageError::Unreachable {
                            key: self.key.clone(),
                            source: Box::new(crate::error::EtcdFailure(reason)),
                        }
                        .into());
                    }
                    Ok(RouteEnd::Failed(reason)) => return Err(self.internal(reason).into()),
                    // The multiplexer went away before taking the watch (its runtime
                    // shut down): a new one takes it.
                    Err(_) if lost < 3 => {
                        lost += 1;
                        break;
                    }
                    Err(_) => {
                        return Err(self
                            .internal("the etcd watch stream stopped".to_owned())
                            .into());
                    }
                }
            }
        }
    }

    fn spec(&self, start_rev: i64) -> WatchSpec {
        let mut options = WatchOptions::new()
            .with_start_revision(start_rev)
            .with_prev_key();
        if self.recursive {
            options = options.with_range(prefix_range_end(self.key.as_bytes()));
        }
        if self.progress_notify {
            options = options.with_progress_notify();
        }
        WatchSpec {
            key: self.key.clone().into_bytes(),
            options,
        }
    }

    /// One response of the etcd watch: an end, a progress notification, or events.
    async fn handle(&mut self, response: WatchResponse, next_rev: &mut i64) -> Result<(), Ending> {
        if response.compact_revision() != 0 {
            return Err(watch::watch_expired(&self.key).into());
        }
        if response.canceled() {
            let reason = match response.cancel_reason() {
                // What etcd's Go client reports for a cancellation without a reason.
                "" => "etcdserver: mvcc: required revision is a future revision".to_owned(),
                reason => format!("etcd cancelled the watch: {reason}"),
            };
            return Err(self.internal(reason).into());
        }
        if response.created() {
            return Ok(());
        }
        let header_rev = response.header().map_or(0, |h| h.revision());
        if response.events().is_empty() {
            if header_rev != 0 {
                self.store.instrumentation.record_bookmark();
                let bookmark = self.store.layers.bookmark(header_rev, false);
                self.out.emit(bookmark).await?;
            }
            return Ok(());
        }
        // The response's changes go to the consumer together (see `Outgoing::emit_all`);
        // those read before a malformed one are delivered before its error.
        self.store.saw_events(response.events());
        let response = Arc::new(response);
        let mut changes = Vec::with_capacity(response.events().len());
        for index in 0..response.events().len() {
            self.store.instrumentation.record_events_received();
            match raw_from_etcd(&response, index) {
                Ok(raw) => changes.push(raw),
                Err(err) => {
                    self.out.emit_all(&mut changes).await?;
                    return Err(err.into());
                }
            }
        }
        if let Some(last) = changes.last() {
            let seen = last.rev.saturating_add(1);
            self.out.emit_all(&mut changes).await?;
            *next_rev = (*next_rev).max(seen);
        }
        Ok(())
    }

    fn internal(&self, message: String) -> StorageError {
        internal(self.key.clone(), message)
    }
}
