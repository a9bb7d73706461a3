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

/// The layout of one minor, which must exist.
fn kube(minor: u32) -> StorageLayout {
    StorageLayout::for_kube_minor(minor).unwrap_or_else(|| panic!("no table for 1.{minor}"))
}

const MINORS: std::ops::RangeInclusive<u32> = 31..=37;

#[test]
fn every_minor_from_1_31_to_1_37_has_a_table_and_no_other_does() {
    for minor in MINORS {
        assert!(!kube(minor).table.rows.is_empty(), "1.{minor}");
    }
    for minor in [0, 30, 38, u32::MAX] {
        assert!(StorageLayout::for_kube_minor(minor).is_none(), "1.{minor}");
    }
    assert_eq!(StorageLayout::kube_1_31().table.rows, kube(31).table.rows);
    assert_eq!(StorageLayout::kube_1_31().table.rows, KUBE_1_31);
}

#[test]
fn every_table_is_sorted_by_group_then_resource_with_one_row_each() {
    for minor in MINORS {
        let rows = kube(minor).table.rows;
        for pair in rows.windows(2) {
            assert!(
                (pair[0].group, pair[0].resource) < (pair[1].group, pair[1].resource),
                "1.{minor}: {}.{} then {}.{}",
                pair[0].resource,
                pair[0].group,
                pair[1].resource,
                pair[1].group
            );
        }
    }
}

#[test]
fn every_table_is_protobuf_except_the_embedded_servers_objects() {
    for minor in MINORS {
        for row in kube(minor).table.rows {
            let json = matches!(
                (row.group, row.resource),
                ("apiextensions.k8s.io", "customresourcedefinitions")
                    | ("apiregistration.k8s.io", "apiservices")
            );
            let want = if json {
                StorageEncoding::Json
            } else {
                StorageEncoding::Protobuf
            };
            assert_eq!(
                row.encoding, want,
                "1.{minor}: {}.{}",
                row.resource, row.group
            );
        }
    }
}

#[test]
fn every_minors_keys_resolve_back_to_their_resource() {
    for minor in MINORS {
        let layout = kube(minor);
        for resource in layout.built_ins() {
            let namespace = if resource.built_in.unwrap().namespaced {
                "ns"
            } else {
                ""
            };
            let key = resource.key(namespace, "name1");
            let resolved = layout
                .resolve_key(&key)
                .unwrap_or_else(|e| panic!("1.{minor}: {key}: {e}"));
            let gr = resource.group_resource.to_string();
            // events.k8s.io events are the core events: a key cannot tell them apart.
            let want = if gr == "events.events.k8s.io" {
                "events"
            } else {
                &gr
            };
            assert_eq!(
                resolved.group_resource.to_string(),
                want,
                "1.{minor}: {key}"
            );
        }
    }
}

#[test]
fn a_resource_keeps_its_key_prefix_and_scope_in_every_minor() {
    let mut seen: Vec<(u32, &Row)> = Vec::new();
    for minor in MINORS {
        for row in kube(minor).table.rows {
            for (earlier, other) in &seen {
                if (other.group, other.resource) == (row.group, row.resource) {
                    assert_eq!(
                        (other.key_prefix, other.namespaced),
                        (row.key_prefix, row.namespaced),
                        "{}.{} in 1.{earlier} and 1.{minor}",
                        row.resource,
                        row.group
                    );
                }
            }
        }
        seen.extend(kube(minor).table.rows.iter().map(|row| (minor, row)));
    }
}

