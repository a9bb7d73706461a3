//! The fields a field selector may name, per resource, as kube-apiserver's registry
//! allows and computes them, and how their values are read from a stored object.
//!
//! Compared against Kubernetes' field label conversion functions
//! (`pkg/apis/core/v1/conversion.go`, `pkg/apis/batch/v1/conversion.go`,
//! `pkg/apis/certificates/v1/conversion.go`, `pkg/apis/resource/*/conversion.go`) and the
//! attribute functions of `pkg/registry/*/strategy.go` (`ToSelectableFields`): which
//! names are accepted, which field each one reads, and what a missing field reads as
//! (kube formats numbers and booleans of its internal types, so a missing count is `0`
//! and a missing flag `false`). A resource with no row gets kube's default: only
//! `metadata.name` and `metadata.namespace`. A selector on any other field is a
//! BadRequest, not an empty list.

use apistore::{FieldSelector, Fields, StorageError};

/// One selectable field: the name a selector uses, the JSON path of the value in the
/// stored (v1) object, and what a missing value reads as.
struct Field {
    name: &'static str,
    path: &'static str,
    missing: &'static str,
}

const fn field(name: &'static str, path: &'static str, missing: &'static str) -> Field {
    Field {
        name,
        path,
        missing,
    }
}

/// The selectable fields of one resource.
struct Row {
    /// The group-resource, as kube's layout names it.
    group_resource: &'static str,
    /// The API group and kind of its stored objects, for reading an object's fields.
    group: &'static str,
    kind: &'static str,
    /// Whether `metadata.namespace` may be named: kube's conversion functions of
    /// cluster-scoped kinds leave it out.
    metadata_namespace: bool,
    fields: &'static [Field],
}

const POD_FIELDS: &[Field] = &[
    field("spec.nodeName", "spec.nodeName", ""),
    field("spec.restartPolicy", "spec.restartPolicy", ""),
    field("spec.schedulerName", "spec.schedulerName", ""),
    field("spec.serviceAccountName", "spec.serviceAccountName", ""),
    field("spec.hostNetwork", "spec.hostNetwork", "false"),
    field("status.phase", "status.phase", ""),
    field("status.podIP", "status.podIP", ""),
    field("status.nominatedNodeName", "status.nominatedNodeName", ""),
];

const EVENT_FIELDS: &[Field] = &[
    field("involvedObject.kind", "involvedObject.kind", ""),
    field("involvedObject.namespace", "involvedObject.namespace", ""),
    field("involvedObject.name", "involvedObject.name", ""),
    field("involvedObject.uid", "involvedObject.uid", ""),
    field("involvedObject.apiVersion", "involvedObject.apiVersion", ""),
    field(
        "involvedObject.resourceVersion",
        "involvedObject.resourceVersion",
        "",
    ),
    field("involvedObject.fieldPath", "involvedObject.fieldPath", ""),
    field("reason", "reason", ""),
    field("reportingComponent", "reportingComponent", ""),
    field("source", "source.component", ""),
    field("type", "type", ""),
];

const SIGNER_FIELDS: &[Field] = &[field("spec.signerName", "spec.signerName", "")];
const REPLICA_FIELDS: &[Field] = &[field("status.replicas", "status.replicas", "0")];

const fn row(
    group_resource: &'static str,
    group: &'static str,
    kind: &'static str,
    metadata_namespace: bool,
    fields: &'static [Field],
) -> Row {
    Row {
        group_resource,
        group,
        kind,
        metadata_namespace,
        fields,
    }
}

const ROWS: &[Row] = &[
    row("pods", "", "Pod", true, POD_FIELDS),
    row(
        "nodes",
        "",
        "Node",
        false,
        &[field("spec.unschedulable", "spec.unschedulable", "false")],
    ),
    row(
        "namespaces",
        "",
        "Namespace",
        false,
        &[field("status.phase", "status.phase", "")],
    ),
    row("secrets", "", "Secret", true, &[field("type", "type", "")]),
    row(
        "services",
        "",
        "Service",
        true,
        &[
            field("spec.clusterIP", "spec.clusterIP", ""),
            field("spec.type", "spec.type", ""),
        ],
    ),
    row(
        "replicationcontrollers",
        "",
        "ReplicationController",
        true,
        REPLICA_FIELDS,
    ),
    // events.k8s.io events are stored as core events, under the same keys.
    row("events", "", "Event", true, EVENT_FIELDS),
    row(
        "events.events.k8s.io",
        "events.k8s.io",
        "Event",
        true,
        EVENT_FIELDS,
    ),
    row(
        "replicasets.apps",
        "apps",
        "ReplicaSet",
        true,
        REPLICA_FIELDS,
    ),
    // kube's name says "successful"; the value is the count of succeeded pods.
    row(
        "jobs.batch",
        "batch",
        "Job",
        true,
        &[field("status.successful", "status.succeeded", "0")],
    ),
    row(
        "certificatesigningrequests.certificates.k8s.io",
        "certificates.k8s.io",
        "CertificateSigningRequest",
        false,
        SIGNER_FIELDS,
    ),
    row(
        "clustertrustbundles.certificates.k8s.io",
        "certificates.k8s.io",
        "ClusterTrustBundle",
        false,
        SIGNER_FIELDS,
    ),
    row(
        "resourceslices.resource.k8s.io",
        "resource.k8s.io",
        "ResourceSlice",
        false,
        &[
            field("spec.nodeName", "spec.nodeName", ""),
            field("spec.driver", "spec.driver", ""),
        ],
    ),
];

