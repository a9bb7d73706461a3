//! The periodic figures: `apiserver_storage_objects` from the object count poller and
//! `apiserver_storage_size_bytes` from the size poller, against real etcd processes,
//! and both pollers stopping when they should.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use apistore_etcd3::{
    ClientConfig, Etcd3Store, EtcdClient, PollError, ResourceConfig, StoreConfig,
};
use apistore_storage::Storage;
use apistore_telemetry::StorageMetrics;
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use apistore_testing::suite::Pod;
use common::Etcd3Backend;

const TICK: Duration = Duration::from_millis(100);
const PATIENCE: Duration = Duration::from_secs(10);

/// The value of a gauge series, if the registry has it.
fn gauge(registry: &prometheus::Registry, name: &str, label: (&str, &str)) -> Option<f64> {
    registry
        .gather()
        .into_iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().to_vec())
        .find(|metric| {
            metric
                .get_label()
                .iter()
                .any(|l| l.name() == label.0 && l.value() == label.1)
        })
        .map(|metric| metric.get_gauge().get_value())
}

/// Waits until `read` returns `want`, or fails the test naming what it last saw.
async fn wait_for<T: PartialEq + std::fmt::Debug>(what: &str, want: T, read: impl Fn() -> T) {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let seen = read();
        if seen == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: wanted {want:?}, still {seen:?} after {PATIENCE:?}"
        );
        tokio::time::sleep(TICK / 4).await;
    }
}

fn objects(backend: &Etcd3Backend) -> Option<f64> {
    gauge(
        &backend.registry,
        "apiserver_storage_objects",
        ("resource", "pods"),
    )
}

