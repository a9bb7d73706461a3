//! The kube section's second object type: a Pod as a `LazyObject` (metadata decoded,
//! body left as stored protobuf), with `spec.nodeName` selectable as `KubePod` has it,
//! read straight from the stored bytes: a list by node decodes no Pod's body.

use apistore_protobuf::{LazyCodec, LazyObject};
use apistore_storage::{ApiObject, Fields, MetaAccessor};

use crate::wrapped_codec::{WrappedCodec, newtype_wrapper};

/// The path of the field kube's Pod registry makes selectable beyond name and
/// namespace.
const NODE_NAME: [&str; 2] = ["spec", "nodeName"];

/// A Pod held as a [`LazyObject`].
#[derive(Debug, Clone, Default)]
pub(crate) struct LazyPod(pub(crate) LazyObject);

impl ApiObject for LazyPod {
    fn meta(&self) -> &dyn MetaAccessor {
        self.0.meta()
    }

    fn meta_mut(&mut self) -> &mut dyn MetaAccessor {
        self.0.meta_mut()
    }

    /// Name, namespace and `spec.nodeName` when it is set, as
    /// [`KubePod`](crate::kube_pod::KubePod)'s. A body whose bytes do not read leaves the
    /// node out here (a field selector then does not match it); the same bytes fail the
    /// first `body()` with the error, as they would fail a whole decode.
    fn fields(&self) -> Fields {
        let mut fields = self.0.fields();
        if let Ok(Some(node)) = self.0.field_str(&NODE_NAME) {
            fields.insert("spec.nodeName".to_owned(), node.into_owned());
        }
        fields
    }
}

newtype_wrapper!(LazyPod, LazyObject);

/// [`LazyCodec`] for [`LazyPod`]s: kube's protobuf, read lazily, written as
/// `LazyCodec` writes (the stored bytes with the metadata spliced in).
pub(crate) type LazyPodCodec = WrappedCodec<LazyPod, LazyCodec>;

#[cfg(test)]
mod tests {
    use apistore_protobuf::{KubeProtobuf, MediaType};
    use apistore_storage::{Codec, DynamicObject};

    use super::*;
    use crate::kube_pod::KubePod;

    #[test]
    fn the_node_name_is_selectable_without_reading_the_body_and_as_kube_pod_has_it() {
        let mut value = crate::pod::pod(7);
        value["spec"]["nodeName"] = serde_json::json!("node-7");
        let stored = KubeProtobuf::latest().encode_value(&value).unwrap();
        let codec = LazyPodCodec::shared(LazyCodec::new(MediaType::Protobuf));
        let lazy = codec.decode(&stored).unwrap();
        let fields = lazy.fields();
        assert!(!lazy.0.is_body_decoded());
        assert_eq!(
            fields.get("spec.nodeName").map(String::as_str),
            Some("node-7")
        );
        let whole: DynamicObject = KubeProtobuf::latest().decode(&stored).unwrap();
        assert_eq!(fields, KubePod(whole).fields());
        assert_eq!(codec.encode(&lazy).unwrap(), stored);

        value["spec"].as_object_mut().unwrap().remove("nodeName");
        let stored = KubeProtobuf::latest().encode_value(&value).unwrap();
        let lazy = codec.decode(&stored).unwrap();
        assert!(!lazy.fields().contains_key("spec.nodeName"));
    }
}
