//! The facade's compaction interval starts kube-apiserver's compactor on the endpoints:
//! after a couple of intervals `compact_rev_key` has been written and old revisions are
//! gone. On an etcd of its own, since compaction is global to an etcd.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apistore::{ApiStore, DynamicObject, ListOptions, ResourceVersionMatch, Storage};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builder_compaction_interval_compacts_old_revisions() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let api = ApiStore::builder()
        .endpoints([etcd.endpoint()])
        .compaction_interval(Duration::from_millis(500))
        .build()
        .await
        .unwrap();
    let store = api.dynamic_store("widgets.example.com").unwrap();
    let first = store
        .create(
            "example.com/widgets/w0",
            DynamicObject::new("example.com/v1", "Widget", "w0"),
            0,
        )
        .await
        .unwrap();
    for i in 1..5 {
        let name = format!("w{i}");
        store
            .create(
                &format!("example.com/widgets/{name}"),
                DynamicObject::new("example.com/v1", "Widget", &name),
                0,
            )
            .await
            .unwrap();
    }
    let exact_at_first = ListOptions {
        resource_version: first.metadata.resource_version.clone(),
        resource_version_match: ResourceVersionMatch::Exact,
        recursive: true,
        ..ListOptions::default()
    };
    // The compactor compacts to the revision it saw one interval earlier.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match store.list("example.com/widgets", &exact_at_first).await {
            Err(err) if err.is_expired() => break,
            Err(err) => panic!("unexpected error: {err}"),
            Ok(_) if tokio::time::Instant::now() > deadline => {
                panic!(
                    "revision {} still readable after 20s",
                    first.metadata.resource_version
                )
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    let mut raw = etcd_client::Client::connect([etcd.endpoint()], None)
        .await
        .unwrap();
    let key = raw.get("compact_rev_key", None).await.unwrap();
    assert!(!key.kvs().is_empty(), "compact_rev_key was not written");
}
