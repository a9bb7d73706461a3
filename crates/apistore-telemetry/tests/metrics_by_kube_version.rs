//! What kube 1.34, 1.36 and 1.37 changed in the storage metrics' exposition, line for
//! line as each minor's kube-apiserver serves it (k8s.io/apiserver v0.34, v0.36 and
//! v0.37: `pkg/storage/etcd3/metrics`, `pkg/storage/metrics`). The 1.31 exposition is
//! `metrics_exposition.rs`'.

// Helpers outside `#[test]` functions panic too: a panic there is a failed test.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use apistore_storage::{KubeVersion, Stats};
use apistore_telemetry::{
    Operation, STATUS_OK, STATUS_UNKNOWN_NON_GRPC, StorageMetrics, TelemetryError,
    TransformationType, encode_text,
};
use prometheus::Registry;

mod common;
use common::{REQUEST_BOUNDS, family, histogram_lines};

/// A counter family's lines: HELP with `level`, TYPE, then the samples after the name.
fn counter(name: &str, level: &str, help: &str, samples: &[&str]) -> Vec<String> {
    let mut lines = vec![
        format!("# HELP {name} {level} {help}"),
        format!("# TYPE {name} counter"),
    ];
    lines.extend(samples.iter().map(|s| format!("{name}{s}")));
    lines
}

/// Asserts that `name`'s family in `text` is exactly [`counter`]'s lines.
fn assert_counter(text: &str, name: &str, level: &str, help: &str, samples: &[&str]) {
    assert_eq!(
        family(text, name),
        counter(name, level, help, samples),
        "{text}"
    );
}

const OBJECT_COUNT_HELP: &str = "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.";

/// The same recordings at every minor, so the tests differ only in what they expect.
fn record_everything(metrics: &StorageMetrics) {
    let deployments = metrics.for_resource("deployments.apps");
    deployments.record_etcd_request(Operation::Get, true, Duration::from_millis(3));
    deployments.record_etcd_request(Operation::ListOnlyKeys, true, Duration::from_millis(3));
    deployments.record_etcd_request(
        Operation::GetCurrentResourceVersion,
        false,
        Duration::from_millis(3),
    );
    deployments.record_list(10, 8, 4);
    deployments.record_cache_list("f:spec.nodeName", 6, 2);
    deployments.record_cache_list("", 9, 9);
    deployments.record_list_latency(true, Duration::from_millis(30));
    deployments.record_bookmark();
    deployments.record_events_received();
    deployments.record_decode_error();
    metrics.set_resource_stats(
        "deployments.apps",
        Some(Stats {
            object_count: 3,
            estimated_average_object_size_bytes: 100,
        }),
    );
}

fn exposition(version: KubeVersion) -> String {
    let registry = Registry::new();
    let metrics = StorageMetrics::register_for(&registry, version).unwrap();
    assert_eq!(metrics.kube_version(), version);
    record_everything(&metrics);
    encode_text(&registry)
}

