//! One configuration in, ready stores out.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use apistore_etcd3::{
    ClientConfig, ConnectError, Etcd3Store, EtcdClient, SharedCompactor, StoreConfig, TlsConfig,
};
use apistore_storage::{ApiObject, Codec, DynamicObject, JsonCodec};
use apistore_telemetry::{StorageMetrics, TelemetryError};
use apistore_value::config::{ConfigError, EncryptionConfig};
use apistore_value::{IdentityTransformer, TransformObserver, TransformationType, Transformer};
use serde::Serialize;
use serde::de::DeserializeOwned;

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
}

/// Builds an [`ApiStore`]: endpoints, key prefix, timeouts, encryption, metrics.
#[derive(Debug)]
pub struct ApiStoreBuilder {
    client: ClientConfig,
    prefix: String,
    request_timeout: Option<Duration>,
    encryption: Option<EncryptionSource>,
    metrics: Option<StorageMetrics>,
    compaction_interval: Option<Duration>,
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
            prefix: "/registry".to_owned(),
            request_timeout: Some(Duration::from_secs(60)),
            encryption: None,
            metrics: None,
            compaction_interval: None,
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
        self.prefix = prefix.into();
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
    /// kube-apiserver's `--encryption-provider-config` takes). Read when building.
    pub fn encryption_config_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.encryption = Some(EncryptionSource::File(path.into()));
        self
    }

    /// Encrypts resources at rest as an already parsed configuration says.
    pub fn encryption_config(mut self, config: EncryptionConfig) -> Self {
        self.encryption = Some(EncryptionSource::Config(config));
        self
    }

    /// Records kube-apiserver's storage and transformation metrics.
    pub fn metrics(mut self, metrics: StorageMetrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Records kube-apiserver's metrics into a Prometheus registry.
    pub fn metrics_registry(self, registry: &prometheus::Registry) -> Result<Self, BuildError> {
        let metrics = StorageMetrics::register(registry)?;
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

    /// Reads the encryption configuration and connects to etcd.
    pub async fn build(self) -> Result<ApiStore, BuildError> {
        let encryption = match self.encryption {
            None => None,
            Some(EncryptionSource::Config(config)) => Some(config),
            Some(EncryptionSource::File(path)) => Some(
                EncryptionConfig::from_file(&path)
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
        Ok(ApiStore {
            client,
            prefix: self.prefix,
            request_timeout: self.request_timeout,
            encryption,
            metrics: self.metrics,
            _compactor: compactor,
        })
    }
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
        let kind = match transformation_type {
            TransformationType::FromStorage => apistore_telemetry::TransformationType::FromStorage,
            TransformationType::ToStorage => apistore_telemetry::TransformationType::ToStorage,
        };
        self.0
            .record_transformation(kind, transformer_prefix, status, elapsed);
    }
}

/// A connection to etcd that hands out one typed store per resource.
#[derive(Debug, Clone)]
pub struct ApiStore {
    client: EtcdClient,
    prefix: String,
    request_timeout: Option<Duration>,
    encryption: Option<Arc<EncryptionConfig>>,
    metrics: Option<StorageMetrics>,
    /// Our share in the endpoints' compactor; it stops when the last share goes.
    _compactor: Option<Arc<SharedCompactor>>,
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

    /// The store configuration for a resource (group-resource string such as `pods` or
    /// `deployments.apps`).
    pub fn store_config(&self, resource: &str) -> StoreConfig {
        StoreConfig {
            prefix: self.prefix.clone(),
            request_timeout: self.request_timeout,
            ..StoreConfig::for_resource(resource)
        }
    }

    /// The value transformer for a resource: the encryption configuration's providers
    /// for it, or identity when it is not listed or nothing is configured.
    pub fn transformer_for(&self, resource: &str) -> Arc<dyn Transformer> {
        match &self.encryption {
            Some(config) => config.transformer_for(resource),
            None => Arc::new(IdentityTransformer),
        }
    }

    /// The metrics stores record, if configured.
    pub fn metrics(&self) -> Option<&StorageMetrics> {
        self.metrics.as_ref()
    }

    /// A typed store for a resource, JSON-encoded.
    pub fn store<T>(&self, resource: &str) -> Etcd3Store<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        let codec: Arc<dyn Codec<T>> = Arc::new(JsonCodec::<T>::new());
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

    /// A store of [`DynamicObject`]s for a resource.
    pub fn dynamic_store(&self, resource: &str) -> Etcd3Store<DynamicObject> {
        self.store(resource)
    }
}
