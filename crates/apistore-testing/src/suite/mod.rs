//! The conformance suite: kube-apiserver's `pkg/storage/testing/store_tests.go` (and, as
//! they land, `watcher_tests.go`), case by case, for any [`Storage`] of [`Pod`]s.
//!
//! A backend runs the suite by implementing [`Backend`] (the store, plus the few ways a
//! test reaches around it: raw reads and writes of stored bytes, compaction, a read
//! counter, and control of a test transformer that prepends a marker to every stored
//! value) and instantiating the case lists, one test per case, from its own `tests/`:
//!
//! ```text
//! // tests/conformance.rs of a backend crate
//! async fn backend(name: &str, needs: apistore_testing::suite::Needs) -> MyBackend { ... }
//! apistore_testing::store_conformance!(backend);
//! apistore_testing::list_conformance!(backend);
//! apistore_testing::watch_conformance!(backend);
//! ```
//!
//! The lists are in [`cases`]: every case there runs on every backend (the etcd3 store
//! and the in-memory store run all of them); cases about etcd itself live beside the
//! etcd3 store's tests. Every function panics on the first failed assertion, which is
//! what a test wants.

// A conformance case is a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod cases;
mod corrupt_objects;
mod count;
mod create;
mod delete;
mod get;
mod interface;
mod keys;
mod list;
mod list_failure;
mod list_get;
mod list_paging;
mod lost_update;
mod pod;
mod tokens;
mod transformer;
mod unsafe_delete;
mod update;
mod watch;
mod watch_errors;
mod watch_initial;
mod watch_scoped;

use std::future::Future;
use std::sync::Arc;

use apistore_storage::Storage;

pub use corrupt_objects::*;
pub use count::*;
pub use create::*;
pub use delete::*;
pub use get::*;
pub use interface::*;
pub use keys::*;
pub use list::{run_test_list, seed_multi_level_data};
pub use list_failure::*;
pub use list_get::{
    run_test_consistent_list, run_test_get_list_non_recursive, run_test_get_list_recursive_prefix,
};
pub use list_paging::*;
pub use lost_update::*;
pub use pod::{Pod, PodSpec};
pub use tokens::*;
pub use transformer::{PrefixTransformer, ReadHook};
pub use unsafe_delete::*;
pub use update::{
    run_test_guaranteed_update, run_test_guaranteed_update_checks_stored_data,
    run_test_guaranteed_update_with_conflict,
    run_test_guaranteed_update_with_stale_suggestion_failing_precondition,
    run_test_guaranteed_update_with_suggestion_and_conflict, run_test_guaranteed_update_with_ttl,
    run_test_transformation_failure, run_test_undecodable_value,
};
pub use watch::{
    run_test_delayed_watch_delivery, run_test_delete_trigger_watch, run_test_progress_notify,
    run_test_watch, run_test_watch_context_cancel,
    run_test_watch_delete_event_object_have_latest_rv, run_test_watch_dispatch_bookmark_events,
    run_test_watch_error, run_test_watch_from_non_zero, run_test_watch_from_zero,
    run_test_watcher_timeout,
};
pub use watch_errors::*;
pub use watch_initial::*;
pub use watch_scoped::{run_test_cluster_scoped_watch, run_test_namespace_scoped_watch};

/// What the suite needs from a backend besides its [`Storage`], in terms any backend
/// can offer: raw access to the bytes it stores, compaction of its history, a count of
/// its reads, and control of the test transformer ([`PrefixTransformer`]) its store
/// writes through.
pub trait Backend: Send + Sync {
    /// The store under test.
    type Store: Storage<Object = Pod>;

    /// The store under test. It must use a value transformer that prepends
    /// [`Backend::transformer_prefix`] to every non-empty value it writes, requires it on
    /// read, and reports values as stale when [`Backend::set_transformer_stale`] says so
    /// (the reference's `PrefixTransformer`; [`PrefixTransformer`] is one).
    fn store(&self) -> &Self::Store;

    /// The key the store keeps a store key under (with the store's prefix): the key
    /// errors name and raw access takes.
    fn stored_key(&self, key: &str) -> String;

    /// The bytes stored under a stored key, bypassing the store.
    fn raw_get(&self, stored_key: &str) -> impl Future<Output = Option<Vec<u8>>> + Send;

    /// Writes bytes under a stored key, bypassing the store (a write like any other for
    /// the backend's revision and watches).
    fn raw_put(&self, stored_key: &str, value: Vec<u8>) -> impl Future<Output = ()> + Send;

    /// The marker the test transformer prepends (`test!` in the reference).
    fn transformer_prefix(&self) -> &[u8];

    /// Makes the test transformer report every read as stale (or not).
    fn set_transformer_stale(&self, stale: bool);

