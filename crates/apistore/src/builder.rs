//! One configuration in, ready stores out.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apistore_etcd3::{
    ClientConfig, ConnectError, Etcd3Store, EtcdClient, PollError, PollHandle, SharedCompactor,
    StoreConfig, TlsConfig,
};
use apistore_layout::{ResourceLayout, StorageLayout};
use apistore_protobuf::{LazyObject, MediaType, StorageCodec, UnknownFieldsObserver};
use apistore_storage::{ApiObject, Codec, DynamicObject, KubeVersion, StorageError};
use apistore_telemetry::{StorageMetrics, TelemetryError};
use apistore_value::config::{ConfigError, EncryptionConfig};
use apistore_value::{TransformObserver, TransformationType, Transformer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::recipe::{ObserverSlot, StoreRecipe};

/// Why an [`ApiStore`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// etcd could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// The EncryptionConfiguration file is unusable.
    #[error("encryption configuration {path}: {source}")]
    Encryption {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        #[source]
        source: ConfigError,
    },
    /// The metrics could not be registered.
    #[error(transparent)]
    Metrics(#[from] TelemetryError),
    /// The compactor could not be started.
    #[error("cannot start the compactor: {0}")]
    Compactor(#[source] apistore_storage::StorageError),
    /// A poll interval was set, but no metrics to poll into.
    #[error(
        "cannot poll storage figures without metrics: set metrics or metrics_registry on the builder"
    )]
    PollWithoutMetrics,
    /// A poller could not start (a zero interval, or no tokio runtime).
    #[error("cannot poll storage figures: {0}")]
    Poll(#[source] PollError),
}

/// Builds an [`ApiStore`]: endpoints, key prefix, timeouts, encryption, metrics.
#[derive(Debug)]
pub struct ApiStoreBuilder {
    client: ClientConfig,
    pub(crate) recipe: StoreRecipe,
    request_timeout: Option<Duration>,
    encryption: Option<EncryptionSource>,
    metrics: Option<StorageMetrics>,
    compaction_interval: Option<Duration>,
    object_count_poll_interval: Option<Duration>,
    storage_size_poll_interval: Option<Duration>,
    storage_cluster_id: String,
    #[cfg(feature = "watch-cache")]
    pub(crate) cache: crate::cached::CacheSettings,
}

#[derive(Debug)]
enum EncryptionSource {
    File(PathBuf),
    Config(EncryptionConfig),
}

impl Default for ApiStoreBuilder {
    fn default() -> Self {
        Self {
            client: ClientConfig::default(),
            recipe: StoreRecipe::default(),
            request_timeout: Some(Duration::from_secs(60)),
            encryption: None,
            metrics: None,
            compaction_interval: None,
            object_count_poll_interval: None,
            storage_size_poll_interval: None,
            storage_cluster_id: "etcd-0".to_owned(),
            #[cfg(feature = "watch-cache")]
            cache: crate::cached::CacheSettings::default(),
        }
    }
}

impl ApiStoreBuilder {
    /// The etcd endpoints (default `http://127.0.0.1:2379`).
    pub fn endpoints<I, S>(mut self, endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.client.endpoints = endpoints.into_iter().map(Into::into).collect();
        self
    }

    /// The key prefix (default `/registry`, as kube-apiserver's `--etcd-prefix`).
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.recipe.prefix = prefix.into();
        self
    }

    /// The longest one etcd request may take (default 60 s, kube-apiserver's request
    /// timeout); `None` waits as long as etcd does.
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// How long to wait for a connection (default 20 s).
    pub fn dial_timeout(mut self, timeout: Duration) -> Self {
        self.client.dial_timeout = timeout;
        self
    }

    /// etcd user name and password.
    pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.client.credentials = Some((user.into(), password.into()));
        self
    }

    /// TLS to etcd (kube-apiserver's `--etcd-cafile`, `--etcd-certfile`,
    /// `--etcd-keyfile`); the endpoints must then be `https://`. A wrong CA or a refused
    /// client certificate fails [`Self::build`], saying which.
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.client.tls = Some(tls);
        self
    }

    /// Encrypts resources at rest as an `EncryptionConfiguration` file says (the file
    /// kube-apiserver's `--encryption-provider-config` takes). Read when building;
    /// `kms` (v2) providers need the `kms-grpc` feature, which dials their plugins.
    pub fn encryption_config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.encryption = Some(EncryptionSource::File(path.into()));
        self
    }

    /// Encrypts resources at rest as an already parsed configuration says.
    pub fn encryption_config(mut self, config: EncryptionConfig) -> Self {
        self.encryption = Some(EncryptionSource::Config(config));
        self
    }

    /// Records kube-apiserver's storage, transformation and KMS envelope metrics.
    pub fn metrics(mut self, metrics: StorageMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Records kube-apiserver's metrics into a Prometheus registry, with the families
    /// and labels of the kube version chosen so far ([`Self::kube_version`]: call that
    /// first; kube 1.34+ label resources `group` and `resource`, 1.37 labels lists by
    /// the storage that served them), once per registry.
    pub fn metrics_registry(self, registry: &prometheus::Registry) -> Result<Self, BuildError> {
        let metrics = StorageMetrics::register_for(registry, self.recipe.kube_version)?;
        Ok(self.metrics(metrics))
    }

    /// Compacts etcd's history every `interval`, coordinating with every other
    /// apistore process and kube-apiserver on the same etcd through `compact_rev_key`
    /// (kube-apiserver's default is 5 minutes). Off unless set: a tool that only
    /// inspects a cluster should leave compaction to the cluster's API servers.
    pub fn compaction_interval(mut self, interval: Duration) -> Self {
        self.compaction_interval = Some(interval);
        self
    }

    /// Polls the object count of every resource a store is made for into
    /// `apiserver_storage_objects` every `interval` (plus up to half of it again as
    /// jitter; kube-apiserver's `--etcd-count-metric-poll-period` defaults to
    /// [`DEFAULT_OBJECT_COUNT_POLL_INTERVAL`](apistore_etcd3::DEFAULT_OBJECT_COUNT_POLL_INTERVAL),
    /// 1 minute). Off unless set; needs metrics. Each poll is one count request to etcd.
    pub fn object_count_poll_interval(mut self, interval: Duration) -> Self {
        self.object_count_poll_interval = Some(interval);
        self
    }

    /// Polls etcd's database size into `apiserver_storage_size_bytes` every `interval`
    /// (plus jitter; kube-apiserver uses
    /// [`DEFAULT_STORAGE_SIZE_POLL_INTERVAL`](apistore_etcd3::DEFAULT_STORAGE_SIZE_POLL_INTERVAL),
    /// 30 s). Off unless set; needs metrics.
    pub fn storage_size_poll_interval(mut self, interval: Duration) -> Self {
        self.storage_size_poll_interval = Some(interval);
        self
    }

    /// The `storage_cluster_id` label of `apiserver_storage_size_bytes` (default
    /// `etcd-0`, the id kube-apiserver gives its first storage backend).
    pub fn storage_cluster_id(mut self, id: impl Into<String>) -> Self {
        self.storage_cluster_id = id.into();
        self
    }

    /// The kube minor of the cluster whose etcd this is (default: the newest apistore
    /// knows, [`KubeVersion::LATEST`]): its storage layout (which resources exist,
    /// their key prefixes and storage versions) and its protobuf schema (which kinds
    /// and fields exist, and how its JSON reads). Fields of a newer kube than this are
    /// not shown by reads but are never lost by writes: updates carry them over, or
    /// are refused naming them.
    pub fn kube_version(mut self, version: KubeVersion) -> Self {
        self.recipe.set_kube_version(version);
        self
    }

    /// Tells `observer` of every value a store decodes without some of its fields
    /// (fields of a newer kube than [`Self::kube_version`]): a read cannot show them,
    /// and the object cannot say so itself. Updates keep such fields either way. Stores
    /// of [`LazyObject`]s ([`ApiStore::lazy_store`]) do not tell it: their objects keep
    /// the stored bytes, and `KubeProtobuf::unknown_fields` lists what a body lacks.
    pub fn observe_unknown_fields(mut self, observer: UnknownFieldsObserver) -> Self {
        self.recipe.unknown_fields = Some(ObserverSlot(observer));
        self
    }

    /// Writes every resource in this encoding (kube-apiserver's `--storage-media-type`)
    /// instead of the one kube-apiserver uses for it (protobuf for built-ins, JSON for
    /// custom resources). Reads take either encoding whatever this says.
    pub fn storage_media_type(mut self, media_type: MediaType) -> Self {
        self.recipe.storage_media_type = Some(media_type);
        self
    }

    /// Reads the encryption configuration and connects to etcd.
    ///
    /// Connecting is lazy, as etcd-client's: `build` checks the configuration and
    /// starts the client, and the first request reaches etcd (an unreachable etcd shows
    /// there, or in [`Storage::readiness_check`](crate::Storage::readiness_check)).
    pub async fn build(mut self) -> Result<ApiStore, BuildError> {
        let polls =
            self.object_count_poll_interval.is_some() || self.storage_size_poll_interval.is_some();
        if polls && self.metrics.is_none() {
            return Err(BuildError::PollWithoutMetrics);
        }
        if let Some(metrics) = &self.metrics
            && metrics.kube_version() != self.recipe.kube_version
        {
            // Not wrong, only surprising: the series are labelled as the metrics' kube
            // labels them, while the stores follow the builder's.
            tracing::warn!(
                metrics = %metrics.kube_version(),
                stores = %self.recipe.kube_version,
                "the storage metrics follow another kube version than the stores; set kube_version before metrics_registry"
            );
        }
        for interval in [
            self.object_count_poll_interval,
            self.storage_size_poll_interval,
        ]
        .into_iter()
        .flatten()
        {
            if interval.is_zero() {
                return Err(BuildError::Poll(PollError::ZeroInterval {
                    what: "storage figures",
                }));
            }
        }
        let encryption = match self.encryption {
            None => None,
            // Loaded by the caller: its kms envelopes report from now on.
            Some(EncryptionSource::Config(config)) => Some(match &self.metrics {
                Some(metrics) => config.with_kms_observer(Arc::new(metrics.envelope())),
                None => config,
            }),
            // Read here: they report from the health check loading runs on.
            Some(EncryptionSource::File(path)) => Some(
                read_encryption_config(&path, self.metrics.as_ref())
                    .map_err(|source| BuildError::Encryption { path, source })?,
            ),
        };
        let encryption = encryption.map(|config| match &self.metrics {
            Some(metrics) => {
                Arc::new(config.with_observer(Arc::new(MetricsObserver(metrics.clone()))))
            }
            None => Arc::new(config),
        });
        let client = EtcdClient::connect(&self.client).await?;
        let compactor = match self.compaction_interval {
            Some(interval) => Some(Arc::new(
                SharedCompactor::acquire(&client, interval).map_err(BuildError::Compactor)?,
            )),
            None => None,
        };
        let size_poller = match (self.storage_size_poll_interval, &self.metrics) {
            (Some(interval), Some(metrics)) => Some(
                client
                    .poll_storage_size(metrics.clone(), self.storage_cluster_id, interval)
                    .map_err(BuildError::Poll)?,
            ),
            _ => None,
        };
        self.recipe.encryption = encryption;
        Ok(ApiStore {
            client,
            recipe: self.recipe,
            request_timeout: self.request_timeout,
            metrics: self.metrics,
            _compactor: compactor,
            pollers: Arc::new(Pollers {
                object_count_interval: self.object_count_poll_interval,
                object_counts: Mutex::default(),
                _storage_size: size_poller,
            }),
            #[cfg(feature = "watch-cache")]
            cache: self.cache,
        })
    }
}

