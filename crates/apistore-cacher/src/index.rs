//! Indexes of the cached objects by a field or a label value (kube's `IndexerFuncs`
//! and `IndexFields`/`IndexLabels`, `MatcherIndex` and the `ByIndex` read of
//! `waitUntilFreshAndListItems` in `watch_cache.go`).
//!
//! A list whose selector pins an indexed field or label to one value (`spec.nodeName=n1`,
//! `app=web` or `app in (web)`) reads the keys the index holds for that value instead
//! of the whole key range; the list's own filtering (key prefix, both selectors) then
//! runs over those alone, so an index only ever narrows what is read and never changes
//! what is returned. Field values are the object's [`ApiObject::fields`], the same ones
//! field selectors match, and label values its labels.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use apistore_storage::{ApiObject, SelectionPredicate};

/// One index a cacher keeps (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CacheIndex {
    /// By the value of a field, as field selectors name it (`spec.nodeName`).
    Field(String),
    /// By the value of a label (`app`).
    Label(String),
}

impl CacheIndex {
    /// kube's index name, `f:<field>` or `l:<label>`, which `apiserver_cache_list_total`
    /// and `apiserver_cache_list_fetched_objects_total` are labelled with.
    pub fn name(&self) -> String {
        match self {
            Self::Field(field) => format!("f:{field}"),
            Self::Label(label) => format!("l:{label}"),
        }
    }

    fn value_of<T: ApiObject>(&self, object: &T) -> Option<String> {
        match self {
            Self::Field(field) => object.fields().remove(field),
            Self::Label(label) => object.labels().get(label).cloned(),
        }
    }

    /// The one value `predicate` requires of this index's field or label, if any.
    fn required_by<'a>(&self, predicate: &'a SelectionPredicate) -> Option<&'a str> {
        match self {
            Self::Field(field) => predicate.field.requires_exact_match(field),
            Self::Label(label) => predicate.label.requires_exact_match(label),
        }
    }
}

/// The keys of the objects holding each value of one index, in key order.
type KeysByValue = HashMap<String, BTreeSet<Arc<str>>>;

/// The keys of the cached objects by value, for every index.
#[derive(Debug, Default)]
pub(crate) struct Indexes {
    indexes: Vec<(CacheIndex, KeysByValue)>,
}

/// What an indexed read found: the index's name and the keys, in key order.
pub(crate) struct IndexedKeys<'a> {
    pub(crate) name: String,
    pub(crate) keys: Option<&'a BTreeSet<Arc<str>>>,
}

impl Indexes {
    pub(crate) fn new(indexes: &[CacheIndex]) -> Self {
        let mut unique: Vec<CacheIndex> = Vec::with_capacity(indexes.len());
        for index in indexes {
            if !unique.contains(index) {
                unique.push(index.clone());
            }
        }
        Self {
            indexes: unique
                .into_iter()
                .map(|index| (index, HashMap::new()))
                .collect(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.indexes.is_empty()
    }

    /// Forgets every key (before a re-list fills the cache again).
    pub(crate) fn clear(&mut self) {
        for (_, values) in &mut self.indexes {
            values.clear();
        }
    }

    /// Records `key` under its object's values.
    pub(crate) fn insert<T: ApiObject>(&mut self, key: &Arc<str>, object: &T) {
        for (index, values) in &mut self.indexes {
            if let Some(value) = index.value_of(object) {
                values.entry(value).or_default().insert(Arc::clone(key));
            }
        }
    }

    /// Forgets `key` under the values of `object`, its previous state.
    pub(crate) fn remove<T: ApiObject>(&mut self, key: &str, object: &T) {
        for (index, values) in &mut self.indexes {
            let Some(value) = index.value_of(object) else {
                continue;
            };
            if let Some(keys) = values.get_mut(&value) {
                keys.remove(key);
                if keys.is_empty() {
                    values.remove(&value);
                }
            }
        }
    }

    /// The keys of the first index `predicate` pins to one value (kube takes the
    /// first of `MatcherIndex` too), or `None` when it pins none.
    pub(crate) fn lookup(&self, predicate: &SelectionPredicate) -> Option<IndexedKeys<'_>> {
        self.indexes.iter().find_map(|(index, values)| {
            let value = index.required_by(predicate)?;
            Some(IndexedKeys {
                name: index.name(),
                keys: values.get(value),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apistore_storage::{DynamicObject, FieldSelector, LabelSelector};

    fn pod(name: &str, app: &str) -> DynamicObject {
        let mut pod = DynamicObject::new("v1", "Pod", name).within("ns");
        pod.metadata.labels.insert("app".to_owned(), app.to_owned());
        pod
    }

    fn with_label(selector: &str) -> SelectionPredicate {
        SelectionPredicate {
            label: LabelSelector::parse(selector).unwrap(),
            ..SelectionPredicate::default()
        }
    }

    #[test]
    fn keys_follow_their_objects_values() {
        let mut indexes = Indexes::new(&[CacheIndex::Label("app".to_owned())]);
        let (a, b): (Arc<str>, Arc<str>) = (Arc::from("/pods/ns/a"), Arc::from("/pods/ns/b"));
        indexes.insert(&a, &pod("a", "web"));
        indexes.insert(&b, &pod("b", "web"));
        let found = indexes.lookup(&with_label("app=web")).unwrap();
        assert_eq!(found.name, "l:app");
        assert_eq!(found.keys.unwrap().iter().collect::<Vec<_>>(), [&a, &b]);

        // a moves to another value: it leaves the first.
        indexes.remove(&a, &pod("a", "web"));
        indexes.insert(&a, &pod("a", "db"));
        assert_eq!(
            indexes
                .lookup(&with_label("app=web"))
                .unwrap()
                .keys
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            indexes
                .lookup(&with_label("app in (db)"))
                .unwrap()
                .keys
                .unwrap()
                .len(),
            1
        );
        indexes.remove(&b, &pod("b", "web"));
        assert!(
            indexes
                .lookup(&with_label("app=web"))
                .unwrap()
                .keys
                .is_none()
        );
    }

    #[test]
    fn only_a_selector_that_pins_one_value_uses_an_index() {
        let indexes = Indexes::new(&[
            CacheIndex::Label("app".to_owned()),
            CacheIndex::Field("metadata.name".to_owned()),
        ]);
        assert!(indexes.lookup(&with_label("app!=web")).is_none());
        assert!(indexes.lookup(&with_label("app in (web,db)")).is_none());
        assert!(indexes.lookup(&with_label("tier=front")).is_none());
        assert!(indexes.lookup(&SelectionPredicate::everything()).is_none());
        let by_name = SelectionPredicate {
            field: FieldSelector::parse("metadata.name=a").unwrap(),
            ..SelectionPredicate::default()
        };
        assert_eq!(indexes.lookup(&by_name).unwrap().name, "f:metadata.name");
    }
}
