//! The object both arms store: a small typed object with standard metadata and a
//! payload sized so that its JSON is 1 KiB, decoded by both arms into this same type.

use apistore_storage::{ApiObject, Labels, MetaAccessor, ObjectMeta};
use serde::{Deserialize, Serialize};

/// The resource the bench objects are stored as (`/registry/benchobjects/...`).
pub(crate) const RESOURCE: &str = "benchobjects";
/// The etcd prefix the store joins keys to.
pub(crate) const ETCD_PREFIX: &str = "/registry/";
/// The size of an object's JSON encoding (as stored: no resourceVersion).
pub(crate) const OBJECT_SIZE: usize = 1024;
/// The length of every object name ([`object_name`]).
pub(crate) const NAME_LEN: usize = 12;

/// A bench object: pod-shaped metadata and an opaque 1 KiB spec.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BenchObject {
    /// `bench.apistore.dev/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) api_version: String,
    /// `BenchObject`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub(crate) kind: String,
    /// Standard metadata.
    #[serde(default)]
    pub(crate) metadata: ObjectMeta,
    /// The spec.
    #[serde(default)]
    pub(crate) spec: BenchSpec,
}

/// The spec: a counter the update workload bumps and filler.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BenchSpec {
    /// Bumped by every guaranteed update, so that every update writes.
    #[serde(default)]
    pub(crate) counter: u64,
    /// Filler bringing the encoding to [`OBJECT_SIZE`].
    #[serde(default)]
    pub(crate) payload: String,
}

impl BenchObject {
    /// A template object in `namespace`; [`Self::named`] gives it a name.
    ///
    /// The payload is sized for a name of `name_len` bytes, so that objects named like
    /// that encode to exactly [`OBJECT_SIZE`] bytes.
    pub(crate) fn template(namespace: &str, name_len: usize) -> Self {
        let mut labels = Labels::new();
        labels.insert("app".to_owned(), "bench".to_owned());
        labels.insert("tier".to_owned(), "storage".to_owned());
        let mut extra = serde_json::Map::new();
        extra.insert(
            "creationTimestamp".to_owned(),
            serde_json::Value::String("2024-09-12T10:00:00Z".to_owned()),
        );
        let mut object = Self {
            api_version: "bench.apistore.dev/v1".to_owned(),
            kind: "BenchObject".to_owned(),
            metadata: ObjectMeta {
                name: "x".repeat(name_len),
                namespace: namespace.to_owned(),
                uid: "6c3b1f4e-2a57-4f1e-9d0c-2b7e8a9f0c11".to_owned(),
                labels,
                extra,
                ..ObjectMeta::default()
            },
            spec: BenchSpec::default(),
        };
        let bare = serde_json::to_vec(&object).map_or(0, |v| v.len());
        object.spec.payload = "p".repeat(OBJECT_SIZE.saturating_sub(bare));
        object
    }

    /// A copy of this template named `name`.
    pub(crate) fn named(&self, name: String) -> Self {
        let mut object = self.clone();
        object.metadata.name = name;
        object
    }
}

impl ApiObject for BenchObject {
    fn meta(&self) -> &dyn MetaAccessor {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        &mut self.metadata
    }
}

/// A name of [`NAME_LEN`] bytes: a tag letter, the caller and a sequence number.
pub(crate) fn object_name(tag: char, caller: usize, seq: u64) -> String {
    format!("{tag}{:02}-{:08}", caller % 100, seq % 100_000_000)
}

/// The store key of an object (relative to the store's prefix).
pub(crate) fn store_key(namespace: &str, name: &str) -> String {
    format!("{RESOURCE}/{namespace}/{name}")
}

/// The etcd key of an object, as the store prepares it.
pub(crate) fn etcd_key(namespace: &str, name: &str) -> String {
    format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/{name}")
}

/// The etcd prefix of every object in a namespace (a recursive list's range start).
pub(crate) fn etcd_namespace_prefix(namespace: &str) -> String {
    format!("{ETCD_PREFIX}{RESOURCE}/{namespace}/")
}

/// The store key of a namespace (what a recursive list or watch is given).
pub(crate) fn store_namespace_key(namespace: &str) -> String {
    format!("{RESOURCE}/{namespace}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_encode_to_one_kib() {
        let template = BenchObject::template("bench", NAME_LEN);
        let object = template.named(object_name('c', 3, 42));
        assert_eq!(object.metadata.name.len(), NAME_LEN);
        assert_eq!(serde_json::to_vec(&object).unwrap().len(), OBJECT_SIZE);
    }
}
