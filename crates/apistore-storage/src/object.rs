//! Object access: what the store needs to know about an object, whatever its type.
//!
//! kube-apiserver reaches into objects through `meta.Accessor`; here a small trait does
//! the same. It is implemented for [`DynamicObject`] (any JSON object with `apiVersion`,
//! `kind` and `metadata`) and, with the `k8s-openapi` feature, for every k8s-openapi
//! resource type, so `Pod` or `ConfigMap` can be stored directly.

use std::collections::BTreeMap;

use serde::Serialize;

/// Label or annotation map, ordered so that encodings are stable.
pub type Labels = BTreeMap<String, String>;

/// Field name/value pairs a field selector is evaluated against.
pub type Fields = BTreeMap<String, String>;

static EMPTY_LABELS: Labels = BTreeMap::new();

/// The annotation that marks the bookmark ending a watch's initial events.
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// Reading and writing the metadata fields the storage layer uses, whatever the
/// metadata type (kube-apiserver's `meta.Accessor`): [`ObjectMeta`] here, and with the
/// `k8s-openapi` feature k8s-openapi's `ObjectMeta`.
pub trait MetaAccessor {
    /// `name`.
    fn name(&self) -> &str;
    /// `namespace`, empty for cluster-scoped objects.
    fn namespace(&self) -> &str;
    /// `uid`.
    fn uid(&self) -> &str;
    /// `labels`.
    fn labels(&self) -> &Labels;
    /// `resourceVersion`, empty when unset.
    fn resource_version(&self) -> &str;
    /// Sets `resourceVersion`; an empty string clears it.
    fn set_resource_version(&mut self, resource_version: String);
    /// Clears `selfLink`.
    fn clear_self_link(&mut self);
    /// `annotations`, created when absent.
    fn annotations_mut(&mut self) -> &mut Labels;
}

impl MetaAccessor for ObjectMeta {
    fn name(&self) -> &str {
        &self.name
    }
    fn namespace(&self) -> &str {
        &self.namespace
    }
    fn uid(&self) -> &str {
        &self.uid
    }
    fn labels(&self) -> &Labels {
        &self.labels
    }
    fn resource_version(&self) -> &str {
        &self.resource_version
    }
    fn set_resource_version(&mut self, resource_version: String) {
        self.resource_version = resource_version;
    }
    fn clear_self_link(&mut self) {
        self.self_link.clear();
    }
    fn annotations_mut(&mut self) -> &mut Labels {
        &mut self.annotations
    }
}

/// Access to the metadata the storage layer reads and writes.
///
/// An implementation lends its metadata ([`Self::meta`], [`Self::meta_mut`], as
/// kube-core's `Resource`); the accessors the store calls are default methods over it.
/// The store reads the name, namespace, uid and labels (preconditions and selectors),
/// and sets the resourceVersion after every read and write. Implementations must keep
/// the resourceVersion in the object's serialised form so that a codec round trip keeps
/// it; the store clears it before encoding for etcd.
pub trait ApiObject {
    /// The object's metadata.
    fn meta(&self) -> &dyn MetaAccessor;
    /// The object's metadata, to change.
    fn meta_mut(&mut self) -> &mut dyn MetaAccessor;

    /// `metadata.name`.
    fn name(&self) -> &str {
        self.meta().name()
    }
    /// `metadata.namespace`, empty for cluster-scoped objects.
    fn namespace(&self) -> &str {
        self.meta().namespace()
    }
    /// `metadata.uid`.
    fn uid(&self) -> &str {
        self.meta().uid()
    }
    /// `metadata.labels`.
    fn labels(&self) -> &Labels {
        self.meta().labels()
    }
    /// `metadata.resourceVersion`, empty when unset.
    fn resource_version(&self) -> &str {
        self.meta().resource_version()
    }
    /// Sets `metadata.resourceVersion`; an empty string clears it.
    fn set_resource_version(&mut self, resource_version: String) {
        self.meta_mut().set_resource_version(resource_version);
    }
    /// Clears `metadata.selfLink` (never stored, as in kube-apiserver).
    fn clear_self_link(&mut self) {
        self.meta_mut().clear_self_link();
    }
    /// `metadata.annotations`, created when absent.
    fn annotations_mut(&mut self) -> &mut Labels {
        self.meta_mut().annotations_mut()
    }

    /// The fields a field selector can name. By default `metadata.name`, and
    /// `metadata.namespace` for namespaced objects, as kube-apiserver's default attribute
    /// function. Types with more selectable fields (`spec.nodeName` of a pod) add theirs.
    fn fields(&self) -> Fields {
        let mut fields = Fields::new();
        fields.insert("metadata.name".to_owned(), self.name().to_owned());
        if !self.namespace().is_empty() {
            fields.insert("metadata.namespace".to_owned(), self.namespace().to_owned());
        }
        fields
    }
}

/// Standard object metadata (`metav1.ObjectMeta`): the fields the store reads, plus any
/// other fields kept as they came.
///
/// `Deserialize` is written by hand (below, `mod de`), to the derived behaviour.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    /// Name, unique within a namespace.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Namespace; empty for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Unique id across time and space.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// The etcd mod revision of the object, as a decimal string.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Deprecated link to the object; never stored.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub self_link: String,
    /// A sequence number of the desired state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: Labels,
    /// Every other metadata field (creationTimestamp, ownerReferences, ...), untouched.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// Any API object: `apiVersion`, `kind`, `metadata`, and the rest as JSON.
