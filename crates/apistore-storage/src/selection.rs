//! Selection predicates: which objects a list or watch returns, after kube-apiserver's
//! `selection_predicate.go`.

use crate::object::{ApiObject, Fields, Labels};
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

    /// Whether the given labels and fields satisfy both selectors
    /// (`MatchesObjectAttributes`).
    pub fn matches_object_attributes(&self, labels: &Labels, fields: &Fields) -> bool {
        self.is_empty() || (self.label.matches(labels) && self.field.matches(fields))
    }

    /// The one object name the field selector pins (`metadata.name=<name>`), letting a
    /// list read a single key. `None` when a continue token is set, as in the reference:
    /// a paged list keeps reading ranges.
    pub fn matches_single(&self) -> Option<&str> {
        self.exact_field("metadata.name")
    }

    /// The one namespace the field selector pins (`metadata.namespace=<ns>`); `None`
    /// when a continue token is set.
    pub fn matches_single_namespace(&self) -> Option<&str> {
        self.exact_field("metadata.namespace")
    }

    fn exact_field(&self, field: &str) -> Option<&str> {
        if !self.continue_token.is_empty() {
            return None;
        }
        self.field.requires_exact_match(field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::DynamicObject;

    fn predicate(label: &str, field: &str) -> SelectionPredicate {
        SelectionPredicate {
            label: LabelSelector::parse(label).unwrap(),
            field: FieldSelector::parse(field).unwrap(),
            ..SelectionPredicate::default()
        }
    }

    fn map(pairs: &[(&str, &str)]) -> Labels {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    // The reference's TestSelectionPredicate (the GetAttrs error case has no
    // counterpart: attributes here cannot fail).
    #[test]
    fn selection_predicate_table() {
        let cases = [
            (
                "A",
                "name=foo",
                "uid=12345",
                map(&[("name", "foo")]),
                map(&[("uid", "12345")]),
                true,
                None,
            ),
            (
                "B",
                "name=foo",
                "uid=12345",
                map(&[("name", "foo")]),
                map(&[]),
                false,
                None,
            ),
            (
                "C",
                "name=foo",
                "uid=12345",
                map(&[]),
                map(&[("uid", "12345")]),
                false,
                None,
            ),
            (
                "D",
                "",
                "metadata.name=12345",
                map(&[]),
                map(&[("metadata.name", "12345")]),
                true,
                Some("12345"),
            ),
        ];
        for (name, label, field, labels, fields, should_match, single) in cases {
            let predicate = predicate(label, field);
            assert_eq!(
                predicate.matches_object_attributes(&labels, &fields),
                should_match,
                "{name}"
            );
            assert_eq!(predicate.matches_single(), single, "{name}");
        }
    }

    #[test]
    fn matches_reads_labels_and_default_fields_of_objects() {
        let mut pod = DynamicObject::new("v1", "Pod", "web-1").within("prod");
        pod.metadata.labels = map(&[("app", "web")]);
        assert!(predicate("app=web", "metadata.name=web-1").matches(&pod));
        assert!(predicate("app in (web,api)", "metadata.namespace=prod").matches(&pod));
        assert!(!predicate("app=web", "metadata.namespace=dev").matches(&pod));
        assert!(!predicate("!app", "").matches(&pod));
        assert!(SelectionPredicate::everything().matches(&pod));
    }

    #[test]
    fn single_name_and_namespace() {
        let mut predicate = predicate("", "metadata.namespace=ns,metadata.name=n,x!=y");
        assert_eq!(predicate.matches_single(), Some("n"));
        assert_eq!(predicate.matches_single_namespace(), Some("ns"));
        predicate.continue_token = "token".to_owned();
        assert_eq!(predicate.matches_single(), None);
        assert_eq!(predicate.matches_single_namespace(), None);
        let negated = self::predicate("", "metadata.name!=n");
        assert_eq!(negated.matches_single(), None);
        assert_eq!(
            SelectionPredicate::everything().matches_single_namespace(),
            None
        );
    }

    #[test]
    fn limit_and_continue_do_not_make_a_predicate_non_empty() {
        let predicate = SelectionPredicate {
            limit: 5,
            continue_token: "t".to_owned(),
            ..SelectionPredicate::default()
        };
        assert!(predicate.is_empty());
        assert!(!self::predicate("a", "").is_empty());
        assert!(!self::predicate("", "a=b").is_empty());
    }
}
