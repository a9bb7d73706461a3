//! The text exposition, line for line, as kube-apiserver v1.31 serves it (the later
//! minors' differences are in `metrics_by_kube_version.rs`).

// Helpers outside `#[test]` functions panic too: a panic there is a failed test.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use apistore_storage::KubeVersion;
use apistore_telemetry::{
    Operation, STATUS_OK, STATUS_UNKNOWN_NON_GRPC, StorageMetrics, TelemetryError,
    TransformationType, encode_text,
};
use prometheus::{IntCounter, Registry};

mod common;
use common::{REQUEST_BOUNDS, family, histogram_lines};

const TRANSFORMATION_BOUNDS: [&str; 25] = [
    "5e-06", "1e-05", "2e-05", "4e-05", "8e-05", "0.00016", "0.00032", "0.00064", "0.00128",
    "0.00256", "0.00512", "0.01024", "0.02048", "0.04096", "0.08192", "0.16384", "0.32768",
    "0.65536", "1.31072", "2.62144", "5.24288", "10.48576", "20.97152", "41.94304", "83.88608",
];

#[test]
fn a_fresh_registration_exposes_only_the_unlabelled_value_metrics() {
    let registry = Registry::new();
    StorageMetrics::register(&registry).unwrap();
    let text = encode_text(&registry);
    let mut expected = vec![
        // kube's KMS v1 gauge, exposed by every kube-apiserver.
        "# HELP apiserver_envelope_encryption_dek_cache_fill_percent [ALPHA] Percent of the cache slots currently occupied by cached DEKs.".to_owned(),
        "# TYPE apiserver_envelope_encryption_dek_cache_fill_percent gauge".to_owned(),
        "apiserver_envelope_encryption_dek_cache_fill_percent 0".to_owned(),
        "# HELP apiserver_storage_data_key_generation_duration_seconds [ALPHA] Latencies in seconds of data encryption key(DEK) generation operations.".to_owned(),
        "# TYPE apiserver_storage_data_key_generation_duration_seconds histogram".to_owned(),
    ];
    expected.extend(histogram_lines(
        "apiserver_storage_data_key_generation_duration_seconds",
        "",
        &TRANSFORMATION_BOUNDS[..14],
        &[0; 14],
        "0",
        0,
    ));
    expected.extend(
        [
            "# HELP apiserver_storage_data_key_generation_failures_total [ALPHA] Total number of failed data encryption key(DEK) generation operations.",
            "# TYPE apiserver_storage_data_key_generation_failures_total counter",
            "apiserver_storage_data_key_generation_failures_total 0",
            "# HELP apiserver_storage_envelope_transformation_cache_misses_total [ALPHA] Total number of cache misses while accessing key decryption key(KEK).",
            "# TYPE apiserver_storage_envelope_transformation_cache_misses_total counter",
            "apiserver_storage_envelope_transformation_cache_misses_total 0",
        ]
        .map(str::to_owned),
    );
    assert_eq!(text.lines().collect::<Vec<_>>(), expected);
}