/// Reads an EncryptionConfiguration file; its `kms` providers reach their plugins over
/// gRPC when the `kms-grpc` feature is on, and are refused with a clear error otherwise.
/// With `metrics`, every `kms` provider's envelope reports to their envelope metrics
/// from loading on.
#[cfg(feature = "kms-grpc")]
fn read_encryption_config(
    path: &std::path::Path,
    metrics: Option<&StorageMetrics>,
) -> Result<EncryptionConfig, ConfigError> {
    let grpc = apistore_value::kms_v2::GrpcKmsConnector;
    match metrics {
        Some(metrics) => {
            let observed = apistore_value::config::ObservedKmsConnector {
                connector: &grpc,
                observer: Arc::new(metrics.envelope()),
            };
            EncryptionConfig::from_file_with_kms(path, &observed)
        }
        None => EncryptionConfig::from_file_with_kms(path, &grpc),
    }
}

#[cfg(not(feature = "kms-grpc"))]
fn read_encryption_config(
    path: &std::path::Path,
    _metrics: Option<&StorageMetrics>,
) -> Result<EncryptionConfig, ConfigError> {
    EncryptionConfig::from_file(path)
}

/// Feeds transformer observations into the transformation metrics.
struct MetricsObserver(StorageMetrics);

impl TransformObserver for MetricsObserver {
    fn observe(
        &self,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        self.0
            .record_transformation(transformation_type, transformer_prefix, status, elapsed);
    }

