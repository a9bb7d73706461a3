//! kube-apiserver's watch cache for apistore: a [`Storage`](apistore_storage::Storage)
//! decorator that serves get, list and watch from memory over any backend (the etcd3
//! store, the in-memory store), after k8s.io/apiserver v0.31.1 `pkg/storage/cacher`.
//!
//! A [`Cacher`] keeps one list-then-watch of its resource in the backend
//! (`reflector.rs`; filled by a paged list, or from kube 1.35 by one streaming
//! watch-list, [`CacherConfig::fill_with_watch_list`], `fill.rs`), the current objects in key order and a window of recent events
//! whose capacity grows and shrinks as kube's does (`watch_cache.rs`, `window.rs`),
//! and serves:
//!
//! - **get and list** with kube's rules (`reads.rs`): resourceVersion "0" and
//!   NotOlderThan from the cache, after waiting (up to 3 s, then "Too large resource
//!   version") for the cache to reach the revision; consistent reads from the backend,
//!   or from the cache after a progress request when
//!   [`CacherConfig::consistent_reads_from_cache`] says the backend answers them; first
//!   pages cut from the cache with continue tokens the etcd3 store accepts; with
//!   [`CacherConfig::list_from_cache_snapshot`] (kube 1.34+), Exact lists and
//!   continuations from the cache's snapshot of their revision while the window
//!   covers it (`snapshots.rs`), from the backend otherwise;
//! - **watches** (`watch.rs`, `watcher.rs`, `dispatcher.rs`): every watcher from the
//!   cache, with initial events for resourceVersion "0" or unset, `sendInitialEvents`
//!   and the initial-events-end bookmark (with [`CacherConfig::watch_list`]), 410 Gone
//!   before the window, selector transitions (ADDED when an object starts to match,
//!   DELETED when it stops), periodic bookmarks, and a buffer per watcher: a watcher
//!   that does not keep up is terminated instead of slowing the others;
//! - **writes** straight to the backend, with the cached object as the suggestion of
//!   the current state.
//!
//! With [`CacherConfig::consistency_check_period`] (kube 1.34+), the cache is compared
//! with the backend now and then (`consistency.rs`, [`Cacher::check_consistency`]) and
//! lists it again when they differ.
//!
//! Readiness follows `ready.go` (`ready.rs`): until the first list lands, and while it
//! re-lists after losing its watch, gets and paged lists go to the backend and other
//! lists and watches are refused with 429. Nothing waits for it unless asked: a
//! server waits for all its caches at once with [`Cacher::readiness`] and
//! [`wait_all_ready`] (kube's `storage-readiness` post-start hook, `readiness.rs`).
//! Metrics use kube's names (`metrics.rs`).
//!
//! Every list item and every event is a clone of the cached object. Cache
//! [`Shared<T>`](apistore_storage::Shared) (an `Arc`, copy on write) and that clone is
//! a pointer copy:
//! every list and every watcher share the one decoded object, as kube's cacher does;
//! with a plain `T` each gets a deep copy, some 60 times slower for a list of 1 KiB
//! objects in the bench (docs/watch-cache.md).
//!
//! What it leaves to others: keys and bytes (the backend's), the objects' encoding,
//! and which resources are cached (the application's, or the facade's builder).
//!
//! ```no_run
//! use apistore_cacher::{Cacher, CacherConfig};
//! use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
//! use apistore_storage::{DynamicObject, ListOptions, ResourceVersionMatch, Storage};
//!
//! # async fn run() -> apistore_storage::Result<()> {
//! let backend: MemoryStore<DynamicObject> =
//!     MemoryStore::new(MemoryKv::new(KvConfig::default()), MemoryStoreConfig::for_resource("configmaps"));
//! let cached = Cacher::new(backend, CacherConfig::new("/configmaps", "configmaps"));
//! cached.wait_until_ready().await?;
//! let from_memory = cached
//!     .list("/configmaps", &ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan))
//!     .await?;
//! # let _ = from_memory; Ok(()) }
//! ```

mod cacher;
mod config;
mod consistency;
mod dispatcher;
mod event;
mod fill;
mod index;
mod interval;
mod keys;
mod metrics;
mod readiness;
mod reads;
mod ready;
mod reflector;
mod resource_metrics;
mod snapshots;
mod watch;
mod watch_cache;
mod watcher;
mod window;

pub use cacher::Cacher;
pub use config::{
    CacherConfig, DEFAULT_BOOKMARK_FREQUENCY, DEFAULT_FILL_WATCH_LIST_TIMEOUT,
    DEFAULT_LIST_PAGE_SIZE, namespace_key_fn,
};
pub use consistency::{ConsistencyCheck, DEFAULT_CONSISTENCY_CHECK_PERIOD};
pub use index::CacheIndex;
pub use metrics::CacherMetrics;
pub use readiness::{DEFAULT_STORAGE_INITIALIZATION_TIMEOUT, Readiness, wait_all_ready};
pub use watch_cache::{BLOCK_TIMEOUT, KeyFn};
pub use window::{
    DEFAULT_LOWER_BOUND_CAPACITY, DEFAULT_UPPER_BOUND_CAPACITY, EVENT_FRESH_DURATION,
};

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