#[test]
fn kube_1_37_stores_what_its_data_go_says() {
    let layout = kube(37);
    // (group-resource, key prefix, stored apiVersion, kind, namespaced)
    #[rustfmt::skip]
    let expected = [
        ("deviceclasses.resource.k8s.io", "deviceclasses", "resource.k8s.io/v1", "DeviceClass", false),
        ("resourceclaims.resource.k8s.io", "resourceclaims", "resource.k8s.io/v1", "ResourceClaim", true),
        ("resourceclaimtemplates.resource.k8s.io", "resourceclaimtemplates", "resource.k8s.io/v1", "ResourceClaimTemplate", true),
        ("resourceslices.resource.k8s.io", "resourceslices", "resource.k8s.io/v1", "ResourceSlice", false),
        // Served at v1 too, stored at v1beta2 so that a downgrade can read it.
        ("devicetaintrules.resource.k8s.io", "devicetaintrules", "resource.k8s.io/v1beta2", "DeviceTaintRule", false),
        ("resourcepoolstatusrequests.resource.k8s.io", "resourcepoolstatusrequests", "resource.k8s.io/v1alpha3", "ResourcePoolStatusRequest", false),
        ("servicecidrs.networking.k8s.io", "servicecidrs", "networking.k8s.io/v1", "ServiceCIDR", false),
        ("ipaddresses.networking.k8s.io", "ipaddresses", "networking.k8s.io/v1", "IPAddress", false),
        ("volumeattributesclasses.storage.k8s.io", "volumeattributesclasses", "storage.k8s.io/v1", "VolumeAttributesClass", false),
        ("mutatingadmissionpolicies.admissionregistration.k8s.io", "mutatingadmissionpolicies", "admissionregistration.k8s.io/v1", "MutatingAdmissionPolicy", false),
        ("mutatingadmissionpolicybindings.admissionregistration.k8s.io", "mutatingadmissionpolicybindings", "admissionregistration.k8s.io/v1", "MutatingAdmissionPolicyBinding", false),
        // Served at v1, stored at the beta version.
        ("clustertrustbundles.certificates.k8s.io", "clustertrustbundles", "certificates.k8s.io/v1beta1", "ClusterTrustBundle", false),
        ("podcertificaterequests.certificates.k8s.io", "podcertificaterequests", "certificates.k8s.io/v1beta1", "PodCertificateRequest", true),
        ("storageversionmigrations.storagemigration.k8s.io", "storageversionmigrations", "storagemigration.k8s.io/v1beta1", "StorageVersionMigration", false),
        ("leasecandidates.coordination.k8s.io", "leasecandidates", "coordination.k8s.io/v1beta1", "LeaseCandidate", true),
        ("workloads.scheduling.k8s.io", "workloads", "scheduling.k8s.io/v1beta1", "Workload", true),
        ("podgroups.scheduling.k8s.io", "podgroups", "scheduling.k8s.io/v1beta1", "PodGroup", true),
        ("compositepodgroups.scheduling.k8s.io", "compositepodgroups", "scheduling.k8s.io/v1alpha3", "CompositePodGroup", true),
        ("evictionrequests.lifecycle.k8s.io", "evictionrequests", "lifecycle.k8s.io/v1alpha1", "EvictionRequest", true),
        ("evictions.lifecycle.k8s.io", "evictions", "lifecycle.k8s.io/v1alpha1", "Eviction", true),
        ("customresourcedefinitions.apiextensions.k8s.io", "apiextensions.k8s.io/customresourcedefinitions", "apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", false),
        ("apiservices.apiregistration.k8s.io", "apiregistration.k8s.io/apiservices", "apiregistration.k8s.io/v1", "APIService", false),
        ("horizontalpodautoscalers.autoscaling", "horizontalpodautoscalers", "autoscaling/v2", "HorizontalPodAutoscaler", true),
        ("events.events.k8s.io", "events", "v1", "Event", true),
        ("nodes", "minions", "v1", "Node", false),
    ];
    for (gr, key_prefix, api_version, kind, namespaced) in expected {
        let resource = layout.resource(gr);
        let built_in = resource
            .built_in
            .unwrap_or_else(|| panic!("{gr} is not a built-in of 1.37"));
        assert_eq!(
            (
                resource.key_prefix.as_str(),
                built_in.api_version,
                built_in.kind,
                built_in.namespaced
            ),
            (key_prefix, api_version, kind, namespaced),
            "{gr}"
        );
    }
    assert_eq!(layout.table.rows.len(), 71);
}

