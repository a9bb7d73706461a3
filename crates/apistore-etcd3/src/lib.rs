//! The etcd v3 backend of apistore.
//!
//! [`Etcd3Store`] implements the [`apistore_storage::Storage`] contract over
//! etcd v3 the way kube-apiserver's `pkg/storage/etcd3` does (k8s.io/apiserver v0.31.1):
//!
//! - keys are `<prefix>/<key>`, validated before any I/O;
//! - values are codec bytes passed through a value transformer, with the etcd key as
//!   authenticated data; the resourceVersion is the mod revision and is never stored;
//! - create is a transaction on "mod revision is 0"; update and delete are
//!   compare-and-swap on the mod revision, retried on conflict with a fresh read;
//! - objects with a TTL share leases through a lease manager;
//! - watches deliver every change after a resourceVersion, in order, over one etcd
//!   watch stream per store, or end with an error event;
//! - a [`Compactor`] (or one [`SharedCompactor`] per cluster) keeps etcd's history to
//!   one interval, coordinating with every other compactor on the same etcd;
//! - a [`HealthChecker`] answers health and readiness from rate-limited reads of
//!   `<prefix>/health`;
//! - pollers keep kube-apiserver's periodic figures, the object count per resource
//!   ([`Etcd3Store::poll_object_count`]) and the database size
//!   ([`EtcdClient::poll_storage_size`]).
//!
//! No etcd-client type appears in this crate's API: connect with [`EtcdClient`].
//!
//! ```no_run
//! use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
//! use apistore_storage::{DynamicObject, GetOptions, Storage};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let client = EtcdClient::connect(&ClientConfig::new(["http://127.0.0.1:2379"])).await?;
//! let store: Etcd3Store<DynamicObject> = Etcd3Store::new(client, StoreConfig::for_resource("configmaps"));
//! let cm = DynamicObject::new("v1", "ConfigMap", "cm1").within("default");
//! let created = store.create("configmaps/default/cm1", cm, 0).await?;
//! let read = store.get("configmaps/default/cm1", &GetOptions::default()).await?;
//! assert_eq!(created, read);
//! # Ok(()) }
//! ```

mod client;
mod compact_revision;
mod compacted;
mod compactor;
mod endpoints;
mod error;
mod event;
mod feature_support;
mod health;
mod instrument;
mod key;
mod kv;
mod lease_manager;
mod list;
mod monitor;
mod raw;
mod reencrypt;
mod scan;
mod size_estimator;
mod stats;
mod store;
mod update;
mod watch_mux;
mod watch_settings;
mod watcher;

use apistore_storage::{
    ApiObject, DeleteOptions, GetOptions, KeysFn, ListOptions, ObjectList, ResponseMeta, Result,
    Stats, Storage, Update, UpdateOptions, Versioner, WatchStream,
};

pub use apistore_backend::ResourceConfig;
pub use client::{
    ClientConfig, DEFAULT_PROBE_TIMEOUT, DEFAULT_UNRESPONSIVE_AFTER, EtcdClient, TlsConfig,
};
pub use compactor::{
    COMPACT_REV_KEY, Compactor, CompactorStatus, DEFAULT_COMPACT_INTERVAL, SharedCompactor,
};
pub use error::ConnectError;
pub use health::{
    DEFAULT_HEALTHCHECK_TIMEOUT, DEFAULT_READINESS_TIMEOUT, HealthChecker, HealthConfig,
    HealthError,
};
pub use key::prefix_range_end;
pub use lease_manager::LeaseManagerConfig;
pub use monitor::{
    DEFAULT_OBJECT_COUNT_POLL_INTERVAL, DEFAULT_STORAGE_SIZE_POLL_INTERVAL, PollError, PollHandle,
    STORAGE_SIZE_TIMEOUT,
};
pub use raw::RawEntry;
pub use reencrypt::Reencryption;
pub use store::{Etcd3Store, StoreConfig};
pub use watch_settings::{DEFAULT_WATCH_UNAVAILABLE_LIMIT, SyncPageHook};
pub use watcher::next_event;

impl<T> Storage for Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    type Object = T;

    fn versioner(&self) -> &dyn Versioner {
        self.layers.versioner()
    }

    async fn create(&self, key: &str, object: T, ttl: u64) -> Result<T> {
        self.create_object(key, object, ttl).await
    }

    async fn get(&self, key: &str, options: &GetOptions) -> Result<T> {
        self.get_object(key, options).await
    }

    async fn delete(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        self.delete_object(key, options).await
    }

    async fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<T>,
        try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
    {
        self.guaranteed_update_object(key, options, try_update)
            .await
    }

    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<T>> {
        self.list_objects(key, options).await
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<T>> {
        self.watch_objects(key, options).await
    }

    async fn count(&self, key: &str) -> Result<i64> {
        self.count_objects(key).await
    }

    async fn readiness_check(&self) -> Result<()> {
        // kube-apiserver's etcd3 store is always ready; health is the prober's job.
        Ok(())
    }

    async fn request_watch_progress(&self) -> Result<()> {
        self.request_progress().await
    }

    async fn get_current_resource_version(&self) -> Result<u64> {
        self.current_resource_version().await
    }

    async fn stats(&self) -> Result<Stats> {
        self.resource_stats().await
    }

    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()> {
        self.enable_size_estimation(keys)
    }

    fn compact_revision(&self) -> i64 {
        self.seen_compact_revision()
    }

    fn supports_watch_list(&self) -> bool {
        self.watch_list()
    }
}

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