#[test]
fn etcd_request_metrics_are_exposed_as_kube_apiserver_1_31_exposes_them() {
    let registry = Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_31).unwrap();
    metrics.record_etcd_request(Operation::Get, "pods", true, Duration::from_millis(3));
    metrics.record_etcd_request(Operation::Get, "pods", false, Duration::from_millis(30));
    metrics.record_etcd_request(Operation::Create, "pods", true, Duration::from_millis(1500));
    // Count labels `type` with the key prefix, as kube-apiserver does.
    metrics.record_etcd_request(
        Operation::ListWithCount,
        "/registry/pods/",
        true,
        Duration::from_micros(500),
    );
    let text = encode_text(&registry);

    let mut expected = vec![
        "# HELP etcd_request_duration_seconds [ALPHA] Etcd request latency in seconds for each operation and object type.".to_owned(),
        "# TYPE etcd_request_duration_seconds histogram".to_owned(),
    ];
    let name = "etcd_request_duration_seconds";
    let ones_from = |first: usize, n: u64| -> Vec<u64> {
        (0..23).map(|i| if i >= first { n } else { 0 }).collect()
    };
    expected.extend(histogram_lines(
        name,
        r#"operation="create",type="pods""#,
        &REQUEST_BOUNDS,
        &ones_from(10, 1),
        "1.5",
        1,
    ));
    let mut get_counts = ones_from(1, 1);
    get_counts.iter_mut().skip(2).for_each(|c| *c = 2);
    get_counts[0] = 1;
    expected.extend(histogram_lines(
        name,
        r#"operation="get",type="pods""#,
        &REQUEST_BOUNDS,
        &get_counts,
        "0.033",
        2,
    ));
    expected.extend(histogram_lines(
        name,
        r#"operation="listWithCount",type="/registry/pods/""#,
        &REQUEST_BOUNDS,
        &ones_from(0, 1),
        "0.0005",
        1,
    ));
    assert_eq!(family(&text, name), expected);

    assert_eq!(
        family(&text, "etcd_requests_total"),
        [
            "# HELP etcd_requests_total [ALPHA] Etcd request counts for each operation and object type.",
            "# TYPE etcd_requests_total counter",
            r#"etcd_requests_total{operation="create",type="pods"} 1"#,
            r#"etcd_requests_total{operation="get",type="pods"} 2"#,
            r#"etcd_requests_total{operation="listWithCount",type="/registry/pods/"} 1"#,
        ]
    );
    // Only the failed operation has an error series.
    assert_eq!(
        family(&text, "etcd_request_errors_total"),
        [
            "# HELP etcd_request_errors_total [ALPHA] Etcd failed request counts for each operation and object type.",
            "# TYPE etcd_request_errors_total counter",
            r#"etcd_request_errors_total{operation="get",type="pods"} 1"#,
        ]
    );
}