    /// How many values the test transformer has read since the last call (and resets).
    fn take_transformer_reads(&self) -> u64;

    /// How many range reads of the backend (single-key gets and range lists, what an
    /// etcd counts as range requests) the store made since the last call (and
    /// resets): the reference's `clientRecorder` count.
    fn take_storage_reads(&self) -> u64;

    /// One compaction at `resource_version`, as the first compactor of a fresh cluster
    /// does it (the reference's `compactStorage`): a write of a key outside every
    /// store's prefix, made only the first time (so the global revision moves by one),
    /// then a compaction of the history before `resource_version`. A backend whose
    /// tests compact must not share its history with other tests ([`Needs::Fresh`]).
    fn compact(&self, resource_version: &str) -> impl Future<Output = ()> + Send;

    /// Makes every value the test transformer reads first create, through the store,
    /// the pod `next` returns (at [`Pod::key`]): the reference's `reproducingTransformer`,
    /// which injects writes into the middle of a list. `None` turns it off. Returns
    /// whether the backend can do this; by default it cannot, and the one case that
    /// needs it ([`run_test_list_resource_version_match`]) fails.
    fn create_on_read(&self, next: Option<PodFactory>) -> bool {
        let _ = next;
        false
    }

    /// A store like [`Backend::store`] (same key space, prefix and transformer) with
    /// kube-apiserver's `WatchList` feature gate on. By default there is none, and the
    /// watch-list cases ([`run_watch_semantics`] and friends) fail.
    fn watch_list_store(&self) -> Option<Self::Store> {
        None
    }

    /// A store like [`Backend::store`] (same key space, prefix and transformer) with
    /// kube's `AllowUnsafeMalformedObjectDeletion` gate set as given. By default there is
    /// none, and the corrupt-object cases ([`run_test_get_list_with_error_aggregation`]
    /// and friends) fail.
    fn store_with_unsafe_malformed_object_deletion(&self, enabled: bool) -> Option<Self::Store> {
        let _ = enabled;
        None
    }

    /// Makes every read of the test transformer fail (the reference's
    /// `failingTransformer`), or restores it. Returns whether the backend can do this; by
    /// default it cannot, and [`run_test_watch_error`] fails.
    fn set_transformer_failing(&self, failing: bool) -> bool {
        let _ = failing;
        false
    }

    /// How many watches of the store are running (started and neither dropped nor
    /// ended), if the backend can tell; the watch cases that stop watches need it.
    fn active_watches(&self) -> Option<usize> {
        None
    }

    /// Waits until a read at any revision (resourceVersion "0", NotOlderThan) sees
    /// every write up to `resource_version`. A store that reads etcd is there already
    /// (the default returns at once); a cache is once its watch of the backend has
    /// caught up. The reference's cacher cases run where consistent reads come from
    /// the cache, so a case's Exact and consistent lists wait for the cache before its
    /// resourceVersion "0" lists read it; where they go to etcd instead (etcd before
    /// 3.4.31 and 3.5.13), nothing waits and the "0" lists race the cache's watch.
    fn caught_up(&self, resource_version: &str) -> impl Future<Output = ()> + Send {
        let _ = resource_version;
        async {}
    }
}

/// What a case needs of the backend it runs on, so that a runner can give it a shared
/// or a fresh one. Every case of [`store_conformance!`](crate::store_conformance),
/// [`list_conformance!`](crate::list_conformance) and
/// [`watch_conformance!`](crate::watch_conformance) names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Any backend: the case works under a prefix of its own, whatever else the key
    /// space holds.
    Shared,
    /// A key space of its own: the case compacts, replays history from the start, or
    /// compares resourceVersions with its own writes.
    Fresh,
    /// A key space of its own whose watches get progress notifications every second.
    ProgressNotify,
}

/// Makes the next pod for [`Backend::create_on_read`], one per call; `None` when the
/// read at hand creates nothing (a backend may narrow which reads create, see the
/// cached backend's).
pub type PodFactory = Arc<dyn Fn() -> Option<Pod> + Send + Sync>;

/// Deletes `obj`'s key (ignoring not-found) and creates `obj`: the reference's
/// `testPropagateStore`. Returns the key and the stored object.
pub async fn propagate<B: Backend>(backend: &B, obj: Pod) -> (String, Pod) {
    use apistore_storage::DeleteOptions;
    let key = obj.key();
    match backend.store().delete(&key, DeleteOptions::default()).await {
        Ok(_) => {}
        Err(err) if err.is_not_found() => {}
        Err(err) => panic!("delete of {key} before create failed: {err}"),
    }
    let stored = backend
        .store()
        .create(&key, obj, 0)
        .await
        .unwrap_or_else(|err| panic!("create of {key} failed: {err}"));
    (key, stored)
}
