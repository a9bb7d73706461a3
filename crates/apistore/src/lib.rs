//! apistore: typed Kubernetes-style API objects in etcd v3, kept exactly the way
//! kube-apiserver keeps them (k8s.io/apiserver v0.31.1, `pkg/storage`).
//!
//! This is the facade: it re-exports every layer and builds ready stores from one
//! configuration.
//!
//! ```no_run
//! use apistore::{ApiStore, DynamicObject, GetOptions, Storage};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let api = ApiStore::builder().endpoints(["http://127.0.0.1:2379"]).build().await?;
//! // Custom resources live at <group>/<plural>, as kube-apiserver keeps them.
//! let widgets = api.dynamic_store("widgets.example.com")?;
//! let key = api.resource_layout("widgets.example.com").key("default", "w1");
//! assert_eq!(key, "example.com/widgets/default/w1");
//! let w = DynamicObject::new("example.com/v1", "Widget", "w1").within("default");
//! let created = widgets.create(&key, w, 0).await?;
//! let read = widgets.get(&key, &GetOptions::default()).await?;
//! assert_eq!(created.metadata.resource_version, read.metadata.resource_version);
//! # Ok(()) }
//! ```
//!
//! The builder takes everything a deployment needs: endpoints, TLS and user
//! authentication ([`ApiStoreBuilder::tls`], [`ApiStoreBuilder::credentials`]), the key
//! prefix, a request timeout, an `EncryptionConfiguration` file, a metrics registry and
//! a compaction interval. [`ApiStoreBuilder::build`] is lazy: it checks the
//! configuration and starts the client; the first request reaches etcd.
//!
//! # One handle per resource
//!
//! [`ApiStore::resource_store`] (and `typed::<K>()` for a k8s-openapi type, with the
//! `k8s-openapi` feature) gives a [`ResourceStore`]: the etcd3 store, the watch cache
//! over it (`ApiStoreBuilder::watch_cache`, the `watch-cache` feature) or, from
//! `MemoryApiStore` (the `memory` feature), the in-memory store, one type whichever is
//! behind it, as kube-rs's `Api<K>`. It takes
//! resources as kube names them, by kubectl short names (`cm`, `deploy`) or singulars,
//! refuses a name the kube version's layout does not know (naming the closest), checks
//! on create that an object is the one its key names, and [`StoreExt::namespaced`]
//! gives it (and every other store) a namespaced view with names instead of keys.
//! [`ApiStore::store`] and [`ApiStore::dynamic_store`] still hand out the concrete
//! [`Etcd3Store`] for any type that implements [`ApiObject`] and serde.
//!
//! # Reading faster than kube-apiserver
//!
//! [`ApiStore::lazy_store`] and [`ApiStore::lazy_resource_store`] give the same stores
//! of [`LazyObject`]s: each read decodes the metadata and keeps the stored bytes, the
//! body is decoded on first use, a single field is read from the bytes, and a write
//! that changed only the metadata is spliced into them. A controller or cache that
//! mostly looks at names, labels and resourceVersions reads, lists and caches Pods
//! faster and in less memory than kube-apiserver's own storage layer does; a
//! [`DynamicObject`] is the convenient representation, two to two and a half times
//! Go's decode (docs/protobuf.md, *Choosing a representation*).
//!
//! # Without etcd
//!
//! With the `memory` feature, `ApiStore::in_memory` gives a `MemoryApiStore`: the same
//! `store`, `dynamic_store`, `lazy_store`, `resource_store`, `lazy_resource_store` and
//! `resource_layout`, with the same
//! layout, codecs and encryption, over an in-memory key space with etcd's semantics
//! (revisions, compaction, TTLs on an injectable `ManualClock`, watches and bookmarks)
//! instead of etcd. Its stores are `MemoryStore`s; both they and [`Etcd3Store`]s
//! implement [`Storage`], so a
//! controller written against `Storage` is unit-tested on one and deployed on the
//! other (see `examples/controller_test.rs`). It is a type of its own, rather than a
//! builder option, so that [`ApiStore::store`] keeps returning the concrete
//! [`Etcd3Store`] every caller names.
//!
//! # Feature flags
//!
//! The defaults are what a newcomer needs, always built: the etcd3 store, encryption at
//! rest (every provider kube has; `kms` v2 plugins need `kms-grpc`), kube-apiserver's
//! metrics and spans, compaction and TLS, each off until configured. The rest is
//! opt-in, as kube-rs gates its runtime:
//!
//! - `watch-cache`: the watch cache per resource (`ApiStoreBuilder::watch_cache`,
//!   `ResourceStore::Cached`, the `Cacher` re-exports).
//! - `memory`: the facade without etcd, for unit tests (`ApiStore::in_memory`,
//!   `MemoryApiStore`, `ResourceStore::Memory`).
//! - `runtime`: `runtime::{watcher, reflector}`, kube-rs's controller pieces.
//! - `kms-grpc`: `kms` (v2) providers in encryption configuration files, their plugins
//!   reached over gRPC.
//! - `k8s-openapi`: store k8s-openapi types directly, e.g.
//!   `api.typed::<k8s_openapi::api::core::v1::ConfigMap>().await?`, the resource taken
//!   from the type. Your
//!   application picks the k8s-openapi version feature. apistore builds against
//!   k8s-openapi 0.29, whose features are `v1_33` to `v1_37` (`earliest`, `latest`).
//!
//! # Kube versions
//!
//! The layout and the protobuf schema are those of one kube minor, 1.31 to 1.37
//! ([`ApiStoreBuilder::kube_version`], default [`KubeVersion::LATEST`]), each generated
//! from that minor's own Go packages. A value holding fields the chosen minor does not
//! know (a newer kube wrote it) reads without them, and an update carries them over
//! into the bytes it writes, or is refused naming them: nothing is dropped silently.
//! [`KubeProtobuf::unknown_fields`] says what a read could not show.
//!
//! Encryption, metrics, tracing, compaction and TLS are always built; each is off until
//! configured.

