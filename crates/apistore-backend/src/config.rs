//! What every store of one resource is configured with, whatever keeps its bytes, and
//! the key scope it makes.
//!
//! The etcd3 store's `StoreConfig` adds what only etcd has (leases, request deadlines,
//! how long a watch waits for a member); the memory store's config is this core and
//! nothing more. One core means a new knob of the storage layer (a kube version, a
//! feature gate) reaches every backend the same way.

use std::sync::Arc;

use apistore_storage::{KubeVersion, Result, StorageError, key_prefix::within};

use crate::key::{as_directory, path_prefix, prepare_key};

/// The configuration every backend's store of one resource takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceConfig {
    /// The prefix every key is stored under (kube-apiserver's `--etcd-prefix`, default
    /// `/registry`).
    pub prefix: String,
    /// The group-resource string of the objects (`pods`, `deployments.apps`), used in
    /// metrics and spans.
    pub group_resource: String,
    /// The key, relative to the prefix, under which all objects of this resource live
    /// (`/pods`); read for the current revision by watches that need it.
    pub resource_prefix: String,
    /// kube-apiserver's `WatchList` feature gate (off by default, as in v0.31.1; see
    /// [`watch_list_default`] for each kube minor's default, which the facade follows):
    /// with it, `sendInitialEvents` asks a watch for the current state followed by a
    /// bookmark that ends the initial events.
    pub watch_list: bool,
    /// Refuse keys outside `resource_prefix` (an invalid key error) instead of storing
    /// objects where kube-apiserver would never look for this resource. kube's own store
    /// trusts its registry to build keys; the facade's stores take keys from callers.
    pub confine_keys: bool,
    /// The kube version whose storage layer to behave as where kube versions differ
    /// (default the newest apistore knows).
    pub kube_version: KubeVersion,
    /// kube-apiserver's `AllowUnsafeMalformedObjectDeletion` feature gate; `None` takes
    /// the kube version's default (alpha and off in 1.32–1.36, on from 1.37). With it, a
    /// list goes past values that cannot be decrypted or decoded and fails at its end
    /// naming up to 100 of them ([`StorageError::StoreRead`]), and a watch that sees one
    /// deleted ends with a `StoreReadError` event; without it, both fail at the first.
    /// [`apistore_storage::DeleteOptions::expect_transform_or_decode_error`] is honoured
    /// either way: kube ignores it with the gate off, but a caller that sets it asks
    /// for it explicitly.
    pub allow_unsafe_malformed_object_deletion: Option<bool>,
}

impl Default for ResourceConfig {
    fn default() -> Self {
        Self {
            prefix: "/registry".to_owned(),
            group_resource: String::new(),
            resource_prefix: String::new(),
            watch_list: false,
            confine_keys: false,
            kube_version: KubeVersion::LATEST,
            allow_unsafe_malformed_object_deletion: None,
        }
    }
}

impl ResourceConfig {
    /// A config for one resource under `/registry`: `resource` is the group-resource
    /// string and, with a leading `/`, the resource prefix.
    pub fn for_resource(resource: &str) -> Self {
        Self {
            group_resource: resource.to_owned(),
            resource_prefix: format!("/{resource}"),
            ..Self::default()
        }
    }

    /// Whether kube's `AllowUnsafeMalformedObjectDeletion` behaviour is on: as set, else
    /// the kube version's default (on from 1.37).
    pub fn unsafe_malformed_object_deletion(&self) -> bool {
        self.allow_unsafe_malformed_object_deletion
            .unwrap_or(self.kube_version >= KubeVersion::V1_37)
    }

    /// The group-resource corrupt objects are reported for when
    /// [`Self::unsafe_malformed_object_deletion`] is on, for
    /// [`crate::ObjectLayers::set_unsafe_malformed_object_deletion`].
    pub fn corrupt_object_reporting(&self) -> Option<Arc<str>> {
        self.unsafe_malformed_object_deletion()
            .then(|| Arc::from(self.group_resource.as_str()))
    }

