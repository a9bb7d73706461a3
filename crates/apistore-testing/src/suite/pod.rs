//! The object the conformance suite stores: a pod-shaped type like kube-apiserver's
//! `example.Pod`, with `spec.nodeName` as an extra selectable field.

use apistore_storage::{ApiObject, Fields, MetaAccessor, ObjectMeta};
use serde::{Deserialize, Serialize};

/// A pod, as far as the conformance suite cares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    /// `v1` when set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `Pod` when set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// Standard metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec.
    #[serde(default)]
    pub spec: PodSpec,
}

/// The part of a pod spec the suite uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    /// The node the pod runs on; selectable as `spec.nodeName`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub node_name: String,
}

impl Pod {
    /// A pod with a name in a namespace (empty for none).
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            metadata: ObjectMeta {
                name: name.to_owned(),
                namespace: namespace.to_owned(),
                ..ObjectMeta::default()
            },
            ..Self::default()
        }
    }

    /// Sets the uid (builder style).
    pub fn with_uid(mut self, uid: &str) -> Self {
        self.metadata.uid = uid.to_owned();
        self
    }

    /// Adds a label (builder style).
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.metadata
            .labels
            .insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets `spec.nodeName` (builder style).
    pub fn on_node(mut self, node: &str) -> Self {
        self.spec.node_name = node.to_owned();
        self
    }

    /// The store key of this pod: `/pods/<namespace>/<name>`, as the reference's
    /// `computePodKey` (an empty namespace gives `/pods//<name>`).
    pub fn key(&self) -> String {
        format!("/pods/{}/{}", self.metadata.namespace, self.metadata.name)
    }
}

impl ApiObject for Pod {
    fn meta(&self) -> &dyn MetaAccessor {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        &mut self.metadata
    }
    fn fields(&self) -> Fields {
        let mut fields = Fields::new();
        fields.insert("metadata.name".to_owned(), self.metadata.name.clone());
        fields.insert(
            "metadata.namespace".to_owned(),
            self.metadata.namespace.clone(),
        );
        fields.insert("spec.nodeName".to_owned(), self.spec.node_name.clone());
        fields
    }
}
