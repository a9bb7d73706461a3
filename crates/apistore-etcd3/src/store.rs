//! The etcd3 store: the state shared by every operation, and get, count and
//! readiness. Create, delete and guaranteed update (`update.rs`), list and watch live
//! in their own files.
//!
//! Follows `pkg/storage/etcd3/store.go` of k8s.io/apiserver v0.31.1.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apistore_backend::{KeyScope, ObjectLayers, ResourceConfig};
use apistore_storage::{
    ApiObject, Codec, GetOptions, JsonCodec, KubeVersion, Result, StorageError, StoredSelector,
};
use apistore_telemetry::StorageMetrics;
use apistore_value::{IdentityTransformer, Transformer};
use bytes::Bytes;
use etcd_client::{GetOptions as EtcdGetOptions, KvClient, PutOptions};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::EtcdClient;
use crate::instrument::{Instrumentation, Operation};
use crate::key::{as_directory, prefix_range_end};
use crate::kv::Kv;
use crate::lease_manager::{LeaseManager, LeaseManagerConfig};
use crate::watch_settings::{DEFAULT_WATCH_UNAVAILABLE_LIMIT, WatchSettings};

/// How a store lays out and treats its objects: the core every backend takes
/// ([`ResourceConfig`]: prefix, resource, feature gates, kube version) and what only
/// etcd has.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The prefix, resource, watch-list gate, key confinement and kube version, as
    /// every backend takes them. From kube 1.34 a list at a revision etcd has not
    /// reached fails with a too-large resourceVersion (504) instead of etcd's error
    /// (500).
    pub resource: ResourceConfig,
    /// Lease reuse for objects with a TTL.
    pub lease: LeaseManagerConfig,
    /// The longest one etcd request may take; `None` waits as long as etcd does.
    pub request_timeout: Option<Duration>,
    /// The longest a whole `guaranteed_update` may take: its read, its transaction and
    /// every retry after a conflict (each request also within `request_timeout`).
    /// `None` (the default, as kube-apiserver) bounds only the requests.
    pub update_timeout: Option<Duration>,
    /// How long a watch may wait for a new etcd watch stream after its stream failed
    /// (no member reachable) before it ends with a 503 ServiceUnavailable error event;
    /// 30 s by default ([`DEFAULT_WATCH_UNAVAILABLE_LIMIT`]). Until then it resumes,
    /// from the revision after the last event it delivered, as soon as a member answers.
    pub watch_unavailable_limit: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            resource: ResourceConfig::default(),
            lease: LeaseManagerConfig::default(),
            request_timeout: None,
            update_timeout: None,
            watch_unavailable_limit: DEFAULT_WATCH_UNAVAILABLE_LIMIT,
        }
    }
}

impl StoreConfig {
    /// A config for one resource under the default `/registry` prefix: `resource` is the
    /// group-resource string and, with a leading `/`, the resource prefix.
    pub fn for_resource(resource: &str) -> Self {
        Self {
            resource: ResourceConfig::for_resource(resource),
            ..Self::default()
        }
    }
}

/// A store of `T` objects in etcd v3, behaving as kube-apiserver's etcd3 store.
pub struct Etcd3Store<T> {
    /// Shared: an etcd-client `Client` is several kilobytes, and every watch holds a
    /// clone of its store.
    pub(crate) client: Arc<EtcdClient>,
    /// Codec, value transformer and versioner; decode failures of reads count in
    /// the store's metrics.
    pub(crate) layers: ObjectLayers<T, Instrumentation>,
    /// Where the keys live, and whether they are confined to the resource prefix.
    pub(crate) scope: KeyScope,
    pub(crate) lease_manager: Arc<LeaseManager>,
    /// Requests to etcd's KV service: members, deadline, retries, metrics.
    pub(crate) kv: Kv,
    pub(crate) update_timeout: Option<Duration>,
    /// Where the kube versions' storage layers differ, which to follow.
    pub(crate) kube_version: KubeVersion,
    pub(crate) instrumentation: Instrumentation,
    pub(crate) watch: WatchSettings,
}

