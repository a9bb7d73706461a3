//! What a cacher is told about its resource and how it should behave (the parts of
//! kube's `cacher.Config` that are not wiring).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use apistore_storage::{ApiObject, KubeVersion};

use crate::consistency::DEFAULT_CONSISTENCY_CHECK_PERIOD;
use crate::index::CacheIndex;
use crate::metrics::CacherMetrics;
use crate::watch_cache::KeyFn;
use crate::window::{DEFAULT_LOWER_BOUND_CAPACITY, DEFAULT_UPPER_BOUND_CAPACITY};

/// How often a watcher that accepts bookmarks gets one (kube's
/// `defaultBookmarkFrequency`).
pub const DEFAULT_BOOKMARK_FREQUENCY: Duration = Duration::from_secs(60);

/// The page size of the cache's own lists of the backend (kube's
/// `storageWatchListPageSize`).
pub const DEFAULT_LIST_PAGE_SIZE: i64 = 10_000;

/// How long the cache's streaming fill waits for the end of its initial events before
/// it gives the watch-list up and lists in pages: client-go's reflector asks its watch
/// for a timeout of at least its `minWatchTimeout` of 5 minutes (up to twice that), the
/// server ends the watch then, and the reflector's failed watch-list falls back to a
/// list. Without a limit, a backend that says it serves watch-lists but stalls would
/// keep the cache unready for ever.
pub const DEFAULT_FILL_WATCH_LIST_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// The configuration of one [`Cacher`](crate::Cacher).
pub struct CacherConfig<T> {
    /// The key every object of the resource lives under, as callers spell keys
    /// (`/pods`); the cache lists and watches it recursively.
    pub resource_prefix: String,
    /// The group-resource string metrics are labelled with (`pods`, `deployments.apps`).
    pub group_resource: String,
    /// The key of an object, as callers spell it; by default
    /// `<resource_prefix>/<namespace>/<name>`, or `<resource_prefix>/<name>` without
    /// a namespace (kube's `NamespaceKeyFunc`).
    pub key_fn: KeyFn<T>,
    /// The field and label indexes lists with a selector pinning one of them to one
    /// value read from (kube's `IndexerFuncs`); none by default.
    pub indexes: Vec<CacheIndex>,
    /// The smallest window of events.
    pub lower_bound_capacity: usize,
    /// The largest window of events.
    pub upper_bound_capacity: usize,
    /// How often watchers that accept bookmarks get one.
    pub bookmark_frequency: Duration,
    /// Serve consistent reads (resourceVersion "") from the cache by asking the
    /// backend for progress and waiting for the cache to reach its current revision
    /// (kube's `ConsistentListFromCache`). Turn on only for a backend that answers
    /// progress requests correctly (etcd 3.4.31+ or 3.5.13+, see the etcd3 store's
    /// `supports_request_watch_progress`; the in-memory store does); off, consistent
    /// reads go to the backend.
    pub consistent_reads_from_cache: bool,
    /// kube's `WatchList` feature gate: honour `sendInitialEvents` in the cache's own
    /// watches, and let the cache fill itself through a streaming watch-list (see
    /// [`Self::fill_with_watch_list`]). Off, the option is ignored and the cache lists
    /// in pages. Off by default, as in v0.31.1; [`Self::with_kube_version`] sets the
    /// gate's default for the version
    /// ([`KubeVersion::watch_list_default`]: on at 1.32 and from 1.34).
    pub watch_list: bool,
    /// The page size of the cache's lists of the backend.
    pub list_page_size: i64,
    /// Fill the cache (at first, and after every loss of its watch) through one
    /// streaming watch-list of the backend (`sendInitialEvents`, resourceVersionMatch
    /// NotOlderThan, bookmarks up to the `k8s.io/initial-events-end` one) and keep
    /// watching on that stream, rather than listing in pages and then watching:
    /// client-go's `WatchListClient` gate, which kube's cacher follows from 1.34 and
    /// which is on by default from kube 1.35. Taken only while [`Self::watch_list`] is
    /// on too (kube's cacher refuses its own watch-list without the `WatchList` gate)
    /// and the backend says it serves watch-lists
    /// ([`Storage::supports_watch_list`](apistore_storage::Storage::supports_watch_list):
    /// for the etcd3 and in-memory stores, their own `WatchList` gate on, as kube's one
    /// gate has it). When the backend refuses or does not stream as a watch-list, the
    /// cache lists in pages instead; and likewise when the end of the initial events
    /// has not come within [`Self::fill_watch_list_timeout`]. On by default, as for the
    /// newest kube; [`Self::with_kube_version`] sets it.
    pub fill_with_watch_list: bool,
    /// How long the streaming fill ([`Self::fill_with_watch_list`]) waits, from asking
    /// the backend for the watch-list, for the end of its initial events; then the
    /// stream is dropped and the round lists in pages, as when the backend refuses the
    /// watch-list. [`DEFAULT_FILL_WATCH_LIST_TIMEOUT`] (5 minutes, client-go's shortest
    /// watch timeout) by default; a limit too large to add to the current time is no
    /// limit.
    pub fill_watch_list_timeout: Duration,
    /// kube's `ListFromCacheSnapshot` (beta and on from kube 1.34): keep a snapshot of
    /// the objects per revision the window covers, and serve Exact lists and continued
    /// lists at those revisions from them, with the items, continue token and
    /// remaining item count the etcd3 store would give. Off (kube 1.31–1.33), those
    /// lists go to the backend. On by default, as for the newest kube;
    /// [`Self::with_kube_version`] sets it per version.
    pub list_from_cache_snapshot: bool,
    /// Send a watch-list's initial-events-end bookmark right after its initial events
    /// (kube 1.32+), not on the next bookmark tick, up to a second later (kube 1.31).
    /// On by default, as for the newest kube; [`Self::with_kube_version`] sets it.
    pub initial_events_end_at_once: bool,
    /// kube's `DetectCacheInconsistency` (beta and on from kube 1.34): how often to
    /// compare the cache with the backend at the cache's revision (see
    /// [`Cacher::check_consistency`](crate::Cacher::check_consistency)); `None`: never.
    /// Every [`DEFAULT_CONSISTENCY_CHECK_PERIOD`] by default, as for the newest kube;
    /// [`Self::with_kube_version`] turns it off for 1.31–1.33.
    pub consistency_check_period: Option<Duration>,
    /// Ask the backend for its current revision through
    /// [`Storage::get_current_resource_version`](apistore_storage::Storage::get_current_resource_version)
    /// (kube 1.33+: the etcd3 store reads the resource prefix's own key, one key),
    /// rather than through a list of one item under the prefix (kube 1.31-1.32's
    /// `GetCurrentResourceVersionFromStorage`, for which etcd counts every key under
    /// the prefix). A consistent list from the cache and a watch-list without a
    /// resourceVersion start with that question. On by default, as for the newest
    /// kube; [`Self::with_kube_version`] turns it off for 1.31-1.32.
    pub current_revision_from_storage: bool,
    /// Where to record metrics; `None` records into unregistered ones.
    pub metrics: Option<CacherMetrics>,
}

