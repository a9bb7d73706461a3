//! The rows: every resource kube-apiserver persists, with its key prefix, storage
//! version and encoding, one table per kube minor (1.31 to 1.37).
//!
//! The tables are generated (`generated/kube_1_<minor>.rs`, by `interop/layout`) from
//! each minor's own sources: kubernetes' integration data
//! (`test/integration/etcd/data.go`, `ExpectedEtcdPath` and `ExpectedGVK`) and the
//! kinds of that minor's k8s.io/api. Built-ins of every group sit at `/<plural>`
//! without their group, with the exceptions their registries name (nodes at `minions`,
//! services at `services/specs`, endpoints at `services/endpoints`,
//! replicationcontrollers at `controllers`, ingresses at `ingress`), events.k8s.io events
//! share the core events, and the two API servers kube-apiserver embeds store grouped
//! and as JSON (`apiextensions.k8s.io/customresourcedefinitions`,
//! `apiregistration.k8s.io/apiservices`). This file holds the row type the generated
//! tables are written in, and the keys that are no object in any minor.

#[cfg(test)]
use crate::StorageEncoding::Json;
use crate::StorageEncoding::{self, Protobuf};
use crate::StorageLayout;

#[path = "generated/mod.rs"]
mod generated;

pub(crate) use generated::KUBE_1_31;

impl StorageLayout {
    /// kube-apiserver 1.`minor`'s layout with its default storage media type, for
    /// `minor` 31 to 37 (`None` for any other).
    ///
    /// Resources a minor serves only at alpha or beta versions are in its table too:
    /// they are what kube-apiserver stores once those versions are enabled.
    pub fn for_kube_minor(minor: u32) -> Option<Self> {
        generated::for_minor(minor).map(|rows| Self { rows })
    }
}

/// Cluster-scoped or namespaced.
pub(crate) const NAMESPACED: bool = true;
pub(crate) const CLUSTER: bool = false;

/// One persisted resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) group: &'static str,
    pub(crate) resource: &'static str,
    /// Relative to `--etcd-prefix`, without slashes at either end.
    pub(crate) key_prefix: &'static str,
    /// The apiVersion kube-apiserver writes (its storage version).
    pub(crate) api_version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) encoding: StorageEncoding,
}

