//! A list's selectors judged on kube's protobuf as it is stored, for a store of any
//! object type: the metadata read as [`LazyObject`] reads it, and the fields a field
//! selector may name read straight from the body's bytes ([`LazyObject::field_str`]).
//! A store given one ([`StoredSelector`]) decodes only the objects its selectors keep.

use std::fmt;

use apistore_storage::{ApiObject, KubeVersion, SelectionPredicate, StoredSelector};
use bytes::Bytes;

use super::LazyObject;
use crate::{KubeProtobuf, is_protobuf};

/// A [`StoredSelector`] for objects stored as kube's protobuf. It judges the selectors
/// on the labels, `metadata.name`, `metadata.namespace` (when set) and each field named
/// with [`Self::with_field`] that is set (its text as [`LazyObject::field_str`] gives
/// it): exactly the labels and fields of a store type whose `ApiObject::fields` adds
/// those fields when they are set, as the bench's typed and `DynamicObject` Pods add
/// `spec.nodeName`. A type that makes other fields selectable, or computes them, needs
/// its own selector (or [`SelectByView`](apistore_storage::SelectByView)).
///
/// A value that is not protobuf (JSON), or whose metadata or named fields do not
/// read, is left to the store's decode, which reports it as usual.
#[derive(Clone)]
pub struct LazySelector {
    protobuf: &'static KubeProtobuf,
    /// Each selectable field's name and its JSON path.
    fields: Vec<(String, Vec<String>)>,
}

impl LazySelector {
    /// A selector reading with the newest kube schema apistore knows, judging labels,
    /// name and namespace.
    pub fn new() -> Self {
        Self::for_kube(KubeVersion::LATEST)
    }

    /// A selector reading with kube `version`'s schema.
    pub fn for_kube(version: KubeVersion) -> Self {
        Self {
            protobuf: KubeProtobuf::for_version(version),
            fields: Vec::new(),
        }
    }

    /// Makes the field at the JSON path `name` (`spec.nodeName`) selectable, as its text
    /// when it is set.
    pub fn with_field(mut self, name: &str) -> Self {
        let path = name.split('.').map(str::to_owned).collect();
        self.fields.push((name.to_owned(), path));
        self
    }
}

impl Default for LazySelector {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for LazySelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.fields.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("LazySelector")
            .field("fields", &names)
            .finish_non_exhaustive()
    }
}

impl StoredSelector for LazySelector {
    fn matches_stored(&self, data: &Bytes, predicate: &SelectionPredicate) -> Option<bool> {
        if !is_protobuf(data) {
            return None;
        }
        // Shared, not copied: the object is dropped once judged, so it keeps no larger
        // read alive.
        let object = LazyObject::decode(self.protobuf, data.clone()).ok()?;
        let mut fields = object.fields();
        // A selector on labels alone looks at no field: the body is not read for it.
        let named = if predicate.field.is_empty() {
            &[][..]
        } else {
            &self.fields[..]
        };
        for (name, path) in named {
            let path: Vec<&str> = path.iter().map(String::as_str).collect();
            if let Some(text) = object.field_str(&path).ok()? {
                fields.insert(name.clone(), text.into_owned());
            }
        }
        Some(predicate.matches_object_attributes(object.labels(), &fields))
    }
}

#[cfg(test)]
mod tests {
    use apistore_storage::{Codec, FieldSelector, Fields, LabelSelector};
    use serde_json::Value;

    use super::*;
    use crate::lazy::tests::{dynamic_codec, golden, realistic_pod, with_field};

    fn predicate(labels: &str, fields: &str) -> SelectionPredicate {
        parsed(labels, fields).unwrap()
    }

    /// A predicate of the two selectors, when both parse (fuzzed fixtures' labels are
    /// not all valid label keys).
    fn parsed(labels: &str, fields: &str) -> Option<SelectionPredicate> {
        Some(SelectionPredicate {
            label: LabelSelector::parse(labels).ok()?,
            field: FieldSelector::parse(fields).ok()?,
            ..SelectionPredicate::everything()
        })
    }

