//! Where kube's storage interface after v0.31.1 behaves differently by kube version,
//! the etcd3 store against real etcd processes (each test an etcd of its own):
//!
//! - `CompactRevision` (1.34): from 1.34 a store sees compactions made by another
//!   server (another apistore, a kube-apiserver) through its watch of
//!   `compact_rev_key`; before, only those of a compactor on its own client;
//! - `Stats` (1.34): sizes are estimated from the start at 1.34 (the store's own
//!   `statsCache`), only once enabled from 1.35 (the watch cache enables it) and
//!   before 1.34; the estimate follows lists and watch events;
//! - the object count poller: kube 1.34's `apiserver_resource_objects` and
//!   `apiserver_resource_size_estimate_bytes` from 1.34 on, only
//!   `apiserver_storage_objects` before.

// A test step that fails must fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::time::{Duration, Instant};

use apistore_etcd3::{
    COMPACT_REV_KEY, ClientConfig, Compactor, Etcd3Store, EtcdClient, StoreConfig,
};
use apistore_storage::{KubeVersion, ListOptions, Stats, Storage, UpdateOptions, WatchEvent};
use apistore_telemetry::StorageMetrics;
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use apistore_testing::suite::Pod;
use futures::StreamExt;

/// Generous: a loaded 2-core machine may take a while; nothing here is timed.
const PATIENCE: Duration = Duration::from_secs(60);

fn etcd(name: &str) -> EtcdServer {
    EtcdServer::start(EtcdOptions {
        name: name.to_owned(),
        ..EtcdOptions::default()
    })
    .unwrap_or_else(|err| panic!("{err}"))
}

/// A store of pods at `version` on a client of its own (another server, as far as
/// the store can tell).
async fn store(server: &EtcdServer, version: KubeVersion) -> Etcd3Store<Pod> {
    let client = EtcdClient::connect(&ClientConfig::new([server.endpoint()]))
        .await
        .unwrap();
    Etcd3Store::new(client, StoreConfig::for_resource("pods")).with_kube_version(version)
}