pub(crate) const fn row(
    group: &'static str,
    resource: &'static str,
    key_prefix: &'static str,
    api_version: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Row {
    Row {
        group,
        resource,
        key_prefix,
        api_version,
        kind,
        namespaced,
        encoding: Protobuf,
    }
}

/// kube-apiserver 1.31 as typed by hand (checked against data.go), kept until the
/// generated table is shown to equal it.
#[cfg(test)]
#[rustfmt::skip]
pub(crate) const HAND_TYPED_1_31: &[Row] = &[
    // core
    row("", "configmaps", "configmaps", "v1", "ConfigMap", NAMESPACED),
    row("", "endpoints", "services/endpoints", "v1", "Endpoints", NAMESPACED),
    row("", "events", "events", "v1", "Event", NAMESPACED),
    row("", "limitranges", "limitranges", "v1", "LimitRange", NAMESPACED),
    row("", "namespaces", "namespaces", "v1", "Namespace", CLUSTER),
    row("", "nodes", "minions", "v1", "Node", CLUSTER),
    row("", "persistentvolumeclaims", "persistentvolumeclaims", "v1", "PersistentVolumeClaim", NAMESPACED),
    row("", "persistentvolumes", "persistentvolumes", "v1", "PersistentVolume", CLUSTER),
    row("", "pods", "pods", "v1", "Pod", NAMESPACED),
    row("", "podtemplates", "podtemplates", "v1", "PodTemplate", NAMESPACED),
    row("", "replicationcontrollers", "controllers", "v1", "ReplicationController", NAMESPACED),
    row("", "resourcequotas", "resourcequotas", "v1", "ResourceQuota", NAMESPACED),
    row("", "secrets", "secrets", "v1", "Secret", NAMESPACED),
    row("", "serviceaccounts", "serviceaccounts", "v1", "ServiceAccount", NAMESPACED),
    row("", "services", "services/specs", "v1", "Service", NAMESPACED),
    // admissionregistration.k8s.io
    row("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "mutatingwebhookconfigurations", "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", CLUSTER),
    row("admissionregistration.k8s.io", "validatingadmissionpolicies", "validatingadmissionpolicies", "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", CLUSTER),
    row("admissionregistration.k8s.io", "validatingadmissionpolicybindings", "validatingadmissionpolicybindings", "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", CLUSTER),
    row("admissionregistration.k8s.io", "validatingwebhookconfigurations", "validatingwebhookconfigurations", "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", CLUSTER),
    // apiextensions.k8s.io: the embedded apiextensions-apiserver stores grouped, as
    // JSON, at v1beta1 (the more compact serialization; kube issue 82292).
    Row {
        encoding: Json,
        ..row("apiextensions.k8s.io", "customresourcedefinitions", "apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", CLUSTER)
    },
    // apiregistration.k8s.io: the embedded kube-aggregator stores grouped, as JSON.
    Row {
        encoding: Json,
        ..row("apiregistration.k8s.io", "apiservices", "apiregistration.k8s.io/apiservices", "apiregistration.k8s.io/v1", "APIService", CLUSTER)
    },
    // apps
    row("apps", "controllerrevisions", "controllerrevisions", "apps/v1", "ControllerRevision", NAMESPACED),
    row("apps", "daemonsets", "daemonsets", "apps/v1", "DaemonSet", NAMESPACED),
    row("apps", "deployments", "deployments", "apps/v1", "Deployment", NAMESPACED),
    row("apps", "replicasets", "replicasets", "apps/v1", "ReplicaSet", NAMESPACED),
    row("apps", "statefulsets", "statefulsets", "apps/v1", "StatefulSet", NAMESPACED),
    // autoscaling: stored at v2 whichever version was served.
    row("autoscaling", "horizontalpodautoscalers", "horizontalpodautoscalers", "autoscaling/v2", "HorizontalPodAutoscaler", NAMESPACED),
    // batch
    row("batch", "cronjobs", "cronjobs", "batch/v1", "CronJob", NAMESPACED),
    row("batch", "jobs", "jobs", "batch/v1", "Job", NAMESPACED),
    // certificates.k8s.io
    row("certificates.k8s.io", "certificatesigningrequests", "certificatesigningrequests", "certificates.k8s.io/v1", "CertificateSigningRequest", CLUSTER),
    row("certificates.k8s.io", "clustertrustbundles", "clustertrustbundles", "certificates.k8s.io/v1alpha1", "ClusterTrustBundle", CLUSTER),
    // coordination.k8s.io
    row("coordination.k8s.io", "leasecandidates", "leasecandidates", "coordination.k8s.io/v1alpha1", "LeaseCandidate", NAMESPACED),
    row("coordination.k8s.io", "leases", "leases", "coordination.k8s.io/v1", "Lease", NAMESPACED),
    // discovery.k8s.io
    row("discovery.k8s.io", "endpointslices", "endpointslices", "discovery.k8s.io/v1", "EndpointSlice", NAMESPACED),
    // events.k8s.io: the same objects as core events, stored as core v1 Events.
    row("events.k8s.io", "events", "events", "v1", "Event", NAMESPACED),
    // flowcontrol.apiserver.k8s.io
    row("flowcontrol.apiserver.k8s.io", "flowschemas", "flowschemas", "flowcontrol.apiserver.k8s.io/v1", "FlowSchema", CLUSTER),
    row("flowcontrol.apiserver.k8s.io", "prioritylevelconfigurations", "prioritylevelconfigurations", "flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration", CLUSTER),
    // internal.apiserver.k8s.io
    row("internal.apiserver.k8s.io", "storageversions", "storageversions", "internal.apiserver.k8s.io/v1alpha1", "StorageVersion", CLUSTER),
    // networking.k8s.io
    row("networking.k8s.io", "ingressclasses", "ingressclasses", "networking.k8s.io/v1", "IngressClass", CLUSTER),
    row("networking.k8s.io", "ingresses", "ingress", "networking.k8s.io/v1", "Ingress", NAMESPACED),
    row("networking.k8s.io", "ipaddresses", "ipaddresses", "networking.k8s.io/v1beta1", "IPAddress", CLUSTER),
    row("networking.k8s.io", "networkpolicies", "networkpolicies", "networking.k8s.io/v1", "NetworkPolicy", NAMESPACED),
    row("networking.k8s.io", "servicecidrs", "servicecidrs", "networking.k8s.io/v1beta1", "ServiceCIDR", CLUSTER),
    // node.k8s.io
    row("node.k8s.io", "runtimeclasses", "runtimeclasses", "node.k8s.io/v1", "RuntimeClass", CLUSTER),
    // policy
    row("policy", "poddisruptionbudgets", "poddisruptionbudgets", "policy/v1", "PodDisruptionBudget", NAMESPACED),
    // rbac.authorization.k8s.io
    row("rbac.authorization.k8s.io", "clusterrolebindings", "clusterrolebindings", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding", CLUSTER),
    row("rbac.authorization.k8s.io", "clusterroles", "clusterroles", "rbac.authorization.k8s.io/v1", "ClusterRole", CLUSTER),
    row("rbac.authorization.k8s.io", "rolebindings", "rolebindings", "rbac.authorization.k8s.io/v1", "RoleBinding", NAMESPACED),
    row("rbac.authorization.k8s.io", "roles", "roles", "rbac.authorization.k8s.io/v1", "Role", NAMESPACED),
    // resource.k8s.io (alpha in 1.31)
    row("resource.k8s.io", "deviceclasses", "deviceclasses", "resource.k8s.io/v1alpha3", "DeviceClass", CLUSTER),
    row("resource.k8s.io", "podschedulingcontexts", "podschedulingcontexts", "resource.k8s.io/v1alpha3", "PodSchedulingContext", NAMESPACED),
    row("resource.k8s.io", "resourceclaims", "resourceclaims", "resource.k8s.io/v1alpha3", "ResourceClaim", NAMESPACED),
    row("resource.k8s.io", "resourceclaimtemplates", "resourceclaimtemplates", "resource.k8s.io/v1alpha3", "ResourceClaimTemplate", NAMESPACED),
    row("resource.k8s.io", "resourceslices", "resourceslices", "resource.k8s.io/v1alpha3", "ResourceSlice", CLUSTER),
    // scheduling.k8s.io
    row("scheduling.k8s.io", "priorityclasses", "priorityclasses", "scheduling.k8s.io/v1", "PriorityClass", CLUSTER),
    // storage.k8s.io
    row("storage.k8s.io", "csidrivers", "csidrivers", "storage.k8s.io/v1", "CSIDriver", CLUSTER),
    row("storage.k8s.io", "csinodes", "csinodes", "storage.k8s.io/v1", "CSINode", CLUSTER),
    row("storage.k8s.io", "csistoragecapacities", "csistoragecapacities", "storage.k8s.io/v1", "CSIStorageCapacity", NAMESPACED),
    row("storage.k8s.io", "storageclasses", "storageclasses", "storage.k8s.io/v1", "StorageClass", CLUSTER),
    row("storage.k8s.io", "volumeattachments", "volumeattachments", "storage.k8s.io/v1", "VolumeAttachment", CLUSTER),
    row("storage.k8s.io", "volumeattributesclasses", "volumeattributesclasses", "storage.k8s.io/v1beta1", "VolumeAttributesClass", CLUSTER),
    // storagemigration.k8s.io
    row("storagemigration.k8s.io", "storageversionmigrations", "storageversionmigrations", "storagemigration.k8s.io/v1alpha1", "StorageVersionMigration", CLUSTER),
];

/// Keys kube-apiserver keeps under its prefix that are not API objects.
pub(crate) const NON_OBJECT_KEYS: &[&str] = &[
    "compact_rev_key",
    "health",
    "masterleases",
    "ranges/serviceips",
    "ranges/servicenodeports",
];