mod builder;
#[cfg(feature = "watch-cache")]
mod cached;
#[cfg(feature = "memory")]
mod memory;
mod recipe;
mod resource_store;
mod rewrite;
#[cfg(feature = "runtime")]
pub mod runtime;
mod scoped;
#[cfg(feature = "k8s-openapi")]
mod typed;

pub use builder::{ApiStore, ApiStoreBuilder, BuildError};
#[cfg(feature = "memory")]
pub use memory::MemoryApiStore;
pub use resource_store::ResourceStore;
pub use rewrite::{RewriteOptions, RewriteSummary, rewrite_stale};
pub use scoped::{Scoped, StoreExt};
#[cfg(feature = "k8s-openapi")]
pub use typed::{TypedResource, group_resource_of};

#[doc(inline)]
pub use apistore_backend::ResourceConfig;
#[cfg(feature = "watch-cache")]
#[doc(inline)]
pub use apistore_cacher::{
    Cacher, CacherConfig, CacherMetrics, DEFAULT_STORAGE_INITIALIZATION_TIMEOUT, Readiness,
};
#[doc(inline)]
pub use apistore_etcd3::{
    ClientConfig, ConnectError, DEFAULT_OBJECT_COUNT_POLL_INTERVAL,
    DEFAULT_STORAGE_SIZE_POLL_INTERVAL, Etcd3Store, EtcdClient, LeaseManagerConfig, PollError,
    PollHandle, Reencryption, StoreConfig, TlsConfig,
};
#[doc(inline)]
pub use apistore_layout::{
    BuiltIn, LayoutError, ResourceLayout, SHORT_NAMES, StorageEncoding, StorageLayout,
};
#[cfg(feature = "memory")]
#[doc(inline)]
pub use apistore_memory::{
    Clock, KvConfig, ManualClock, MemoryKv, MemoryStore, MemoryStoreConfig, SystemClock,
};
#[doc(inline)]
pub use apistore_protobuf::{
    KubeProtobuf, LazyCodec, LazyObject, LazySelector, MediaType, PartialRead, ProtobufError,
    StorageCodec, UnknownField, UnknownFieldsObserver,
};
#[doc(inline)]
pub use apistore_storage::*;
#[doc(inline)]
pub use apistore_telemetry::StorageMetrics;
#[doc(inline)]
pub use apistore_value::config::EncryptionConfig;

/// The Prometheus crate the metrics are registered with, so that applications use the
/// same version.
pub use prometheus;

/// The layers, for what the facade does not re-export at the top.
pub mod layers {
    #[cfg(feature = "watch-cache")]
    #[doc(inline)]
    pub use apistore_cacher as cacher;
    #[doc(inline)]
    pub use apistore_etcd3 as etcd3;
    #[doc(inline)]
    pub use apistore_layout as layout;
    #[cfg(feature = "memory")]
    #[doc(inline)]
    pub use apistore_memory as memory;
    #[doc(inline)]
    pub use apistore_protobuf as protobuf;
    #[doc(inline)]
    pub use apistore_storage as storage;
    #[doc(inline)]
    pub use apistore_telemetry as telemetry;
    #[doc(inline)]
    pub use apistore_value as value;
    #[doc(inline)]
    pub use apistore_versioning as versioning;
}

// README.md's example, compiled with the doctests (it runs in memory).
#[cfg(all(doctest, feature = "memory"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

// The workspace README's tour, run with the doctests (it needs `k8s-openapi`).
#[cfg(all(
    doctest,
    feature = "k8s-openapi",
    feature = "memory",
    feature = "runtime"
))]
#[doc = include_str!("../../../README.md")]
struct WorkspaceReadmeDoctests;
