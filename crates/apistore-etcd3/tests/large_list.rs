//! A list larger than gRPC's default 4 MiB message limit comes back whole, as
//! kube-apiserver's client allows responses up to 2 GiB; and a large list read back
//! on several threads is the list read back on one.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use apistore_storage::{ListOptions, Storage};
use apistore_testing::suite::{Backend, Pod};
use common::Etcd3Backend;
use futures::StreamExt as _;

/// Runs the creates `writes`, 16 at a time: the tests are about a list's size, not a
/// burst of writes. All 600 at once took kine over PostgreSQL past the client's request
/// timeout on a loaded two-core machine (3 runs of 8 after its connection pool was
/// capped).
async fn create_all<F, T, E>(writes: Vec<F>)
where
    F: std::future::Future<Output = Result<T, E>>,
    E: std::fmt::Debug,
{
    let results: Vec<_> = futures::stream::iter(writes)
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result.unwrap();
    }
}

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
    create_all(writes).await;
    let options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store.list("/pods/big", &options).await.unwrap();
    assert_eq!(list.items.len(), count);
}

/// A list whose pages are read back on several threads is the list read on one: the
/// same items in the same order, the same continue tokens and the same errors, with and
/// without kube 1.37's going past corrupt objects, and with a selector that drops most.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_read_on_several_threads_is_the_list_read_on_one() {
    use apistore_storage::{KubeVersion, LabelSelector, SelectionPredicate};

    let backend = Etcd3Backend::new("large_list_threads").await;
    let count = 700;
    // About 2.5 KiB each: a whole list holds work for three read threads (half a MiB
    // each), where 700 bare Pods would be read on the caller's thread alone.
    let payload = "p".repeat(2200);
    let writes: Vec<_> = (0..count)
        .map(|i| {
            let mut pod = Pod::new("many", &format!("pod-{i:04}"));
            let app = if i % 3 == 0 { "web" } else { "db" };
            pod.metadata.labels.insert("app".into(), app.into());
            pod.metadata
                .annotations
                .insert("payload".into(), payload.clone());
            let store = backend.store().clone();
            async move { store.create(&pod.key(), pod, 0).await }
        })
        .collect();
    create_all(writes).await;

    let lists = |store: apistore_etcd3::Etcd3Store<Pod>| async move {
        let mut seen = Vec::new();
        for (label, limit) in [("", 0), ("app=web", 0), ("", 150), ("app=web", 90)] {
            let mut options = ListOptions {
                recursive: true,
                predicate: SelectionPredicate {
                    label: LabelSelector::parse(label).unwrap(),
                    limit,
                    ..SelectionPredicate::default()
                },
                ..ListOptions::default()
            };
            loop {
                match store.list("/pods/many", &options).await {
                    Ok(list) => {
                        let names: Vec<String> = list
                            .items
                            .iter()
                            .map(|pod| pod.metadata.name.clone())
                            .collect();
                        seen.push(format!(
                            "{label}/{limit}: {names:?} {:?}",
                            list.metadata.remaining_item_count
                        ));
                        if list.metadata.continue_token.is_empty() {
                            break;
                        }
                        options.predicate.continue_token = list.metadata.continue_token;
                    }
                    Err(err) => {
                        seen.push(format!("{label}/{limit}: {err}"));
                        break;
                    }
                }
            }
        }
        seen
    };
    let compare = |what: &'static str, store: apistore_etcd3::Etcd3Store<Pod>| async move {
        let alone = lists(store.clone().with_read_threads(1)).await;
        let threads = lists(store.with_read_threads(4)).await;
        assert_eq!(threads, alone, "{what}");
        alone
    };
    let intact = compare("intact", backend.store().clone()).await;
    assert_eq!(intact.len(), 1 + 1 + 5 + 3, "{intact:?}");

    // Values that do not read back: some do not decrypt, some do not decode.
    let mut raw = backend.raw.clone();
    for i in [5, 333, 334, 650] {
        let key = backend.etcd_key(&format!("/pods/many/pod-{i:04}"));
        let value: &[u8] = if i % 2 == 0 {
            b"test!{not json"
        } else {
            b"no marker"
        };
        raw.put(key, value, None).await.unwrap();
    }
    let failing = compare("corrupt, kube 1.31", backend.store().clone()).await;
    assert!(
        failing.iter().any(|seen| seen.contains("pod-0005")),
        "{failing:?}"
    );
    let store_1_37 = backend
        .store()
        .clone()
        .with_kube_version(KubeVersion::V1_37)
        .with_unsafe_malformed_object_deletion(true);
    let past = compare("corrupt, kube 1.37", store_1_37).await;
    assert!(
        past.iter()
            .any(|seen| seen.contains("pod-0005") && seen.contains("and 3 more")),
        "{past:?}"
    );
}
