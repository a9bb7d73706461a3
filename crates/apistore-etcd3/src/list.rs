//! GetList over etcd: the key prefix, the paged reads of [`pager`] or the one
//! `RangeStream` of [`stream`], and the list metrics, after `GetList` in
//! kube-apiserver's `etcd3/store.go`. Where a list starts, the loop's selection and
//! doubling pages, and the continue token it ends with are `apistore_backend::list`'s,
//! shared with the memory store. The paged read itself is [`pager`], shared with the
//! watcher's initial sync and key scans; from kube 1.37 an unlimited recursive list
//! streams instead where etcd can (3.7+), and falls back to the pages where it cannot.

use std::sync::atomic::{AtomicUsize, Ordering};

use apistore_backend::list::{ListPages, OFF_RUNTIME_VALUES, list_start};
use apistore_storage::{
    ApiObject, KubeVersion, ListMeta, ListOptions, ObjectList, Result, StorageError,
};
use bytes::Bytes;
use etcd_client::KeyValue;
use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::Instrument;

use crate::instrument::{Instrumentation, Operation};
use crate::key::{as_directory, prefix_range_end};
use crate::store::Etcd3Store;

pub(crate) mod pager;
pub(crate) mod stream;

use pager::{OnCompacted, Pager};
use stream::{Streamed, StreamedRange};

/// Keys per page when a list without a limit is consumed in chunks from an etcd that
/// does not stream (about a MiB of 1 KiB objects, near the size of etcd 3.7's
/// `RangeStream` chunks, which aim at `--max-request-bytes`).
pub(crate) const CHUNK_PAGE: i64 = 1000;

/// Where a list consumed in chunks sends each chunk's items.
pub(crate) type ChunkSink<'s, T> = &'s mut (dyn FnMut(Vec<T>) + Send);

/// A list in progress whose counts (and from kube 1.37 its latency) go to
/// `apiserver_storage_list_*` when dropped: on every exit once the list got as far as
/// reading etcd (kube-apiserver counts a list only once its continue token and
/// resourceVersion were accepted).
struct RecordedList<'a, T> {
    instrumentation: &'a Instrumentation,
    pages: ListPages<'a, T, Vec<u8>>,
    started: Instant,
    /// Whether the list read a `RangeStream` (kube's `streamed` label), even one that
    /// failed part way.
    streamed: bool,
}

