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
use bytes::Bytes;
use etcd_client::{GetOptions as EtcdGetOptions, GetResponse, GetStreamResponse, KvClient};

use super::pager::read_error;
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

/// Records the stream in `etcd_request_*` as `listStream` once it is over, however it
/// ends (kube records it when its iterator ends, error or not); a refused stream is not
/// recorded, as in kube.
struct StreamRecord<'a> {
    kv: &'a Kv,
    key: &'a str,
    started: Instant,
    outcome: Option<bool>,
}

impl Drop for StreamRecord<'_> {
    fn drop(&mut self) {
        if let Some(ok) = self.outcome {
            self.kv
                .record(Operation::ListStream, self.key, ok, self.started);
        }
    }
}

/// Whether etcd refused the request as a method it does not have.
fn is_unimplemented(err: &etcd_client::Error) -> bool {
    classify(err) == Failure::Server(tonic::Code::Unimplemented)
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
            && self.kube_version >= apistore_storage::KubeVersion::V1_37
            && self.client.range_stream.supported()
    }

    /// Reads the range `[key_prefix, range_end)` at `revision` (0: the latest) with one
    /// `RangeStream`, handing each chunk to `pages` as it arrives. `resource_version` is
    /// the caller's minimum for a list at the latest revision.
    pub(super) async fn stream_list(
        &self,
        key_prefix: &str,
        range_end: Vec<u8>,
        revision: i64,
        resource_version: &str,
        pages: &mut ListPages<'_, T, Vec<u8>>,
    ) -> Result<Streamed> {
        let mut options = EtcdGetOptions::new().with_range(range_end);
        if revision > 0 {
            options = options.with_revision(revision);
        }
        let start = key_prefix.as_bytes();
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
        let mut record = StreamRecord {
            kv: &self.kv,
            key: key_prefix,
            started: Instant::now(),
            outcome: Some(false),
        };
        let opened = self
            .kv
            .send(key_prefix, Operation::ListStream, open)
            .await?;
        let (answered, (mut stream, mut next)) = match opened {
            Ok(opened) => opened,
            Err((endpoint, err)) if is_unimplemented(&err) => {
                record.outcome = None;
                self.client.range_stream.refused(Instant::now());
                tracing::debug!(
                    key = key_prefix,
                    endpoint,
                    "etcd does not implement RangeStream: lists read with paged Range requests"
                );
                return Ok(Streamed::Unsupported);
            }
            Err((_, err)) => return Err(read_error(key_prefix, err, revision, true, None)),
        };
        let mut header_revision = None;
        let mut after_empty = false;
        while let Some(mut chunk) = next {
            if after_empty {
                // Only the last chunk may be empty (an empty range).
                return Err(internal(
                    key_prefix,
                    "no results were found, but etcd indicated there were more values remaining",
                ));
            }
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
            after_empty = chunk.kvs().is_empty();
            self.take_chunk(&mut chunk, pages)?;
            drop(chunk);
            next = self
                .next_chunk(&mut stream, &answered, key_prefix, revision)
                .await?;
        }
        let revision = if revision > 0 {
            revision
        } else {
            header_revision.ok_or_else(|| {
                internal(
                    key_prefix,
                    format!("etcd's RangeStream for {key_prefix:?} ended without a revision"),
                )
            })?
        };
        record.outcome = Some(true);
        Ok(Streamed::Read { revision })
    }

    /// Decodes one chunk's key-values into `pages`, taking them out of the chunk so
    /// that each raw value goes as soon as its object is decoded.
    fn take_chunk(
        &self,
        chunk: &mut GetResponse,
        pages: &mut ListPages<'_, T, Vec<u8>>,
    ) -> Result<()> {
        let kvs = chunk.take_kvs();
        self.saw_values(&kvs);
        let kvs = kvs.into_iter().map(|kv| {
            let mod_revision = kv.mod_revision();
            let (item_key, value) = kv.into_key_value();
            (item_key, Bytes::from(value), mod_revision)
        });
        // `more` and `count` are the last chunk's (zero before it): with no limit,
        // nothing remains after the range, so the list ends without a continue token.
        pages.take_page(&self.layers, kvs, chunk.more(), chunk.count())?;
        Ok(())
    }

    /// The stream's next chunk, `None` once it ended; waiting for it takes at most the
    /// store's request timeout, as one `Range` page would.
    ///
    /// A stream that breaks (its member died, the connection dropped) fails the list,
    /// as in kube 1.37, whose `streamChunks` hands the error to its caller: etcd's Go
    /// client repeats a server stream only before its first message, and not a
    /// `RangeStream` at all. The caller lists again (a reflector relists). The member is
    /// marked suspect, so that the next list goes to another, and the error names it.
    async fn next_chunk(
        &self,
        stream: &mut GetStreamResponse,
        answered: &Answered,
        key_prefix: &str,
        revision: i64,
    ) -> Result<Option<GetResponse>> {
        let message = stream.message();
        let outcome = match self.kv.request_timeout {
            Some(limit) => tokio::time::timeout(limit, message)
                .await
                .map_err(|_| timed_out(key_prefix, limit))?,
            None => message.await,
        };
        outcome.map_err(|err| {
            if is_compacted(&err) || is_future_revision(&err) {
                read_error(key_prefix, err, revision, true, None)
            } else {
                self.kv.failed_after_answer(key_prefix, answered, err)
            }
        })
    }
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
