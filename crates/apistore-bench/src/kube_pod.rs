//! The object type of the kube section: a Pod as a `DynamicObject`, with the field a
//! Pod's registry makes selectable beyond name and namespace (`spec.nodeName`), so that
//! a list by node runs the same field selector on both sides.

use apistore_storage::{ApiObject, DynamicObject, Fields, MetaAccessor};
use serde::{Deserialize, Serialize};

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
}