#[test]
fn kube_1_37_labels_lists_by_storage_and_index_and_hides_the_old_object_count() {
    let text = exposition(KubeVersion::V1_37);

    assert_counter(
        &text,
        "etcd_requests_total",
        "[ALPHA]",
        "Etcd request counts for each operation and object type.",
        &[
            r#"{group="apps",operation="get",resource="deployments"} 1"#,
            r#"{group="apps",operation="getCurrentResourceVersion",resource="deployments"} 1"#,
            r#"{group="apps",operation="listOnlyKeys",resource="deployments"} 1"#,
        ],
    );
    assert_counter(
        &text,
        "etcd_request_errors_total",
        "[ALPHA]",
        "Etcd failed request counts for each operation and object type.",
        &[r#"{group="apps",operation="getCurrentResourceVersion",resource="deployments"} 1"#],
    );
    // etcd's list and the watch cache's two (by index) are series apart.
    assert_counter(
        &text,
        "apiserver_storage_list_total",
        "[ALPHA]",
        "Number of LIST requests served from storage",
        &[
            r#"{group="apps",index="",resource="deployments",storage="etcd"} 1"#,
            r#"{group="apps",index="",resource="deployments",storage="watchcache"} 1"#,
            r#"{group="apps",index="f:spec.nodeName",resource="deployments",storage="watchcache"} 1"#,
        ],
    );
    assert_counter(
        &text,
        "apiserver_storage_list_fetched_objects_total",
        "[ALPHA]",
        "Number of objects read from storage in the course of serving a LIST request",
        &[
            r#"{group="apps",index="",resource="deployments",storage="etcd"} 10"#,
            r#"{group="apps",index="",resource="deployments",storage="watchcache"} 9"#,
            r#"{group="apps",index="f:spec.nodeName",resource="deployments",storage="watchcache"} 6"#,
        ],
    );
    // The watch cache evaluates nothing, as kube's counts it: a zero series.
    assert_counter(
        &text,
        "apiserver_storage_list_evaluated_objects_total",
        "[ALPHA]",
        "Number of objects tested in the course of serving a LIST request from storage",
        &[
            r#"{group="apps",resource="deployments",storage="etcd"} 8"#,
            r#"{group="apps",resource="deployments",storage="watchcache"} 0"#,
        ],
    );
    assert_counter(
        &text,
        "apiserver_storage_list_returned_objects_total",
        "[ALPHA]",
        "Number of objects returned for a LIST request from storage",
        &[
            r#"{group="apps",resource="deployments",storage="etcd"} 4"#,
            r#"{group="apps",resource="deployments",storage="watchcache"} 11"#,
        ],
    );
    let mut duration = vec![
        "# HELP apiserver_storage_list_duration_seconds [ALPHA] Latency of the storage layer GetList call in seconds, including object decode, split by whether etcd RangeStream was used.".to_owned(),
        "# TYPE apiserver_storage_list_duration_seconds histogram".to_owned(),
    ];
    let counts: Vec<u64> = (0..23).map(|i| u64::from(i >= 2)).collect();
    duration.extend(histogram_lines(
        "apiserver_storage_list_duration_seconds",
        r#"group="apps",resource="deployments",streamed="true""#,
        &REQUEST_BOUNDS,
        &counts,
        "0.03",
        1,
    ));
    assert_eq!(
        family(&text, "apiserver_storage_list_duration_seconds"),
        duration
    );
    assert_counter(
        &text,
        "etcd_bookmark_total",
        "[ALPHA]",
        "Number of etcd bookmarks (progress notify events) split by kind.",
        &[r#"{group="apps",resource="deployments"} 1"#],
    );
    assert_counter(
        &text,
        "apiserver_storage_events_received_total",
        "[BETA]",
        "Number of etcd events received split by kind.",
        &[r#"{group="apps",resource="deployments"} 1"#],
    );
    assert_counter(
        &text,
        "apiserver_storage_decode_errors_total",
        "[ALPHA]",
        "Number of stored object decode errors split by object type",
        &[r#"{group="apps",resource="deployments"} 1"#],
    );
    assert_eq!(
        family(&text, "apiserver_resource_objects"),
        [
            format!("# HELP apiserver_resource_objects [ALPHA] {OBJECT_COUNT_HELP}"),
            "# TYPE apiserver_resource_objects gauge".to_owned(),
            r#"apiserver_resource_objects{group="apps",resource="deployments"} 3"#.to_owned(),
        ]
    );
    // Hidden: the stable count three minors after its deprecation, the alpha bookmark
    // gauge at once.
    assert!(!text.contains("apiserver_storage_objects"), "{text}");
    assert!(!text.contains("etcd_bookmark_counts"), "{text}");
}

#[test]
fn kube_1_34_splits_the_resource_label_and_keeps_lists_unlabelled_by_storage() {
    let text = exposition(KubeVersion::V1_34);

    assert_counter(
        &text,
        "etcd_requests_total",
        "[ALPHA]",
        "Etcd request counts for each operation and object type.",
        &[
            // 1.34 labels the current revision's read as any get.
            r#"{group="apps",operation="get",resource="deployments"} 2"#,
            r#"{group="apps",operation="listOnlyKeys",resource="deployments"} 1"#,
        ],
    );
    // The watch cache's lists are its own metrics' business before 1.37.
    assert_counter(
        &text,
        "apiserver_storage_list_total",
        "[ALPHA]",
        "Number of LIST requests served from storage",
        &[r#"{group="apps",resource="deployments"} 1"#],
    );
    assert_counter(
        &text,
        "apiserver_storage_list_returned_objects_total",
        "[ALPHA]",
        "Number of objects returned for a LIST request from storage",
        &[r#"{group="apps",resource="deployments"} 4"#],
    );
    assert_eq!(
        family(&text, "etcd_bookmark_counts"),
        [
            "# HELP etcd_bookmark_counts [ALPHA] Number of etcd bookmarks (progress notify events) split by kind.",
            "# TYPE etcd_bookmark_counts gauge",
            r#"etcd_bookmark_counts{group="apps",resource="deployments"} 1"#,
        ]
    );
    assert_counter(
        &text,
        "apiserver_storage_events_received_total",
        "[ALPHA]",
        "Number of etcd events received split by kind.",
        &[r#"{group="apps",resource="deployments"} 1"#],
    );
    // Still labelled by the group-resource string; its help says it is deprecated,
    // though 1.34 does not yet mark it so.
    assert_eq!(
        family(&text, "apiserver_storage_objects"),
        [
            format!(
                "# HELP apiserver_storage_objects [STABLE] [DEPRECATED, consider using apiserver_resource_objects instead] {OBJECT_COUNT_HELP}"
            ),
            "# TYPE apiserver_storage_objects gauge".to_owned(),
            r#"apiserver_storage_objects{resource="deployments.apps"} 3"#.to_owned(),
        ]
    );
    assert!(!text.contains("etcd_bookmark_total"), "{text}");
    assert!(
        !text.contains("apiserver_storage_list_duration_seconds"),
        "{text}"
    );
}

#[test]
fn kube_1_36_counts_bookmarks_in_a_counter_and_marks_the_old_object_count_deprecated() {
    let text = exposition(KubeVersion::V1_36);

    assert_counter(
        &text,
        "etcd_bookmark_total",
        "[ALPHA]",
        "Number of etcd bookmarks (progress notify events) split by kind.",
        &[r#"{group="apps",resource="deployments"} 1"#],
    );
    assert!(!text.contains("etcd_bookmark_counts"), "{text}");
    assert_eq!(
        family(&text, "apiserver_storage_objects"),
        [
            format!(
                "# HELP apiserver_storage_objects [STABLE] (Deprecated since 1.34.0) [DEPRECATED, consider using apiserver_resource_objects instead] {OBJECT_COUNT_HELP}"
            ),
            "# TYPE apiserver_storage_objects gauge".to_owned(),
            r#"apiserver_storage_objects{resource="deployments.apps"} 3"#.to_owned(),
        ]
    );
    assert_eq!(
        family(&text, "apiserver_storage_events_received_total")[0],
        "# HELP apiserver_storage_events_received_total [BETA] Number of etcd events received split by kind."
    );
}

#[test]
fn kube_1_31_has_none_of_the_later_families() {
    let text = exposition(KubeVersion::V1_31);
    for name in [
        "apiserver_resource_objects",
        "apiserver_resource_size_estimate_bytes",
        "etcd_bookmark_total",
        "apiserver_storage_list_duration_seconds",
        "watchcache",
        "group=",
    ] {
        assert!(!text.contains(name), "{name} in {text}");
    }
    assert!(
        text.contains(r#"etcd_requests_total{operation="list",type="deployments.apps"} 1"#),
        "{text}"
    );
}

#[test]
fn from_1_32_transformations_are_labelled_with_their_resource() {
    let registry = Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_32).unwrap();
    let prefix = "k8s:enc:aesgcm:v1:key1:";
    metrics.record_resource_transformation(
        "secrets",
        TransformationType::ToStorage,
        prefix,
        STATUS_OK,
        Some(Duration::from_micros(40)),
    );
    metrics.record_resource_transformation(
        "secrets",
        TransformationType::FromStorage,
        prefix,
        STATUS_UNKNOWN_NON_GRPC,
        None,
    );
    metrics.record_resource_transformation(
        "deployments.apps",
        TransformationType::ToStorage,
        prefix,
        STATUS_OK,
        Some(Duration::from_micros(40)),
    );
    // A value whose resource is not known: kube's empty label.
    metrics.record_transformation(TransformationType::ToStorage, "identity", STATUS_OK, None);
    let text = encode_text(&registry);
    assert_counter(
        &text,
        "apiserver_storage_transformation_operations_total",
        "[ALPHA]",
        "Total number of transformations. Successful transformation will have a status 'OK' and a varied status string when the transformation fails. The status, resource, and transformation_type fields can be used for alerting purposes. For example, you can monitor for encryption/decryption failures using the transformation_type (e.g., from_storage for decryption and to_storage for encryption). Additionally, these fields can be used to ensure that the correct transformers are applied to each resource.",
        &[
            r#"{resource="",status="OK",transformation_type="to_storage",transformer_prefix="identity"} 1"#,
            r#"{resource="deployments.apps",status="OK",transformation_type="to_storage",transformer_prefix="k8s:enc:aesgcm:v1:key1:"} 1"#,
            r#"{resource="secrets",status="OK",transformation_type="to_storage",transformer_prefix="k8s:enc:aesgcm:v1:key1:"} 1"#,
            r#"{resource="secrets",status="unknown-non-grpc",transformation_type="from_storage",transformer_prefix="k8s:enc:aesgcm:v1:key1:"} 1"#,
        ],
    );
    // The duration histogram keeps its labels; both resources share one series.
    assert!(
        text.lines().any(|l| l
            == r#"apiserver_storage_transformation_duration_seconds_count{transformation_type="to_storage",transformer_prefix="k8s:enc:aesgcm:v1:key1:"} 2"#),
        "{text}"
    );

    // 1.31 has no resource label: the same calls count together.
    let registry = Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_31).unwrap();
    for resource in ["secrets", "configmaps"] {
        metrics.record_resource_transformation(
            resource,
            TransformationType::ToStorage,
            prefix,
            STATUS_OK,
            None,
        );
    }
    assert!(
        encode_text(&registry).lines().any(|l| l
            == r#"apiserver_storage_transformation_operations_total{status="OK",transformation_type="to_storage",transformer_prefix="k8s:enc:aesgcm:v1:key1:"} 2"#)
    );
}

#[test]
fn one_registry_holds_one_minors_metrics() {
    let registry = Registry::new();
    let first = StorageMetrics::register_for(&registry, KubeVersion::V1_33).unwrap();
    let again = StorageMetrics::register_for(&registry, KubeVersion::V1_33).unwrap();
    assert!(again.same_as(&first));
    let err = StorageMetrics::register_for(&registry, KubeVersion::V1_37).unwrap_err();
    assert!(
        matches!(
            err,
            TelemetryError::OtherKubeVersion {
                registered: KubeVersion::V1_33,
                requested: KubeVersion::V1_37,
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "the registry already holds the storage metrics of kube 1.33; cannot register kube 1.37's too"
    );
}
