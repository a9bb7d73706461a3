//! GetList over one etcd `RangeStream` (etcd 3.7 and later), after kube 1.37's
//! `streamChunks` and `shouldStream` in `etcd3/store.go` (feature gate
//! `EtcdRangeStream`, on by default from 1.37).
//!
//! A `Range` answers a whole list in one message, which the client holds whole, raw,
//! while it decodes it. A `RangeStream` answers the same range, at one revision, in
//! chunks of about a request's size (etcd sizes them near `--max-request-bytes`), and
//! each chunk is decoded and dropped before the next is read: the raw bytes held at
//! once are a chunk's, not the list's.
//!
//! Which lists stream is kube's choice: recursive ones without a limit and without a
//! continue token (a limited or continued list is bounded by its pages already), from
//! kube 1.37. An etcd that does not know the method (3.6 and older, kine, etcd's gRPC
//! proxy) answers `Unimplemented`: the list is then read with paged `Range` requests,
//! and the client remembers it for [`RECHECK_AFTER`], as kube's feature checker does,
//! so that each list does not pay for a refused request (and an upgraded etcd is used
//! once the time is up).
//!
//! The pieces of the answer that a `Range` sends in its one message come on the last
//! chunk only (the header with its revision, `more`, `count`), so the list's revision
//! (for a list at the latest revision) is known at the end, as in kube; a stream read
//! at a given revision reports etcd's latest revision in its header, not the one read
//! at, and the one asked for is the list's.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use apistore_backend::list::ListPages;
use apistore_storage::{ApiObject, Result};
use etcd_client::{GetOptions as EtcdGetOptions, GetResponse, GetStreamResponse, KvClient};

use super::pager::read_error;
use super::{ChunkSink, PageReads};
use crate::error::{Failure, classify, internal, is_compacted, is_future_revision, timed_out};
use crate::instrument::Operation;
use crate::kv::{Answered, Kv};
use crate::store::Etcd3Store;

/// How long a client that met an etcd without `RangeStream` lists with paged `Range`
/// requests before it tries the stream again (kube's `rangeStreamRecheckInterval`).
pub(crate) const RECHECK_AFTER: Duration = Duration::from_secs(10 * 60);

/// Whether the etcd behind one client answers `RangeStream`, as far as it has said:
/// supported until a stream is refused as unimplemented, then not for
/// [`RECHECK_AFTER`]. Shared by the clones of an [`EtcdClient`](crate::EtcdClient) and
/// every store built on it.
#[derive(Debug, Default)]
pub(crate) struct RangeStreamSupport {
    refused_at: Mutex<Option<Instant>>,
}

impl RangeStreamSupport {
    /// Whether lists should try `RangeStream` now.
    pub(crate) fn supported(&self) -> bool {
        self.supported_at(Instant::now())
    }

    fn supported_at(&self, now: Instant) -> bool {
        let refused_at = *self
            .refused_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        refused_at.is_none_or(|at| now.saturating_duration_since(at) >= RECHECK_AFTER)
    }

    /// Notes that an etcd answered a `RangeStream` with `Unimplemented`.
    fn refused(&self, now: Instant) {
        *self
            .refused_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(now);
    }
}

/// How a list's attempt at streaming ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Streamed {
    /// Every chunk was taken; the list reads at this revision.
    Read {
        /// The revision of the list: the one asked for, or the one etcd read at.
        revision: i64,
    },
    /// etcd does not implement `RangeStream`: nothing was taken, read with `Range`.
    Unsupported,
}

/// The range a list streams: `[key_prefix, range_end)` at `revision` (0: the latest),
/// and the caller's minimum `resource_version` for a list at the latest revision.
#[derive(Debug)]
pub(super) struct StreamedRange<'a> {
    pub(super) key_prefix: &'a str,
    pub(super) range_end: Vec<u8>,
    pub(super) revision: i64,
    pub(super) resource_version: &'a str,
}

/// Records the stream in `etcd_request_*` as `listStream` once it is over, however it
/// ends (kube records it when its iterator ends, error or not); a refused stream is not
/// recorded, as in kube.
struct StreamRecord {
    kv: Kv,
    key: String,
    started: Instant,
    ok: bool,
}

