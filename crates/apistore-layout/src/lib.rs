//! kube-apiserver's storage layout: where each resource lives in etcd, and how.
//!
//! kube-apiserver keeps an object of GroupResource `gr` at
//! `<--etcd-prefix>/<key prefix of gr>/<namespace>/<name>` (no namespace segment for
//! cluster-scoped resources), encoded as its storage version in its storage media type.
//! This crate is that knowledge as one table ([`StorageLayout::kube_1_31`]), used by the
//! facade (to put a typed or dynamic store's objects where kube-apiserver does) and by
//! the command (to map a key back to its GroupResource, and so to the encryption
//! configuration's transformer and the codec kube-apiserver would use). It knows no
//! backend and no codec: it only says where and in which encoding.
//!
//! ```
//! use apistore_layout::{StorageEncoding, StorageLayout};
//!
//! let layout = StorageLayout::kube_1_31();
//! let nodes = layout.resource("nodes");
//! assert_eq!(nodes.key_prefix, "minions");
//! assert_eq!(nodes.key("", "node-1"), "minions/node-1");
//! let widgets = layout.resolve_key("example.com/widgets/default/w1").unwrap();
//! assert_eq!(widgets.group_resource.to_string(), "widgets.example.com");
//! assert_eq!(widgets.encoding, StorageEncoding::Json);
//! ```

mod table;

use std::fmt;

pub use apistore_storage::GroupResource;
use apistore_storage::key_prefix::lies_under;

use crate::table::{KUBE_1_31, NON_OBJECT_KEYS, Row};

/// How kube-apiserver encodes a resource's objects in etcd.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StorageEncoding {
    /// `application/vnd.kubernetes.protobuf`: `k8s\0` and a `runtime.Unknown` message
    /// (kube-apiserver's default `--storage-media-type` for every built-in type).
    Protobuf,
    /// `application/json` (custom resources always; the embedded apiextensions and
    /// aggregator servers for their own objects).
    Json,
}

impl fmt::Display for StorageEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Protobuf => "protobuf",
            Self::Json => "json",
        })
    }
}

/// Where and how one resource is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLayout {
    /// The resource and its group (`deployments.apps`).
    pub group_resource: GroupResource,
    /// The key prefix relative to `--etcd-prefix`, without slashes at either end
    /// (`deployments`, `services/specs`, `example.com/widgets`).
    pub key_prefix: String,
    /// The encoding kube-apiserver writes.
    pub encoding: StorageEncoding,
    /// What the layout knows about the resource beyond where it lives: `None` for a
    /// resource outside kube-apiserver's own (a custom resource, or one served by an
    /// aggregated API server).
    pub built_in: Option<BuiltIn>,
}

/// What kube-apiserver itself says about one of its resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltIn {
    /// The apiVersion objects are stored as (`apps/v1`, `autoscaling/v2`).
    pub api_version: &'static str,
    /// The kind objects are stored as (`Deployment`).
    pub kind: &'static str,
    /// Whether objects have a namespace segment in their key.
    pub namespaced: bool,
}

impl ResourceLayout {
    /// The key (relative to `--etcd-prefix`) of one object: `<key prefix>/<namespace>/<name>`,
    /// or `<key prefix>/<name>` when `namespace` is empty.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        let mut key =
            String::with_capacity(self.key_prefix.len() + namespace.len() + name.len() + 2);
        key.push_str(&self.key_prefix);
        if !namespace.is_empty() {
            key.push('/');
            key.push_str(namespace);
        }
        key.push('/');
        key.push_str(name);
        key
    }

    /// Whether `key` (relative to `--etcd-prefix`, one leading `/` allowed) is this
    /// resource's prefix itself or lies under it.
    pub fn contains_key(&self, key: &str) -> bool {
        lies_under(key.strip_prefix('/').unwrap_or(key), &self.key_prefix)
    }

    fn from_row(row: &Row) -> Self {
        Self {
            group_resource: GroupResource::new(row.group, row.resource),
            key_prefix: row.key_prefix.to_owned(),
            encoding: row.encoding,
            built_in: Some(BuiltIn {
                api_version: row.api_version,
                kind: row.kind,
                namespaced: row.namespaced,
            }),
        }
    }

    /// A resource kube-apiserver does not serve itself: stored at `<group>/<resource>`
    /// as JSON, as the apiextensions server stores custom resources (and
    /// kube's generic `SimpleRestOptionsFactory` lays out an aggregated server's).
    fn custom(group_resource: GroupResource) -> Self {
        let key_prefix = if group_resource.group.is_empty() {
            group_resource.resource.clone()
        } else {
            format!("{}/{}", group_resource.group, group_resource.resource)
        };
        Self {
            group_resource,
            key_prefix,
            encoding: StorageEncoding::Json,
            built_in: None,
        }
    }
}