async fn create_pods(store: &Etcd3Store<Pod>, names: &[&str]) {
    for name in names {
        store
            .create(&format!("/pods/ns/{name}"), Pod::new("ns", name), 0)
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_object_count_follows_the_store_and_stops_with_its_handle() {
    let backend = Etcd3Backend::new("poll_object_count").await;
    create_pods(&backend.store, &["a", "b", "c"]).await;
    // Unset until the first poll.
    assert_eq!(objects(&backend), None);

    let poller = backend.store.poll_object_count(TICK).unwrap();
    wait_for("count after 3 creates", Some(3.0), || objects(&backend)).await;
    create_pods(&backend.store, &["d", "e"]).await;
    wait_for("count after 5 creates", Some(5.0), || objects(&backend)).await;
    // Each poll is a count request, recorded like any other, under the prepared key.
    let counts = backend
        .registry
        .gather()
        .into_iter()
        .filter(|f| f.name() == "etcd_requests_total")
        .flat_map(|f| f.get_metric().to_vec())
        .filter(|m| {
            m.get_label()
                .iter()
                .any(|l| l.name() == "operation" && l.value() == "listWithCount")
        })
        .map(|m| m.get_counter().get_value())
        .sum::<f64>();
    assert!(counts >= 2.0, "at least two polls were made, saw {counts}");

    poller.stop();
    // Deleting after the stop: the figure keeps its last value.
    backend
        .store
        .delete("/pods/ns/a", Default::default())
        .await
        .unwrap();
    tokio::time::sleep(TICK * 4).await;
    assert_eq!(objects(&backend), Some(5.0));
}

#[tokio::test]
async fn the_object_count_poller_stops_when_its_store_is_dropped() {
    let backend = Etcd3Backend::new("poll_store_dropped").await;
    let store: Etcd3Store<Pod> = Etcd3Store::new(
        backend.client.clone(),
        StoreConfig {
            resource: ResourceConfig {
                prefix: backend.store.path_prefix().to_owned(),
                ..ResourceConfig::for_resource("pods")
            },
            ..StoreConfig::default()
        },
    )
    .with_metrics(backend.metrics.clone());
    create_pods(&store, &["a"]).await;
    let clone = store.clone();
    let poller = store.poll_object_count(TICK).unwrap();
    wait_for("count", Some(1.0), || objects(&backend)).await;

    drop(store);
    tokio::time::sleep(TICK * 3).await;
    assert!(!poller.is_finished(), "a clone of the store is still alive");
    drop(clone);
    wait_for("poller finished", true, || poller.is_finished()).await;
}

#[tokio::test]
async fn a_failing_count_sets_minus_one() {
    // Nothing listens on a port we just had and closed; the plain connection is lazy,
    // so the failure comes with the first count.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let client = EtcdClient::connect(&ClientConfig::new([format!("http://127.0.0.1:{port}")]))
        .await
        .unwrap();
    let registry = prometheus::Registry::new();
    let metrics = StorageMetrics::register(&registry).unwrap();
    let store: Etcd3Store<Pod> = Etcd3Store::new(
        client,
        StoreConfig {
            request_timeout: Some(Duration::from_secs(1)),
            ..StoreConfig::for_resource("pods")
        },
    )
    .with_metrics(metrics);
    let _poller = store.poll_object_count(TICK).unwrap();
    // The store and the metrics follow kube 1.37, whose count is the 1.34 family.
    wait_for("count of an unreachable etcd", Some(-1.0), || {
        gauge(
            &registry,
            "apiserver_resource_objects",
            ("resource", "pods"),
        )
    })
    .await;
}

#[tokio::test]
async fn pollers_refuse_what_they_cannot_do() {
    let backend = Etcd3Backend::new("poll_refusals").await;
    let without_metrics: Etcd3Store<Pod> =
        Etcd3Store::new(backend.client.clone(), StoreConfig::for_resource("pods"));
    let err = without_metrics.poll_object_count(TICK).unwrap_err();
    assert!(matches!(err, PollError::NoMetrics { ref resource } if resource == "pods"));
    assert!(err.to_string().contains("\"pods\""), "{err}");
    // A store configured without a resource prefix has nothing to count under.
    let no_prefix: Etcd3Store<Pod> = Etcd3Store::new(
        backend.client.clone(),
        StoreConfig {
            resource: ResourceConfig {
                group_resource: "pods".to_owned(),
                ..ResourceConfig::default()
            },
            ..StoreConfig::default()
        },
    )
    .with_metrics(backend.metrics.clone());
    let err = no_prefix.poll_object_count(TICK).unwrap_err();
    assert!(matches!(err, PollError::BadResourcePrefix { .. }), "{err}");
    assert!(err.to_string().contains("empty key"), "{err}");
    let err = backend.store.poll_object_count(Duration::ZERO).unwrap_err();
    assert!(matches!(err, PollError::ZeroInterval { .. }), "{err}");

    // Outside a runtime: an error, not a panic.
    let Etcd3Backend { store, .. } = backend;
    let err = std::thread::spawn(move || store.poll_object_count(TICK).map(|_| ()))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, PollError::NoRuntime { .. }), "{err}");
    assert!(err.to_string().contains("tokio runtime"), "{err}");
}

#[tokio::test]
async fn the_storage_size_is_the_members_db_size_and_goes_when_etcd_does() {
    let mut etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let client = EtcdClient::connect(&ClientConfig::new([etcd.endpoint()]))
        .await
        .unwrap();
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    let registry = prometheus::Registry::new();
    let metrics = StorageMetrics::register(&registry).unwrap();
    let size = || {
        gauge(
            &registry,
            "apiserver_storage_size_bytes",
            ("storage_cluster_id", "etcd-3"),
        )
    };

    let poller = client.poll_storage_size(metrics, "etcd-3", TICK).unwrap();
    // Nothing writes to this etcd, so its size holds still once read.
    let db_size = raw.status().await.unwrap().db_size();
    assert!(db_size > 0);
    wait_for("size of a live etcd", Some(db_size as f64), size).await;

    etcd.stop();
    wait_for("size of a stopped etcd", None, size).await;
    assert!(!poller.is_finished());
    poller.stop();
}