    fn observe_resource(
        &self,
        resource: &str,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        self.0.record_resource_transformation(
            resource,
            transformation_type,
            transformer_prefix,
            status,
            elapsed,
        );
    }
}

/// A connection to etcd that hands out one typed store per resource.
#[derive(Debug, Clone)]
pub struct ApiStore {
    client: EtcdClient,
    pub(crate) recipe: StoreRecipe,
    request_timeout: Option<Duration>,
    metrics: Option<StorageMetrics>,
    /// Our share in the endpoints' compactor; it stops when the last share goes.
    _compactor: Option<Arc<SharedCompactor>>,
    /// The periodic figures; they stop when the last clone of the `ApiStore` goes.
    pollers: Arc<Pollers>,
    #[cfg(feature = "watch-cache")]
    pub(crate) cache: crate::cached::CacheSettings,
}

/// The pollers of one [`ApiStore`].
#[derive(Debug)]
struct Pollers {
    object_count_interval: Option<Duration>,
    /// One per resource a store was made for, with the store it counts through (kept
    /// here so that the poller lives as long as the `ApiStore`, not the caller's store).
    object_counts: Mutex<HashMap<String, (Etcd3Store<DynamicObject>, PollHandle)>>,
    _storage_size: Option<PollHandle>,
}

impl ApiStore {
    /// A builder with kube-apiserver's defaults.
    pub fn builder() -> ApiStoreBuilder {
        ApiStoreBuilder::default()
    }