impl<T> Drop for RecordedList<'_, T> {
    fn drop(&mut self) {
        self.instrumentation.record_list(
            self.pages.counts(),
            self.streamed,
            self.started.elapsed(),
        );
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// A list of `key` with `options`, as [`Storage::list`](apistore_storage::Storage::list)
    /// returns it.
    ///
    /// On a multi-thread runtime the list runs on a task of its own, so that its large
    /// pages can be read back under `block_in_place` (see [`PageReads`]); the caller's
    /// task waits for it, in the caller's tracing span, and dropping the wait stops the
    /// list.
    pub(crate) async fn list_objects(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<ObjectList<T>> {
        let multi_thread = Handle::try_current()
            .is_ok_and(|handle| handle.runtime_flavor() == RuntimeFlavor::MultiThread);
        if !multi_thread {
            return self
                .read_list(key, options, None, PageReads::OffRuntime)
                .await;
        }
        let (store, owned_key, owned_options) = (self.clone(), key.to_owned(), options.clone());
        let list = async move {
            store
                .read_list(&owned_key, &owned_options, None, PageReads::OwnTask)
                .await
        };
        let mut task = AbortOnDrop(tokio::spawn(list.instrument(tracing::Span::current())));
        match (&mut task.0).await {
            Ok(list) => list,
            // A panic of the codec is the caller's, as on its own task.
            Err(err) => match err.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(err) => Err(StorageError::Internal {
                    key: key.to_owned(),
                    message: format!("the list's task did not finish: {err}"),
                    source: None,
                }),
            },
        }
    }

    /// The list [`Storage::list`](apistore_storage::Storage::list) would return, its
    /// items handed to `each` chunk by chunk, in key order, as they are decoded, for a
    /// caller that consumes a large list without holding it whole (a list's objects
    /// can outweigh the bytes etcd sends for them several times). Returns the list's
    /// metadata: its resourceVersion, and its continue token and remaining count when a
    /// limit cut it short.
    ///
    /// The chunks are what the list reads: from kube 1.37 on etcd 3.7+, an unlimited
    /// recursive list's `RangeStream` chunks as etcd sends them (each decoded and handed
    /// on before the next is read); otherwise pages of 1,000 keys for a list without a
    /// limit, all at the first page's revision as a paged list's, or the list's own
    /// pages for a limited one. Every chunk reads at one revision, so the chunks
    /// together are exactly the list. A failure ends the list with an error after
    /// `each` has seen some chunks: the caller must treat what it saw as incomplete (as
    /// a list that failed), and list again.
    pub async fn list_chunks<F>(
        &self,
        key: &str,
        options: &ListOptions,
        mut each: F,
    ) -> Result<ListMeta>
    where
        F: FnMut(Vec<T>) + Send,
    {
        let list = self
            .read_list(key, options, Some(&mut each), PageReads::OffRuntime)
            .await?;
        Ok(list.metadata)
    }

    /// A list of `key` with `options`. With a `sink`, the items go to it chunk by chunk
    /// as they are decoded (the list returned has none): a `RangeStream`'s chunks as
    /// etcd sends them, else pages of [`CHUNK_PAGE`] keys for a list without a limit
    /// (one `Range` would hold the whole answer), or the list's own pages.
    pub(crate) async fn read_list(
        &self,
        key: &str,
        options: &ListOptions,
        mut sink: Option<ChunkSink<'_, T>>,
        reads: PageReads,
    ) -> Result<ObjectList<T>> {
        let _reading = ListsReading::enter();
        let mut key_prefix = self.prepare_key(key)?;
        let _span = self.instrumentation.list_span(key, options);
        if options.recursive {
            key_prefix = as_directory(key_prefix);
        }
        let predicate = &options.predicate;
        let continuing = !predicate.continue_token.is_empty();
        let start = list_start(&key_prefix, options)?;
        let start_key = start
            .continue_key
            .map_or_else(|| key_prefix.as_bytes().to_vec(), String::into_bytes);
        let mut list = RecordedList {
            instrumentation: &self.instrumentation,
            pages: ListPages::new(predicate),
            started: Instant::now(),
            streamed: false,
        };

        let (operation, range_end) = if options.recursive {
            let end = prefix_range_end(key_prefix.as_bytes());
            (Operation::List, Some(end))
        } else {
            (Operation::Get, None)
        };
        if let (Some(end), true) = (&range_end, self.lists_with_stream(options)) {
            let streamed = self
                .stream_list(
                    StreamedRange {
                        key_prefix: &key_prefix,
                        range_end: end.clone(),
                        revision: start.rev,
                        resource_version: &options.resource_version,
                    },
                    &mut list.pages,
                    &mut sink,
                    reads,
                )
                .await;
            list.streamed = !matches!(streamed, Ok(Streamed::Unsupported));
            match streamed {
                Ok(Streamed::Read { revision }) => {
                    return list
                        .pages
                        .finish(&key_prefix, revision, self.layers.versioner());
                }
                Ok(Streamed::Unsupported) => {}
                Err(err) => return Err(self.with_current_revision(&key_prefix, err).await),
            }
        }
        let mut pager = Pager::new(&key_prefix, start_key, operation)
            .at_revision(start.rev)
            .future_revision_is_too_large(self.kube_version >= KubeVersion::V1_34)
            .on_compacted(if continuing {
                OnCompacted::ContinueFromFirst
            } else {
                OnCompacted::Expired
            });
        if let Some(end) = range_end {
            pager = pager.range_end(end);
        }
        // Chunks of an unlimited list are pages of their own size, at the first one's
        // revision, as a paged list's; a limited list pages anyway.
        let chunked_pages = sink.is_some() && list.pages.page_limit() <= 0;
        loop {
            pager.set_limit(if chunked_pages {
                CHUNK_PAGE
            } else {
                list.pages.page_limit()
            });
            let page = match pager.next_page(self).await {
                Ok(page) => page,
                Err(err) => return Err(self.with_current_revision(&key_prefix, err).await),
            };
            self.layers.validate_minimum_resource_version(
                &key_prefix,
                &options.resource_version,
                page.header_revision,
            )?;
            let complete = self
                .take_page(&mut list.pages, page.kvs, page.more, page.count, reads)
                .await?;
            if let Some(sink) = sink.as_mut() {
                sink(list.pages.take_items());
            }
            if complete && (!(chunked_pages && page.more) || list.pages.stopped()) {
                break;
            }
        }
        list.pages
            .finish(&key_prefix, pager.revision(), self.layers.versioner())
    }

    /// A too-large resourceVersion whose current revision is not known yet (0) with
    /// etcd's current revision: kube 1.34+ says how far etcd is (its
    /// GetCurrentResourceVersion), 0 when that read fails too. Other errors as they are.
    async fn with_current_revision(&self, key_prefix: &str, err: StorageError) -> StorageError {
        match err {
            StorageError::ResourceVersionTooLarge {
                key,
                requested,
                current: 0,
                retry_after_seconds,
            } => {
                let current = self.current_revision(key_prefix).await.unwrap_or(0);
                StorageError::ResourceVersionTooLarge {
                    key,
                    requested,
                    current,
                    retry_after_seconds,
                }
            }
            err => err,
        }
    }

    /// etcd's current revision, from the header of a one-key read of `key`.
    async fn current_revision(&self, key: &str) -> Result<u64> {
        let mut pager = Pager::new(key, key.as_bytes().to_vec(), Operation::Get).keys_only();
        pager.set_limit(1);
        let page = pager.next_page(self).await?;
        Ok(page.header_revision.max(0).unsigned_abs())
    }
}

