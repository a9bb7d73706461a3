//! Get and list with kube's rules for what the cache serves (kube's `Cacher.Get`,
//! `Cacher.GetList`, `shouldDelegateList`, `computeListLimit`):
//!
//! - a get without resourceVersion reads the backend (for backward compatibility, as
//!   kube does); with one, it waits for the cache to reach it and reads the cache;
//! - a list with a continue token reads the snapshot at the token's revision when
//!   snapshots are on (kube 1.34+'s `ListFromCacheSnapshot`) and the cache still has
//!   it (with resourceVersion "0", the whole rest of the list: the limit is ignored
//!   there, kube's `computeListLimit`); a token of revision −1 is a consistent read
//!   from the token's key, from the cache when consistent reads may come from it;
//!   otherwise the backend, which accepts the tokens the cache hands out (they are
//!   the etcd3 store's own);
//! - a consistent list (resourceVersion "") reads the backend, unless the cacher may
//!   ask it for progress: then it learns the backend's current revision, asks for a
//!   progress bookmark, waits for the cache to reach that revision and reads the cache
//!   (falling back to the backend if the cache does not get there in time);
//! - resourceVersion "0" and NotOlderThan wait for the cache and read it; "0" ignores
//!   the limit, as kube does;
//! - Exact (and kube's legacy exact: a limit with a non-zero resourceVersion and no
//!   match) reads the snapshot at that revision when snapshots are on and the window
//!   still covers it, and the backend otherwise (kube before 1.34 always sends it to
//!   etcd);
//! - while the cache initializes, a get reads the backend, a paged list without
//!   selectors too, and other lists are refused with 429 (kube's
//!   `ResilientWatchCacheInitialization`).

use std::sync::Arc;
use std::time::Duration;

use apistore_storage::{
    GetOptions, ListMeta, ListOptions, ObjectList, ResourceVersionMatch, Result, Storage,
    StorageError,
};
use apistore_versioning::continue_token;
use tokio::time::Instant;

use crate::cacher::{Shared, initializing};
use crate::event::canonical_key;
use crate::watch_cache::{BLOCK_TIMEOUT, Items, range_from};

/// Where a continued list may be answered from the cache.
enum Continuation {
    /// From the snapshot of `revision`, from key `start` on.
    AtRevision { start: String, revision: u64 },
    /// From the newest state, from key `start` on, once the cache has reached the
    /// backend's current revision.
    Latest { start: String },
}

/// How often a consistent read that waits for the cache asks the backend for
/// progress again (kube's `progressRequestsInterval` of its progress requester).
const PROGRESS_REQUEST_INTERVAL: Duration = Duration::from_millis(100);

impl<S: Storage> Shared<S> {
    pub(crate) async fn get(&self, key: &str, options: &GetOptions) -> Result<S::Object> {
        let canonical = canonical_key(key);
        let parsed = self
            .storage
            .versioner()
            .parse_resource_version(&options.resource_version);
        let (Some(canonical), Ok(resource_version), false, true) = (
            canonical,
            parsed,
            options.resource_version.is_empty(),
            self.ready.check(),
        ) else {
            return self.storage.get(key, options).await;
        };
        self.wait_for_cache(resource_version, key).await?;
        match self.cache.get(&canonical) {
            (Some(object), _) => Ok((*object).clone()),
            (None, _) if options.ignore_not_found => Ok(S::Object::default()),
            (None, read_rv) => Err(StorageError::NotFound {
                key: key.to_owned(),
                resource_version: read_rv,
            }),
        }
    }