    /// The key scope of a store with this config.
    pub fn key_scope(&self) -> KeyScope {
        KeyScope {
            path_prefix: path_prefix(&self.prefix).into(),
            resource_prefix: self.resource_prefix.as_str().into(),
            group_resource: self.group_resource.as_str().into(),
            confine_keys: self.confine_keys,
        }
    }
}

/// Where one store's keys live: its normalised path prefix, its resource prefix and
/// whether keys must lie under it. Cheap to clone (shared strings).
#[derive(Debug, Clone)]
pub struct KeyScope {
    path_prefix: Arc<str>,
    resource_prefix: Arc<str>,
    group_resource: Arc<str>,
    confine_keys: bool,
}

impl KeyScope {
    /// The stored key a caller's key maps to, after validation: refused when outside
    /// the resource prefix of a confined store, then as [`prepare_key`].
    pub fn prepare_key(&self, key: &str) -> Result<String> {
        if self.confine_keys && !within(key, &self.resource_prefix) {
            return Err(StorageError::InvalidKey {
                key: key.to_owned(),
                problem: "key outside the resource prefix of this store",
            });
        }
        prepare_key(&self.path_prefix, key)
    }

    /// The stored key of the resource prefix as a directory (`/registry/pods/`): where
    /// every object of the store lies, for counts and stats over all of them.
    pub fn resource_directory(&self) -> Result<String> {
        Ok(as_directory(prepare_key(
            &self.path_prefix,
            &self.resource_prefix,
        )?))
    }

    /// The normalised path prefix every key is joined to (`/registry/`).
    pub fn path_prefix(&self) -> &str {
        &self.path_prefix
    }

    /// The key, relative to the prefix, under which the store's objects live.
    pub fn resource_prefix(&self) -> &str {
        &self.resource_prefix
    }

    /// The group-resource string of the store.
    pub fn group_resource(&self) -> &str {
        &self.group_resource
    }

    /// The group-resource string, shared.
    pub fn group_resource_arc(&self) -> &Arc<str> {
        &self.group_resource
    }
}

/// kube-apiserver's default of its `WatchList` feature gate at `version`: off at 1.31
/// (alpha), on at 1.32 (beta), off again at 1.33, on from 1.34. The rule lives in
/// [`KubeVersion::watch_list_default`], where the watch cache's configuration reads it
/// too; this stays for callers of the backend layer.
pub fn watch_list_default(version: KubeVersion) -> bool {
    version.watch_list_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_watch_list_gate_defaults_as_kube_features_go_says() {
        let on: Vec<_> = KubeVersion::ALL
            .iter()
            .filter(|v| super::watch_list_default(**v))
            .map(|v| v.minor())
            .collect();
        assert_eq!(on, [32, 34, 35, 36, 37]);
    }

    use super::*;

    #[test]
    fn confined_scopes_refuse_keys_of_other_resources() {
        let mut config = ResourceConfig::for_resource("configmaps");
        let open = config.key_scope();
        assert_eq!(
            open.prepare_key("/secrets/ns/a").unwrap(),
            "/registry/secrets/ns/a"
        );
        config.confine_keys = true;
        let confined = config.key_scope();
        assert_eq!(
            confined.prepare_key("/configmaps/ns/a").unwrap(),
            "/registry/configmaps/ns/a"
        );
        for key in ["/secrets/ns/a", "/configmapsx/ns/a"] {
            let err = confined.prepare_key(key).unwrap_err();
            assert_eq!(err.key(), key);
            assert!(
                err.to_string().contains("outside the resource prefix"),
                "{err}"
            );
        }
        // Validation still applies inside the prefix.
        assert!(confined.prepare_key("/configmaps/../secrets/a").is_err());
    }

    #[test]
    fn for_resource_names_the_prefix_and_the_group_resource() {
        let scope = ResourceConfig::for_resource("deployments.apps").key_scope();
        assert_eq!(scope.path_prefix(), "/registry/");
        assert_eq!(scope.resource_prefix(), "/deployments.apps");
        assert_eq!(scope.group_resource(), "deployments.apps");
    }
}