/// Where a list reads its large pages back (see `apistore_backend::list`'s
/// `off_runtime`) when the process's lists are crowded ([`ListsReading::crowded`]): a
/// page read on a runtime worker then holds every task queued there, among them the
/// connection bringing the next page. Otherwise every page is read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PageReads {
    /// The list runs on a task of its own on a multi-thread runtime: a large page is
    /// read where the list runs, under `block_in_place`, which hands the worker's
    /// other tasks to another thread meanwhile. Never in a `LocalSet` or on a
    /// current-thread runtime, where `block_in_place` panics: a task of its own is in
    /// neither.
    OwnTask,
    /// The list runs on the caller's task: a large page is read on tokio's blocking
    /// threads while the task waits.
    OffRuntime,
}

/// How many lists in this process are reading etcd's answers right now: the measure of
/// whether a large page read on a runtime worker would hold up other work.
static LISTS_READING: AtomicUsize = AtomicUsize::new(0);

/// One list counted in [`LISTS_READING`] while it lives, on every exit.
struct ListsReading;

impl ListsReading {
    fn enter() -> Self {
        LISTS_READING.fetch_add(1, Ordering::Relaxed);
        Self
    }

    /// Whether a large page is better read off the list's worker (as [`PageReads`]
    /// says): when there are at least as many lists as the runtime has workers, every
    /// worker may be busy reading a page, and the tasks queued behind one (the
    /// connection bringing the next chunk among them) wait for it. With fewer, a free
    /// worker takes them, and handing a page or the worker's queue off is pure cost: a
    /// whole list of 10,000 typed Pods with one caller took about a tenth longer with
    /// it. A current-thread runtime has one worker, so its lists are always crowded.
    fn crowded() -> bool {
        let workers = Handle::try_current().map_or(1, |handle| handle.metrics().num_workers());
        LISTS_READING.load(Ordering::Relaxed) >= workers
    }
}

impl Drop for ListsReading {
    fn drop(&mut self) {
        LISTS_READING.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Waits for a spawned task, and aborts it when dropped before it finished: a list
/// the caller stopped waiting for stops.
struct AbortOnDrop<R>(JoinHandle<R>);

impl<R> Drop for AbortOnDrop<R> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Takes one page or chunk of etcd's key-values into `pages`, reading its values
    /// back as `reads` says; returns whether the list is complete
    /// ([`ListPages::take_page`]).
    pub(crate) async fn take_page(
        &self,
        pages: &mut ListPages<'_, T, Vec<u8>>,
        kvs: Vec<KeyValue>,
        more: bool,
        count: i64,
        reads: PageReads,
    ) -> Result<bool> {
        self.saw_values(&kvs);
        let kvs = kvs.into_iter().map(|kv| {
            let mod_revision = kv.mod_revision();
            let (item_key, value) = kv.into_key_value();
            (item_key, Bytes::from(value), mod_revision)
        });
        let off_worker = kvs.len() >= OFF_RUNTIME_VALUES && ListsReading::crowded();
        match reads {
            _ if !off_worker => pages.take_page(&self.layers, kvs, more, count),
            PageReads::OwnTask => {
                tokio::task::block_in_place(|| pages.take_page(&self.layers, kvs, more, count))
            }
            PageReads::OffRuntime => {
                pages
                    .take_page_off_runtime(&self.layers, kvs.collect(), more, count)
                    .await
            }
        }
    }
}
