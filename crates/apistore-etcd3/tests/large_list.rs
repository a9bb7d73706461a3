//! A list larger than gRPC's default 4 MiB message limit comes back whole, as
//! kube-apiserver's client allows responses up to 2 GiB.

mod common;

use apistore_storage::{ListOptions, Storage};
use apistore_testing::suite::{Backend, Pod};
use common::Etcd3Backend;
use futures::StreamExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_list_over_four_mebibytes_is_returned_whole() {
    let backend = Etcd3Backend::new("large_list").await;
    let store = backend.store();
    let payload = "x".repeat(8 * 1024);
    let count = 600; // 600 × 8 KiB ≈ 4.8 MiB in one range response
    let mut writes = Vec::new();
    for i in 0..count {
        let mut pod = Pod::new("big", &format!("pod-{i:04}"));
        pod.metadata
            .annotations
            .insert("payload".into(), payload.clone());
        writes.push(async move { store.create(&pod.key(), pod, 0).await });
    }
    // 16 at a time: the test is about the list's size, not a burst of writes. All 600 at
    // once took kine over PostgreSQL past the client's request timeout on a loaded
    // two-core machine (3 runs of 8 after its connection pool was capped).
    let results: Vec<_> = futures::stream::iter(writes)
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result.unwrap();
    }
    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store.list("/pods/big", &options).await.unwrap();
    assert_eq!(list.items.len(), count);
}