///
/// `Deserialize` is written by hand (below, `mod de`), to the derived behaviour.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DynamicObject {
    /// `apiVersion`, e.g. `v1` or `example.com/v1`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// `kind`, e.g. `ConfigMap`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The object's metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// Every other top-level field (`spec`, `status`, `data`, ...).
    #[serde(flatten)]
    pub data: serde_json::Map<String, serde_json::Value>,
}

impl DynamicObject {
    /// A new object of the given apiVersion and kind, with a name.
    pub fn new(api_version: &str, kind: &str, name: &str) -> Self {
        Self {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            metadata: ObjectMeta {
                name: name.to_owned(),
                ..ObjectMeta::default()
            },
            data: serde_json::Map::new(),
        }
    }

    /// Sets the namespace (builder style).
    pub fn within(mut self, namespace: &str) -> Self {
        self.metadata.namespace = namespace.to_owned();
        self
    }

    /// Sets a top-level field (builder style).
    pub fn with(mut self, field: &str, value: serde_json::Value) -> Self {
        self.data.insert(field.to_owned(), value);
        self
    }

    /// The object a JSON object's members make, as `Deserialize` reads them, with
    /// every member but `apiVersion`, `kind` and `metadata` moved into `data` as it
    /// stands (`serde_json::from_value` would rebuild every map of the body).
    ///
    /// # Errors
    ///
    /// One of the three known members of the wrong type; the error names it.
    pub fn from_members(
        mut members: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, serde_json::Error> {
        fn take<T: Default + serde::de::DeserializeOwned>(
            members: &mut serde_json::Map<String, serde_json::Value>,
            name: &str,
        ) -> Result<T, serde_json::Error> {
            match members.remove(name) {
                Some(value) => T::deserialize(value).map_err(|e| {
                    <serde_json::Error as serde::de::Error>::custom(format!("{name}: {e}"))
                }),
                None => Ok(T::default()),
            }
        }
        let api_version = take(&mut members, "apiVersion")?;
        let kind = take(&mut members, "kind")?;
        let metadata = match members.remove("metadata") {
            Some(serde_json::Value::Object(meta)) => ObjectMeta::from_members(meta),
            Some(other) => serde::Deserialize::deserialize(other),
            None => Ok(ObjectMeta::default()),
        }
        .map_err(|e| <serde_json::Error as serde::de::Error>::custom(format!("metadata: {e}")))?;
        Ok(Self {
            api_version,
            kind,
            metadata,
            data: members,
        })
    }
}

impl ObjectMeta {
    /// The metadata a JSON object's members make, as `Deserialize` reads them, with
    /// every member it does not know (`managedFields`, `ownerReferences`, ...) moved
    /// into `extra` as it stands: `Deserialize` from a `Value` would rebuild each of
    /// those trees, which for a Pod's managedFields is most of the metadata's cost.
    ///
    /// # Errors
    ///
    /// A known member of the wrong type, refused with `Deserialize`'s own error.
    pub fn from_members(
        members: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Self, serde_json::Error> {
        use serde::Deserialize;
        use serde_json::Value;

        /// A string member moved out; anything else goes to `Deserialize` for its error.
        fn text(value: Value) -> Result<String, serde_json::Error> {
            match value {
                Value::String(s) => Ok(s),
                other => String::deserialize(other),
            }
        }
        /// A map of strings moved out member by member (the map's keys come sorted, so
        /// the new map is built in one pass); anything else goes to `Deserialize`.
        fn labels(value: Value) -> Result<Labels, serde_json::Error> {
            match value {
                Value::Object(map) if map.values().all(Value::is_string) => Ok(map
                    .into_iter()
                    .filter_map(|(k, v)| match v {
                        Value::String(s) => Some((k, s)),
                        _ => None,
                    })
                    .collect()),
                other => Labels::deserialize(other),
            }
        }

        let mut meta = Self::default();
        for (key, value) in members {
            match key.as_str() {
                "name" => meta.name = text(value)?,
                "namespace" => meta.namespace = text(value)?,
                "uid" => meta.uid = text(value)?,
                "resourceVersion" => meta.resource_version = text(value)?,
                "selfLink" => meta.self_link = text(value)?,
                "generation" => meta.generation = Option::<i64>::deserialize(value)?,
                "labels" => meta.labels = labels(value)?,
                "annotations" => meta.annotations = labels(value)?,
                _ => {
                    meta.extra.insert(key, value);
                }
            }
        }
        Ok(meta)
    }
}

impl ApiObject for DynamicObject {
    fn meta(&self) -> &dyn MetaAccessor {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        &mut self.metadata
    }
}

mod de;

#[cfg(feature = "k8s-openapi")]
mod k8s;

// Silence the unused warning when the k8s-openapi feature is off: the empty map is only
// needed to lend out labels of types whose label map is optional.
#[cfg(not(feature = "k8s-openapi"))]
const _: &Labels = &EMPTY_LABELS;

#[cfg(test)]
mod tests;