/// Why a key or resource has no place in the layout.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    /// The key is one kube-apiserver keeps for itself, not an API object.
    #[error("key {key:?} is kube-apiserver's own bookkeeping ({what}), not an API object")]
    NotAnObject {
        /// The key.
        key: String,
        /// Which bookkeeping key it is under.
        what: &'static str,
    },
    /// The key matches no resource kube-apiserver serves and is not shaped like a
    /// custom resource's key (`<group with a dot>/<plural>/...`).
    #[error(
        "key {key:?} is not under any resource kube-apiserver stores, nor shaped like a custom \
         resource's key (<group>/<plural>/...); name its resource explicitly (--resource GROUP_RESOURCE)"
    )]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// The key names a custom resource group but no resource in it.
    #[error("key {key:?} names the group {group:?} but no resource in it (<group>/<plural>/...)")]
    GroupWithoutResource {
        /// The key.
        key: String,
        /// The group it names.
        group: String,
    },
}

/// The table of a kube-apiserver version: lookups by GroupResource and by key.
#[derive(Debug, Clone, Copy)]
pub struct StorageLayout {
    rows: &'static [Row],
}

impl StorageLayout {
    /// kube-apiserver 1.31's layout with its default storage media type.
    pub const fn kube_1_31() -> Self {
        Self { rows: KUBE_1_31 }
    }

    /// Every built-in resource, in table order.
    pub fn built_ins(&self) -> impl Iterator<Item = ResourceLayout> + '_ {
        self.rows.iter().map(ResourceLayout::from_row)
    }

    /// The built-in resource of a GroupResource, if kube-apiserver serves it.
    pub fn built_in(&self, group_resource: &GroupResource) -> Option<ResourceLayout> {
        self.rows
            .iter()
            .find(|row| {
                row.group == group_resource.group && row.resource == group_resource.resource
            })
            .map(ResourceLayout::from_row)
    }

    /// Where a resource lives, for a group-resource written as kube writes it
    /// (`pods`, `deployments.apps`, `widgets.example.com`). A resource kube-apiserver
    /// does not serve is laid out as a custom resource: `<group>/<plural>`, JSON.
    pub fn resource(&self, group_resource: &str) -> ResourceLayout {
        let group_resource = GroupResource::parse(group_resource);
        self.built_in(&group_resource)
            .unwrap_or_else(|| ResourceLayout::custom(group_resource))
    }

    /// The resource a key (relative to `--etcd-prefix`) belongs to: the built-in whose
    /// key prefix it lies under (the longest, so `services/endpoints` is endpoints, not
    /// services), else a custom resource when its first segment is a group (it has a
    /// dot) and a plural follows. Keys of kube-apiserver's bookkeeping and keys of no
    /// resource are errors that say so.
    pub fn resolve_key(&self, key: &str) -> Result<ResourceLayout, LayoutError> {
        let relative = key.trim_start_matches('/');
        if let Some(what) = NON_OBJECT_KEYS
            .iter()
            .find(|prefix| lies_under(relative, prefix))
        {
            return Err(LayoutError::NotAnObject {
                key: key.to_owned(),
                what,
            });
        }
        // events.k8s.io events share the core prefix: the core row comes first and wins.
        let built_in = self
            .rows
            .iter()
            .filter(|row| lies_under(relative, row.key_prefix))
            .fold(None::<&Row>, |best, row| match best {
                Some(best) if best.key_prefix.len() >= row.key_prefix.len() => Some(best),
                _ => Some(row),
            });
        if let Some(row) = built_in {
            return Ok(ResourceLayout::from_row(row));
        }
        let mut segments = relative.split('/');
        let group = segments.next().unwrap_or_default();
        if !group.contains('.') {
            return Err(LayoutError::UnknownKey {
                key: key.to_owned(),
            });
        }
        match segments.next().filter(|plural| !plural.is_empty()) {
            Some(plural) => Ok(ResourceLayout::custom(GroupResource::new(group, plural))),
            None => Err(LayoutError::GroupWithoutResource {
                key: key.to_owned(),
                group: group.to_owned(),
            }),
        }
    }
}

impl StorageLayout {
    /// kube-apiserver's layout of one kube minor, with its default storage media type.
    pub fn for_kube(version: apistore_storage::KubeVersion) -> Self {
        // Every minor KubeVersion names has a generated table (a test checks it).
        Self::for_kube_minor(version.minor()).unwrap_or_else(Self::kube_1_31)
    }
}

impl Default for StorageLayout {
    fn default() -> Self {
        Self::kube_1_31()
    }
}

#[cfg(test)]
mod tests;