impl<T: ApiObject> CacherConfig<T> {
    /// A configuration for the resource under `resource_prefix` with kube's defaults.
    pub fn new(resource_prefix: impl Into<String>, group_resource: impl Into<String>) -> Self {
        let resource_prefix = resource_prefix.into();
        Self {
            key_fn: namespace_key_fn(&resource_prefix),
            resource_prefix,
            group_resource: group_resource.into(),
            indexes: Vec::new(),
            lower_bound_capacity: DEFAULT_LOWER_BOUND_CAPACITY,
            upper_bound_capacity: DEFAULT_UPPER_BOUND_CAPACITY,
            bookmark_frequency: DEFAULT_BOOKMARK_FREQUENCY,
            consistent_reads_from_cache: false,
            watch_list: false,
            list_page_size: DEFAULT_LIST_PAGE_SIZE,
            fill_with_watch_list: true,
            fill_watch_list_timeout: DEFAULT_FILL_WATCH_LIST_TIMEOUT,
            list_from_cache_snapshot: true,
            initial_events_end_at_once: true,
            consistency_check_period: Some(DEFAULT_CONSISTENCY_CHECK_PERIOD),
            current_revision_from_storage: true,
            metrics: None,
        }
    }

    /// Indexes the cached objects by the value of `field`, as field selectors name it
    /// (`spec.nodeName`; builder style): a list selecting `field=<value>` reads only
    /// the objects with that value.
    pub fn with_field_index(mut self, field: impl Into<String>) -> Self {
        self.indexes.push(CacheIndex::Field(field.into()));
        self
    }

    /// Indexes the cached objects by the value of label `label` (builder style): a list
    /// selecting `label=<value>` reads only the objects with that value.
    pub fn with_label_index(mut self, label: impl Into<String>) -> Self {
        self.indexes.push(CacheIndex::Label(label.into()));
        self
    }

