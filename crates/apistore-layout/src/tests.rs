//! The table row by row, against the paths kubernetes' own integration data expects
//! (`test/integration/etcd/data.go`: `ExpectedEtcdPath` for namespace `ns`, `ExpectedGVK`).

use super::*;

/// (group-resource, namespace, name, expected key under /registry, stored apiVersion, kind)
#[rustfmt::skip]
const EXPECTED: &[(&str, &str, &str, &str, &str, &str)] = &[
    ("configmaps", "ns", "cm1", "configmaps/ns/cm1", "v1", "ConfigMap"),
    ("services", "ns", "service1", "services/specs/ns/service1", "v1", "Service"),
    ("podtemplates", "ns", "pt1name", "podtemplates/ns/pt1name", "v1", "PodTemplate"),
    ("pods", "ns", "pod1", "pods/ns/pod1", "v1", "Pod"),
    ("endpoints", "ns", "ep1name", "services/endpoints/ns/ep1name", "v1", "Endpoints"),
    ("resourcequotas", "ns", "rq1name", "resourcequotas/ns/rq1name", "v1", "ResourceQuota"),
    ("limitranges", "ns", "lr1name", "limitranges/ns/lr1name", "v1", "LimitRange"),
    ("namespaces", "", "namespace1", "namespaces/namespace1", "v1", "Namespace"),
    ("nodes", "", "node1", "minions/node1", "v1", "Node"),
    ("persistentvolumes", "", "pv1name", "persistentvolumes/pv1name", "v1", "PersistentVolume"),
    ("events", "ns", "event1", "events/ns/event1", "v1", "Event"),
    ("persistentvolumeclaims", "ns", "pvc1", "persistentvolumeclaims/ns/pvc1", "v1", "PersistentVolumeClaim"),
    ("serviceaccounts", "ns", "sa1name", "serviceaccounts/ns/sa1name", "v1", "ServiceAccount"),
    ("secrets", "ns", "secret1", "secrets/ns/secret1", "v1", "Secret"),
    ("replicationcontrollers", "ns", "rc1", "controllers/ns/rc1", "v1", "ReplicationController"),
    ("daemonsets.apps", "ns", "ds6", "daemonsets/ns/ds6", "apps/v1", "DaemonSet"),
    ("deployments.apps", "ns", "deployment4", "deployments/ns/deployment4", "apps/v1", "Deployment"),
    ("statefulsets.apps", "ns", "ss3", "statefulsets/ns/ss3", "apps/v1", "StatefulSet"),
    ("replicasets.apps", "ns", "rs3", "replicasets/ns/rs3", "apps/v1", "ReplicaSet"),
    ("controllerrevisions.apps", "ns", "crs3", "controllerrevisions/ns/crs3", "apps/v1", "ControllerRevision"),
    ("horizontalpodautoscalers.autoscaling", "ns", "hpa2", "horizontalpodautoscalers/ns/hpa2", "autoscaling/v2", "HorizontalPodAutoscaler"),
    ("jobs.batch", "ns", "job1", "jobs/ns/job1", "batch/v1", "Job"),
    ("cronjobs.batch", "ns", "cjv1", "cronjobs/ns/cjv1", "batch/v1", "CronJob"),
    ("certificatesigningrequests.certificates.k8s.io", "", "csr2", "certificatesigningrequests/csr2", "certificates.k8s.io/v1", "CertificateSigningRequest"),
    ("clustertrustbundles.certificates.k8s.io", "", "example.com:signer:abc", "clustertrustbundles/example.com:signer:abc", "certificates.k8s.io/v1alpha1", "ClusterTrustBundle"),
    ("leases.coordination.k8s.io", "ns", "leasev1", "leases/ns/leasev1", "coordination.k8s.io/v1", "Lease"),
    ("leasecandidates.coordination.k8s.io", "ns", "lc1", "leasecandidates/ns/lc1", "coordination.k8s.io/v1alpha1", "LeaseCandidate"),
    ("endpointslices.discovery.k8s.io", "ns", "slicev1", "endpointslices/ns/slicev1", "discovery.k8s.io/v1", "EndpointSlice"),
    ("events.events.k8s.io", "ns", "event3", "events/ns/event3", "v1", "Event"),
    ("ingresses.networking.k8s.io", "ns", "ingress3", "ingress/ns/ingress3", "networking.k8s.io/v1", "Ingress"),
    ("ingressclasses.networking.k8s.io", "", "ingressclass3", "ingressclasses/ingressclass3", "networking.k8s.io/v1", "IngressClass"),
    ("networkpolicies.networking.k8s.io", "ns", "np2", "networkpolicies/ns/np2", "networking.k8s.io/v1", "NetworkPolicy"),
    ("ipaddresses.networking.k8s.io", "", "192.168.1.3", "ipaddresses/192.168.1.3", "networking.k8s.io/v1beta1", "IPAddress"),
    ("servicecidrs.networking.k8s.io", "", "range-b1", "servicecidrs/range-b1", "networking.k8s.io/v1beta1", "ServiceCIDR"),
    ("poddisruptionbudgets.policy", "ns", "pdbv1", "poddisruptionbudgets/ns/pdbv1", "policy/v1", "PodDisruptionBudget"),
    ("storageversionmigrations.storagemigration.k8s.io", "", "test-migration", "storageversionmigrations/test-migration", "storagemigration.k8s.io/v1alpha1", "StorageVersionMigration"),
    ("flowschemas.flowcontrol.apiserver.k8s.io", "", "fs-3", "flowschemas/fs-3", "flowcontrol.apiserver.k8s.io/v1", "FlowSchema"),
    ("prioritylevelconfigurations.flowcontrol.apiserver.k8s.io", "", "conf5", "prioritylevelconfigurations/conf5", "flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"),
    ("volumeattachments.storage.k8s.io", "", "va3", "volumeattachments/va3", "storage.k8s.io/v1", "VolumeAttachment"),
    ("volumeattributesclasses.storage.k8s.io", "", "vac2", "volumeattributesclasses/vac2", "storage.k8s.io/v1beta1", "VolumeAttributesClass"),
    ("storageclasses.storage.k8s.io", "", "sc2", "storageclasses/sc2", "storage.k8s.io/v1", "StorageClass"),
    ("csistoragecapacities.storage.k8s.io", "ns", "csc-12345-3", "csistoragecapacities/ns/csc-12345-3", "storage.k8s.io/v1", "CSIStorageCapacity"),
    ("csidrivers.storage.k8s.io", "", "csid1", "csidrivers/csid1", "storage.k8s.io/v1", "CSIDriver"),
    ("csinodes.storage.k8s.io", "", "csini1", "csinodes/csini1", "storage.k8s.io/v1", "CSINode"),
    ("roles.rbac.authorization.k8s.io", "ns", "role3", "roles/ns/role3", "rbac.authorization.k8s.io/v1", "Role"),
    ("clusterroles.rbac.authorization.k8s.io", "", "crole3", "clusterroles/crole3", "rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rolebindings.rbac.authorization.k8s.io", "ns", "roleb3", "rolebindings/ns/roleb3", "rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("clusterrolebindings.rbac.authorization.k8s.io", "", "croleb3", "clusterrolebindings/croleb3", "rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("validatingwebhookconfigurations.admissionregistration.k8s.io", "", "hook2", "validatingwebhookconfigurations/hook2", "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("mutatingwebhookconfigurations.admissionregistration.k8s.io", "", "hook2", "mutatingwebhookconfigurations/hook2", "admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("validatingadmissionpolicies.admissionregistration.k8s.io", "", "vap1", "validatingadmissionpolicies/vap1", "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
    ("validatingadmissionpolicybindings.admissionregistration.k8s.io", "", "pb1", "validatingadmissionpolicybindings/pb1", "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
    ("priorityclasses.scheduling.k8s.io", "", "pc3", "priorityclasses/pc3", "scheduling.k8s.io/v1", "PriorityClass"),
    ("apiservices.apiregistration.k8s.io", "", "as2.foo.com", "apiregistration.k8s.io/apiservices/as2.foo.com", "apiregistration.k8s.io/v1", "APIService"),
    ("customresourcedefinitions.apiextensions.k8s.io", "", "openshiftwebconsoleconfigs.webconsole2.operator.openshift.io", "apiextensions.k8s.io/customresourcedefinitions/openshiftwebconsoleconfigs.webconsole2.operator.openshift.io", "apiextensions.k8s.io/v1beta1", "CustomResourceDefinition"),
    ("runtimeclasses.node.k8s.io", "", "rc3", "runtimeclasses/rc3", "node.k8s.io/v1", "RuntimeClass"),
    ("deviceclasses.resource.k8s.io", "", "class1name", "deviceclasses/class1name", "resource.k8s.io/v1alpha3", "DeviceClass"),
    ("resourceclaims.resource.k8s.io", "ns", "claim1name", "resourceclaims/ns/claim1name", "resource.k8s.io/v1alpha3", "ResourceClaim"),
    ("resourceclaimtemplates.resource.k8s.io", "ns", "claimtemplate1name", "resourceclaimtemplates/ns/claimtemplate1name", "resource.k8s.io/v1alpha3", "ResourceClaimTemplate"),
    ("podschedulingcontexts.resource.k8s.io", "ns", "pod1name", "podschedulingcontexts/ns/pod1name", "resource.k8s.io/v1alpha3", "PodSchedulingContext"),
    ("resourceslices.resource.k8s.io", "", "node1slice", "resourceslices/node1slice", "resource.k8s.io/v1alpha3", "ResourceSlice"),
    ("storageversions.internal.apiserver.k8s.io", "", "sv1.test", "storageversions/sv1.test", "internal.apiserver.k8s.io/v1alpha1", "StorageVersion"),
];

#[test]
fn every_built_in_row_puts_objects_where_kube_apiserver_does() {
    let layout = StorageLayout::kube_1_31();
    for &(gr, namespace, name, key, api_version, kind) in EXPECTED {
        let resource = layout.resource(gr);
        assert_eq!(resource.key(namespace, name), key, "{gr}");
        assert_eq!(resource.group_resource.to_string(), gr, "{gr}");
        let built_in = resource
            .built_in
            .unwrap_or_else(|| panic!("{gr} is not a built-in"));
        assert_eq!(
            (built_in.api_version, built_in.kind),
            (api_version, kind),
            "{gr}"
        );
        assert_eq!(built_in.namespaced, !namespace.is_empty(), "{gr}");
        assert!(resource.contains_key(key), "{gr}");
    }
}

#[test]
fn every_row_is_covered_by_the_expected_table_and_no_row_is_repeated() {
    let layout = StorageLayout::kube_1_31();
    let rows: Vec<String> = layout
        .built_ins()
        .map(|r| r.group_resource.to_string())
        .collect();
    for gr in &rows {
        assert!(
            EXPECTED.iter().any(|row| row.0 == gr),
            "{gr} has no expected row"
        );
        assert_eq!(
            rows.iter().filter(|other| *other == gr).count(),
            1,
            "{gr} twice"
        );
    }
    assert_eq!(rows.len(), EXPECTED.len());
}

#[test]
fn every_expected_key_resolves_back_to_its_resource() {
    let layout = StorageLayout::kube_1_31();
    for &(gr, _, _, key, _, _) in EXPECTED {
        let resolved = layout
            .resolve_key(key)
            .unwrap_or_else(|e| panic!("{key}: {e}"));
        // events.k8s.io events are the core events: a key cannot tell them apart.
        let want = if gr == "events.events.k8s.io" {
            "events"
        } else {
            gr
        };
        assert_eq!(resolved.group_resource.to_string(), want, "{key}");
        // With a leading slash and as a bare prefix too.
        let prefix = resolved.key_prefix.clone();
        assert_eq!(layout.resolve_key(&format!("/{key}")).unwrap(), resolved);
        assert_eq!(layout.resolve_key(&prefix).unwrap(), resolved, "{prefix}");
    }
}

#[test]
fn built_ins_are_protobuf_except_the_embedded_servers_objects() {
    let layout = StorageLayout::kube_1_31();
    for resource in layout.built_ins() {
        let json = ["apiextensions.k8s.io", "apiregistration.k8s.io"]
            .contains(&resource.group_resource.group.as_str());
        let want = if json {
            StorageEncoding::Json
        } else {
            StorageEncoding::Protobuf
        };
        assert_eq!(resource.encoding, want, "{}", resource.group_resource);
    }
}

#[test]
fn custom_resources_are_grouped_json() {
    let layout = StorageLayout::kube_1_31();
    for (gr, key) in [
        ("foos.cr.bar.com", "cr.bar.com/foos/ns/cr1foo"),
        ("pants.custom.fancy.com", "custom.fancy.com/pants/cr2pant"),
        (
            "pandas.awesome.bears.com",
            "awesome.bears.com/pandas/cr3panda",
        ),
        (
            "integers.random.numbers.com",
            "random.numbers.com/integers/fortytwo",
        ),
    ] {
        let resource = layout.resource(gr);
        assert_eq!(resource.encoding, StorageEncoding::Json);
        assert_eq!(resource.built_in, None);
        assert!(
            key.starts_with(&format!("{}/", resource.key_prefix)),
            "{gr}"
        );
        assert_eq!(layout.resolve_key(key).unwrap(), resource, "{key}");
    }
    // A resource of a built-in group that kube does not serve: laid out as kube's
    // generic registry would, grouped.
    assert_eq!(layout.resource("widgets.apps").key_prefix, "apps/widgets");
}

#[test]
fn a_resource_prefix_is_a_directory_not_a_string_prefix() {
    let layout = StorageLayout::kube_1_31();
    let pods = layout.resource("pods");
    assert!(pods.contains_key("pods"));
    assert!(pods.contains_key("/pods/default/p1"));
    assert!(!pods.contains_key("podsx/default/p1"));
    assert!(!pods.contains_key("podtemplates/default/p1"));
    // `services` is services/specs: services/endpoints is another resource.
    let services = layout.resource("services");
    assert!(!services.contains_key("services/endpoints/ns/e"));
    assert_eq!(
        layout.resolve_key("services").unwrap_err(),
        LayoutError::UnknownKey {
            key: "services".into()
        }
    );
}

#[test]
fn bookkeeping_and_unknown_keys_are_clear_errors() {
    let layout = StorageLayout::kube_1_31();
    for key in [
        "health",
        "masterleases/127.0.0.1",
        "ranges/serviceips",
        "/ranges/servicenodeports",
        "compact_rev_key",
    ] {
        let err = layout.resolve_key(key).unwrap_err();
        assert!(
            matches!(err, LayoutError::NotAnObject { .. }),
            "{key}: {err}"
        );
        assert!(err.to_string().contains("not an API object"), "{err}");
    }
    let err = layout.resolve_key("widgets/default/w1").unwrap_err();
    assert!(err.to_string().contains("--resource"), "{err}");
    let err = layout.resolve_key("example.com").unwrap_err();
    assert!(
        matches!(err, LayoutError::GroupWithoutResource { .. }),
        "{err}"
    );
    assert!(layout.resolve_key("").is_err());
}

// ---- The generated tables (interop/layout, from each minor's data.go) ----

use crate::table::KUBE_1_31;

#[test]
fn generated_1_31_is_the_hand_typed_table() {
    use crate::table::HAND_TYPED_1_31;
    let key = |row: &&Row| (row.group, row.resource);
    let mut generated: Vec<&Row> = KUBE_1_31.iter().collect();
    let mut hand: Vec<&Row> = HAND_TYPED_1_31.iter().collect();
    generated.sort_by_key(key);
    hand.sort_by_key(key);
    let only_generated: Vec<_> = generated.iter().filter(|r| !hand.contains(r)).collect();
    let only_hand: Vec<_> = hand.iter().filter(|r| !generated.contains(r)).collect();
    assert!(
        only_generated.is_empty() && only_hand.is_empty(),
        "generated only: {only_generated:#?}\nhand only: {only_hand:#?}"
    );
    assert_eq!(generated, hand);
}
