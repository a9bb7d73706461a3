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

/// `Deserialize` for [`DynamicObject`] and [`ObjectMeta`] by hand, with what
/// `#[serde(flatten)]` would do and none of its cost.
///
/// Derived, a flattened map makes serde buffer every field it does not know (a Pod's
/// whole `spec` and `status`) into its private `Content` tree first and only then build
/// the `serde_json::Value`s from that tree: each such field is built twice. Here the
/// known fields go to their types and every other field straight into a `Value`, as the
/// derived code's result would hold it: the same map, `default` for absent fields,
/// `duplicate field` for a known field given twice, the last of repeated other fields.
mod de {
    use std::fmt;

    use serde::de::{self, Deserialize, Deserializer, MapAccess, Visitor};
    use serde_json::{Map, Value};

    use super::{DynamicObject, Labels, ObjectMeta};

    /// A field name: one of `KNOWN` by index, or any other, owned for the map.
    enum Key {
        Known(usize),
        Other(String),
    }

    /// Reads a [`Key`] against a list of known names.
    struct KeySeed(&'static [&'static str]);

    impl<'de> de::DeserializeSeed<'de> for KeySeed {
        type Value = Key;

        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
            deserializer.deserialize_identifier(self)
        }
    }

    impl Visitor<'_> for KeySeed {
        type Value = Key;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a field name")
        }

        fn visit_str<E: de::Error>(self, name: &str) -> Result<Key, E> {
            Ok(match self.0.iter().position(|known| *known == name) {
                Some(index) => Key::Known(index),
                None => Key::Other(name.to_owned()),
            })
        }

        fn visit_string<E: de::Error>(self, name: String) -> Result<Key, E> {
            Ok(match self.0.iter().position(|known| *known == name) {
                Some(index) => Key::Known(index),
                None => Key::Other(name),
            })
        }

        fn visit_bytes<E: de::Error>(self, name: &[u8]) -> Result<Key, E> {
            match std::str::from_utf8(name) {
                Ok(name) => self.visit_str(name),
                Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(name), &self)),
            }
        }
    }

    /// Sets a known field once; a second time is serde's `duplicate field` error.
    fn once<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
        map: &mut A,
        slot: &mut Option<T>,
        name: &'static str,
    ) -> Result<(), A::Error> {
        if slot.is_some() {
            return Err(de::Error::duplicate_field(name));
        }
        *slot = Some(map.next_value()?);
        Ok(())
    }

    const OBJECT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

    impl<'de> Deserialize<'de> for DynamicObject {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct ObjectVisitor;

            impl<'de> Visitor<'de> for ObjectVisitor {
                type Value = DynamicObject;

                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("struct DynamicObject")
                }

                fn visit_map<A: MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<DynamicObject, A::Error> {
                    let (mut api_version, mut kind, mut metadata) = (None, None, None);
                    let mut data = Map::new();
                    while let Some(key) = map.next_key_seed(KeySeed(OBJECT_FIELDS))? {
                        match key {
                            Key::Known(0) => once(&mut map, &mut api_version, "apiVersion")?,
                            Key::Known(1) => once(&mut map, &mut kind, "kind")?,
                            Key::Known(_) => once(&mut map, &mut metadata, "metadata")?,
                            Key::Other(name) => {
                                data.insert(name, map.next_value::<Value>()?);
                            }
                        }
                    }
                    Ok(DynamicObject {
                        api_version: api_version.unwrap_or_default(),
                        kind: kind.unwrap_or_default(),
                        metadata: metadata.unwrap_or_default(),
                        data,
                    })
                }
            }

            deserializer.deserialize_map(ObjectVisitor)
        }
    }

    const META_FIELDS: &[&str] = &[
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "selfLink",
        "generation",
        "labels",
        "annotations",
    ];

    impl<'de> Deserialize<'de> for ObjectMeta {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct MetaVisitor;

            impl<'de> Visitor<'de> for MetaVisitor {
                type Value = ObjectMeta;

                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("struct ObjectMeta")
                }

                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ObjectMeta, A::Error> {
                    let (mut name, mut namespace, mut uid, mut resource_version, mut self_link) =
                        (None, None, None, None, None);
                    let mut generation: Option<Option<i64>> = None;
                    let (mut labels, mut annotations): (Option<Labels>, Option<Labels>) =
                        (None, None);
                    let mut extra = Map::new();
                    while let Some(key) = map.next_key_seed(KeySeed(META_FIELDS))? {
                        match key {
                            Key::Known(0) => once(&mut map, &mut name, "name")?,
                            Key::Known(1) => once(&mut map, &mut namespace, "namespace")?,
                            Key::Known(2) => once(&mut map, &mut uid, "uid")?,
                            Key::Known(3) => {
                                once(&mut map, &mut resource_version, "resourceVersion")?;
                            }
                            Key::Known(4) => once(&mut map, &mut self_link, "selfLink")?,
                            Key::Known(5) => once(&mut map, &mut generation, "generation")?,
                            Key::Known(6) => once(&mut map, &mut labels, "labels")?,
                            Key::Known(_) => once(&mut map, &mut annotations, "annotations")?,
                            Key::Other(field) => {
                                extra.insert(field, map.next_value::<Value>()?);
                            }
                        }
                    }
                    Ok(ObjectMeta {
                        name: name.unwrap_or_default(),
                        namespace: namespace.unwrap_or_default(),
                        uid: uid.unwrap_or_default(),
                        resource_version: resource_version.unwrap_or_default(),
                        self_link: self_link.unwrap_or_default(),
                        generation: generation.flatten(),
                        labels: labels.unwrap_or_default(),
                        annotations: annotations.unwrap_or_default(),
                        extra,
                    })
                }
            }

            deserializer.deserialize_map(MetaVisitor)
        }
    }
}

