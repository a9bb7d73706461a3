//! One configuration in, ready stores out.

use std::sync::Arc;
use std::time::Duration;

use apistore_etcd3::{ClientConfig, ConnectError, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{ApiObject, Codec, DynamicObject, JsonCodec};
use apistore_value::{IdentityTransformer, Transformer};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Why an [`ApiStore`] could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// etcd could not be reached.
    #[error(transparent)]
    Connect(#[from] ConnectError),
}

/// Builds an [`ApiStore`]: endpoints, key prefix, timeouts.
#[derive(Debug, Clone)]
pub struct ApiStoreBuilder {
    client: ClientConfig,
    prefix: String,
    request_timeout: Option<Duration>,
}

impl Default for ApiStoreBuilder {
    fn default() -> Self {
        Self {
            client: ClientConfig::default(),
            prefix: "/registry".to_owned(),
            request_timeout: Some(Duration::from_secs(60)),
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

    /// Connects to etcd.
    pub async fn build(self) -> Result<ApiStore, BuildError> {
        let client = EtcdClient::connect(&self.client).await?;
        Ok(ApiStore {
            client,
            prefix: self.prefix,
            request_timeout: self.request_timeout,
        })
    }
}

/// A connection to etcd that hands out one typed store per resource.
#[derive(Debug, Clone)]
pub struct ApiStore {
    client: EtcdClient,
    prefix: String,
    request_timeout: Option<Duration>,
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

    /// The value transformer for a resource (identity until encryption is configured).
    pub fn transformer_for(&self, _resource: &str) -> Arc<dyn Transformer> {
        Arc::new(IdentityTransformer)
    }

    /// A typed store for a resource, JSON-encoded.
    pub fn store<T>(&self, resource: &str) -> Etcd3Store<T>
    where
        T: ApiObject + Clone + Default + Send + Sync + Serialize + DeserializeOwned + 'static,
    {
        let codec: Arc<dyn Codec<T>> = Arc::new(JsonCodec::<T>::new());
        Etcd3Store::with_parts(
            self.client.clone(),
            self.store_config(resource),
            codec,
            self.transformer_for(resource),
        )
    }

    /// A store of [`DynamicObject`]s for a resource.
    pub fn dynamic_store(&self, resource: &str) -> Etcd3Store<DynamicObject> {
        self.store(resource)
    }
}
