//! The object type of the kube section: a Pod as a `DynamicObject`, with the field a
//! Pod's registry makes selectable beyond name and namespace (`spec.nodeName`), so that
//! a list by node runs the same field selector on both sides.

use apistore_protobuf::{MediaType, StorageCodec};
use apistore_storage::{ApiObject, DynamicObject, Fields, MetaAccessor};
use serde::{Deserialize, Serialize};

use crate::wrapped_codec::{WrappedCodec, newtype_wrapper};

/// A Pod held as a `DynamicObject`; serialises exactly as one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct KubePod(pub(crate) DynamicObject);

impl ApiObject for KubePod {
    fn meta(&self) -> &dyn MetaAccessor {
        &self.0.metadata
    }

    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        &mut self.0.metadata
    }

    fn fields(&self) -> Fields {
        let mut fields = self.0.fields();
        if let Some(node) = self
            .0
            .data
            .get("spec")
            .and_then(|spec| spec.get("nodeName"))
            .and_then(serde_json::Value::as_str)
        {
            fields.insert("spec.nodeName".to_owned(), node.to_owned());
        }
        fields
    }
}

newtype_wrapper!(KubePod, DynamicObject);

/// The codec of [`KubePod`]s: `StorageCodec<DynamicObject>`, so that a Pod is read
/// the way a store of `DynamicObject`s reads it (by the protobuf walk's value tree,
/// `KubeProtobuf::decode_dynamic`). A `StorageCodec<KubePod>` would go through serde
/// instead, as for any type but `DynamicObject` itself: until 2026-12-07 the
/// section's `DynamicObject` lists, store-lists and caches measured that slower way.
pub(crate) type KubePodCodec = WrappedCodec<KubePod, StorageCodec<DynamicObject>>;

/// A [`KubePodCodec`] for kube's protobuf.
pub(crate) fn kube_pod_codec() -> KubePodCodec {
    KubePodCodec::new(StorageCodec::new(MediaType::Protobuf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_node_name_is_selectable() {
        let pod = KubePod(
            DynamicObject::new("v1", "Pod", "p")
                .within("ns")
                .with("spec", serde_json::json!({"nodeName": "node-7"})),
        );
        let fields = pod.fields();
        assert_eq!(
            fields.get("spec.nodeName").map(String::as_str),
            Some("node-7")
        );
        assert_eq!(
            fields.get("metadata.namespace").map(String::as_str),
            Some("ns")
        );
        assert!(!KubePod::default().fields().contains_key("spec.nodeName"));
    }

    #[test]
    fn the_codec_reads_and_writes_what_serde_does() {
        use apistore_storage::Codec;

        let through_serde = StorageCodec::<KubePod>::new(MediaType::Protobuf);
        let codec = kube_pod_codec();
        for i in [0, 7, 4_321] {
            let pod: KubePod = serde_json::from_value(crate::pod::pod(i)).unwrap();
            let stored = through_serde.encode(&pod).unwrap();
            assert_eq!(codec.encode(&pod).unwrap(), stored, "Pod {i} written alike");
            let read = codec.decode(&stored).unwrap();
            assert_eq!(
                read,
                through_serde.decode(&stored).unwrap(),
                "Pod {i} read alike"
            );
            assert_eq!(read, pod, "Pod {i} round-trips");
        }
    }
}
