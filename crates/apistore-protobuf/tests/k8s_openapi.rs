//! The transcoder seen through k8s-openapi's types.
//!
//! For the golden cases of the kinds k8s-openapi has: read Go's JSON into the
//! k8s-openapi type, write that back out as a `serde_json::Value` (k8s-openapi's own
//! field order and omissions, not Go's), encode it to protobuf with `encode_value`,
//! decode the protobuf to JSON and read it into the type again: the object must come
//! back equal. Then proptest values for a few simple kinds, JSON -> protobuf -> JSON.

// Tests may unwrap: a panic there is a failed test (helpers outside #[test] too).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::path::{Path, PathBuf};

use apistore_protobuf::{KubeProtobuf, MediaType, StorageCodec};
use apistore_storage::Codec;
use k8s_openapi::ByteString;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use proptest::prelude::*;
use serde::Deserialize;
use serde::de::DeserializeOwned;

#[derive(Deserialize)]
struct Fixture {
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    json: String,
}

/// The kube minor of the fixtures: `APISTORE_GOLDEN_KUBE` for a set in
/// `APISTORE_GOLDEN_DIR` (1.31, the committed `tests/golden`'s, when unset).
fn golden_kube() -> apistore_storage::KubeVersion {
    std::env::var("APISTORE_GOLDEN_KUBE").map_or(apistore_storage::KubeVersion::V1_31, |v| {
        v.parse()
            .unwrap_or_else(|e| panic!("APISTORE_GOLDEN_KUBE: {e}"))
    })
}

fn fixture_dir() -> PathBuf {
    std::env::var_os("APISTORE_GOLDEN_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
        PathBuf::from,
    )
}

