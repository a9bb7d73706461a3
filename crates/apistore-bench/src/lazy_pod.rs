//! The kube section's second object type: a Pod as a `LazyObject` (metadata decoded,
//! body left as stored protobuf), with `spec.nodeName` selectable as `KubePod` has it,
//! read straight from the stored bytes: a list by node decodes no Pod's body.

use std::sync::Arc;

use apistore_protobuf::{LazyCodec, LazyObject, MediaType};
use apistore_storage::{ApiObject, Codec, CodecError, Fields, MetaAccessor};
use bytes::Bytes;

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

    /// Name, namespace and `spec.nodeName` when it is set, as [`KubePod`]'s
    /// (crate::kube_pod::KubePod). A body whose bytes do not read leaves the node out
    /// here (a field selector then does not match it); the same bytes fail the first
    /// `body()` with the error, as they would fail a whole decode.
    fn fields(&self) -> Fields {
        let mut fields = self.0.fields();
        if let Ok(Some(node)) = self.0.field_str(&NODE_NAME) {
            fields.insert("spec.nodeName".to_owned(), node.into_owned());
        }
        fields
    }
}

/// [`LazyCodec`] for [`LazyPod`]s: kube's protobuf, read lazily, written as
/// `LazyCodec` writes (the stored bytes with the metadata spliced in).
#[derive(Debug, Clone, Default)]
pub(crate) struct LazyPodCodec(LazyCodec);

impl LazyPodCodec {
    /// A codec writing `write`.
    pub(crate) fn shared(write: MediaType) -> Arc<Self> {
        Arc::new(Self(LazyCodec::new(write)))
    }
}

impl Codec<LazyPod> for LazyPodCodec {
    fn encode(&self, object: &LazyPod) -> Result<Bytes, CodecError> {
        self.0.encode(&object.0)
    }

    fn decode(&self, data: &[u8]) -> Result<LazyPod, CodecError> {
        self.0.decode(data).map(LazyPod)
    }

    fn encode_replacing(&self, object: &LazyPod, previous: &[u8]) -> Result<Bytes, CodecError> {
        self.0.encode_replacing(&object.0, previous)
    }

    fn carries_previous(&self) -> bool {
        Codec::<LazyObject>::carries_previous(&self.0)
    }

    fn round_trips(&self) -> bool {
        Codec::<LazyObject>::round_trips(&self.0)
    }

    fn stored_value<'a>(&self, object: &'a LazyPod) -> Option<&'a [u8]> {
        self.0.stored_value(&object.0)
    }
}

#[cfg(test)]
mod tests {
    use apistore_protobuf::KubeProtobuf;
    use apistore_storage::DynamicObject;

    use super::*;
    use crate::kube_pod::KubePod;

    #[test]
    fn the_node_name_is_selectable_without_reading_the_body_and_as_kube_pod_has_it() {
        let mut value = crate::pod::pod(7);
        value["spec"]["nodeName"] = serde_json::json!("node-7");
        let stored = KubeProtobuf::latest().encode_value(&value).unwrap();
        let codec = LazyPodCodec::shared(MediaType::Protobuf);
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
