//! The storage contract: kube-apiserver's `storage.Interface` and `storage.Versioner`.
//!
//! Nothing here names a backend. A backend keeps objects under keys in a key space with
//! one global revision that every write moves forward; an object's resourceVersion is
//! the revision of its last write, and a list or watch at a resourceVersion sees the
//! key space as it was at that revision.

use std::future::Future;

use crate::error::Result;
use crate::list::{ListMeta, ObjectList};
use crate::object::ApiObject;
use crate::options::{DeleteOptions, GetOptions, ListOptions, ResponseMeta, Update, UpdateOptions};
use crate::stats::{KeysFn, Stats};
use crate::watch::WatchStream;

/// Moves resourceVersions between objects and the storage's revisions
/// (kube-apiserver's `storage.Versioner`).
pub trait Versioner: Send + Sync {
    /// Sets the object's resourceVersion; 0 clears it.
    fn update_object(&self, object: &mut dyn ApiObject, resource_version: u64) -> Result<()>;
    /// Sets a list's resourceVersion, continue token and remaining item count.
    fn update_list(
        &self,
        list: &mut ListMeta,
        resource_version: u64,
        continue_token: String,
        remaining_item_count: Option<i64>,
    ) -> Result<()>;
    /// Clears what is never stored: the resourceVersion and the selfLink.
    fn prepare_object_for_storage(&self, object: &mut dyn ApiObject) -> Result<()>;
    /// The object's resourceVersion as a number; 0 when unset.
    fn object_resource_version(&self, object: &dyn ApiObject) -> Result<u64>;
    /// Parses a resourceVersion string; empty is 0.
    fn parse_resource_version(&self, resource_version: &str) -> Result<u64>;
}

/// A store of typed API objects with optimistic concurrency on resourceVersion.
///
/// Keys are relative to the store's prefix (`pods/default/nginx`). Every method is
/// cancel-safe: dropping its future abandons the request, and a write either happened
/// completely or not at all. Writes are compare-and-swap on the object's revision, so
/// concurrent writers never lose each other's updates.
///
/// A revision the backend has forgotten (compacted away) is an expired error (410) for
/// lists and watches; one it has not reached yet is a too-large-resourceVersion error.
pub trait Storage: Send + Sync {
    /// The type of object this store holds.
    type Object: ApiObject + Clone + Default + Send + Sync + 'static;

    /// The versioner that maps resourceVersions to this store's revisions.
    fn versioner(&self) -> &dyn Versioner;

    /// Creates `object` under `key`, failing if the key exists. A `ttl` in seconds other
    /// than 0 makes the storage delete the object once that time has passed (a deletion
    /// watches see like any other). Returns the stored object with its resourceVersion;
    /// an object that already carries one is refused.
    fn create(
        &self,
        key: &str,
        object: Self::Object,
        ttl: u64,
    ) -> impl Future<Output = Result<Self::Object>> + Send;

    /// Reads the object under `key`: always its latest state. A `resource_version` in the
    /// options the storage has not reached yet is a too-large-resourceVersion error.
    fn get(
        &self,
        key: &str,
        options: &GetOptions,
    ) -> impl Future<Output = Result<Self::Object>> + Send;

    /// Deletes the object under `key` if the preconditions and validation pass on its
    /// latest state. Returns its last state with the resourceVersion of the deletion.
    fn delete(
        &self,
        key: &str,
        options: DeleteOptions<Self::Object>,
    ) -> impl Future<Output = Result<Self::Object>> + Send;

    /// Reads the object under `key`, applies `try_update` and writes the result if the
    /// object did not change meanwhile; on a conflict, reads again and retries. An update
    /// that changes nothing writes nothing.
    fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<Self::Object>,
        try_update: F,
    ) -> impl Future<Output = Result<Self::Object>> + Send
    where
        F: FnMut(Self::Object, &ResponseMeta) -> Result<Update<Self::Object>> + Send;

    /// Lists the objects under `key` (or the one object, when not recursive), all read at
    /// one revision: the first page fixes it and the continue token carries it, as the
    /// options' resourceVersion and match say (kube-apiserver's `GetList`).
    fn list(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> impl Future<Output = Result<ObjectList<Self::Object>>> + Send;

    /// Watches the objects under `key` (or the one object, when not recursive): every
    /// change after the options' resourceVersion, in order, exactly once, or an Error
    /// event last (410 when that revision was compacted away).
    fn watch(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> impl Future<Output = Result<WatchStream<Self::Object>>> + Send;

    /// Counts the objects under `key`.
    fn count(&self, key: &str) -> impl Future<Output = Result<i64>> + Send;

    /// Whether the store is ready to serve.
    fn readiness_check(&self) -> impl Future<Output = Result<()>> + Send;

    /// Asks the backend for progress notifications: each of the store's watches that has
    /// seen every change up to the current revision gets a bookmark at it.
    fn request_watch_progress(&self) -> impl Future<Output = Result<()>> + Send;

    /// The storage's current revision, as a resourceVersion: what a list of nothing
    /// would report (kube's `GetCurrentResourceVersion`, 1.33). Any write moves it, also
    /// writes outside this store's prefix.
    fn get_current_resource_version(&self) -> impl Future<Output = Result<u64>> + Send;

    /// How many objects the store holds under its resource prefix and, once size
    /// estimation is enabled, their estimated average size (kube's `Stats`, 1.34).
    fn stats(&self) -> impl Future<Output = Result<Stats>> + Send;

    /// Turns on the estimation of object sizes that [`Self::stats`] reports, with
    /// `keys` listing the keys the store holds (kube's `EnableResourceSizeEstimation`,
    /// 1.35; a watch cache hands over its own keys). The estimate follows the values
    /// the store reads in lists and watches. Fails when it is already on, or when the
    /// store cannot estimate sizes.
    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()>;

    /// The latest revision the store has seen compacted away, 0 when it has seen none
    /// (kube's `CompactRevision`, 1.34). Which compactions a store sees depends on the
    /// backend (and for etcd on the kube version: from 1.34 it watches the compactors'
    /// shared key, so compactions made by other servers count too).
    fn compact_revision(&self) -> i64;

    /// Whether the store's watches serve a streaming watch-list: with
    /// `sendInitialEvents`, the current objects as ADDED events and then, when
    /// bookmarks are allowed, the bookmark annotated `k8s.io/initial-events-end` (for
    /// the etcd3 and in-memory stores, kube's `WatchList` gate on for the store). A
    /// watch cache fills through a streaming watch-list only from a store that says so.
    /// No by default: a store that ignores `sendInitialEvents` would leave the cache
    /// waiting for an end bookmark that never comes. kube asks the opposite
    /// (`IsWatchListSemanticsUnSupported`, 1.35), as its one `WatchList` gate covers
    /// every store of a server.
    fn supports_watch_list(&self) -> bool {
        false
    }
}