/// Round-trips every case of one fixture file through the k8s-openapi type `T`.
/// Cases k8s-openapi cannot read at all (Go JSON k8s-openapi's newer types refuse)
/// are counted, not failed; realistic cases must all be read.
fn roundtrip_through<T>(file: &str)
where
    T: DeserializeOwned + serde::Serialize + PartialEq + Debug + 'static,
{
    let kp = KubeProtobuf::for_version(golden_kube());
    let path = fixture_dir().join(file);
    let fixture: Fixture = serde_json::from_slice(&std::fs::read(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut failures = Vec::new();
    let mut unreadable = Vec::new();
    let mut checked = 0;
    for case in &fixture.cases {
        let first: T = match serde_json::from_str(&case.json) {
            Ok(v) => v,
            Err(e) if case.name.starts_with("fuzz/") => {
                unreadable.push(format!("{}: {e}", case.name));
                continue;
            }
            Err(e) => {
                failures.push(format!(
                    "{}: k8s-openapi cannot read Go's JSON: {e}",
                    case.name
                ));
                continue;
            }
        };
        // The store's codec writes a typed object from its `Serialize` (no JSON text
        // when it can): the very bytes the JSON path writes from its text.
        let by_text = kp.encode_json(&serde_json::to_vec(&first).unwrap());
        let by_codec =
            StorageCodec::<T>::for_kube(MediaType::Protobuf, golden_kube()).encode(&first);
        match (&by_text, &by_codec) {
            (Ok(a), Ok(b)) if a[..] == b[..] => {}
            (Err(_), Err(_)) => {}
            _ => failures.push(format!(
                "{}: the codec's encode differs from encode_json of its JSON text: {:?} against {:?}",
                case.name,
                by_codec.as_ref().map(|b| b.len()),
                by_text.as_ref().map(Vec::len)
            )),
        }
        let value = serde_json::to_value(&first).unwrap();
        let stored = match kp.encode_value(&value) {
            Ok(b) => b,
            Err(e) => {
                failures.push(format!(
                    "{}: encode_value: {e}\n    value: {value}",
                    case.name
                ));
                continue;
            }
        };
        let json = match kp.decode_to_json(&stored) {
            Ok(j) => j,
            Err(e) => {
                failures.push(format!("{}: decode_to_json: {e}", case.name));
                continue;
            }
        };
        match serde_json::from_slice::<T>(&json) {
            Ok(second) if second == first => checked += 1,
            Ok(second) => failures.push(format!(
                "{}: came back different\n    sent: {}\n    got:  {}",
                case.name,
                serde_json::to_string(&first).unwrap(),
                serde_json::to_string(&second).unwrap()
            )),
            Err(e) => failures.push(format!(
                "{}: k8s-openapi cannot read the decoded JSON: {e}\n    {}",
                case.name,
                String::from_utf8_lossy(&json)
            )),
        }
    }
    eprintln!(
        "{file}: {checked} of {} cases round-trip; {} fuzzed cases k8s-openapi cannot read{}",
        fixture.cases.len(),
        unreadable.len(),
        if unreadable.is_empty() {
            String::new()
        } else {
            format!(":\n  {}", unreadable.join("\n  "))
        }
    );
    assert!(
        failures.is_empty(),
        "{file}: {} of {} cases fail:\n- {}",
        failures.len(),
        fixture.cases.len(),
        failures.join("\n- ")
    );
}

macro_rules! roundtrip_tests {
    ($($test:ident: $ty:ty = $file:literal;)*) => {
        $(
            #[test]
            fn $test() {
                roundtrip_through::<$ty>($file);
            }
        )*
    };
}

roundtrip_tests! {
    pod_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::Pod = "core_v1_Pod.json";
    configmap_round_trips_through_k8s_openapi: ConfigMap = "core_v1_ConfigMap.json";
    secret_round_trips_through_k8s_openapi: Secret = "core_v1_Secret.json";
    service_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::Service = "core_v1_Service.json";
    endpoints_round_trip_through_k8s_openapi: k8s_openapi::api::core::v1::Endpoints = "core_v1_Endpoints.json";
    node_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::Node = "core_v1_Node.json";
    namespace_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::Namespace = "core_v1_Namespace.json";
    serviceaccount_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::ServiceAccount = "core_v1_ServiceAccount.json";
    core_event_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::Event = "core_v1_Event.json";
    persistentvolume_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::PersistentVolume = "core_v1_PersistentVolume.json";
    persistentvolumeclaim_round_trips_through_k8s_openapi: k8s_openapi::api::core::v1::PersistentVolumeClaim = "core_v1_PersistentVolumeClaim.json";
    deployment_round_trips_through_k8s_openapi: k8s_openapi::api::apps::v1::Deployment = "apps_v1_Deployment.json";
    replicaset_round_trips_through_k8s_openapi: k8s_openapi::api::apps::v1::ReplicaSet = "apps_v1_ReplicaSet.json";
    statefulset_round_trips_through_k8s_openapi: k8s_openapi::api::apps::v1::StatefulSet = "apps_v1_StatefulSet.json";
    daemonset_round_trips_through_k8s_openapi: k8s_openapi::api::apps::v1::DaemonSet = "apps_v1_DaemonSet.json";
    controllerrevision_round_trips_through_k8s_openapi: k8s_openapi::api::apps::v1::ControllerRevision = "apps_v1_ControllerRevision.json";
    job_round_trips_through_k8s_openapi: k8s_openapi::api::batch::v1::Job = "batch_v1_Job.json";
    cronjob_round_trips_through_k8s_openapi: k8s_openapi::api::batch::v1::CronJob = "batch_v1_CronJob.json";
    lease_round_trips_through_k8s_openapi: Lease = "coordination.k8s.io_v1_Lease.json";
    events_event_round_trips_through_k8s_openapi: k8s_openapi::api::events::v1::Event = "events.k8s.io_v1_Event.json";
    endpointslice_round_trips_through_k8s_openapi: k8s_openapi::api::discovery::v1::EndpointSlice = "discovery.k8s.io_v1_EndpointSlice.json";
    role_round_trips_through_k8s_openapi: k8s_openapi::api::rbac::v1::Role = "rbac.authorization.k8s.io_v1_Role.json";
    clusterrole_round_trips_through_k8s_openapi: k8s_openapi::api::rbac::v1::ClusterRole = "rbac.authorization.k8s.io_v1_ClusterRole.json";
    rolebinding_round_trips_through_k8s_openapi: k8s_openapi::api::rbac::v1::RoleBinding = "rbac.authorization.k8s.io_v1_RoleBinding.json";
    clusterrolebinding_round_trips_through_k8s_openapi: k8s_openapi::api::rbac::v1::ClusterRoleBinding = "rbac.authorization.k8s.io_v1_ClusterRoleBinding.json";
    ingress_round_trips_through_k8s_openapi: k8s_openapi::api::networking::v1::Ingress = "networking.k8s.io_v1_Ingress.json";
    networkpolicy_round_trips_through_k8s_openapi: k8s_openapi::api::networking::v1::NetworkPolicy = "networking.k8s.io_v1_NetworkPolicy.json";
    hpa_round_trips_through_k8s_openapi: k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler = "autoscaling_v2_HorizontalPodAutoscaler.json";
    pdb_round_trips_through_k8s_openapi: k8s_openapi::api::policy::v1::PodDisruptionBudget = "policy_v1_PodDisruptionBudget.json";
    priorityclass_round_trips_through_k8s_openapi: k8s_openapi::api::scheduling::v1::PriorityClass = "scheduling.k8s.io_v1_PriorityClass.json";
    storageclass_round_trips_through_k8s_openapi: k8s_openapi::api::storage::v1::StorageClass = "storage.k8s.io_v1_StorageClass.json";
    csidriver_round_trips_through_k8s_openapi: k8s_openapi::api::storage::v1::CSIDriver = "storage.k8s.io_v1_CSIDriver.json";
    validatingwebhook_round_trips_through_k8s_openapi: k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration = "admissionregistration.k8s.io_v1_ValidatingWebhookConfiguration.json";
    mutatingwebhook_round_trips_through_k8s_openapi: k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration = "admissionregistration.k8s.io_v1_MutatingWebhookConfiguration.json";
    flowschema_round_trips_through_k8s_openapi: k8s_openapi::api::flowcontrol::v1::FlowSchema = "flowcontrol.apiserver.k8s.io_v1_FlowSchema.json";
    prioritylevel_round_trips_through_k8s_openapi: k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration = "flowcontrol.apiserver.k8s.io_v1_PriorityLevelConfiguration.json";
    crd_round_trips_through_k8s_openapi: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition = "apiextensions.k8s.io_v1_CustomResourceDefinition.json";
    apiservice_round_trips_through_k8s_openapi: k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService = "apiregistration.k8s.io_v1_APIService.json";
}

/// JSON -> protobuf -> JSON for a value built in Rust: the protobuf reads back into
/// the same object, re-encoding the decoded JSON gives the same protobuf bytes, and
/// decoding those gives the same JSON bytes (Go's form is a fixed point).
fn json_protobuf_json_is_identity<T>(object: &T) -> Result<(), TestCaseError>
where
    T: DeserializeOwned + serde::Serialize + PartialEq + Debug,
{
    let kp = KubeProtobuf::k8s_1_31();
    let value = serde_json::to_value(object).unwrap();
    let stored = kp
        .encode_value(&value)
        .map_err(|e| TestCaseError::fail(format!("encode_value: {e}: {value}")))?;
    let json = kp
        .decode_to_json(&stored)
        .map_err(|e| TestCaseError::fail(format!("decode_to_json: {e}")))?;
    let back: T = serde_json::from_slice(&json)
        .map_err(|e| TestCaseError::fail(format!("{e}: {}", String::from_utf8_lossy(&json))))?;
    prop_assert_eq!(&back, object);
    let again = kp
        .encode_json(&json)
        .map_err(|e| TestCaseError::fail(format!("encode_json: {e}")))?;
    prop_assert_eq!(&again, &stored, "encode_json(decode_to_json(P)) != P");
    let json_again = kp
        .decode_to_json(&again)
        .map_err(|e| TestCaseError::fail(format!("decode_to_json: {e}")))?;
    prop_assert_eq!(
        String::from_utf8_lossy(&json_again),
        String::from_utf8_lossy(&json)
    );
    Ok(())
}

/// Maps that are absent or hold at least one entry (Go omits an empty map, so
/// `Some({})` would come back as `None`).
fn string_map(
    keys: impl Strategy<Value = String>,
    values: impl Strategy<Value = String>,
) -> impl Strategy<Value = Option<BTreeMap<String, String>>> {
    proptest::option::of(proptest::collection::btree_map(keys, values, 1..6))
}

fn meta() -> impl Strategy<Value = ObjectMeta> {
    (
        "[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?",
        proptest::option::of("[a-z0-9-]{1,20}"),
        string_map(any::<String>(), any::<String>()),
        string_map(any::<String>(), any::<String>()),
        proptest::option::of(any::<i64>()),
    )
        .prop_map(
            |(name, namespace, labels, annotations, generation)| ObjectMeta {
                name: Some(name),
                namespace,
                labels,
                annotations,
                generation: generation.filter(|g| *g != 0),
                ..ObjectMeta::default()
            },
        )
}

/// A MicroTime between year 1 and 9999, to the microsecond (what Go keeps); never
/// Go's zero time, which Go writes as null.
fn micro_time() -> impl Strategy<Value = MicroTime> {
    (-62_135_596_799i64..253_402_300_799i64, 0i32..1_000_000).prop_map(|(secs, micros)| {
        MicroTime(k8s_openapi::jiff::Timestamp::new(secs, micros * 1000).unwrap())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn configmap_with_arbitrary_unicode_is_a_fixed_point(
        metadata in meta(),
        data in string_map(any::<String>(), any::<String>()),
        binary in proptest::option::of(proptest::collection::btree_map(
            any::<String>(), proptest::collection::vec(any::<u8>(), 0..64), 1..4)),
        immutable in proptest::option::of(any::<bool>()),
    ) {
        let cm = ConfigMap {
            metadata,
            data,
            binary_data: binary.map(|m| m.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
            immutable,
        };
        json_protobuf_json_is_identity(&cm)?;
    }

    #[test]
    fn lease_with_arbitrary_durations_and_times_is_a_fixed_point(
        metadata in meta(),
        holder in proptest::option::of(any::<String>()),
        duration in proptest::option::of(any::<i32>()),
        transitions in proptest::option::of(any::<i32>()),
        acquire in proptest::option::of(micro_time()),
        renew in proptest::option::of(micro_time()),
        strategy in proptest::option::of("[A-Za-z]{1,20}"),
    ) {
        let lease = Lease {
            metadata,
            spec: Some(LeaseSpec {
                acquire_time: acquire,
                holder_identity: holder,
                lease_duration_seconds: duration,
                lease_transitions: transitions,
                preferred_holder: None,
                renew_time: renew,
                strategy,
            }),
        };
        json_protobuf_json_is_identity(&lease)?;
    }

    #[test]
    fn secret_with_arbitrary_bytes_is_a_fixed_point(
        metadata in meta(),
        data in proptest::option::of(proptest::collection::btree_map(
            "[-._a-zA-Z0-9]{1,40}", proptest::collection::vec(any::<u8>(), 0..256), 1..6)),
        type_ in proptest::option::of("[a-z.]{1,10}(/[a-z-]{1,10})?"),
        immutable in proptest::option::of(any::<bool>()),
    ) {
        let secret = Secret {
            metadata,
            data: data.map(|m| m.into_iter().map(|(k, v)| (k, ByteString(v))).collect()),
            immutable,
            string_data: None,
            type_,
        };
        json_protobuf_json_is_identity(&secret)?;
    }
}