    /// The etcd connection.
    pub fn client(&self) -> &EtcdClient {
        &self.client
    }

    /// kube-apiserver's storage layout, which says where each resource's objects live.
    pub fn layout(&self) -> StorageLayout {
        self.recipe.layout
    }

    /// The kube minor whose layout and protobuf schema the stores use
    /// ([`ApiStoreBuilder::kube_version`]).
    pub fn kube_version(&self) -> KubeVersion {
        self.recipe.kube_version
    }

    /// Where and how a resource is stored (group-resource string such as `pods`,
    /// `deployments.apps` or `widgets.example.com`): its key prefix, and its encoding
    /// after any [`ApiStoreBuilder::storage_media_type`] override.
    pub fn resource_layout(&self, resource: &str) -> ResourceLayout {
        self.recipe.resource_layout(resource)
    }

    /// The store configuration for a resource (group-resource string such as `pods` or
    /// `deployments.apps`): its objects live under the key prefix kube-apiserver uses
    /// (`deployments`, `minions`, `example.com/widgets`), and keys outside it are refused.
    pub fn store_config(&self, resource: &str) -> StoreConfig {
        StoreConfig {
            resource: self.recipe.resource_config(resource),
            request_timeout: self.request_timeout,
            ..StoreConfig::default()
        }
    }

    /// The codec a store of `resource` uses: reads JSON or protobuf (with the kube
    /// version's schema), writes as kube-apiserver writes the resource (or the
    /// storage media type set on the builder), and tells the builder's
    /// unknown-fields observer of partial reads.
    pub fn codec<T>(&self, resource: &str) -> StorageCodec<T> {
        self.recipe.codec(resource)
    }

    /// The value transformer for a resource: the encryption configuration's providers
    /// for it, or identity when it is not listed or nothing is configured.
    pub fn transformer_for(&self, resource: &str) -> Arc<dyn Transformer> {
        self.recipe.transformer_for(resource)
    }

    /// The encryption configuration stores are made with, if any: its `kms`
    /// providers' health ([`EncryptionConfig::kms_providers`]), for instance.
    pub fn encryption_config(&self) -> Option<&EncryptionConfig> {
        self.recipe.encryption.as_deref()
    }

    /// The metrics stores record, if configured.
    pub fn metrics(&self) -> Option<&StorageMetrics> {
        self.metrics.as_ref()
    }

