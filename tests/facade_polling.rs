//! The facade's poll intervals: the object count of every resource a store was made for
//! and the database size, polled into the caller's registry, and stopped when the last
//! clone of the `ApiStore` is dropped.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use apistore::{ApiStore, BuildError, DynamicObject, KubeVersion, PollError, Storage};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};

const TICK: Duration = Duration::from_millis(100);

/// Every series of `name` as `(label values, value)`.
fn series(registry: &apistore::prometheus::Registry, name: &str) -> Vec<(Vec<String>, f64)> {
    registry
        .gather()
        .into_iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().to_vec())
        .map(|metric| {
            let labels = metric
                .get_label()
                .iter()
                .map(|l| l.value().to_owned())
                .collect();
            // Only one of the two is set; the other reads as zero.
            let value = metric.get_counter().get_value() + metric.get_gauge().get_value();
            (labels, value)
        })
        .collect()
}

/// The polls made: kube 1.37's `Stats` reads a count, or the keys when it estimates
/// sizes.
fn count_requests(registry: &apistore::prometheus::Registry) -> f64 {
    series(registry, "etcd_requests_total")
        .into_iter()
        .filter(|(labels, _)| {
            labels
                .iter()
                .any(|op| op == "listWithCount" || op == "listOnlyKeys")
        })
        .map(|(_, value)| value)
        .sum()
}

async fn eventually(what: &str, check: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within 10 s"
        );
        tokio::time::sleep(TICK / 4).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_polls_counts_and_size_until_the_api_store_is_dropped() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let registry = apistore::prometheus::Registry::new();
    let api = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .metrics_registry(&registry)
        .unwrap()
        .object_count_poll_interval(TICK)
        .storage_size_poll_interval(TICK)
        .build()
        .await
        .unwrap();
    let widgets = api.dynamic_store("widgets.example.com").unwrap();
    let gadgets = api.dynamic_store("gadgets.example.com").unwrap();
    for i in 0..3 {
        let name = format!("w{i}");
        let widget = DynamicObject::new("example.com/v1", "Widget", &name);
        widgets
            .create(&format!("example.com/widgets/{name}"), widget, 0)
            .await
            .unwrap();
    }
    let gadget = DynamicObject::new("example.com/v1", "Gadget", "g0");
    gadgets
        .create("example.com/gadgets/g0", gadget, 0)
        .await
        .unwrap();

    // The builder follows kube 1.37, which counts in `apiserver_resource_objects`
    // by group and resource (and hides `apiserver_storage_objects`).
    let objects = || {
        let mut s = series(&registry, "apiserver_resource_objects");
        s.sort_by(|a, b| a.0.cmp(&b.0));
        s
    };
    let group_resource = |resource: &str| vec!["example.com".to_owned(), resource.to_owned()];
    eventually("both counts", || {
        objects()
            == vec![
                (group_resource("gadgets"), 1.0),
                (group_resource("widgets"), 3.0),
            ]
    })
    .await;
    assert!(series(&registry, "apiserver_storage_objects").is_empty());
    eventually("the size of etcd-0", || {
        series(&registry, "apiserver_storage_size_bytes")
            .iter()
            .any(|(labels, bytes)| labels == &["etcd-0"] && *bytes > 0.0)
    })
    .await;

    // A second store for the same resource starts no second poller, and the poller
    // outlives the caller's stores: it belongs to the ApiStore.
    let again = api.dynamic_store("widgets.example.com").unwrap();
    drop((widgets, gadgets, again));
    let before = count_requests(&registry);
    eventually("polls after the stores were dropped", || {
        count_requests(&registry) >= before + 2.0
    })
    .await;

    let clone = api.clone();
    drop(api);
    let before = count_requests(&registry);
    eventually("polls while a clone lives", || {
        count_requests(&registry) >= before + 2.0
    })
    .await;
    drop(clone);
    // A poll already under way may still land; after that, nothing.
    tokio::time::sleep(TICK * 3).await;
    let after_drop = count_requests(&registry);
    tokio::time::sleep(TICK * 5).await;
    assert_eq!(
        count_requests(&registry),
        after_drop,
        "pollers still running"
    );
}

#[tokio::test]
async fn poll_intervals_need_metrics_and_a_nonzero_interval() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let err = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .storage_size_poll_interval(TICK)
        .build()
        .await
        .unwrap_err();
    assert!(matches!(err, BuildError::PollWithoutMetrics), "{err}");
    assert!(err.to_string().contains("without metrics"), "{err}");

    let registry = apistore::prometheus::Registry::new();
    let err = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .metrics_registry(&registry)
        .unwrap()
        .object_count_poll_interval(Duration::ZERO)
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(err, BuildError::Poll(PollError::ZeroInterval { .. })),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_follow_the_builders_kube_version() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let registry = apistore::prometheus::Registry::new();
    let api = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .kube_version(KubeVersion::V1_31)
        .metrics_registry(&registry)
        .unwrap()
        .object_count_poll_interval(TICK)
        .build()
        .await
        .unwrap();
    assert_eq!(
        api.metrics().map(|m| m.kube_version()),
        Some(KubeVersion::V1_31)
    );
    let widgets = api.dynamic_store("widgets.example.com").unwrap();
    widgets
        .create(
            "example.com/widgets/w0",
            DynamicObject::new("example.com/v1", "Widget", "w0"),
            0,
        )
        .await
        .unwrap();
    // kube 1.31: one group-resource label, and no 1.34 families.
    eventually("the 1.31 count", || {
        series(&registry, "apiserver_storage_objects")
            == vec![(vec!["widgets.example.com".to_owned()], 1.0)]
    })
    .await;
    assert!(series(&registry, "apiserver_resource_objects").is_empty());
    assert!(
        series(&registry, "etcd_requests_total")
            .iter()
            .any(|(labels, n)| labels == &["create", "widgets.example.com"] && *n == 1.0),
        "{:?}",
        series(&registry, "etcd_requests_total")
    );
}
