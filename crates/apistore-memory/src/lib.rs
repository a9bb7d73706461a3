//! An in-memory backend of apistore with etcd's semantics, for tests without etcd.
//!
//! [`MemoryStore`] implements the [`Storage`] contract the way the etcd3 store does
//! over etcd, with a [`MemoryKv`] standing in for etcd. It proves that the contract is
//! backend-agnostic (it runs the same conformance suite as the etcd3 store, from
//! `apistore-testing`), and lets a controller's unit tests run in milliseconds with no
//! etcd process, as raft-rs ships `MemStorage` beside its `Storage` trait.
//!
//! What behaves as with etcd (k8s.io/apiserver v0.31.1's etcd3 store):
//!
//! - **revisions**: one global revision per [`MemoryKv`], moved by every write; per
//!   key a create revision, a mod revision (the resourceVersion) and a version;
//! - **history and compaction**: reads at past revisions, watches from past
//!   revisions, [`MemoryKv::compact`], and a bounded history
//!   ([`KvConfig::history_limit`]) that compacts as it goes; below the compacted
//!   revision lists and watches get 410 Expired with kube's messages (and a continued
//!   list a token to go on at the latest revision);
//! - **TTLs**: objects written with a TTL are deleted when it runs out, on a clock you
//!   can inject ([`ManualClock`]);
//! - **bytes**: the same [`Codec`](apistore_storage::Codec) and value
//!   [`Transformer`](apistore_value::Transformer) layering, with the stored key as
//!   authenticated data, so encryption at rest, wrong keys and stale rewrites behave
//!   identically;
//! - **resourceVersions and continue tokens** from `apistore-versioning`: the same
//!   tokens as the etcd3 store for the same data and revision;
//! - **lists**: limit, continue, Exact and NotOlderThan, too-large resourceVersions,
//!   with the same page reads (and so the same [`MemoryStore::reads`] counts);
//! - **watches**: the same start rules, initial events and bookmarks, progress
//!   notifications ([`KvConfig::progress_notify_interval`]) and progress requests, and
//!   the same Error events.
//!
//! What it does not do: persist, replicate, or speak etcd's protocol. Error texts that
//! quote etcd (`etcdserver: mvcc: required revision is a future revision`) are quoted
//! as the etcd3 store reports them, so a test can compare both backends.
//!
//! ```
//! use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
//! use apistore_storage::{DynamicObject, GetOptions, Storage};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let kv = MemoryKv::new(KvConfig::default());
//! let store: MemoryStore<DynamicObject> =
//!     MemoryStore::new(kv.clone(), MemoryStoreConfig::for_resource("configmaps"));
//! let cm = DynamicObject::new("v1", "ConfigMap", "cm1").within("default");
//! let created = store.create("configmaps/default/cm1", cm, 0).await?;
//! assert_eq!(created.metadata.resource_version, "2"); // a fresh key space is at 1
//! let read = store.get("configmaps/default/cm1", &GetOptions::default()).await?;
//! assert_eq!(created, read);
//! assert!(kv.raw_get("/registry/configmaps/default/cm1").is_some());
//! # Ok::<(), apistore_storage::StorageError>(()) }).unwrap();
//! ```

mod clock;
mod event;
mod hub;
mod kv;
mod lease;
mod list;
mod mvcc;
mod stats;
mod store;
mod update;
mod watch;

use apistore_storage::{
    ApiObject, DeleteOptions, GetOptions, KeysFn, ListOptions, ObjectList, ResponseMeta, Result,
    Stats, Storage, Update, UpdateOptions, Versioner, WatchStream,
};

pub use clock::{Clock, ManualClock, SystemClock};
pub use kv::{KvConfig, MemoryKv};
pub use store::{MemoryStore, MemoryStoreConfig};

impl<T> Storage for MemoryStore<T>
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
        self.get_object(key, options)
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
        self.list_objects(key, options)
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<T>> {
        self.watch_objects(key, options).await
    }

    async fn count(&self, key: &str) -> Result<i64> {
        self.count_objects(key)
    }

    async fn readiness_check(&self) -> Result<()> {
        Ok(())
    }

    async fn request_watch_progress(&self) -> Result<()> {
        self.hub.request_progress();
        Ok(())
    }

    async fn get_current_resource_version(&self) -> Result<u64> {
        self.current_resource_version()
    }

    async fn stats(&self) -> Result<Stats> {
        self.resource_stats()
    }

    fn enable_resource_size_estimation(&self, keys: KeysFn) -> Result<()> {
        self.enable_size_estimation(keys)
    }

    fn compact_revision(&self) -> i64 {
        self.kv.compacted_revision()
    }

    fn supports_watch_list(&self) -> bool {
        self.watch_list
    }
}

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