impl Drop for StreamRecord {
    fn drop(&mut self) {
        self.kv
            .record(Operation::ListStream, &self.key, self.ok, self.started);
    }
}

/// Whether etcd refused the request as a method it does not have.
fn is_unimplemented(err: &etcd_client::Error) -> bool {
    classify(err) == Failure::Server(tonic::Code::Unimplemented)
}

/// A `RangeStream` that etcd began to answer: its chunks are read with
/// [`Etcd3Store::next_chunk`]; it is recorded in the metrics when dropped.
pub(crate) struct Chunks {
    answered: Answered,
    stream: GetStreamResponse,
    /// The first message, read while opening, until it is taken.
    first: Option<Option<GetResponse>>,
    /// The revision asked for (0: the latest).
    revision: i64,
    /// Whether the last chunk read was empty: only the last one may be.
    after_empty: bool,
    record: StreamRecord,
}

impl Chunks {
    /// Marks the stream as read to its end, for the metrics.
    pub(crate) fn finished(&mut self) {
        self.record.ok = true;
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Whether a list with `options` reads with one `RangeStream` (kube's
    /// `shouldStream`, and the gate's default for the store's kube version).
    pub(super) fn lists_with_stream(&self, options: &apistore_storage::ListOptions) -> bool {
        options.recursive
            && options.predicate.limit <= 0
            && options.predicate.continue_token.is_empty()
            && self.streams_ranges()
    }

    /// Whether whole ranges read with `RangeStream` now: from kube 1.37 (the
    /// `EtcdRangeStream` gate's default), unless etcd refused it lately.
    pub(crate) fn streams_ranges(&self) -> bool {
        self.kube_version >= apistore_storage::KubeVersion::V1_37
            && self.client.range_stream.supported()
    }

    /// Opens one `RangeStream` of `[key, range_end)` at `revision` (0: the latest):
    /// `None` when etcd does not implement it (remembered for [`RECHECK_AFTER`]).
    pub(crate) async fn open_chunks(
        &self,
        key: &str,
        range_end: Vec<u8>,
        revision: i64,
    ) -> Result<Option<Chunks>> {
        let mut options = EtcdGetOptions::new().with_range(range_end);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let start = key.as_bytes();
        // The first chunk is part of opening: etcd may refuse the method either when the
        // call starts or as the stream's first message, and a member that fails before
        // answering anything can be left for another like any read.
        let open = |mut kv: KvClient| {
            let options = options.clone();
            async move {
                let mut stream = kv.get_stream(start, Some(options)).await?;
                let first = stream.message().await?;
                Ok((stream, first))
            }
        };
        let started = Instant::now();
        let failed = |err| {
            self.kv.record(Operation::ListStream, key, false, started);
            err
        };
        match self
            .kv
            .send(key, Operation::ListStream, open)
            .await
            .map_err(failed)?
        {
            Ok((answered, (stream, first))) => Ok(Some(Chunks {
                answered,
                stream,
                first: Some(first),
                revision,
                after_empty: false,
                record: StreamRecord {
                    kv: self.kv.clone(),
                    key: key.to_owned(),
                    started,
                    ok: false,
                },
            })),
            Err((endpoint, err)) if is_unimplemented(&err) => {
                // Not a request etcd served: not recorded, as in kube.
                self.client.range_stream.refused(Instant::now());
                tracing::debug!(
                    key,
                    endpoint,
                    "etcd does not implement RangeStream: ranges read with paged Range requests"
                );
                Ok(None)
            }
            Err((_, err)) => Err(failed(read_error(key, err, revision, true, None))),
        }
    }

    /// Reads `range` with one `RangeStream`, handing each chunk to `pages` as it
    /// arrives (its values read back as `reads` says), and its items on to `sink` when
    /// there is one.
    pub(super) async fn stream_list(
        &self,
        range: StreamedRange<'_>,
        pages: &mut ListPages<'_, T, Vec<u8>>,
        sink: &mut Option<ChunkSink<'_, T>>,
        reads: PageReads,
    ) -> Result<Streamed> {
        let StreamedRange {
            key_prefix,
            range_end,
            revision,
            resource_version,
        } = range;
        let Some(mut chunks) = self.open_chunks(key_prefix, range_end, revision).await? else {
            return Ok(Streamed::Unsupported);
        };
        let mut header_revision = None;
        while let Some(mut chunk) = self.next_chunk(&mut chunks, key_prefix).await? {
            if let Some(header) = chunk.header() {
                // The last chunk: its header is etcd's revision at the start of the
                // stream, the one read at when none was asked for.
                if revision <= 0 {
                    self.layers.validate_minimum_resource_version(
                        key_prefix,
                        resource_version,
                        header.revision(),
                    )?;
                }
                header_revision = Some(header.revision());
            }
            // `more` and `count` are the last chunk's (zero before it): with no limit,
            // nothing remains after the range, so the list ends without a continue
            // token.
            let (more, count) = (chunk.more(), chunk.count());
            self.take_page(pages, chunk.take_kvs(), more, count, reads)
                .await?;
            drop(chunk);
            if let Some(sink) = sink.as_mut() {
                sink(pages.take_items());
            }
            if pages.stopped() {
                // The list fails naming its corrupt objects: the rest of the stream is
                // not read (dropping it cancels it), and the revision is not needed.
                return Ok(Streamed::Read {
                    revision: revision.max(0),
                });
            }
        }
        let revision = if revision > 0 {
            revision
        } else {
            header_revision.ok_or_else(|| no_revision(key_prefix))?
        };
        chunks.finished();
        Ok(Streamed::Read { revision })
    }

    /// The stream's next chunk, `None` once it ended; waiting for it takes at most the
    /// store's request timeout, as one `Range` page would. Only the last chunk may be
    /// empty (an empty range): a chunk after an empty one is an error.
    ///
    /// A stream that breaks (its member died, the connection dropped) fails the read,
    /// as in kube 1.37, whose `streamChunks` hands the error to its caller: etcd's Go
    /// client repeats a server stream only before its first message, and not a
    /// `RangeStream` at all. The caller lists again (a reflector relists). The member is
    /// marked suspect, so that the next list goes to another, and the error names it.
    pub(crate) async fn next_chunk(
        &self,
        chunks: &mut Chunks,
        key: &str,
    ) -> Result<Option<GetResponse>> {
        let chunk = match chunks.first.take() {
            Some(first) => first,
            None => {
                let message = chunks.stream.message();
                let outcome = match self.kv.request_timeout {
                    Some(limit) => tokio::time::timeout(limit, message)
                        .await
                        .map_err(|_| timed_out(key, limit))?,
                    None => message.await,
                };
                outcome.map_err(|err| {
                    if is_compacted(&err) || is_future_revision(&err) {
                        read_error(key, err, chunks.revision, true, None)
                    } else {
                        self.kv.failed_after_answer(key, &chunks.answered, err)
                    }
                })?
            }
        };
        if let Some(chunk) = &chunk {
            if chunks.after_empty {
                return Err(internal(
                    key,
                    "no results were found, but etcd indicated there were more values remaining",
                ));
            }
            chunks.after_empty = chunk.kvs().is_empty();
        }
        Ok(chunk)
    }
}

/// A stream that ended without the last chunk's header.
pub(crate) fn no_revision(key: &str) -> apistore_storage::StorageError {
    internal(
        key,
        format!("etcd's RangeStream for {key:?} ended without a revision"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_stream_is_not_tried_again_until_the_recheck_interval_passed() {
        let support = RangeStreamSupport::default();
        let now = Instant::now();
        assert!(support.supported_at(now), "supported until refused");
        support.refused(now);
        assert!(!support.supported_at(now));
        assert!(!support.supported_at(now + RECHECK_AFTER - Duration::from_secs(1)));
        assert!(support.supported_at(now + RECHECK_AFTER));
        support.refused(now + RECHECK_AFTER);
        assert!(!support.supported_at(now + RECHECK_AFTER + Duration::from_secs(1)));
    }

    #[test]
    fn only_an_unimplemented_answer_from_etcd_means_no_range_stream() {
        let unimplemented = etcd_client::Error::GRpcStatus(tonic::Status::unimplemented(
            "unknown method RangeStream for service etcdserverpb.KV",
        ));
        assert!(is_unimplemented(&unimplemented));
        let unavailable = etcd_client::Error::GRpcStatus(tonic::Status::unavailable("down"));
        assert!(!is_unimplemented(&unavailable));
    }
}
