//! A store of `LazyObject`s (kube protobuf through `LazyCodec`, kube 1.37) under a
//! prefix of its own in the shared test etcd: for the etcd3 store's and the watch
//! cache's tests of the lazy representation.

use std::sync::Arc;

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig};
use apistore_protobuf::{LazyCodec, LazyObject, MediaType};
use apistore_storage::KubeVersion;
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use apistore_value::{IdentityTransformer, Transformer};

/// The store, and the endpoint of the etcd it is on (for raw access).
pub(crate) async fn lazy_store(test: &str) -> (Etcd3Store<LazyObject>, String) {
    lazy_store_with(test, Arc::new(IdentityTransformer)).await
}

/// [`lazy_store`] with its values passing through `transformer`.
pub(crate) async fn lazy_store_with(
    test: &str,
    transformer: Arc<dyn Transformer>,
) -> (Etcd3Store<LazyObject>, String) {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    let endpoint = endpoint.split(',').next().unwrap_or_default().to_owned();
    let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()]))
        .await
        .unwrap_or_else(|err| panic!("connect to test etcd at {endpoint}: {err}"));
    let config = StoreConfig {
        resource: ResourceConfig {
            prefix: unique_prefix(test),
            kube_version: KubeVersion::V1_37,
            ..ResourceConfig::for_resource("pods")
        },
        ..StoreConfig::default()
    };
    let store = Etcd3Store::with_parts(
        client,
        config,
        Arc::new(LazyCodec::for_kube(MediaType::Protobuf, KubeVersion::V1_37)),
        transformer,
    );
    (store, endpoint)
}
