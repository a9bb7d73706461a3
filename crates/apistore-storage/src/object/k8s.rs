//! The storage traits for k8s-openapi's types: their `ObjectMeta` and every resource
//! type that carries it.

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