/// Polls `read` until it gives `want`, failing the test after [`PATIENCE`].
async fn eventually<T, F, Fut>(what: &str, want: T, mut read: F)
where
    T: PartialEq + std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = T>,
{
    let deadline = Instant::now() + PATIENCE;
    loop {
        let seen = read().await;
        if seen == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: wanted {want:?}, still {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The size of the value stored under `key`, read around every store.
async fn stored_size(raw: &mut etcd_client::Client, key: &str) -> i64 {
    let response = raw.get(key, None).await.unwrap();
    i64::try_from(response.kvs()[0].value().len()).unwrap()
}

fn everything() -> ListOptions {
    ListOptions {
        recursive: true,
        ..ListOptions::default()
    }
}

/// compact.go's `Compact` as another server runs it: claim `compact_rev_key` at
/// logical time 0 with `rev`, then compact etcd to `rev`.
async fn compact_as_another_server(raw: &mut etcd_client::Client, rev: i64) {
    use etcd_client::{Compare, CompareOp, Txn, TxnOp};
    let txn = Txn::new()
        .when([Compare::version(COMPACT_REV_KEY, CompareOp::Equal, 0)])
        .and_then([TxnOp::put(COMPACT_REV_KEY, rev.to_string(), None)])
        .or_else([TxnOp::get(COMPACT_REV_KEY, None)]);
    assert!(raw.txn(txn).await.unwrap().succeeded());
    raw.compact(rev, None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_kube_1_34_a_store_sees_compactions_made_by_another_server() {
    let server = etcd("compact-awareness");
    let mut raw = etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap();
    let at_1_37 = store(&server, KubeVersion::V1_37).await;
    let at_1_34 = store(&server, KubeVersion::V1_34).await;
    let at_1_31 = store(&server, KubeVersion::V1_31).await;
    let created = at_1_37
        .create("pods/ns/p1", Pod::new("ns", "p1"), 0)
        .await
        .unwrap();
    let rev: i64 = created.metadata.resource_version.parse().unwrap();
    for store in [&at_1_37, &at_1_34, &at_1_31] {
        assert_eq!(store.compact_revision(), 0, "nothing compacted yet");
    }

    compact_as_another_server(&mut raw, rev).await;

    eventually("kube 1.37's compact revision", rev, || async {
        at_1_37.compact_revision()
    })
    .await;
    eventually("kube 1.34's compact revision", rev, || async {
        at_1_34.compact_revision()
    })
    .await;
    // A store made after the compaction reads it at once from the key.
    let late = store(&server, KubeVersion::V1_35).await;
    eventually("a later store's compact revision", rev, || async {
        late.compact_revision()
    })
    .await;
    assert_eq!(
        at_1_31.compact_revision(),
        0,
        "before 1.34 a store sees only the compactions of its own client's compactor"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compactor_on_the_stores_client_is_seen_at_every_kube_version() {
    let server = etcd("compact-local");
    let client = EtcdClient::connect(&ClientConfig::new([server.endpoint()]))
        .await
        .unwrap();
    let at_1_31 = Etcd3Store::<Pod>::new(client.clone(), StoreConfig::for_resource("pods"))
        .with_kube_version(KubeVersion::V1_31);
    at_1_31
        .create("pods/ns/p1", Pod::new("ns", "p1"), 0)
        .await
        .unwrap();
    // The first interval claims the clock, the second compacts.
    let compactor = Compactor::start(&client, Duration::from_millis(100)).unwrap();
    eventually("compactions made", true, || async {
        compactor.status().compactions >= 1
    })
    .await;
    let status = compactor.stop().await;
    assert!(status.last_compacted_revision > 0, "{status:?}");
    assert_eq!(at_1_31.compact_revision(), status.last_compacted_revision);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_are_estimated_from_the_start_only_at_kube_1_34() {
    let server = etcd("stats-versions");
    let mut raw = etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap();
    let writer = store(&server, KubeVersion::V1_31).await;
    for name in ["a", "b"] {
        writer
            .create(&format!("pods/ns/{name}"), Pod::new("ns", name), 0)
            .await
            .unwrap();
    }
    let average = (stored_size(&mut raw, "/registry/pods/ns/a").await
        + stored_size(&mut raw, "/registry/pods/ns/b").await)
        / 2;
    for (version, estimated) in [
        (KubeVersion::V1_31, false),
        (KubeVersion::V1_33, false),
        (KubeVersion::V1_34, true),
        (KubeVersion::V1_35, false),
        (KubeVersion::V1_37, false),
    ] {
        let store = store(&server, version).await;
        store.list("pods", &everything()).await.unwrap();
        let stats = store.stats().await.unwrap();
        let expected = Stats {
            object_count: 2,
            estimated_average_object_size_bytes: if estimated { average } else { 0 },
        };
        assert_eq!(stats, expected, "stats at kube {version}");
        assert_eq!(store.estimates_sizes(), estimated, "at kube {version}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enabled_estimate_follows_lists_watches_and_etcds_keys() {
    let server = etcd("stats-estimate");
    let mut raw = etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap();
    let other = store(&server, KubeVersion::V1_37).await;
    let estimating = store(&server, KubeVersion::V1_37).await;
    // etcd3/store_test.go `TestStats` with the size estimate on: etcd's keys.
    estimating
        .enable_resource_size_estimation(estimating.etcd_keys().unwrap())
        .unwrap();
    let again = estimating.enable_resource_size_estimation(estimating.etcd_keys().unwrap());
    assert!(again.is_err(), "enabled twice: {again:?}");

    for name in ["a", "b"] {
        other
            .create(&format!("pods/ns/{name}"), Pod::new("ns", name), 0)
            .await
            .unwrap();
    }
    let size_a = stored_size(&mut raw, "/registry/pods/ns/a").await;
    let size_b = stored_size(&mut raw, "/registry/pods/ns/b").await;
    // Nothing seen yet: the keys count, the sizes are unknown.
    assert_eq!(
        estimating.stats().await.unwrap(),
        Stats {
            object_count: 2,
            estimated_average_object_size_bytes: 0,
        }
    );
    let list = estimating.list("pods", &everything()).await.unwrap();
    assert_eq!(
        estimating.stats().await.unwrap(),
        Stats {
            object_count: 2,
            estimated_average_object_size_bytes: (size_a + size_b) / 2,
        }
    );

    // A watch's events move the estimate: b grows, written by another store.
    let from = ListOptions {
        resource_version: list.metadata.resource_version.clone(),
        recursive: true,
        ..ListOptions::default()
    };
    let mut watch = estimating.watch("pods", &from).await.unwrap();
    other
        .guaranteed_update("pods/ns/b", UpdateOptions::default(), |mut pod: Pod, _| {
            pod.metadata.labels.insert("grown".into(), "x".repeat(300));
            Ok(pod.into())
        })
        .await
        .unwrap();
    let event = tokio::time::timeout(PATIENCE, watch.next())
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(event, WatchEvent::Modified(_)), "{event:?}");
    let grown_b = stored_size(&mut raw, "/registry/pods/ns/b").await;
    assert!(grown_b > size_b + 300);
    assert_eq!(
        estimating
            .stats()
            .await
            .unwrap()
            .estimated_average_object_size_bytes,
        (size_a + grown_b) / 2
    );

    // A deletion the estimating store never saw: etcd's keys no longer list it.
    drop(watch);
    other
        .delete("pods/ns/a", apistore_storage::DeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(
        estimating.stats().await.unwrap(),
        Stats {
            object_count: 1,
            estimated_average_object_size_bytes: grown_b,
        }
    );
}

/// The value of the gauge `name` with exactly the labels `labels`, if there is one.
fn gauge(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> Option<i64> {
    let family = registry.gather().into_iter().find(|f| f.name() == name)?;
    family
        .get_metric()
        .iter()
        .find(|m| {
            labels.iter().all(|(n, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *n && l.value() == *v)
            })
        })
        .map(|m| m.get_gauge().get_value() as i64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_object_count_poller_sets_kube_1_34s_gauges_from_1_34_on() {
    let server = etcd("stats-metrics");
    let mut raw = etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap();
    let pods = [("group", ""), ("resource", "pods")];

    let registry = prometheus::Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_34).unwrap();
    let at_1_34 = store(&server, KubeVersion::V1_34)
        .await
        .with_metrics(metrics);
    for name in ["a", "b"] {
        at_1_34
            .create(&format!("pods/ns/{name}"), Pod::new("ns", name), 0)
            .await
            .unwrap();
    }
    let total = stored_size(&mut raw, "/registry/pods/ns/a").await
        + stored_size(&mut raw, "/registry/pods/ns/b").await;
    // 1.34's store estimates from the start; its list is what it learns from.
    at_1_34.list("pods", &everything()).await.unwrap();
    let _poll = at_1_34
        .poll_object_count(Duration::from_millis(100))
        .unwrap();
    let expected = (total / 2) * 2;
    eventually(
        "apiserver_resource_objects and the size estimate",
        (Some(2), Some(expected)),
        || async {
            (
                gauge(&registry, "apiserver_resource_objects", &pods),
                gauge(&registry, "apiserver_resource_size_estimate_bytes", &pods),
            )
        },
    )
    .await;
    assert_eq!(
        gauge(
            &registry,
            "apiserver_storage_objects",
            &[("resource", "pods")]
        ),
        Some(2)
    );

    let registry = prometheus::Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_31).unwrap();
    let at_1_31 = store(&server, KubeVersion::V1_31)
        .await
        .with_metrics(metrics);
    let _poll = at_1_31
        .poll_object_count(Duration::from_millis(100))
        .unwrap();
    eventually("apiserver_storage_objects", Some(2), || async {
        gauge(
            &registry,
            "apiserver_storage_objects",
            &[("resource", "pods")],
        )
    })
    .await;
    assert_eq!(gauge(&registry, "apiserver_resource_objects", &pods), None);
    assert_eq!(
        gauge(&registry, "apiserver_resource_size_estimate_bytes", &pods),
        None
    );
}