#[test]
fn resource_metrics_are_exposed_as_kube_apiserver_1_31_exposes_them() {
    let registry = Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_31).unwrap();
    metrics.record_list("pods", 10, 8, 4);
    metrics.record_list("pods", 5, 5, 5);
    metrics.record_list("deployments.apps", 0, 0, 0);
    metrics.record_decode_error("pods");
    metrics.record_events_received("deployments.apps");
    metrics.record_events_received("deployments.apps");
    metrics.record_bookmark("pods");
    metrics.set_object_count("pods", 42);
    metrics.set_object_count("secrets", -1);
    metrics.set_storage_size("etcd-0", 1_234_567_890);
    metrics.set_storage_size("etcd-1", 4096);
    metrics.clear_storage_size("etcd-1");
    metrics.observe_lease_object_count(120);
    metrics.observe_lease_object_count(7);
    let text = encode_text(&registry);

    let counter = |name: &str, help: &str, samples: &[&str]| -> Vec<String> {
        let mut lines = vec![
            format!("# HELP {name} [ALPHA] {help}"),
            format!("# TYPE {name} counter"),
        ];
        lines.extend(samples.iter().map(|s| format!("{name}{s}")));
        lines
    };
    assert_eq!(
        family(&text, "apiserver_storage_list_total"),
        counter(
            "apiserver_storage_list_total",
            "Number of LIST requests served from storage",
            &[
                r#"{resource="deployments.apps"} 1"#,
                r#"{resource="pods"} 2"#
            ],
        )
    );
    assert_eq!(
        family(&text, "apiserver_storage_list_fetched_objects_total"),
        counter(
            "apiserver_storage_list_fetched_objects_total",
            "Number of objects read from storage in the course of serving a LIST request",
            &[
                r#"{resource="deployments.apps"} 0"#,
                r#"{resource="pods"} 15"#
            ],
        )
    );
    assert_eq!(
        family(&text, "apiserver_storage_list_evaluated_objects_total"),
        counter(
            "apiserver_storage_list_evaluated_objects_total",
            "Number of objects tested in the course of serving a LIST request from storage",
            &[
                r#"{resource="deployments.apps"} 0"#,
                r#"{resource="pods"} 13"#
            ],
        )
    );
    assert_eq!(
        family(&text, "apiserver_storage_list_returned_objects_total"),
        counter(
            "apiserver_storage_list_returned_objects_total",
            "Number of objects returned for a LIST request from storage",
            &[
                r#"{resource="deployments.apps"} 0"#,
                r#"{resource="pods"} 9"#
            ],
        )
    );
    assert_eq!(
        family(&text, "apiserver_storage_decode_errors_total"),
        counter(
            "apiserver_storage_decode_errors_total",
            "Number of stored object decode errors split by object type",
            &[r#"{resource="pods"} 1"#],
        )
    );
    assert_eq!(
        family(&text, "apiserver_storage_events_received_total"),
        counter(
            "apiserver_storage_events_received_total",
            "Number of etcd events received split by kind.",
            &[r#"{resource="deployments.apps"} 2"#],
        )
    );
    assert_eq!(
        family(&text, "etcd_bookmark_counts"),
        [
            "# HELP etcd_bookmark_counts [ALPHA] Number of etcd bookmarks (progress notify events) split by kind.",
            "# TYPE etcd_bookmark_counts gauge",
            r#"etcd_bookmark_counts{resource="pods"} 1"#,
        ]
    );
    assert_eq!(
        family(&text, "apiserver_storage_objects"),
        [
            "# HELP apiserver_storage_objects [STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
            "# TYPE apiserver_storage_objects gauge",
            r#"apiserver_storage_objects{resource="pods"} 42"#,
            r#"apiserver_storage_objects{resource="secrets"} -1"#,
        ]
    );
    // Go spells large floats with an exponent.
    assert_eq!(
        family(&text, "apiserver_storage_size_bytes"),
        [
            "# HELP apiserver_storage_size_bytes [STABLE] Size of the storage database file physically allocated in bytes.",
            "# TYPE apiserver_storage_size_bytes gauge",
            r#"apiserver_storage_size_bytes{storage_cluster_id="etcd-0"} 1.23456789e+09"#,
        ]
    );
    let mut lease = vec![
        "# HELP etcd_lease_object_counts [ALPHA] Number of objects attached to a single etcd lease.".to_owned(),
        "# TYPE etcd_lease_object_counts histogram".to_owned(),
    ];
    lease.extend(histogram_lines(
        "etcd_lease_object_counts",
        "",
        &["10", "50", "100", "500", "1000", "2500", "5000"],
        &[1, 1, 1, 2, 2, 2, 2],
        "127",
        2,
    ));
    assert_eq!(family(&text, "etcd_lease_object_counts"), lease);
    // The deprecated (hidden in 1.31) DB size gauge is not exposed.
    assert!(!text.contains("apiserver_storage_db_total_size_in_bytes"));
}

#[test]
fn transformation_metrics_are_exposed_as_kube_apiserver_1_31_exposes_them() {
    let registry = Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_31).unwrap();
    let prefix = "k8s:enc:aesgcm:v1:key1:";
    metrics.record_transformation(
        TransformationType::FromStorage,
        prefix,
        STATUS_OK,
        Some(Duration::from_micros(20)),
    );
    metrics.record_transformation(
        TransformationType::FromStorage,
        prefix,
        STATUS_OK,
        Some(Duration::from_millis(1)),
    );
    metrics.record_transformation(
        TransformationType::ToStorage,
        "",
        STATUS_UNKNOWN_NON_GRPC,
        None,
    );
    metrics.record_envelope_cache_miss();
    metrics.record_data_key_generation(false, Duration::from_micros(10));
    let text = encode_text(&registry);

    let name = "apiserver_storage_transformation_duration_seconds";
    let mut expected = vec![
        format!("# HELP {name} [ALPHA] Latencies in seconds of value transformation operations."),
        format!("# TYPE {name} histogram"),
    ];
    let counts: Vec<u64> = (0..25)
        .map(|i| match i {
            // 20 µs falls in le="2e-05" (bounds are inclusive), 1 ms in le="0.00128".
            0..=1 => 0,
            2..=7 => 1,
            _ => 2,
        })
        .collect();
    expected.extend(histogram_lines(
        name,
        &format!(r#"transformation_type="from_storage",transformer_prefix="{prefix}""#),
        &TRANSFORMATION_BOUNDS,
        &counts,
        "0.00102",
        2,
    ));
    assert_eq!(family(&text, name), expected);

    assert_eq!(
        family(&text, "apiserver_storage_transformation_operations_total"),
        [
            "# HELP apiserver_storage_transformation_operations_total [ALPHA] Total number of transformations. Successful transformation will have a status 'OK' and a varied status string when the transformation fails. This status and transformation_type fields may be used for alerting on encryption/decryption failure using transformation_type from_storage for decryption and to_storage for encryption",
            "# TYPE apiserver_storage_transformation_operations_total counter",
            r#"apiserver_storage_transformation_operations_total{status="OK",transformation_type="from_storage",transformer_prefix="k8s:enc:aesgcm:v1:key1:"} 2"#,
            r#"apiserver_storage_transformation_operations_total{status="unknown-non-grpc",transformation_type="to_storage",transformer_prefix=""} 1"#,
        ]
    );
    assert!(
        text.lines()
            .any(|l| l == "apiserver_storage_envelope_transformation_cache_misses_total 1")
    );
    assert!(
        text.lines()
            .any(|l| l == "apiserver_storage_data_key_generation_failures_total 1")
    );
    assert!(
        text.lines()
            .any(|l| l == "apiserver_storage_data_key_generation_duration_seconds_count 0")
    );
}

#[test]
fn registering_twice_returns_the_same_metrics_and_shares_counts() {
    let registry = Registry::new();
    let first = StorageMetrics::register(&registry).unwrap();
    let second = StorageMetrics::register(&registry).unwrap();
    // A clone of a registry is the same registry, from any thread.
    let clone = registry.clone();
    let third = std::thread::spawn(move || StorageMetrics::register(&clone).unwrap())
        .join()
        .unwrap();
    assert!(first.same_as(&second));
    assert!(first.same_as(&third));

    first.record_decode_error("pods");
    second.record_decode_error("pods");
    third.for_resource("pods").record_decode_error();
    let text = encode_text(&registry);
    assert!(
        text.lines()
            .any(|l| l == r#"apiserver_storage_decode_errors_total{group="",resource="pods"} 3"#),
        "{text}"
    );

    // Another registry gets metrics of its own.
    let other_registry = Registry::new();
    let other = StorageMetrics::register(&other_registry).unwrap();
    assert!(!other.same_as(&first));
    assert!(!encode_text(&other_registry).contains("apiserver_storage_decode_errors_total{"));
}

#[test]
fn concurrent_registrations_agree_on_one_set_of_metrics() {
    let registry = Registry::new();
    let all: Vec<StorageMetrics> = std::thread::scope(|s| {
        // Every thread is started before any is joined.
        #[allow(clippy::needless_collect)]
        let handles: Vec<_> = (0..8)
            .map(|_| s.spawn(|| StorageMetrics::register(&registry).unwrap()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for metrics in &all {
        assert!(metrics.same_as(&all[0]));
        metrics.record_bookmark("pods");
    }
    assert!(
        encode_text(&registry)
            .lines()
            .any(|l| l == r#"etcd_bookmark_total{group="",resource="pods"} 8"#)
    );
}

#[test]
fn the_default_registry_registration_is_idempotent() {
    let first = StorageMetrics::default_registry().unwrap();
    let second = StorageMetrics::default_registry().unwrap();
    assert!(first.same_as(&second));
}

#[test]
fn metrics_registered_by_someone_else_are_refused() {
    let registry = Registry::new();
    let foreign = IntCounter::new("etcd_requests_total", "not ours").unwrap();
    registry.register(Box::new(foreign)).unwrap();
    let err = StorageMetrics::register(&registry).unwrap_err();
    assert!(matches!(err, TelemetryError::ForeignMetrics), "{err:?}");
}
