//! Typed stores that cannot go astray: a k8s-openapi type knows its group, version and
//! plural, so `api.typed::<ConfigMap>()` finds its resource without a string to
//! mistype, as kube-rs's `Api::<K>` does. Only with the `k8s-openapi` feature.
//!
//! ```no_run
//! use apistore::{ApiStore, StoreExt};
//! use k8s_openapi::api::core::v1::ConfigMap;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let api = ApiStore::builder().build().await?;
//! let configmaps = api.typed::<ConfigMap>().await?;
//! let cm = configmaps.namespaced("default").get("cm1").await?;
//! # let _ = cm; Ok(()) }
//! ```

use apistore_storage::{ApiObject, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[cfg(feature = "memory")]
use crate::MemoryApiStore;
use crate::{ApiStore, ResourceStore};

/// The group-resource string of a k8s-openapi type: `configmaps`, `deployments.apps`,
/// `ingresses.networking.k8s.io`.
pub fn group_resource_of<K: k8s_openapi::Resource>() -> String {
    if K::GROUP.is_empty() {
        K::URL_PATH_SEGMENT.to_owned()
    } else {
        format!("{}.{}", K::URL_PATH_SEGMENT, K::GROUP)
    }
}

/// A k8s-openapi resource type a store can hold: every k8s-openapi resource type with
/// apistore's `ApiObject` (the `k8s-openapi` feature implements it for all of them).
pub trait TypedResource:
    k8s_openapi::Resource
    + ApiObject
    + Clone
    + Default
    + Send
    + Sync
    + Serialize
    + DeserializeOwned
    + 'static
{
}

impl<K> TypedResource for K where
    K: k8s_openapi::Resource
        + ApiObject
        + Clone
        + Default
        + Send
        + Sync
        + Serialize
        + DeserializeOwned
        + 'static
{
}

impl ApiStore {
    /// The store of a k8s-openapi type's resource, as [`ApiStore::resource_store`] with
    /// the group-resource the type gives ([`group_resource_of`]).
    ///
    /// # Errors
    ///
    /// A type whose resource the chosen kube version does not store (one added by a
    /// later kube), or the watch cache's first list.
    pub async fn typed<K>(&self) -> Result<ResourceStore<K>>
    where
        K: TypedResource,
    {
        self.resource_store(&group_resource_of::<K>()).await
    }
}

#[cfg(feature = "memory")]
impl MemoryApiStore {
    /// The in-memory store of a k8s-openapi type's resource, as [`ApiStore::typed`].
    ///
    /// # Errors
    ///
    /// A type whose resource the chosen kube version does not store.
    pub async fn typed<K>(&self) -> Result<ResourceStore<K>>
    where
        K: TypedResource,
    {
        self.resource_store(&group_resource_of::<K>()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{ConfigMap, Node};
    use k8s_openapi::api::networking::v1::Ingress;

    #[test]
    fn group_resources_come_from_the_type() {
        assert_eq!(group_resource_of::<ConfigMap>(), "configmaps");
        assert_eq!(group_resource_of::<Node>(), "nodes");
        assert_eq!(group_resource_of::<Deployment>(), "deployments.apps");
        assert_eq!(
            group_resource_of::<Ingress>(),
            "ingresses.networking.k8s.io"
        );
    }
}
