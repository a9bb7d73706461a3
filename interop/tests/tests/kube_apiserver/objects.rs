//! The objects the tests create through kube-apiserver, each with where kube serves it
//! and where apistore finds it; and the resources kube 1.31 serves, against which the
//! 1.37 test checks that every newer resource has an object here.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use serde_json::{Value, json};

/// The namespace of every namespaced object.
pub(crate) const NAMESPACE: &str = "interop";

/// One object: where kube serves it, where apistore finds it, what it is.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// The REST collection (`/api/v1/namespaces/interop/pods`).
    pub(crate) collection: String,
    /// apistore's resource (`pods`, `deployments.apps`, `deviceclasses.resource.k8s.io`).
    pub(crate) resource: String,
    /// apistore's key, relative to `/registry` (`pods/interop/p1`).
    pub(crate) key: String,
    /// The object to create.
    pub(crate) object: Value,
}

impl Case {
    /// `api_version` and `plural` place it in the REST API; `key_prefix` is kube's
    /// registry prefix for it (`services/specs`).
    pub(crate) fn new(plural: &str, key_prefix: &str, namespaced: bool, object: Value) -> Self {
        let api_version = object["apiVersion"].as_str().unwrap().to_owned();
        let name = object["metadata"]["name"].as_str().unwrap().to_owned();
        let (root, group) = match api_version.split_once('/') {
            Some((group, _)) => (format!("/apis/{api_version}"), group.to_owned()),
            None => (format!("/api/{api_version}"), String::new()),
        };
        let (collection, key) = if namespaced {
            (
                format!("{root}/namespaces/{NAMESPACE}/{plural}"),
                format!("{key_prefix}/{NAMESPACE}/{name}"),
            )
        } else {
            (format!("{root}/{plural}"), format!("{key_prefix}/{name}"))
        };
        let resource = if group.is_empty() {
            plural.to_owned()
        } else {
            format!("{plural}.{group}")
        };
        Self {
            collection,
            resource,
            key,
            object,
        }
    }

    pub(crate) fn name(&self) -> &str {
        self.object["metadata"]["name"].as_str().unwrap()
    }

    /// Where kube serves the object.
    pub(crate) fn path(&self) -> String {
        format!("{}/{}", self.collection, self.name())
    }

    /// Where kube serves the object at another version of its group.
    pub(crate) fn path_at(&self, api_version: &str) -> String {
        let root = |version: &str| {
            if version.contains('/') {
                format!("/apis/{version}/")
            } else {
                format!("/api/{version}/")
            }
        };
        let own = self.object["apiVersion"].as_str().unwrap();
        self.path().replacen(&root(own), &root(api_version), 1)
    }

    /// The prefix apistore lists it under: its key without the name.
    pub(crate) fn list_prefix(&self) -> &str {
        self.key.rsplit_once('/').unwrap().0
    }
}

impl std::fmt::Display for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.resource, self.key)
    }
}

/// The CRD, created (and established) before the others.
pub(crate) fn widget_crd() -> Case {
    Case::new(
        "customresourcedefinitions",
        "apiextensions.k8s.io/customresourcedefinitions",
        false,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "scope": "Namespaced",
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                            "color": {"type": "string"},
                            "ports": {"type": "array", "items": {"type": "integer"}}
                        }}}
                    }}
                }]
            }
        }),
    )
}

/// The Pod: on 1.32 and later with pod-level resources (PodLevelResources, on by
/// default since 1.34), on 1.33 and later with `seLinuxChangePolicy`.
pub(crate) fn pod(minor: u32) -> Value {
    let mut pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": NAMESPACE, "labels": {"app": "interop"},
                     "annotations": {"note": "created by kube-apiserver"}},
        "spec": {
            "containers": [{
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                "env": [{"name": "GREETING", "value": "hello"}]
            }],
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000},
            "terminationGracePeriodSeconds": 5
        }
    });
    if minor >= 32 {
        pod["spec"]["resources"] = json!({
            "requests": {"cpu": "200m", "memory": "128Mi"},
            "limits": {"cpu": "1", "memory": "256Mi"}
        });
    }
    if minor >= 33 {
        pod["spec"]["securityContext"]["seLinuxChangePolicy"] = json!("MountOption");
    }
    pod
}

