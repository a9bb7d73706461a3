//! The result of a list: items and list metadata.

use serde::{Deserialize, Serialize};

/// List metadata (`metav1.ListMeta`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListMeta {
    /// The revision the list was read at.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// A token for the next page; empty on the last page.
    #[serde(rename = "continue", default, skip_serializing_if = "String::is_empty")]
    pub continue_token: String,
    /// How many items follow this page, when known (no selector filtered the list).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_item_count: Option<i64>,
}

/// A page of objects, serialised as kube's `List` (`apiVersion: v1`, `kind: List`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectList<T> {
    /// Always `v1`.
    pub api_version: String,
    /// Always `List`.
    pub kind: String,
    /// Revision, continue token and remaining count.
    pub metadata: ListMeta,
    /// The objects, in key order; never null.
    pub items: Vec<T>,
}

impl<T> Default for ObjectList<T> {
    fn default() -> Self {
        Self {
            api_version: "v1".to_owned(),
            kind: "List".to_owned(),
            metadata: ListMeta::default(),
            items: Vec::new(),
        }
    }
}

impl<T> ObjectList<T> {
    /// A list with the given items and metadata.
    pub fn new(items: Vec<T>, metadata: ListMeta) -> Self {
        Self {
            metadata,
            items,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_list_serialises_items_as_an_empty_array() {
        let list: ObjectList<serde_json::Value> = ObjectList::default();
        let json = serde_json::to_string(&list).unwrap();
        assert_eq!(
            json,
            r#"{"apiVersion":"v1","kind":"List","metadata":{},"items":[]}"#
        );
    }
}
