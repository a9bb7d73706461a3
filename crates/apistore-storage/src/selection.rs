//! Selection predicates: which objects a list or watch returns, after kube-apiserver's
//! `selection_predicate.go`.

use crate::object::ApiObject;
use crate::selector::{FieldSelector, LabelSelector};

/// Label and field selectors, a page limit and a continue token.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SelectionPredicate {
    /// Labels the object must have.
    pub label: LabelSelector,
    /// Fields the object must have (see [`ApiObject::fields`]).
    pub field: FieldSelector,
    /// The most items one page returns; 0 for no limit.
    pub limit: i64,
    /// A continue token from a previous page.
    pub continue_token: String,
    /// Whether the watcher accepts bookmark events.
    pub allow_watch_bookmarks: bool,
}

impl SelectionPredicate {
    /// The predicate that selects everything, with no limit.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Whether the selectors select everything (limit and continue do not count).
    pub fn is_empty(&self) -> bool {
        self.label.is_empty() && self.field.is_empty()
    }

    /// Whether `object` satisfies both selectors.
    pub fn matches(&self, object: &dyn ApiObject) -> bool {
        if self.is_empty() {
            return true;
        }
        self.label.matches(object.labels()) && self.field.matches(&object.fields())
    }
}