/// Every object, in creation order (the CRD first, created apart).
pub(crate) fn cases(minor: u32) -> Vec<Case> {
    let mut cases = vec![
        Case::new(
            "namespaces",
            "namespaces",
            false,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
        ),
        Case::new("pods", "pods", true, pod(minor)),
        Case::new(
            "deployments",
            "deployments",
            true,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "d1", "namespace": NAMESPACE},
                "spec": {
                    "replicas": 2,
                    "selector": {"matchLabels": {"app": "d1"}},
                    "template": {
                        "metadata": {"labels": {"app": "d1"}},
                        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}
                    }
                }
            }),
        ),
        Case::new(
            "services",
            "services/specs",
            true,
            json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "svc1", "namespace": NAMESPACE},
                "spec": {"selector": {"app": "d1"}, "ports": [{"port": 80, "targetPort": 8080}]}
            }),
        ),
        Case::new(
            "secrets",
            "secrets",
            true,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s1", "namespace": NAMESPACE},
                "type": "Opaque",
                "data": {"password": "aHVudGVyMg=="}
            }),
        ),
        widget_crd(),
        Case::new(
            "widgets",
            "example.com/widgets",
            true,
            json!({
                "apiVersion": "example.com/v1",
                "kind": "Widget",
                "metadata": {"name": "w1", "namespace": NAMESPACE},
                "spec": {"size": 3, "color": "blue", "ports": [80, 443]}
            }),
        ),
    ];
    if minor >= 34 {
        cases.extend(added_after_1_31());
    }
    cases
}

/// One object of each resource kube 1.37 serves by default that 1.31 did not.
pub(crate) fn added_after_1_31() -> Vec<Case> {
    let device_request = json!({"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
    ]}});
    vec![
        Case::new(
            "deviceclasses",
            "deviceclasses",
            false,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu.example.com"},
                "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]}
            }),
        ),
        Case::new(
            "resourceclaims",
            "resourceclaims",
            true,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": "claim1", "namespace": NAMESPACE},
                "spec": device_request
            }),
        ),
        Case::new(
            "resourceclaimtemplates",
            "resourceclaimtemplates",
            true,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": "template1", "namespace": NAMESPACE},
                "spec": {"spec": device_request}
            }),
        ),
        Case::new(
            "resourceslices",
            "resourceslices",
            false,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "node1-gpu.example.com"},
                "spec": {
                    "driver": "gpu.example.com",
                    "nodeName": "node1",
                    "pool": {"name": "node1", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu0", "attributes": {"model": {"string": "a100"}},
                                 "capacity": {"memory": {"value": "40Gi"}}}]
                }
            }),
        ),
        Case::new(
            "servicecidrs",
            "servicecidrs",
            false,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "ServiceCIDR",
                "metadata": {"name": "extra"},
                "spec": {"cidrs": ["127.97.0.0/24"]}
            }),
        ),
        Case::new(
            "ipaddresses",
            "ipaddresses",
            false,
            json!({
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IPAddress",
                "metadata": {"name": "127.97.0.10"},
                "spec": {"parentRef": {"group": "", "resource": "services", "namespace": NAMESPACE, "name": "svc1"}}
            }),
        ),
        Case::new(
            "devicetaintrules",
            "devicetaintrules",
            false,
            json!({
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceTaintRule",
                "metadata": {"name": "broken-gpus"},
                "spec": {
                    "deviceSelector": {"driver": "gpu.example.com", "pool": "node1"},
                    "taint": {"key": "example.com/broken", "value": "true", "effect": "NoSchedule"}
                }
            }),
        ),
        Case::new(
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicies",
            false,
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicy",
                "metadata": {"name": "label-gadgets"},
                "spec": {
                    // Gadgets do not exist: the policy mutates nothing this test writes.
                    "matchConstraints": {"resourceRules": [{
                        "apiGroups": ["example.com"], "apiVersions": ["v1"],
                        "operations": ["CREATE"], "resources": ["gadgets"]
                    }]},
                    "mutations": [{"patchType": "ApplyConfiguration", "applyConfiguration": {
                        "expression": "Object{metadata: Object.metadata{labels: {\"mutated\": \"true\"}}}"
                    }}],
                    "reinvocationPolicy": "Never"
                }
            }),
        ),
        Case::new(
            "mutatingadmissionpolicybindings",
            "mutatingadmissionpolicybindings",
            false,
            json!({
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingAdmissionPolicyBinding",
                "metadata": {"name": "label-gadgets"},
                "spec": {"policyName": "label-gadgets"}
            }),
        ),
        Case::new(
            "clustertrustbundles",
            "clustertrustbundles",
            false,
            json!({
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "ClusterTrustBundle",
                "metadata": {"name": "example-roots"},
                "spec": {"trustBundle": ca_pem()}
            }),
        ),
        Case::new(
            "podcertificaterequests",
            "podcertificaterequests",
            true,
            json!({
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "PodCertificateRequest",
                "metadata": {"name": "p1-cert", "namespace": NAMESPACE},
                "spec": {
                    "signerName": "example.com/pod-identity",
                    "podName": "p1", "podUID": "00000000-0000-0000-0000-000000000001",
                    "serviceAccountName": "default",
                    "serviceAccountUID": "00000000-0000-0000-0000-000000000002",
                    "nodeName": "node1", "nodeUID": "00000000-0000-0000-0000-000000000003",
                    "maxExpirationSeconds": 86400,
                    "stubPKCS10Request": stub_csr(),
                    "unverifiedUserAnnotations": {"example.com/purpose": "interop"}
                }
            }),
        ),
        Case::new(
            "storageversionmigrations",
            "storageversionmigrations",
            false,
            json!({
                "apiVersion": "storagemigration.k8s.io/v1",
                "kind": "StorageVersionMigration",
                "metadata": {"name": "secrets"},
                "spec": {"resource": {"group": "", "resource": "secrets"}}
            }),
        ),
        Case::new(
            "volumeattributesclasses",
            "volumeattributesclasses",
            false,
            json!({
                "apiVersion": "storage.k8s.io/v1",
                "kind": "VolumeAttributesClass",
                "metadata": {"name": "gold"},
                "driverName": "csi.example.com",
                "parameters": {"iops": "3000"}
            }),
        ),
    ]
}