    pub(crate) async fn list(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<ObjectList<S::Object>> {
        let rv = options.resource_version.as_str();
        let predicate = &options.predicate;
        let consistent = rv.is_empty();
        let parsed = self.storage.versioner().parse_resource_version(rv);
        let canonical = canonical_key(key);
        let (Some(canonical), Ok(resource_version)) = (canonical, parsed) else {
            return self.storage.list(key, options).await;
        };
        let key_for_cache = canonical.as_ref();
        let prefix = list_prefix(key_for_cache, options.recursive);
        if !predicate.continue_token.is_empty() {
            return match self.continuation(&prefix, options) {
                Some(Continuation::AtRevision { start, revision }) if self.ready.check() => {
                    self.list_from_snapshot(key, &prefix, Some(&start), revision, options)
                        .await
                }
                Some(Continuation::Latest { start }) if self.ready.check() => {
                    self.list_latest_from(key, &prefix, &start, options).await
                }
                _ => self.storage.list(key, options).await,
            };
        }
        if consistent && !self.settings.consistent_reads_from_cache {
            return self.storage.list(key, options).await;
        }
        let legacy_exact = predicate.limit > 0
            && options.resource_version_match == ResourceVersionMatch::Unset
            && !rv.is_empty()
            && rv != "0";
        let exact = options.resource_version_match == ResourceVersionMatch::Exact || legacy_exact;
        if !self.ready.check() {
            if exact || (predicate.is_empty() && predicate.limit > 0) {
                return self.storage.list(key, options).await;
            }
            return Err(initializing(key));
        }
        if exact {
            // kube serves only recursive lists from snapshots (a single object has no
            // exact-revision get in the cache).
            if resource_version == 0
                || !self.settings.list_from_cache_snapshot
                || !options.recursive
            {
                return self.storage.list(key, options).await;
            }
            return self
                .list_from_snapshot(key, &prefix, None, resource_version, options)
                .await;
        }
        let (items, read_rv, index) = if consistent {
            if let Some(answer) = self.reach_current_revision(key, options).await {
                return answer;
            }
            self.items(key_for_cache, &prefix, options)
        } else {
            self.wait_for_cache(resource_version, key).await?;
            self.items(key_for_cache, &prefix, options)
        };
        let items = items.iter().map(|(key, object)| (key, object));
        self.page(key_for_cache, options, items, read_rv, &index)
    }

    /// Where a continued list may be answered from the cache (kube 1.34+'s
    /// `ShouldDelegateContinue` with `ListFromCacheSnapshot`): a recursive list with a
    /// valid token, resourceVersion "" or "0" and no match, while snapshots are taken.
    /// A token pinning a revision reads the snapshot of that revision; a token of
    /// revision −1 (issued with a 410 after the pinned revision was compacted) is a
    /// consistent read from the token's key on, which the cache answers only when
    /// consistent reads may come from it. `None` sends the list to the backend: kube
    /// 1.31–1.33 (snapshots off), a cache found inconsistent, a token of revision 0,
    /// and a bad token or resourceVersion, whose error the backend words.
    fn continuation(&self, prefix: &str, options: &ListOptions) -> Option<Continuation> {
        let rv = options.resource_version.as_str();
        if !self.cache.snapshots_enabled()
            || !options.recursive
            || !(rv.is_empty() || rv == "0")
            || options.resource_version_match != ResourceVersionMatch::Unset
        {
            return None;
        }
        let (start, revision) =
            continue_token::decode(&options.predicate.continue_token, prefix).ok()?;
        match u64::try_from(revision) {
            Ok(0) => None,
            Ok(revision) => Some(Continuation::AtRevision { start, revision }),
            Err(_) => self
                .settings
                .consistent_reads_from_cache
                .then_some(Continuation::Latest { start }),
        }
    }

    /// A continued list at the latest revision, from `start` on (kube's
    /// `waitAndListConsistent` with a continue key): the cache first reaches the
    /// backend's current revision, asking it for progress meanwhile, then its newest
    /// state is cut as the etcd3 store cuts a list continued after a compaction (a
    /// token of the revision read, the remaining item count). If the cache does not
    /// get there in time the backend answers (kube's fallback for consistent reads).
    async fn list_latest_from(
        &self,
        key: &str,
        prefix: &str,
        start: &str,
        options: &ListOptions,
    ) -> Result<ObjectList<S::Object>> {
        if let Some(answer) = self.reach_current_revision(key, options).await {
            return answer;
        }
        let (store, read_rv) = self.cache.latest();
        let items = range_from(&store, prefix, start);
        self.page(prefix, options, items, read_rv, "")
    }

    /// A list at exactly `revision` (an Exact list, or a continued one from `start`)
    /// from the cache's snapshot of that revision, cut as the etcd3 store cuts it; the
    /// backend answers when the cache has no snapshot for it (kube's delegator falls
    /// back on the cache's "too old" the same way). A revision the cache has not
    /// reached yet is waited for when consistent reads may come from the cache (the
    /// backend is asked for progress meanwhile), and goes to the backend otherwise.
    async fn list_from_snapshot(
        &self,
        key: &str,
        prefix: &str,
        start: Option<&str>,
        revision: u64,
        options: &ListOptions,
    ) -> Result<ObjectList<S::Object>> {
        self.sync_compaction();
        if self.cache.not_fresh(revision) {
            if !self.settings.consistent_reads_from_cache {
                return self.storage.list(key, options).await;
            }
            self.wait_with_progress_requests(revision, key).await?;
        }
        let Some(snapshot) = self.cache.snapshot_at(revision) else {
            return self.storage.list(key, options).await;
        };
        let items = range_from(&snapshot, prefix, start.unwrap_or(prefix));
        self.page(prefix, options, items, revision, "")
    }

    /// What a list reads from the cache: the object under `key`, or those under
    /// `prefix` (from an index when the selectors pin one to a value), the revision,
    /// and the name of the index used ("" for none).
    fn items(
        &self,
        key: &str,
        prefix: &str,
        options: &ListOptions,
    ) -> (Items<S::Object>, u64, String) {
        if options.recursive {
            if let Some(indexed) = self.cache.list_indexed(prefix, &options.predicate) {
                return indexed;
            }
            let (items, read_rv) = self.cache.list(prefix);
            return (items, read_rv, String::new());
        }
        let (object, read_rv) = self.cache.get(key);
        let items = object
            .map(|object| vec![(Arc::from(key), object)])
            .unwrap_or_default();
        (items, read_rv, String::new())
    }

    /// The first step of a consistent read from the cache: the cache reaches the
    /// backend's current revision, asking it for progress meanwhile. `None`: it did,
    /// and the caller reads the cache (counted in
    /// `apiserver_watch_cache_consistent_read_total` as a success without fallback).
    /// Otherwise the answer: the backend's when the cache did not get there in time
    /// (kube's fallback), or the error.
    async fn reach_current_revision(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Option<Result<ObjectList<S::Object>>> {
        let reached = match self.current_revision().await {
            Ok(current) => self.wait_with_progress_requests(current, key).await,
            Err(err) => Err(err),
        };
        match reached {
            Ok(()) => {
                self.metrics.record_consistent_read(true, false);
                None
            }
            Err(err) if err.is_too_large_resource_version() => {
                let answer = self.storage.list(key, options).await;
                self.metrics.record_consistent_read(answer.is_ok(), true);
                Some(answer)
            }
            Err(err) => {
                self.metrics.record_consistent_read(false, false);
                Some(Err(err))
            }
        }
    }

    /// One page of `items` (all under the list's key, in key order) as kube's
    /// `GetList` cuts it from the cache. The items after the page are only counted
    /// (for the remaining item count and the metrics), not copied: a continued list
    /// from a snapshot costs its page and a walk of the rest of the tree.
    fn page<'i>(
        &self,
        key: &str,
        options: &ListOptions,
        items: impl Iterator<Item = (&'i Arc<str>, &'i Arc<S::Object>)>,
        read_rv: u64,
        index: &str,
    ) -> Result<ObjectList<S::Object>>
    where
        S::Object: 'i,
    {
        let predicate = &options.predicate;
        let limit = if predicate.limit <= 0 || options.resource_version == "0" {
            0
        } else {
            usize::try_from(predicate.limit).unwrap_or(usize::MAX)
        };
        let mut selected = Vec::new();
        let mut last_key: Option<&Arc<str>> = None;
        let mut items = items.peekable();
        let mut fetched = 0usize;
        for (item_key, object) in items.by_ref() {
            fetched += 1;
            if predicate.matches(&**object) {
                selected.push((**object).clone());
                last_key = Some(item_key);
            }
            if limit > 0 && selected.len() >= limit {
                break;
            }
        }
        let has_more = items.peek().is_some();
        // kube counts every item from the start key, read or not.
        fetched += items.count();
        let mut metadata = ListMeta::default();
        let (token, remaining) = match last_key {
            Some(last_key) if has_more => {
                let key_prefix = list_prefix(key, true);
                let rv = i64::try_from(read_rv).unwrap_or(i64::MAX);
                let items_count = i64::try_from(fetched).unwrap_or(i64::MAX);
                match continue_token::prepare(
                    last_key.as_bytes(),
                    &key_prefix,
                    rv,
                    items_count,
                    true,
                    predicate,
                ) {
                    Ok(Some(next)) => (next.continue_token, next.remaining_item_count),
                    Ok(None) => (String::new(), None),
                    Err(err) => {
                        return Err(StorageError::Internal {
                            key: key.to_owned(),
                            message: format!("preparing the continue token: {err}"),
                            source: Some(Box::new(err)),
                        });
                    }
                }
            }
            _ => (String::new(), None),
        };
        self.storage
            .versioner()
            .update_list(&mut metadata, read_rv, token, remaining)?;
        self.metrics.record_list(fetched, selected.len(), index);
        Ok(ObjectList::new(selected, metadata))
    }

    /// The backend's current revision: its own answer (kube 1.33+'s
    /// `GetCurrentResourceVersion`), or from a one-item list (1.31-1.32's
    /// `GetCurrentResourceVersionFromStorage`).
    pub(crate) async fn current_revision(&self) -> Result<u64> {
        if self.settings.current_revision_from_storage {
            return self.storage.get_current_resource_version().await;
        }
        let options = ListOptions::prefix().limit(1);
        let page = self
            .storage
            .list(&self.settings.resource_prefix, &options)
            .await?;
        self.storage
            .versioner()
            .parse_resource_version(&page.metadata.resource_version)
    }

    /// Waits (at most [`BLOCK_TIMEOUT`]) for the cache to reach `resource_version`,
    /// recording how long in `apiserver_watch_cache_read_wait_seconds` when it had to
    /// wait at all (kube observes only then).
    pub(crate) async fn wait_for_cache(&self, resource_version: u64, key: &str) -> Result<()> {
        if !self.cache.not_fresh(resource_version) {
            return Ok(());
        }
        let start = Instant::now();
        let waited = self.cache.wait_until_fresh(resource_version, key).await;
        self.metrics.record_read_wait(start.elapsed());
        waited
    }

    /// Waits for the cache to reach `resource_version`, asking the backend for
    /// progress meanwhile (kube's conditional progress requester): without changes
    /// to the resource, only a progress bookmark moves the cache forward.
    pub(crate) async fn wait_with_progress_requests(
        &self,
        resource_version: u64,
        key: &str,
    ) -> Result<()> {
        if !self.cache.not_fresh(resource_version) {
            return Ok(());
        }
        let start = Instant::now();
        let waited = self
            .wait_with_progress_requests_from(start, resource_version, key)
            .await;
        self.metrics.record_read_wait(start.elapsed());
        waited
    }

    async fn wait_with_progress_requests_from(
        &self,
        start: Instant,
        resource_version: u64,
        key: &str,
    ) -> Result<()> {
        let deadline = start + BLOCK_TIMEOUT;
        loop {
            if !self.cache.not_fresh(resource_version) {
                return Ok(());
            }
            if let Err(err) = self.storage.request_watch_progress().await {
                tracing::debug!(error = %err, "progress request failed");
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let result = self
                .cache
                .wait_until_fresh_for(resource_version, key, left.min(PROGRESS_REQUEST_INTERVAL))
                .await;
            match result {
                Ok(()) => return Ok(()),
                Err(err) if Instant::now() >= deadline => return Err(err),
                Err(_) => {}
            }
        }
    }
}

/// The key prefix a list reads: the key itself, with a trailing `/` when recursive (so
/// `/pods/a` does not list `/pods/ab`).
pub(crate) fn list_prefix(key: &str, recursive: bool) -> String {
    if recursive && !key.ends_with('/') {
        format!("{key}/")
    } else {
        key.to_owned()
    }
}
