//! The fields a field selector may name, per resource, as kube-apiserver's registry
//! allows them (each resource's `GetAttrs` and field label conversion function):
//! `metadata.name` and `metadata.namespace` everywhere, and a few more per resource. A
//! selector on any other field is a BadRequest there, not an empty list.
//!
//! Taken from the list in issue 18 (kube's `pkg/registry/*/strategy.go` and
//! `pkg/apis/*/v1/conversion.go` were not at hand to check against).

use apistore::selector::{FieldRequirement, Operator, escape_value};
use apistore::{FieldSelector, Fields, SelectorError, StorageError};

/// The fields kube supports for `group_resource` beyond `metadata.name` and
/// `metadata.namespace`.
fn extra_fields(group_resource: &str) -> &'static [&'static str] {
    match group_resource {
        "pods" => &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "secrets" => &["type"],
        "events" | "events.events.k8s.io" => &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        "namespaces" => &["status.phase"],
        "nodes" => &["spec.unschedulable"],
        "replicasets.apps" | "replicationcontrollers" => &["status.replicas"],
        "jobs.batch" => &["status.successful"],
        _ => &[],
    }
}

/// Refuses a selector naming a field the resource does not support, naming those it
/// does, as kube-apiserver does (`field label not supported: ...`).
pub(crate) fn check(
    group_resource: &str,
    etcd_key: &str,
    selector: &FieldSelector,
) -> Result<(), StorageError> {
    let extra = extra_fields(group_resource);
    let supported = |field: &str| {
        field == "metadata.name" || field == "metadata.namespace" || extra.contains(&field)
    };
    match selector
        .requirements()
        .iter()
        .find(|r| !supported(r.field()))
    {
        None => Ok(()),
        Some(requirement) => {
            let mut fields = vec!["metadata.name", "metadata.namespace"];
            fields.extend_from_slice(extra);
            Err(StorageError::bad_request(
                etcd_key,
                format!(
                    "field label not supported: {} (\"{group_resource}\" supports {})",
                    requirement.field(),
                    fields.join(", ")
                ),
            ))
        }
    }
}

/// The value of a supported field that is not `metadata.*`, read from the object as
/// kube's `GetAttrs` does (a boolean as `true`/`false`, a number as its digits, a missing
/// field as ""); `source` of an event is its `source.component`.
pub(crate) fn value(object: &serde_json::Value, field: &str) -> String {
    let path = if field == "source" {
        "source.component"
    } else {
        field
    };
    let found = path
        .split('.')
        .try_fold(object, |value, segment| value.get(segment));
    match found {
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(serde_json::Value::Bool(flag)) => flag.to_string(),
        Some(serde_json::Value::Number(number)) => number.to_string(),
        _ => String::new(),
    }
}

/// The selector split in what the store evaluates (`metadata.*`: a dynamic object
/// knows no other field) and the requirements the command evaluates on each object.
pub(crate) fn split(
    selector: &FieldSelector,
) -> Result<(FieldSelector, Vec<FieldRequirement>), SelectorError> {
    let (store, rest): (Vec<&FieldRequirement>, Vec<&FieldRequirement>) = selector
        .requirements()
        .iter()
        .partition(|r| r.field().starts_with("metadata."));
    let text: Vec<String> = store
        .iter()
        .map(|r| {
            let op = if r.operator() == Operator::NotEquals {
                "!="
            } else {
                "="
            };
            format!("{}{op}{}", r.field(), escape_value(r.value()))
        })
        .collect();
    let store = FieldSelector::parse(&text.join(","))?;
    Ok((store, rest.into_iter().cloned().collect()))
}

/// Whether the object meets every requirement the store did not evaluate.
pub(crate) fn matches(object: &serde_json::Value, rest: &[FieldRequirement]) -> bool {
    rest.iter().all(|r| {
        let mut fields = Fields::new();
        fields.insert(r.field().to_owned(), value(object, r.field()));
        r.matches(&fields)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unsupported_fields_are_refused_with_the_supported_ones() {
        let selector = FieldSelector::parse("spec.nodeName=node-1").unwrap();
        assert!(check("pods", "/registry/pods", &selector).is_ok());
        let err = check("configmaps", "/registry/configmaps", &selector).unwrap_err();
        assert!(err.is_bad_request());
        let message = err.to_string();
        assert!(message.contains("spec.nodeName"), "{message}");
        assert!(
            message.contains("metadata.name, metadata.namespace"),
            "{message}"
        );
    }

    #[test]
    fn values_are_read_as_kube_formats_them() {
        let pod = serde_json::json!({"spec": {"nodeName": "n1", "hostNetwork": true}});
        assert_eq!(value(&pod, "spec.nodeName"), "n1");
        assert_eq!(value(&pod, "spec.hostNetwork"), "true");
        assert_eq!(value(&pod, "status.phase"), "");
        let selector = FieldSelector::parse("metadata.name=p1,spec.nodeName!=n1").unwrap();
        let (store, rest) = split(&selector).unwrap();
        assert_eq!(store.requirements().len(), 1);
        assert!(!matches(&pod, &rest));
    }
}
