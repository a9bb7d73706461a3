//! The metrics a real `Etcd3Store` following kube 1.37 records against a real etcd,
//! labelled as k8s.io/apiserver v0.37's `pkg/storage/etcd3/metrics` and
//! `pkg/storage/metrics` label them: `group` and `resource` instead of one string, the
//! operations 1.34 and 1.37 named (`listOnlyKeys`, `getCurrentResourceVersion`), the
//! count under the resource rather than its key, lists by `storage` and `index`, and
//! `apiserver_storage_list_duration_seconds` by whether the list streamed. (The 1.31
//! exposition is `telemetry.rs`'.)

// Helpers outside `#[test]` functions panic too: a panic there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::{GetOptions, KubeVersion, ListOptions, Storage};
use apistore_telemetry::{StorageMetrics, encode_text};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use apistore_testing::suite::Pod;

/// The sample lines of `name` (its series, without HELP and TYPE).
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_37_store_records_kube_1_37s_labels_and_families() {
    let server = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let client = EtcdClient::connect(&ClientConfig::new([server.endpoint()]))
        .await
        .unwrap();
    let registry = prometheus::Registry::new();
    let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_37).unwrap();
    let store: Etcd3Store<Pod> = Etcd3Store::new(client, StoreConfig::for_resource("pods"))
        .with_kube_version(KubeVersion::V1_37)
        .with_metrics(metrics);

    for name in ["a", "b"] {
        store
            .create(&format!("/pods/ns/{name}"), Pod::new("ns", name), 0)
            .await
            .unwrap();
    }
    store
        .get("/pods/ns/a", &GetOptions::default())
        .await
        .unwrap();
    let everything = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store.list("/pods", &everything).await.unwrap();
    assert_eq!(list.items.len(), 2);
    assert_eq!(store.count("/pods").await.unwrap(), 2);
    let current = store.get_current_resource_version().await.unwrap();
    assert!(current > 0);
    store
        .enable_resource_size_estimation(store.etcd_keys().unwrap())
        .unwrap();
    assert_eq!(store.stats().await.unwrap().object_count, 2);

    let text = encode_text(&registry);
    let requests = samples(&text, "etcd_requests_total");
    // An unlimited list streams on etcd 3.7+ and pages on older etcd; both are 1.37.
    let streamed = requests
        .iter()
        .any(|l| l.contains(r#"operation="listStream""#));
    let list_operation = if streamed { "listStream" } else { "list" };
    for expected in [
        r#"etcd_requests_total{group="",operation="create",resource="pods"} 2"#.to_owned(),
        r#"etcd_requests_total{group="",operation="get",resource="pods"} 1"#.to_owned(),
        format!(
            r#"etcd_requests_total{{group="",operation="{list_operation}",resource="pods"}} 1"#
        ),
        // kube 1.34+ labels a count with the resource, not the key it counts under.
        r#"etcd_requests_total{group="",operation="listWithCount",resource="pods"} 1"#.to_owned(),
        r#"etcd_requests_total{group="",operation="getCurrentResourceVersion",resource="pods"} 1"#
            .to_owned(),
    ] {
        assert!(
            requests.contains(&expected.as_str()),
            "{expected} in\n{text}"
        );
    }
    // The size estimator reads the keys at least once for `stats`.
    assert!(
        requests.iter().any(|l| l.starts_with(
            r#"etcd_requests_total{group="",operation="listOnlyKeys",resource="pods"} "#
        )),
        "{text}"
    );
    assert!(!text.contains("type="), "no 1.31 label in\n{text}");

    assert_eq!(
        samples(&text, "apiserver_storage_list_total"),
        [r#"apiserver_storage_list_total{group="",index="",resource="pods",storage="etcd"} 1"#],
        "{text}"
    );
    assert_eq!(
        samples(&text, "apiserver_storage_list_returned_objects_total"),
        [
            r#"apiserver_storage_list_returned_objects_total{group="",resource="pods",storage="etcd"} 2"#
        ],
        "{text}"
    );
    assert_eq!(
        samples(&text, "apiserver_storage_list_duration_seconds_count"),
        [format!(
            r#"apiserver_storage_list_duration_seconds_count{{group="",resource="pods",streamed="{streamed}"}} 1"#
        )
        .as_str()],
        "{text}"
    );
    // Hidden at 1.37.
    assert!(!text.contains("apiserver_storage_objects"), "{text}");
}