#[cfg(feature = "k8s-openapi")]
mod k8s {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta as K8sMeta;

    use super::{ApiObject, EMPTY_LABELS, Labels, MetaAccessor};

    impl MetaAccessor for K8sMeta {
        fn name(&self) -> &str {
            self.name.as_deref().unwrap_or_default()
        }
        fn namespace(&self) -> &str {
            self.namespace.as_deref().unwrap_or_default()
        }
        fn uid(&self) -> &str {
            self.uid.as_deref().unwrap_or_default()
        }
        fn labels(&self) -> &Labels {
            self.labels.as_ref().unwrap_or(&EMPTY_LABELS)
        }
        fn resource_version(&self) -> &str {
            self.resource_version.as_deref().unwrap_or_default()
        }
        fn set_resource_version(&mut self, resource_version: String) {
            self.resource_version = (!resource_version.is_empty()).then_some(resource_version);
        }
        fn clear_self_link(&mut self) {
            self.self_link = None;
        }
        fn annotations_mut(&mut self) -> &mut Labels {
            self.annotations.get_or_insert_with(Labels::new)
        }
    }

    /// Every k8s-openapi resource type is an object the store can keep.
    impl<K> ApiObject for K
    where
        K: k8s_openapi::Metadata<Ty = K8sMeta>,
    {
        fn meta(&self) -> &dyn MetaAccessor {
            self.metadata()
        }
        fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
            self.metadata_mut()
        }
    }
}