/// The names a selector may use for `group_resource`.
fn supported(group_resource: &str) -> Vec<&'static str> {
    let row = ROWS.iter().find(|r| r.group_resource == group_resource);
    let mut names = vec!["metadata.name"];
    if row.is_none_or(|r| r.metadata_namespace) {
        names.push("metadata.namespace");
    }
    if let Some(row) = row {
        names.extend(row.fields.iter().map(|f| f.name));
    }
    names
}

/// Refuses a selector naming a field the resource does not support, naming those it
/// does, as kube-apiserver does (`field label not supported: ...`).
pub(crate) fn check(
    group_resource: &str,
    etcd_key: &str,
    selector: &FieldSelector,
) -> Result<(), StorageError> {
    let names = supported(group_resource);
    match selector
        .requirements()
        .iter()
        .find(|r| !names.contains(&r.field()))
    {
        None => Ok(()),
        Some(requirement) => Err(StorageError::bad_request(
            etcd_key,
            format!(
                "field label not supported: {} (\"{group_resource}\" supports {})",
                requirement.field(),
                names.join(", ")
            ),
        )),
    }
}

/// The selectable fields of a stored object beyond its metadata, found by its apiVersion
/// group and kind, read as kube's attribute functions format them (a boolean as
/// `true`/`false`, a number as its digits, a missing field as the row says).
pub(crate) fn extra_fields(
    api_version: &str,
    kind: &str,
    data: &serde_json::Map<String, serde_json::Value>,
    fields: &mut Fields,
) {
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    let Some(row) = ROWS.iter().find(|r| r.group == group && r.kind == kind) else {
        return;
    };
    for field in row.fields {
        let mut segments = field.path.split('.');
        let first = segments.next().and_then(|s| data.get(s));
        let found = segments.try_fold(first, |value, segment| {
            Some(value.and_then(|v| v.get(segment)))
        });
        let value = match found.flatten() {
            Some(serde_json::Value::String(text)) => text.clone(),
            Some(serde_json::Value::Bool(flag)) => flag.to_string(),
            Some(serde_json::Value::Number(number)) => number.to_string(),
            _ => field.missing.to_owned(),
        };
        fields.insert(field.name.to_owned(), value);
    }
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
        // kube's Node and Namespace conversions leave metadata.namespace out.
        let namespace = FieldSelector::parse("metadata.namespace=x").unwrap();
        assert!(check("nodes", "/registry/minions", &namespace).is_err());
        assert!(check("persistentvolumes", "/registry/pv", &namespace).is_ok());
        let service = FieldSelector::parse("spec.type=ClusterIP").unwrap();
        assert!(check("services", "/registry/services/specs", &service).is_ok());
    }

    #[test]
    fn values_are_read_as_kube_formats_them() {
        let data = |value: serde_json::Value| value.as_object().unwrap().clone();
        let mut fields = Fields::new();
        let pod = data(serde_json::json!({"spec": {"nodeName": "n1", "hostNetwork": true}}));
        extra_fields("v1", "Pod", &pod, &mut fields);
        assert_eq!(fields["spec.nodeName"], "n1");
        assert_eq!(fields["spec.hostNetwork"], "true");
        assert_eq!(fields["status.phase"], "");
        let mut fields = Fields::new();
        extra_fields("v1", "Pod", &data(serde_json::json!({})), &mut fields);
        assert_eq!(fields["spec.hostNetwork"], "false");
        let mut fields = Fields::new();
        let job = data(serde_json::json!({"status": {"succeeded": 3}}));
        extra_fields("batch/v1", "Job", &job, &mut fields);
        assert_eq!(fields["status.successful"], "3");
        let mut fields = Fields::new();
        let event = data(serde_json::json!({"source": {"component": "kubelet"}}));
        extra_fields("v1", "Event", &event, &mut fields);
        assert_eq!(fields["source"], "kubelet");
        let mut fields = Fields::new();
        extra_fields("v1", "ConfigMap", &event, &mut fields);
        assert!(fields.is_empty());
    }
}