/// A CA certificate (PEM) for the ClusterTrustBundle.
pub(crate) fn ca_pem() -> String {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "apistore-interop-bundle");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params
        .self_signed(&KeyPair::generate().unwrap())
        .unwrap()
        .pem()
}

/// A PKCS#10 request (DER, base64 as JSON carries bytes) for a fresh ECDSA P-256 key:
/// the PodCertificateRequest's stub, whose signature kube checks.
pub(crate) fn stub_csr() -> String {
    let params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let request = params
        .serialize_request(&KeyPair::generate().unwrap())
        .unwrap();
    BASE64.encode(request.der())
}

/// The resources kube 1.31 serves by default and stores, as `<group>/<resource>`
/// (`/pods` for the core group): what its discovery lists with `create` and `list`
/// (the 1.31 test checks this list against the server).
pub(crate) const SERVED_BY_1_31: &[&str] = &[
    "/configmaps",
    "/endpoints",
    "/events",
    "/limitranges",
    "/namespaces",
    "/nodes",
    "/persistentvolumeclaims",
    "/persistentvolumes",
    "/pods",
    "/podtemplates",
    "/replicationcontrollers",
    "/resourcequotas",
    "/secrets",
    "/serviceaccounts",
    "/services",
    "admissionregistration.k8s.io/mutatingwebhookconfigurations",
    "admissionregistration.k8s.io/validatingadmissionpolicies",
    "admissionregistration.k8s.io/validatingadmissionpolicybindings",
    "admissionregistration.k8s.io/validatingwebhookconfigurations",
    "apiextensions.k8s.io/customresourcedefinitions",
    "apiregistration.k8s.io/apiservices",
    "apps/controllerrevisions",
    "apps/daemonsets",
    "apps/deployments",
    "apps/replicasets",
    "apps/statefulsets",
    "autoscaling/horizontalpodautoscalers",
    "batch/cronjobs",
    "batch/jobs",
    "certificates.k8s.io/certificatesigningrequests",
    "coordination.k8s.io/leases",
    "discovery.k8s.io/endpointslices",
    "events.k8s.io/events",
    "flowcontrol.apiserver.k8s.io/flowschemas",
    "flowcontrol.apiserver.k8s.io/prioritylevelconfigurations",
    "networking.k8s.io/ingressclasses",
    "networking.k8s.io/ingresses",
    "networking.k8s.io/networkpolicies",
    "node.k8s.io/runtimeclasses",
    "policy/poddisruptionbudgets",
    "rbac.authorization.k8s.io/clusterrolebindings",
    "rbac.authorization.k8s.io/clusterroles",
    "rbac.authorization.k8s.io/rolebindings",
    "rbac.authorization.k8s.io/roles",
    "scheduling.k8s.io/priorityclasses",
    "storage.k8s.io/csidrivers",
    "storage.k8s.io/csinodes",
    "storage.k8s.io/csistoragecapacities",
    "storage.k8s.io/storageclasses",
    "storage.k8s.io/volumeattachments",
];