    /// Behaves as the cacher of kube `version` where the versions differ (builder
    /// style): the `WatchList` gate ([`Self::watch_list`]) as kube defaults it, on at
    /// 1.32 and from 1.34, off at 1.31 and 1.33
    /// ([`KubeVersion::watch_list_default`]); snapshots
    /// ([`Self::list_from_cache_snapshot`]) and consistency checks
    /// ([`Self::consistency_check_period`], every
    /// [`DEFAULT_CONSISTENCY_CHECK_PERIOD`]) from 1.34 on, neither before; the
    /// initial-events-end bookmark at once from 1.32
    /// ([`Self::initial_events_end_at_once`]); the fill through a streaming watch-list
    /// from 1.35 ([`Self::fill_with_watch_list`]; kube's cacher turned its reflector's
    /// watch-list off up to 1.33, and client-go's `WatchListClient` gate is off by
    /// default up to 1.34); the current revision from the backend's own answer from
    /// 1.33 ([`Self::current_revision_from_storage`]). A caller that turns a gate on or off explicitly sets the
    /// field after this.
    pub fn with_kube_version(mut self, version: KubeVersion) -> Self {
        self.watch_list = version.watch_list_default();
        self.initial_events_end_at_once = version >= KubeVersion::V1_32;
        self.fill_with_watch_list = version >= KubeVersion::V1_35;
        self.current_revision_from_storage = version >= KubeVersion::V1_33;
        let since_1_34 = version >= KubeVersion::V1_34;
        self.list_from_cache_snapshot = since_1_34;
        self.consistency_check_period = since_1_34.then_some(DEFAULT_CONSISTENCY_CHECK_PERIOD);
        self
    }

    /// Replaces the key function (builder style).
    pub fn with_key_fn(mut self, key_fn: impl Fn(&T) -> String + Send + Sync + 'static) -> Self {
        self.key_fn = Arc::new(key_fn);
        self
    }
}

/// kube's `NamespaceKeyFunc`: `<prefix>/<namespace>/<name>`, or `<prefix>/<name>` for
/// an object without a namespace.
pub fn namespace_key_fn<T: ApiObject>(prefix: &str) -> KeyFn<T> {
    let prefix = prefix.trim_end_matches('/').to_owned();
    Arc::new(move |object: &T| {
        if object.namespace().is_empty() {
            format!("{prefix}/{}", object.name())
        } else {
            format!("{prefix}/{}/{}", object.namespace(), object.name())
        }
    })
}

impl<T> fmt::Debug for CacherConfig<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacherConfig")
            .field("resource_prefix", &self.resource_prefix)
            .field("group_resource", &self.group_resource)
            .field("indexes", &self.indexes)
            .field("lower_bound_capacity", &self.lower_bound_capacity)
            .field("upper_bound_capacity", &self.upper_bound_capacity)
            .field("bookmark_frequency", &self.bookmark_frequency)
            .field(
                "consistent_reads_from_cache",
                &self.consistent_reads_from_cache,
            )
            .field("watch_list", &self.watch_list)
            .field("list_page_size", &self.list_page_size)
            .field("fill_with_watch_list", &self.fill_with_watch_list)
            .field("fill_watch_list_timeout", &self.fill_watch_list_timeout)
            .field("list_from_cache_snapshot", &self.list_from_cache_snapshot)
            .field("consistency_check_period", &self.consistency_check_period)
            .field(
                "current_revision_from_storage",
                &self.current_revision_from_storage,
            )
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use apistore_storage::{DynamicObject, KubeVersion};

    use super::CacherConfig;

    /// kube's cacher fills through its reflector's watch-list from 1.35: up to 1.33 it
    /// turns the reflector's watch-list off, and client-go's `WatchListClient` gate is
    /// off by default until 1.35. The `WatchList` gate, which the fill needs too, is on
    /// at 1.32 and from 1.34: so the cache streams its fill from 1.35 on.
    #[test]
    fn fill_with_watch_list_follows_the_kube_version() {
        // (minor, `WatchList` gate, `WatchListClient` for the cache's fill)
        let table = [
            (31, false, false),
            (32, true, false),
            (33, false, false),
            (34, true, false),
            (35, true, true),
            (36, true, true),
            (37, true, true),
        ];
        let minors: Vec<u32> = KubeVersion::ALL.iter().map(|v| v.minor()).collect();
        let listed: Vec<u32> = table.iter().map(|(minor, ..)| *minor).collect();
        assert_eq!(minors, listed, "every known minor has a row");
        for (minor, watch_list, fill_with_watch_list) in table {
            let version = KubeVersion::from_minor(minor).unwrap();
            let config =
                CacherConfig::<DynamicObject>::new("/pods", "pods").with_kube_version(version);
            assert_eq!(config.watch_list, watch_list, "{version}: watch_list");
            assert_eq!(
                config.fill_with_watch_list, fill_with_watch_list,
                "{version}: fill_with_watch_list"
            );
            let streams = config.watch_list && config.fill_with_watch_list;
            assert_eq!(
                streams,
                minor >= 35,
                "{version}: fills through a watch-list"
            );
        }
        let bare = CacherConfig::<DynamicObject>::new("/pods", "pods");
        assert!(bare.fill_with_watch_list);
        // A bare configuration keeps v0.31.1's gate, off.
        assert!(!bare.watch_list);
        assert_eq!(
            bare.fill_watch_list_timeout,
            super::DEFAULT_FILL_WATCH_LIST_TIMEOUT
        );
    }
}