    /// Selectors about an object's own labels, name, namespace and a body field: some
    /// that select it and some that do not.
    fn predicates_about(labels: &Fields, fields: &Fields) -> Vec<SelectionPredicate> {
        let mut out = vec![
            parsed("app=nobody", ""),
            parsed("!app", ""),
            parsed("", "metadata.name=x-none"),
            parsed("", "spec.nodeName=node-none"),
            parsed("", "spec.nodeName!=node-none"),
            parsed("", "status.phase=Running"),
        ];
        for (key, value) in labels.iter().take(2) {
            out.push(parsed(&format!("{key}={value}"), ""));
            out.push(parsed(&format!("{key}!={value}"), ""));
            out.push(parsed(&format!("!{key}"), ""));
        }
        for (name, value) in fields {
            out.push(parsed("", &format!("{name}={value}")));
            out.push(parsed("", &format!("{name}!={value}")));
        }
        out.into_iter().flatten().collect()
    }

    /// The default fields and each of `names` the whole decode's body holds as text.
    fn fields_of(object: &apistore_storage::DynamicObject, names: &[&str]) -> Fields {
        let mut fields = object.fields();
        let body = Value::Object(object.data.clone());
        for name in names {
            let text = match body.pointer(&format!("/{}", name.replace('.', "/"))) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                _ => continue,
            };
            fields.insert((*name).to_owned(), text);
        }
        fields
    }

    /// On every golden case kube-apiserver's serializer wrote, the selector answers
    /// each selector about the object as the whole decode's labels and fields do.
    #[test]
    fn every_golden_case_is_judged_as_its_whole_decode_is() {
        let names = ["spec.nodeName", "status.phase", "spec.restartPolicy"];
        let selector = names
            .iter()
            .fold(LazySelector::for_kube(KubeVersion::V1_31), |s, name| {
                s.with_field(name)
            });
        let (mut cases, mut unread, mut judged, mut selected) = (0, 0, 0, 0);
        for (file, case, stored) in golden() {
            let Ok(whole) = dynamic_codec().decode(&stored) else {
                continue;
            };
            cases += 1;
            let fields = fields_of(&whole, &names);
            // Kinds a `LazyObject` does not read (no ObjectMeta: reviews, options) are
            // left to the decode, always.
            let readable = LazyObject::decode(selector.protobuf, Bytes::from(stored.clone()));
            for predicate in predicates_about(&whole.metadata.labels, &fields) {
                let want = predicate.matches_object_attributes(&whole.metadata.labels, &fields);
                let got = selector.matches_stored(&Bytes::from(stored.clone()), &predicate);
                let want = readable.is_ok().then_some(want);
                assert_eq!(got, want, "{file} {case}: {predicate:?}");
                judged += 1;
                selected += usize::from(want == Some(true));
            }
            unread += usize::from(readable.is_err());
        }
        println!("{cases} cases ({unread} not read), {judged} judged, {selected} selected");
        assert!(
            cases > 500 && judged > 5_000,
            "{cases} cases, {judged} judged"
        );
        assert!(unread < cases / 4, "{unread} of {cases} cases not read");
        assert!(
            selected > judged / 5 && selected < judged * 4 / 5,
            "{selected}"
        );
    }

    /// What the selector cannot read it leaves to the decode: JSON, bytes that are not
    /// an object, and a body field that does not read (the decode then reports it).
    #[test]
    fn what_does_not_read_is_left_to_the_decode() {
        let selector = LazySelector::for_kube(KubeVersion::V1_31).with_field("spec.nodeName");
        let by_node = predicate("", "spec.nodeName=node-1");
        let json = br#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"}}"#;
        assert_eq!(
            selector.matches_stored(&Bytes::from_static(json), &by_node),
            None
        );
        let garbage = Bytes::from_static(b"k8s\x00\xff\xff");
        assert_eq!(selector.matches_stored(&garbage, &by_node), None);
        let pod = Bytes::from(realistic_pod());
        assert!(selector.matches_stored(&pod, &by_node).is_some());
        // spec (2) with nodeName (10) as a varint where a string belongs.
        let broken = Bytes::from(with_field(&pod, &[2], &[10 << 3, 1]));
        assert!(dynamic_codec().decode(&broken).is_err());
        assert_eq!(selector.matches_stored(&broken, &by_node), None);
        // A selector without fields judges labels alone on the same bytes.
        assert_eq!(
            LazySelector::default().matches_stored(&broken, &predicate("app=nobody", "")),
            Some(false)
        );
        assert!(format!("{selector:?}").contains("spec.nodeName"));
    }
}
