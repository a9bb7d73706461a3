//! The families as each kube version exposes them, scraped from the registry in the
//! text format (what a Prometheus server reads).

use std::time::Duration;

use apistore_storage::KubeVersion;
use prometheus::{Encoder as _, Registry, TextEncoder};

use super::CacherMetrics;

/// Registers the metrics of `version`, records one of everything for
/// `deployments.apps`, and returns the scrape.
fn scrape(version: KubeVersion) -> String {
    let registry = Registry::new();
    let metrics = CacherMetrics::register_for(&registry, version).unwrap();
    let deployments = metrics.for_resource("deployments.apps", "/deployments");
    deployments.events_received.inc();
    deployments.events_dispatched.inc();
    deployments.record_capacity_change(100, 200);
    deployments.record_resource_version(1_234_567_890_123_456_789);
    deployments.record_initialization(Duration::from_millis(300));
    deployments.record_initialization_error();
    deployments.terminated_watchers.inc();
    deployments.init_events.inc();
    deployments.record_list(10, 4, "");
    deployments.record_list(3, 1, "f:spec.nodeName");
    deployments.record_read_wait(Duration::from_millis(30));
    deployments.record_consistent_read(true, false);
    deployments.consistency_checks.success.inc();
    // Received 15 ms ago, queued for the watcher 2 ms ago, handed out now.
    let now = tokio::time::Instant::now();
    deployments.observe_dispatch(
        now - Duration::from_millis(15),
        now - Duration::from_millis(2),
    );
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    String::from_utf8(text).unwrap()
}

fn has(text: &str, line: &str) -> bool {
    text.lines().any(|l| l == line)
}

fn assert_lines(text: &str, version: KubeVersion, lines: &[&str]) {
    for line in lines {
        assert!(has(text, line), "kube {version}: `{line}` in\n{text}");
    }
}

fn assert_no_family(text: &str, version: KubeVersion, name: &str) {
    assert!(
        !text.contains(&format!("# TYPE {name} ")),
        "kube {version}: no {name} in\n{text}"
    );
}

#[test]
fn kube_1_31_labels_by_group_resource_string_and_resource_prefix() {
    let version = KubeVersion::V1_31;
    let text = scrape(version);
    assert_lines(
        &text,
        version,
        &[
            r#"apiserver_watch_cache_events_received_total{resource="deployments.apps"} 1"#,
            r#"apiserver_watch_cache_events_dispatched_total{resource="deployments.apps"} 1"#,
            r#"watch_cache_capacity{resource="deployments.apps"} 200"#,
            r#"watch_cache_capacity_increase_total{resource="deployments.apps"} 1"#,
            // Whole, so the exposition's float64 rounds it (why kube 1.36 truncates).
            r#"apiserver_watch_cache_resource_version{resource="deployments.apps"} 1234567890123456800"#,
            "# HELP apiserver_watch_cache_resource_version [ALPHA] Current resource version of watch cache broken by resource type.",
            r#"apiserver_watch_cache_initializations_total{resource="deployments.apps"} 1"#,
            r#"apiserver_terminated_watchers_total{resource="deployments.apps"} 1"#,
            r#"apiserver_init_events_total{resource="deployments.apps"} 1"#,
            r#"apiserver_cache_list_total{index="",resource_prefix="/deployments"} 1"#,
            r#"apiserver_cache_list_total{index="f:spec.nodeName",resource_prefix="/deployments"} 1"#,
            r#"apiserver_cache_list_fetched_objects_total{index="",resource_prefix="/deployments"} 10"#,
            r#"apiserver_cache_list_returned_objects_total{resource_prefix="/deployments"} 5"#,
            "# HELP apiserver_cache_list_total [ALPHA] Number of LIST requests served from watch cache",
            r#"apiserver_watch_cache_read_wait_seconds_bucket{resource="deployments.apps",le="0.05"} 1"#,
            r#"apiserver_watch_cache_read_wait_seconds_bucket{resource="deployments.apps",le="0.025"} 0"#,
            r#"apiserver_watch_cache_consistent_read_total{fallback="false",resource="deployments.apps",success="true"} 1"#,
            r#"apiserver_storage_consistency_checks_total{resource="deployments.apps",status="success"} 1"#,
        ],
    );
    assert_no_family(
        &text,
        version,
        "apiserver_watch_cache_initialization_errors_total",
    );
    assert_no_family(
        &text,
        version,
        "apiserver_watch_cache_initialization_duration_seconds",
    );
    assert_no_family(
        &text,
        version,
        "apiserver_watch_events_dispatch_duration_seconds",
    );
}

#[test]
fn kube_1_34_labels_by_group_and_resource() {
    let version = KubeVersion::V1_34;
    let text = scrape(version);
    assert_lines(
        &text,
        version,
        &[
            r#"apiserver_watch_cache_events_received_total{group="apps",resource="deployments"} 1"#,
            r#"watch_cache_capacity{group="apps",resource="deployments"} 200"#,
            // Not truncated before 1.36.
            r#"apiserver_watch_cache_resource_version{group="apps",resource="deployments"} 1234567890123456800"#,
            r#"apiserver_cache_list_total{group="apps",index="",resource="deployments"} 1"#,
            r#"apiserver_cache_list_fetched_objects_total{group="apps",index="f:spec.nodeName",resource="deployments"} 3"#,
            r#"apiserver_cache_list_returned_objects_total{group="apps",resource="deployments"} 5"#,
            r#"apiserver_watch_cache_read_wait_seconds_count{group="apps",resource="deployments"} 1"#,
            r#"apiserver_watch_cache_consistent_read_total{fallback="false",group="apps",resource="deployments",success="true"} 1"#,
            r#"apiserver_storage_consistency_checks_total{group="apps",resource="deployments",status="success"} 1"#,
        ],
    );
    assert_no_family(
        &text,
        version,
        "apiserver_watch_cache_initialization_errors_total",
    );
}

