//! Reading a key or a range in pages, every page at the revision of the first: the loop
//! that `GetList`, the watcher's initial `sync` and a key scan share in kube-apiserver's
//! `etcd3/store.go` and `etcd3/watcher.go`, and the one way a compacted revision met
//! while paging becomes a 410 (kube-apiserver's `interpretListError`).
//!
//! The pager owns the requests (start key, range end, limit, revision) and where the
//! next page starts; its callers own what they do with the key-values and when to stop
//! early.

use apistore_backend::list::compacted_list_error;
use apistore_storage::{ApiObject, Result, StorageError};
use etcd_client::{GetOptions as EtcdGetOptions, KeyValue};

use crate::error::{from_etcd, is_compacted, is_future_revision};
use crate::instrument::Operation;
use crate::store::Etcd3Store;

/// What a compacted revision becomes: every answer is 410 Expired, they differ in the
/// continue token that lets the caller go on at the latest revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnCompacted {
    /// A list that was not continued: no token ("the resourceVersion ... is too old").
    Expired,
    /// A continued list: a token to go on from the key the caller's token named.
    ContinueFromFirst,
    /// A paged read that is not a list (the watcher's sync): a token to go on from
    /// the page that failed.
    ContinueFromPage,
}

/// One page as etcd returned it.
#[derive(Debug)]
pub(crate) struct Page {
    /// The key-values of the page, in key order.
    pub(crate) kvs: Vec<KeyValue>,
    /// The revision of etcd's answer (its header), not the revision read at.
    pub(crate) header_revision: i64,
    /// Whether etcd has more keys in the range after this page.
    pub(crate) more: bool,
    /// How many keys the whole range holds from the page's start key on.
    pub(crate) count: i64,
}

/// A paged read of one key or one range, at one revision.
#[derive(Debug)]
pub(crate) struct Pager<'a> {
    /// The prepared key the read is about: errors and metrics name it.
    key: &'a str,
    operation: Operation,
    first_start: Vec<u8>,
    start: Vec<u8>,
    range_end: Option<Vec<u8>>,
    keys_only: bool,
    limit: i64,
    revision: i64,
    on_compacted: OnCompacted,
    /// Whether a read at a revision etcd has not reached is a too-large
    /// resourceVersion (kube 1.34+) rather than etcd's error passed on (1.31-1.33).
    future_is_too_large: bool,
}

impl<'a> Pager<'a> {
    /// A read of `start` alone (a range once [`Self::range_end`] is set), at the latest
    /// revision, unpaged; errors and metrics name `key`.
    pub(crate) fn new(key: &'a str, start: Vec<u8>, operation: Operation) -> Self {
        Self {
            key,
            operation,
            first_start: start.clone(),
            start,
            range_end: None,
            keys_only: false,
            limit: 0,
            revision: 0,
            on_compacted: OnCompacted::Expired,
            future_is_too_large: false,
        }
    }

    /// Makes a read at a revision etcd has not reached fail with a too-large
    /// resourceVersion ([`StorageError::ResourceVersionTooLarge`], its current revision
    /// left 0 for the caller to fill in), as kube-apiserver's list does from 1.34.
    pub(crate) fn future_revision_is_too_large(mut self, yes: bool) -> Self {
        self.future_is_too_large = yes;
        self
    }

    /// Reads the range from the start key up to `end` (exclusive).
    pub(crate) fn range_end(mut self, end: Vec<u8>) -> Self {
        self.range_end = Some(end);
        self
    }

    /// Asks for keys without their values.
    pub(crate) fn keys_only(mut self) -> Self {
        self.keys_only = true;
        self
    }

    /// Reads at `revision` (0: the latest, then the revision of the first page).
    pub(crate) fn at_revision(mut self, revision: i64) -> Self {
        self.revision = revision;
        self
    }

    /// What a compacted revision becomes.
    pub(crate) fn on_compacted(mut self, on_compacted: OnCompacted) -> Self {
        self.on_compacted = on_compacted;
        self
    }

    /// Asks for at most `limit` keys per page from now on (0: all of them).
    pub(crate) fn set_limit(&mut self, limit: i64) {
        self.limit = limit;
    }

    /// The revision every page reads at: the one asked for, or once the first page is
    /// in, the revision etcd answered it at; 0 before that for a read of the latest.
    pub(crate) fn revision(&self) -> i64 {
        self.revision
    }

    /// Reads the next page, and moves the start past its last key.
    pub(crate) async fn next_page<T>(&mut self, store: &Etcd3Store<T>) -> Result<Page>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        let mut options = EtcdGetOptions::new();
        if self.limit > 0 {
            options = options.with_limit(self.limit);
        }
        if let Some(end) = &self.range_end {
            options = options.with_range(end.clone());
        }
        if self.keys_only {
            options = options.with_keys_only();
        }
        if self.revision != 0 {
            options = options.with_revision(self.revision);
        }
        let start = &self.start;
        let request = |mut kv: etcd_client::KvClient| {
            let (start, options) = (start.clone(), options.clone());
            async move { kv.get(start, Some(options)).await }
        };
        let mut response = match store.call_raw(self.key, self.operation, request).await? {
            Ok(response) => response,
            Err(err) => return Err(self.interpret_error(err)),
        };
        let header_revision = response.header().map_or(0, |h| h.revision());
        let more = response.more();
        let count = response.count();
        let kvs = response.take_kvs();
        if self.revision == 0 {
            self.revision = header_revision;
        }
        let Some(last) = kvs.last() else {
            if more {
                return Err(StorageError::Internal {
                    key: self.key.to_owned(),
                    message:
                        "no results were found, but etcd indicated there were more values remaining"
                            .to_owned(),
                    source: None,
                });
            }
            return Ok(Page {
                kvs,
                header_revision,
                more,
                count,
            });
        };
        self.start.clear();
        self.start.extend_from_slice(last.key());
        self.start.push(0);
        Ok(Page {
            kvs,
            header_revision,
            more,
            count,
        })
    }

    /// A compacted revision is 410 Expired, with a token to go on at the latest revision
    /// where the read continues something; any other error maps as any etcd error.
    fn interpret_error(&self, err: etcd_client::Error) -> StorageError {
        let continue_from = match self.on_compacted {
            OnCompacted::Expired => None,
            OnCompacted::ContinueFromFirst => Some(self.first_start.as_slice()),
            OnCompacted::ContinueFromPage => Some(self.start.as_slice()),
        };
        read_error(
            self.key,
            err,
            self.revision,
            self.future_is_too_large,
            continue_from,
        )
    }
}

/// What etcd's error on a read of `key` at `revision` becomes (kube-apiserver's
/// `listReadError` and `interpretListError`): with `future_is_too_large` (kube 1.34+), a
/// revision etcd has not reached is a too-large resourceVersion, its current revision
/// left 0 for the caller to fill in; a compacted revision is 410 Expired, with a token
/// to go on from `continue_from` at the latest revision when there is one; anything
/// else maps as any etcd error. Shared by the paged reads and the list's `RangeStream`.
pub(crate) fn read_error(
    key: &str,
    err: etcd_client::Error,
    revision: i64,
    future_is_too_large: bool,
    continue_from: Option<&[u8]>,
) -> StorageError {
    if future_is_too_large && is_future_revision(&err) {
        return StorageError::ResourceVersionTooLarge {
            key: key.to_owned(),
            requested: revision.max(0).unsigned_abs(),
            current: 0,
            retry_after_seconds: 0,
        };
    }
    if !is_compacted(&err) {
        return from_etcd(key, err);
    }
    compacted_list_error(key, continue_from)
}