    /// A typed store for a resource. Keys are relative to the prefix and must lie
    /// under the resource's key prefix ([`Self::resource_layout`]`.key(namespace, name)`
    /// builds one). Values are read as JSON or protobuf, whichever is stored, and written
    /// as kube-apiserver writes this resource: protobuf for built-ins (so a Rust control
    /// plane can share etcd with kube-apiserver), JSON for custom resources.
    ///
    /// The resource is named as kube names it (`configmaps`, `deployments.apps`), by a
    /// kubectl short name (`cm`) or a singular (`configmap`), or as a custom resource
    /// (`widgets.example.com`); the store is the canonical resource's.
    ///
    /// With an object count poll interval set, the first store made for a resource
    /// also starts polling that resource's count.
    ///
    /// # Errors
    ///
    /// A bad request naming the closest resource the chosen kube version knows, for a
    /// name it does not know: a typo would otherwise make a key prefix kube-apiserver
    /// never reads, to which no EncryptionConfiguration entry applies.
    pub fn store<T>(&self, resource: &str) -> Result<Etcd3Store<T>, StorageError>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        let resource = self.recipe.known_resource(resource)?;
        Ok(self.canonical_store(&resource))
    }

    /// A store of [`LazyObject`]s for a resource, named as for [`Self::store`], with
    /// the same keys, encryption, metrics and media type: each read decodes only the
    /// envelope and the metadata and keeps the stored bytes, the body is decoded when
    /// first asked for, and a write that changed only the metadata splices it into the
    /// stored bytes. The representation that reads faster than kube-apiserver's own
    /// decode (docs/protobuf.md, *Choosing a representation*). Fields the kube version's
    /// schema does not know stay in the stored bytes through every write (a changed
    /// body is written whole with them carried over); the unknown-fields observer is
    /// not told of them.
    ///
    /// # Errors
    ///
    /// A name the chosen kube version does not know, as [`Self::store`].
    pub fn lazy_store(&self, resource: &str) -> Result<Etcd3Store<LazyObject>, StorageError> {
        let resource = self.recipe.known_resource(resource)?;
        Ok(self.canonical_store_with(&resource, self.recipe.lazy_codec(&resource)))
    }

    /// [`Self::store`] of a name already made canonical by the layout.
    pub(crate) fn canonical_store<T>(&self, resource: &str) -> Etcd3Store<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        self.canonical_store_with(resource, self.recipe.shared_codec(resource))
    }

    /// The store of a canonical resource name with `codec`.
    pub(crate) fn canonical_store_with<T>(
        &self,
        resource: &str,
        codec: Arc<dyn Codec<T>>,
    ) -> Etcd3Store<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        if let Some(interval) = self.pollers.object_count_interval {
            self.start_object_count_poller(resource, interval);
        }
        self.make_store(resource, codec)
    }

    fn start_object_count_poller(&self, resource: &str, interval: Duration) {
        let mut counts = self
            .pollers
            .object_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if counts.contains_key(resource) {
            return;
        }
        let store: Etcd3Store<DynamicObject> =
            self.make_store(resource, self.recipe.shared_codec(resource));
        // The builder checked that metrics are on and the interval is not zero, and
        // `build` ran inside a runtime; a failure here would be a runtime shut down
        // under us, which leaves the figure unpolled rather than the store unusable.
        match store.poll_object_count(interval) {
            Ok(handle) => {
                counts.insert(resource.to_owned(), (store, handle));
            }
            Err(err) => tracing::warn!(resource, error = %err, "object count not polled"),
        }
    }

    fn make_store<T>(&self, resource: &str, codec: Arc<dyn Codec<T>>) -> Etcd3Store<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + 'static,
    {
        let store = Etcd3Store::with_parts(
            self.client.clone(),
            self.store_config(resource),
            codec,
            self.transformer_for(resource),
        );
        match &self.metrics {
            Some(metrics) => store.with_metrics(metrics.clone()),
            None => store,
        }
    }

    /// A store of [`DynamicObject`]s for a resource, named as for [`Self::store`].
    ///
    /// # Errors
    ///
    /// A name the chosen kube version does not know, as [`Self::store`].
    pub fn dynamic_store(&self, resource: &str) -> Result<Etcd3Store<DynamicObject>, StorageError> {
        self.store(resource)
    }

    /// Re-encrypts the stale values of a resource under `prefix` (a key relative to the
    /// prefix, within the resource's key prefix) with the current write key, on the
    /// stored bytes: see [`rewrite_stale`](crate::rewrite_stale).
    pub async fn rewrite_stale(
        &self,
        resource: &str,
        prefix: &str,
        options: &crate::RewriteOptions,
        progress: impl Fn(usize, usize) + Sync,
    ) -> Result<crate::RewriteSummary, StorageError> {
        let store: Etcd3Store<DynamicObject> = self.dynamic_store(resource)?;
        crate::rewrite_stale(&store, prefix, options, progress).await
    }
}