// Silence the unused warning when the k8s-openapi feature is off: the empty map is only
// needed to lend out labels of types whose label map is optional.
#[cfg(not(feature = "k8s-openapi"))]
const _: &Labels = &EMPTY_LABELS;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dynamic_object_keeps_unknown_fields_through_a_round_trip() {
        let json = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns","creationTimestamp":"2024-01-01T00:00:00Z","labels":{"a":"b"}},"data":{"k":"v"}}"#;
        let obj: DynamicObject = serde_json::from_str(json).unwrap();
        assert_eq!(obj.name(), "cm");
        assert_eq!(obj.namespace(), "ns");
        assert_eq!(obj.labels().get("a").map(String::as_str), Some("b"));
        let back: serde_json::Value = serde_json::to_value(&obj).unwrap();
        let orig: serde_json::Value = serde_json::from_str(json).unwrap();
        assert_eq!(back, orig);
    }

    use serde::Deserialize;

    /// The derived, flattened shape the hand-written `Deserialize` follows.
    #[derive(Debug, Default, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct DerivedMeta {
        #[serde(default)]
        name: String,
        #[serde(default)]
        namespace: String,
        #[serde(default)]
        uid: String,
        #[serde(default)]
        resource_version: String,
        #[serde(default)]
        self_link: String,
        #[serde(default)]
        generation: Option<i64>,
        #[serde(default)]
        labels: Labels,
        #[serde(default)]
        annotations: Labels,
        #[serde(flatten)]
        extra: serde_json::Map<String, serde_json::Value>,
    }

    /// As [`DerivedMeta`], for the object.
    #[derive(Debug, PartialEq, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct DerivedObject {
        #[serde(default)]
        api_version: String,
        #[serde(default)]
        kind: String,
        #[serde(default)]
        metadata: DerivedMeta,
        #[serde(flatten)]
        data: serde_json::Map<String, serde_json::Value>,
    }

    fn same_as_derived(json: &str) {
        let by_hand = serde_json::from_str::<DynamicObject>(json);
        let derived = serde_json::from_str::<DerivedObject>(json);
        match (by_hand, derived) {
            (Ok(object), Ok(derived)) => {
                let meta = derived.metadata;
                let m = &object.metadata;
                assert_eq!(
                    (&object.api_version, &object.kind, &object.data),
                    (&derived.api_version, &derived.kind, &derived.data),
                    "{json}"
                );
                assert_eq!(
                    (
                        &m.name,
                        &m.namespace,
                        &m.uid,
                        &m.resource_version,
                        &m.self_link
                    ),
                    (
                        &meta.name,
                        &meta.namespace,
                        &meta.uid,
                        &meta.resource_version,
                        &meta.self_link
                    ),
                    "{json}"
                );
                assert_eq!(
                    (m.generation, &m.labels, &m.annotations, &m.extra),
                    (
                        meta.generation,
                        &meta.labels,
                        &meta.annotations,
                        &meta.extra
                    ),
                    "{json}"
                );
            }
            (Err(by_hand), Err(derived)) => {
                let derived = derived
                    .to_string()
                    .replace("DerivedMeta", "ObjectMeta")
                    .replace("DerivedObject", "DynamicObject");
                assert_eq!(by_hand.to_string(), derived, "{json}");
            }
            (by_hand, derived) => panic!("{json}: by hand {by_hand:?}, derived {derived:?}"),
        }
    }

    #[test]
    fn deserialize_by_hand_matches_the_derived_flattened_shape() {
        for json in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u","resourceVersion":"5","selfLink":"/x","generation":3,"labels":{"a":"b"},"annotations":{"c":"d"},"creationTimestamp":null,"ownerReferences":[{"kind":"RS"}]},"spec":{"nodeName":"n","containers":[{"name":"c","ports":[{"containerPort":80}]}]},"status":{"phase":"Running","x":1.5,"y":-2}}"#,
            r#"{}"#,
            r#"{"kind":"ConfigMap","data":{"k":"v"},"data":{"k":"w"}}"#,
            r#"{"metadata":{"generation":null,"extra":{"deep":[true,null]}}}"#,
            r#"{"kind":"A","kind":"B"}"#,
            r#"{"metadata":{"name":"a","name":"b"}}"#,
            r#"{"metadata":{"labels":null}}"#,
            r#"{"metadata":null}"#,
            r#"{"apiVersion":7}"#,
            r#"{"metadata":{"generation":"x"}}"#,
            r#"[]"#,
            r#"{"spec":"#,
        ] {
            same_as_derived(json);
        }
    }

    #[test]
    fn metadata_from_its_members_is_the_deserialized_one() {
        use serde::Deserialize;
        for (i, json) in [
            r#"{}"#,
            r#"{"name":"p","namespace":"ns","uid":"u","resourceVersion":"7","selfLink":"/x","generation":3,"labels":{"a":"b","c":""},"annotations":{"k":"v"},"creationTimestamp":null,"managedFields":[{"fieldsV1":{"f:spec":{".":{}}},"manager":"m"}],"ownerReferences":[{"kind":"RS","controller":true}]}"#,
            r#"{"generation":null,"labels":{},"finalizers":["a"]}"#,
            r#"{"generation":-9223372036854775808}"#,
            // Wrong types: the error `Deserialize` gives, the first in key order.
            r#"{"name":null}"#,
            r#"{"uid":5,"name":null}"#,
            r#"{"labels":{"a":1}}"#,
            r#"{"labels":null}"#,
            r#"{"annotations":["a"]}"#,
            r#"{"generation":1.5}"#,
            r#"{"generation":"3"}"#,
            r#"{"generation":18446744073709551615}"#,
        ]
        .into_iter()
        .enumerate()
        {
            let serde_json::Value::Object(members) = serde_json::from_str(json).unwrap() else {
                panic!("{json}: not an object");
            };
            let want = ObjectMeta::deserialize(serde_json::Value::Object(members.clone()))
                .map_err(|e| e.to_string());
            let got = ObjectMeta::from_members(members).map_err(|e| e.to_string());
            assert_eq!(got, want, "{json}");
            // The first four are metadata as it comes; every other has a wrong type.
            assert_eq!(got.is_ok(), i < 4, "{json}: {got:?}");
        }
    }

    #[test]
    fn an_object_from_its_members_is_the_deserialized_one() {
        for json in [
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","generation":3,"labels":{"a":"b"},"creationTimestamp":null,"ownerReferences":[{"kind":"RS"}]},"spec":{"nodeName":"n"},"status":{"x":1.5,"y":-2}}"#,
            r#"{}"#,
            r#"{"data":{"k":"v"}}"#,
        ] {
            let serde_json::Value::Object(members) = serde_json::from_str(json).unwrap() else {
                panic!("{json}: not an object");
            };
            let want: DynamicObject = serde_json::from_str(json).unwrap();
            assert_eq!(
                DynamicObject::from_members(members).unwrap(),
                want,
                "{json}"
            );
        }
        // A known member of the wrong type: refused as `Deserialize` refuses it, named.
        for (json, name) in [
            (r#"{"metadata":{"name":null}}"#, "metadata"),
            (r#"{"metadata":{"labels":{"a":1}}}"#, "metadata"),
            (r#"{"metadata":{"annotations":[]}}"#, "metadata"),
            (r#"{"metadata":{"generation":1.5}}"#, "metadata"),
            (
                r#"{"metadata":{"generation":18446744073709551615}}"#,
                "metadata",
            ),
            (r#"{"metadata":[]}"#, "metadata"),
            (r#"{"apiVersion":7}"#, "apiVersion"),
            (r#"{"metadata":{"generation":"x"}}"#, "metadata"),
            (r#"{"metadata":null}"#, "metadata"),
        ] {
            assert!(
                serde_json::from_str::<DynamicObject>(json).is_err(),
                "{json}"
            );
            let serde_json::Value::Object(members) = serde_json::from_str(json).unwrap() else {
                panic!("{json}: not an object");
            };
            let err = DynamicObject::from_members(members)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(&format!("{name}: ")), "{json}: {err}");
        }
    }

    #[test]
    fn default_fields_are_name_and_namespace() {
        let obj = DynamicObject::new("v1", "ConfigMap", "cm").within("ns");
        let fields = obj.fields();
        assert_eq!(fields["metadata.name"], "cm");
        assert_eq!(fields["metadata.namespace"], "ns");
        let cluster = DynamicObject::new("v1", "Namespace", "ns");
        assert!(!cluster.fields().contains_key("metadata.namespace"));
    }

    #[cfg(feature = "k8s-openapi")]
    #[test]
    fn k8s_openapi_types_are_api_objects() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some("cm".into());
        assert_eq!(cm.name(), "cm");
        assert_eq!(cm.resource_version(), "");
        cm.set_resource_version("5".into());
        assert_eq!(cm.metadata.resource_version.as_deref(), Some("5"));
        cm.set_resource_version(String::new());
        assert_eq!(cm.metadata.resource_version, None);
        assert!(cm.labels().is_empty());
    }
}