#[test]
fn kube_1_37_adds_initialization_and_dispatch_metrics_and_hides_the_cache_list_families() {
    let version = KubeVersion::V1_37;
    let text = scrape(version);
    assert_lines(
        &text,
        version,
        &[
            // 1.36+: the 15 least significant digits.
            r#"apiserver_watch_cache_resource_version{group="apps",resource="deployments"} 567890123456789"#,
            "# HELP apiserver_watch_cache_resource_version [ALPHA] Current resource version of watch cache broken by resource type. This is truncated to the 15 least significant digits.",
            r#"apiserver_watch_cache_initializations_total{group="apps",resource="deployments"} 1"#,
            r#"apiserver_watch_cache_initialization_errors_total{group="apps",resource="deployments"} 1"#,
            r#"apiserver_watch_cache_initialization_duration_seconds_bucket{group="apps",resource="deployments",le="0.25"} 0"#,
            r#"apiserver_watch_cache_initialization_duration_seconds_bucket{group="apps",resource="deployments",le="0.5"} 1"#,
            r#"apiserver_watch_cache_initialization_duration_seconds_bucket{group="apps",resource="deployments",le="600"} 1"#,
            "# HELP apiserver_watch_events_dispatch_duration_seconds [ALPHA] Histogram of watch event dispatch latency broken by resource type and pipeline stage. The 'total' stage is the end-to-end latency of a delivered event.",
            // At least 15 ms since the cache received it, at least 2 ms in the buffer.
            r#"apiserver_watch_events_dispatch_duration_seconds_bucket{group="apps",resource="deployments",stage="total",le="0.01"} 0"#,
            r#"apiserver_watch_events_dispatch_duration_seconds_count{group="apps",resource="deployments",stage="total"} 1"#,
            r#"apiserver_watch_events_dispatch_duration_seconds_bucket{group="apps",resource="deployments",stage="cache_to_watcher",le="0.001"} 0"#,
            r#"apiserver_watch_events_dispatch_duration_seconds_count{group="apps",resource="deployments",stage="cache_to_watcher"} 1"#,
        ],
    );
    // Alpha and deprecated in 1.37: hidden by component-base at once.
    for family in [
        "apiserver_cache_list_total",
        "apiserver_cache_list_fetched_objects_total",
        "apiserver_cache_list_returned_objects_total",
    ] {
        assert_no_family(&text, version, family);
    }
    // The backend stamps no decode time on its events: no storage_to_cache stage.
    assert!(!text.contains(r#"stage="storage_to_cache""#), "{text}");
}

#[test]
fn a_second_registration_into_one_registry_fails() {
    let registry = Registry::new();
    CacherMetrics::register(&registry).unwrap();
    assert!(CacherMetrics::register(&registry).is_err());
    assert!(CacherMetrics::register_for(&registry, KubeVersion::V1_31).is_err());
}

#[test]
fn a_core_resource_has_an_empty_group() {
    let registry = Registry::new();
    let metrics = CacherMetrics::register(&registry).unwrap();
    metrics.for_resource("pods", "/pods").events_received.inc();
    let mut text = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut text)
        .unwrap();
    let text = String::from_utf8(text).unwrap();
    assert!(
        has(
            &text,
            r#"apiserver_watch_cache_events_received_total{group="",resource="pods"} 1"#
        ),
        "{text}"
    );
}

/// The storage families' lines after one cached list of `deployments.apps` from no
/// index and one from `f:spec.nodeName`, with the cacher given the storage metrics.
fn storage_scrape(version: KubeVersion) -> String {
    let registry = Registry::new();
    let storage = apistore_telemetry::StorageMetrics::register_for(&registry, version).unwrap();
    let metrics = CacherMetrics::register_for(&registry, version)
        .unwrap()
        .with_list_observer(std::sync::Arc::new(storage));
    let deployments = metrics.for_resource("deployments.apps", "/deployments");
    deployments.record_list(10, 4, "");
    deployments.record_list(3, 1, "f:spec.nodeName");
    apistore_telemetry::encode_text(&registry)
}

#[test]
fn kube_1_37_counts_cached_lists_in_the_storage_list_families_too() {
    let text = storage_scrape(KubeVersion::V1_37);
    assert_lines(
        &text,
        KubeVersion::V1_37,
        &[
            r#"apiserver_storage_list_total{group="apps",index="",resource="deployments",storage="watchcache"} 1"#,
            r#"apiserver_storage_list_total{group="apps",index="f:spec.nodeName",resource="deployments",storage="watchcache"} 1"#,
            r#"apiserver_storage_list_fetched_objects_total{group="apps",index="",resource="deployments",storage="watchcache"} 10"#,
            r#"apiserver_storage_list_fetched_objects_total{group="apps",index="f:spec.nodeName",resource="deployments",storage="watchcache"} 3"#,
            r#"apiserver_storage_list_evaluated_objects_total{group="apps",resource="deployments",storage="watchcache"} 0"#,
            r#"apiserver_storage_list_returned_objects_total{group="apps",resource="deployments",storage="watchcache"} 5"#,
        ],
    );
    // The cache's own list families are hidden at 1.37.
    assert!(!text.contains("apiserver_cache_list_total{"), "{text}");
}

#[test]
fn before_1_37_cached_lists_stay_out_of_the_storage_families() {
    for version in [KubeVersion::V1_31, KubeVersion::V1_36] {
        let text = storage_scrape(version);
        assert_no_family(&text, version, "apiserver_storage_list_total");
        assert!(text.contains("apiserver_cache_list_total{"), "{text}");
    }
}
