//! The kube section's third object type: a Pod as k8s-openapi's `Pod`, decoded by the
//! generated code (`KubeProtobuf::decode_k8s`, through `StorageCodec`), the object Go's
//! store lists into its `v1.Pod`; with `spec.nodeName` selectable as `KubePod` has it.

use apistore_protobuf::StorageCodec;
use apistore_storage::{ApiObject, Fields, MetaAccessor};
use k8s_openapi::api::core::v1::Pod;

use crate::wrapped_codec::{WrappedCodec, newtype_wrapper};

/// A Pod held as k8s-openapi's typed `Pod`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct TypedPod(pub(crate) Pod);

impl ApiObject for TypedPod {
    fn meta(&self) -> &dyn MetaAccessor {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        self.0.meta_mut()
    }

    /// Name, namespace and `spec.nodeName` when it is set, as
    /// [`KubePod`](crate::kube_pod::KubePod)'s.
    fn fields(&self) -> Fields {
        let mut fields = self.0.fields();
        if let Some(node) = self.0.spec.as_ref().and_then(|s| s.node_name.as_ref()) {
            fields.insert("spec.nodeName".to_owned(), node.clone());
        }
        fields
    }
}

newtype_wrapper!(TypedPod, Pod);

/// [`StorageCodec`] for [`TypedPod`]s: it decodes a `Pod` by the generated code.
pub(crate) type TypedPodCodec = WrappedCodec<TypedPod, StorageCodec<Pod>>;

#[cfg(test)]
mod tests {
    use apistore_protobuf::{KubeProtobuf, MediaType};
    use apistore_storage::{Codec, DynamicObject};

    use super::*;
    use crate::kube_pod::KubePod;

    #[test]
    fn the_node_name_is_selectable_as_kube_pod_has_it() {
        let mut value = crate::pod::pod(7);
        value["spec"]["nodeName"] = serde_json::json!("node-7");
        let stored = KubeProtobuf::latest().encode_value(&value).unwrap();
        let codec = TypedPodCodec::shared(StorageCodec::new(MediaType::Protobuf));
        let typed = codec.decode(&stored).unwrap();
        let fields = typed.fields();
        assert_eq!(
            fields.get("spec.nodeName").map(String::as_str),
            Some("node-7")
        );
        let whole: DynamicObject = KubeProtobuf::latest().decode(&stored).unwrap();
        assert_eq!(fields, KubePod(whole).fields());

        value["spec"].as_object_mut().unwrap().remove("nodeName");
        let stored = KubeProtobuf::latest().encode_value(&value).unwrap();
        assert!(
            !codec
                .decode(&stored)
                .unwrap()
                .fields()
                .contains_key("spec.nodeName")
        );
    }
}