#[test]
fn storage_versions_move_from_minor_to_minor_as_data_go_says() {
    // (group-resource, stored apiVersion in 1.31, 1.32, ..., 1.37; "" where not served)
    #[rustfmt::skip]
    let expected: &[(&str, [&str; 7])] = &[
        ("deviceclasses.resource.k8s.io", ["resource.k8s.io/v1alpha3", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1", "resource.k8s.io/v1", "resource.k8s.io/v1"]),
        ("podschedulingcontexts.resource.k8s.io", ["resource.k8s.io/v1alpha3", "", "", "", "", "", ""]),
        ("devicetaintrules.resource.k8s.io", ["", "", "resource.k8s.io/v1alpha3", "resource.k8s.io/v1alpha3", "resource.k8s.io/v1alpha3", "resource.k8s.io/v1alpha3", "resource.k8s.io/v1beta2"]),
        ("servicecidrs.networking.k8s.io", ["networking.k8s.io/v1beta1", "networking.k8s.io/v1beta1", "networking.k8s.io/v1beta1", "networking.k8s.io/v1", "networking.k8s.io/v1", "networking.k8s.io/v1", "networking.k8s.io/v1"]),
        ("volumeattributesclasses.storage.k8s.io", ["storage.k8s.io/v1beta1", "storage.k8s.io/v1beta1", "storage.k8s.io/v1beta1", "storage.k8s.io/v1beta1", "storage.k8s.io/v1beta1", "storage.k8s.io/v1", "storage.k8s.io/v1"]),
        ("mutatingadmissionpolicies.admissionregistration.k8s.io", ["", "admissionregistration.k8s.io/v1alpha1", "admissionregistration.k8s.io/v1alpha1", "admissionregistration.k8s.io/v1alpha1", "admissionregistration.k8s.io/v1beta1", "admissionregistration.k8s.io/v1beta1", "admissionregistration.k8s.io/v1"]),
        ("leasecandidates.coordination.k8s.io", ["coordination.k8s.io/v1alpha1", "coordination.k8s.io/v1alpha2", "coordination.k8s.io/v1beta1", "coordination.k8s.io/v1beta1", "coordination.k8s.io/v1beta1", "coordination.k8s.io/v1beta1", "coordination.k8s.io/v1beta1"]),
        ("clustertrustbundles.certificates.k8s.io", ["certificates.k8s.io/v1alpha1", "certificates.k8s.io/v1alpha1", "certificates.k8s.io/v1beta1", "certificates.k8s.io/v1beta1", "certificates.k8s.io/v1beta1", "certificates.k8s.io/v1beta1", "certificates.k8s.io/v1beta1"]),
        ("storageversionmigrations.storagemigration.k8s.io", ["storagemigration.k8s.io/v1alpha1", "storagemigration.k8s.io/v1alpha1", "storagemigration.k8s.io/v1alpha1", "storagemigration.k8s.io/v1alpha1", "storagemigration.k8s.io/v1beta1", "storagemigration.k8s.io/v1beta1", "storagemigration.k8s.io/v1beta1"]),
        ("workloads.scheduling.k8s.io", ["", "", "", "", "scheduling.k8s.io/v1alpha1", "scheduling.k8s.io/v1alpha2", "scheduling.k8s.io/v1beta1"]),
        ("deployments.apps", ["apps/v1"; 7]),
    ];
    for (gr, versions) in expected {
        let gr_parsed = GroupResource::parse(gr);
        for (minor, want) in MINORS.zip(versions) {
            let got = kube(minor)
                .built_in(&gr_parsed)
                .map_or("", |r| r.built_in.unwrap().api_version);
            assert_eq!(got, *want, "{gr} in 1.{minor}");
        }
    }
}

#[test]
fn every_kube_version_has_its_own_layout() {
    use apistore_storage::KubeVersion;
    for &version in KubeVersion::ALL {
        let by_version = StorageLayout::for_kube(version);
        let by_minor = StorageLayout::for_kube_minor(version.minor()).unwrap();
        assert!(std::ptr::eq(by_version.table, by_minor.table), "{version}");
    }
    let device_classes = StorageLayout::for_kube(KubeVersion::V1_37)
        .built_in(&GroupResource::new("resource.k8s.io", "deviceclasses"))
        .unwrap();
    assert_eq!(
        device_classes.built_in.unwrap().api_version,
        "resource.k8s.io/v1"
    );
}

#[test]
fn keys_resolve_by_their_first_segment_as_by_every_row() {
    // The lookup by first segment is the table's, not a scan of it...
    let table = &crate::table::TABLES[0];
    assert!(table.rows == KUBE_1_31);
    let pods = table.rows_beginning("pods");
    assert!(
        !pods.is_empty() && pods.len() < KUBE_1_31.len(),
        "{}",
        pods.len()
    );
    assert!(table.rows_beginning("no-such-resource").is_empty());
    // ...and gives every key the row a scan of every row gives: the longest prefix
    // the key lies under, the first of equals.
    let scan = |relative: &str| {
        KUBE_1_31
            .iter()
            .filter(|row| apistore_storage::key_prefix::lies_under(relative, row.key_prefix))
            .fold(None::<&Row>, |best, row| match best {
                Some(best) if best.key_prefix.len() >= row.key_prefix.len() => Some(best),
                _ => Some(row),
            })
            .map(|row| row.key_prefix)
    };
    let layout = StorageLayout::kube_1_31();
    let mut checked = 0;
    for row in KUBE_1_31 {
        for key in [
            row.key_prefix.to_owned(),
            format!("{}/ns/name", row.key_prefix),
            format!("{}/name", row.key_prefix),
            format!("{}x/ns/name", row.key_prefix),
        ] {
            let resolved = layout.resolve_key(&key).ok();
            let by_scan = scan(&key);
            if let Some(prefix) = by_scan {
                let resolved = resolved.unwrap_or_else(|| panic!("{key}: not resolved"));
                assert_eq!(resolved.key_prefix, prefix, "{key}");
            }
            checked += 1;
        }
    }
    assert!(checked > 200, "{checked}");
}