impl<T> Clone for Etcd3Store<T> {
    fn clone(&self) -> Self {
        Self {
            client: self.client.clone(),
            layers: self.layers.clone(),
            scope: self.scope.clone(),
            lease_manager: Arc::clone(&self.lease_manager),
            kv: self.kv.clone(),
            update_timeout: self.update_timeout,
            kube_version: self.kube_version,
            instrumentation: self.instrumentation.clone(),
            watch: self.watch.clone(),
        }
    }
}

impl<T> fmt::Debug for Etcd3Store<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Etcd3Store")
            .field("path_prefix", &self.scope.path_prefix())
            .field("group_resource", &self.scope.group_resource())
            .field("transformer", self.layers.transformer())
            .finish_non_exhaustive()
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// A store of `T` objects with the JSON codec and no encryption.
    pub fn new(client: EtcdClient, config: StoreConfig) -> Self
    where
        T: Serialize + DeserializeOwned,
    {
        Self::with_parts(
            client,
            config,
            Arc::new(JsonCodec::<T>::new()),
            Arc::new(IdentityTransformer),
        )
    }

    /// A store with an explicit codec and value transformer.
    pub fn with_parts(
        client: EtcdClient,
        config: StoreConfig,
        codec: Arc<dyn Codec<T>>,
        transformer: Arc<dyn Transformer>,
    ) -> Self {
        let scope = config.resource.key_scope();
        Self {
            watch: WatchSettings::new(
                &client.members,
                config.resource.watch_list,
                config.watch_unavailable_limit,
            ),
            kv: Kv {
                members: Arc::clone(&client.members),
                request_timeout: config.request_timeout,
                instrumentation: Instrumentation::default(),
            },
            client: Arc::new(client),
            layers: {
                let mut layers = ObjectLayers::new(codec, transformer, Instrumentation::default());
                layers.set_unsafe_malformed_object_deletion(
                    config.resource.corrupt_object_reporting(),
                );
                layers
            },
            scope,
            lease_manager: Arc::new(LeaseManager::new(config.lease)),
            update_timeout: config.update_timeout,
            kube_version: config.resource.kube_version,
            instrumentation: Instrumentation::default(),
        }
    }

    /// Turns kube's `AllowUnsafeMalformedObjectDeletion` behaviour on or off for this
    /// store (builder style; the default follows the kube version, see
    /// [`ResourceConfig::allow_unsafe_malformed_object_deletion`](apistore_backend::ResourceConfig::allow_unsafe_malformed_object_deletion)).
    pub fn with_unsafe_malformed_object_deletion(mut self, enabled: bool) -> Self {
        self.layers.set_unsafe_malformed_object_deletion(
            enabled.then(|| Arc::clone(self.scope.group_resource_arc())),
        );
        self
    }

    /// Records kube-apiserver's storage metrics for this store (builder style).
    pub fn with_metrics(mut self, metrics: StorageMetrics) -> Self {
        self.instrumentation = Instrumentation::new(Some(metrics), self.scope.group_resource());
        self.kv.instrumentation = self.instrumentation.clone();
        self.layers.set_decode_errors(self.instrumentation.clone());
        self
    }

    /// The metrics this store records, if any.
    pub fn metrics(&self) -> Option<&StorageMetrics> {
        self.instrumentation.metrics()
    }

    /// Reads a large page of a list back on up to `threads` threads at once (builder
    /// style; 0, the default, for one per core; 1 as kube-apiserver, on the calling
    /// thread alone): see [`ObjectLayers::set_read_threads`](apistore_backend::ObjectLayers::set_read_threads).
    pub fn with_read_threads(mut self, threads: usize) -> Self {
        self.layers.set_read_threads(threads);
        self
    }

    /// Lets a list judge its selectors on each value's stored bytes through
    /// `selector` and decode only the values they keep (builder style; off by default,
    /// as in kube-apiserver): see
    /// [`ObjectLayers::set_stored_selector`](apistore_backend::ObjectLayers::set_stored_selector).
    pub fn with_stored_selector(mut self, selector: Arc<dyn StoredSelector>) -> Self {
        self.layers.set_stored_selector(Some(selector));
        self
    }

    /// Replaces the value transformer (builder style).
    pub fn with_transformer(mut self, transformer: Arc<dyn Transformer>) -> Self {
        self.layers.set_transformer(transformer);
        self
    }

    /// The value transformer.
    pub fn transformer(&self) -> &Arc<dyn Transformer> {
        self.layers.transformer()
    }

    /// The normalised path prefix every key is joined to (`/registry/`).
    pub fn path_prefix(&self) -> &str {
        self.scope.path_prefix()
    }

    /// The group-resource string of this store.
    pub fn group_resource(&self) -> &str {
        self.scope.group_resource()
    }

    /// The etcd key a caller's key maps to, after validation.
    pub fn prepare_key(&self, key: &str) -> Result<String> {
        self.scope.prepare_key(key)
    }

    /// The key, relative to the prefix, under which this store's objects live.
    pub fn resource_prefix(&self) -> &str {
        self.scope.resource_prefix()
    }

    /// Runs one etcd KV request with the store's timeout, retries, metrics and error
    /// mapping ([`Kv::call`]).
    pub(crate) async fn call<R, F, Fut>(
        &self,
        key: &str,
        operation: Operation,
        request: F,
    ) -> Result<R>
    where
        F: FnMut(KvClient) -> Fut,
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        self.kv.call(key, operation, request).await
    }

    /// Like [`Self::call`] but hands back the raw etcd error, for callers that interpret
    /// some errors themselves (compaction on lists). The outer error is a timeout.
    pub(crate) async fn call_raw<R, F, Fut>(
        &self,
        key: &str,
        operation: Operation,
        request: F,
    ) -> Result<Result<R, etcd_client::Error>>
    where
        F: FnMut(KvClient) -> Fut,
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        Ok(self
            .kv
            .call_raw(key, operation, request)
            .await?
            .map_err(|(_, err)| err))
    }

    /// The TTL option of a write: a (possibly reused) lease for `ttl` seconds.
    pub(crate) async fn put_options(&self, key: &str, ttl: u64) -> Result<Option<PutOptions>> {
        if ttl == 0 {
            return Ok(None);
        }
        let ttl = i64::try_from(ttl)
            .map_err(|_| StorageError::bad_request(key, format!("ttl {ttl} is out of range")))?;
        let (_, member) = self.kv.members.pick(&[]);
        let mut lease_client = member.lease();
        let (id, previous_count) = self
            .kv
            .call_once(key, self.lease_manager.get_lease(&mut lease_client, ttl))
            .await?;
        if let Some(count) = previous_count {
            self.instrumentation.observe_lease_object_count(count);
        }
        Ok(Some(PutOptions::new().with_lease(id)))
    }

    /// Get: always the latest value, then the minimum-resourceVersion check (before the
    /// existence check, so a too-large version on a missing key is too large, not missing).
    pub(crate) async fn get_object(&self, key: &str, options: &GetOptions) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        let etcd_key = prepared.as_str();
        let mut response = self
            .call(etcd_key, Operation::Get, |mut kv| async move {
                kv.get(etcd_key, None).await
            })
            .await?;
        let revision = response.header().map_or(0, |h| h.revision());
        self.layers.validate_minimum_resource_version(
            &prepared,
            &options.resource_version,
            revision,
        )?;
        let Some(kv) = response.take_kvs().into_iter().next() else {
            if options.ignore_not_found {
                return Ok(T::default());
            }
            return Err(StorageError::not_found(prepared));
        };
        let rev = kv.mod_revision();
        let (_, value) = kv.into_key_value();
        self.layers
            .decode_stored(&prepared, Bytes::from(value), rev)
    }

    /// Count: a count-only range over `key/`.
    pub(crate) async fn count_objects(&self, key: &str) -> Result<i64> {
        let prepared = as_directory(self.prepare_key(key)?);
        let options = EtcdGetOptions::new()
            .with_range(prefix_range_end(prepared.as_bytes()))
            .with_count_only();
        let etcd_key = prepared.as_str();
        let response = self
            .call(etcd_key, Operation::ListWithCount, |mut kv| {
                let options = options.clone();
                async move { kv.get(etcd_key, Some(options)).await }
            })
            .await?;
        Ok(response.count())
    }
}
