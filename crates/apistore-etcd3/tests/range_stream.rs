//! Which read a list makes, by etcd version: from kube 1.37 an unlimited recursive list
//! reads with one `RangeStream` on etcd 3.7 and later, and with paged `Range` requests
//! on older etcds, which answer `Unimplemented` (once per client: the client remembers).
//! The answers are the same either way. Run against the test etcd of any version: the
//! expectations follow the version it reports.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use apistore_etcd3::Etcd3Store;
use apistore_storage::{
    KubeVersion, ListOptions, ObjectList, ResourceVersionMatch, SelectionPredicate, Storage,
    StorageError,
};
use apistore_testing::etcd::EtcdOptions;
use apistore_testing::suite::{Backend, Pod};
use common::Etcd3Backend;

/// Whether the etcd behind `backend` has `RangeStream`: it says it is 3.7 or later.
async fn etcd_streams(backend: &Etcd3Backend) -> bool {
    let status = backend
        .raw
        .clone()
        .status()
        .await
        .expect("the test etcd answers a status request");
    let version = status.version().to_owned();
    let mut numbers = version.split('.').map(|n| n.parse::<u32>());
    match (numbers.next(), numbers.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) >= (3, 7),
        _ => panic!("the test etcd reports version {version:?}, not major.minor.patch"),
    }
}

fn recursive() -> ListOptions {
    ListOptions {
        recursive: true,
        ..ListOptions::default()
    }
}

fn exact(resource_version: &str) -> ListOptions {
    ListOptions {
        resource_version: resource_version.to_owned(),
        resource_version_match: ResourceVersionMatch::Exact,
        ..recursive()
    }
}

async fn create_pods(store: &Etcd3Store<Pod>, namespace: &str, names: std::ops::Range<usize>) {
    for i in names {
        let mut pod = Pod::new(namespace, &format!("pod-{i:03}"));
        // About a KiB each, so that etcd sends several chunks.
        pod.metadata
            .annotations
            .insert("payload".into(), "x".repeat(1024));
        store.create(&pod.key(), pod, 0).await.unwrap();
    }
}

fn names(list: &ObjectList<Pod>) -> Vec<String> {
    list.items
        .iter()
        .map(|pod| pod.metadata.name.clone())
        .collect()
}

#[tokio::test]
async fn unlimited_lists_stream_on_etcd_3_7_and_page_with_range_before_it() {
    let backend = Etcd3Backend::new("range_stream").await;
    let streams = etcd_streams(&backend).await;
    let kube_1_31 = backend.store.clone();
    let kube_1_37 = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    create_pods(&kube_1_37, "rs", 0..40).await;
    assert!(
        backend.client.range_stream_available(),
        "until etcd says no"
    );

    let listed = kube_1_37.list("/pods/rs", &recursive()).await.unwrap();
    // Only etcd 3.7+ has the method: an older one refused it, and the client remembers,
    // so the next lists (below) read with Range without asking again.
    assert_eq!(backend.client.range_stream_available(), streams);
    let expected: Vec<String> = (0..40).map(|i| format!("pod-{i:03}")).collect();
    assert_eq!(names(&listed), expected);
    assert!(listed.metadata.continue_token.is_empty());
    assert_eq!(listed.metadata.remaining_item_count, None);
    let revision = listed.metadata.resource_version.clone();

    // Later writes change neither a list at the first list's revision, streamed (etcd
    // reports its latest revision in a pinned stream's header: the list must not), nor
    // the same list read with Range by a store at kube 1.31.
    create_pods(&kube_1_37, "rs", 40..42).await;
    let at_revision = kube_1_37.list("/pods/rs", &exact(&revision)).await.unwrap();
    assert_eq!(at_revision, listed);
    let paged = kube_1_31.list("/pods/rs", &exact(&revision)).await.unwrap();
    assert_eq!(paged, listed);

    // A limited list pages whatever the etcd (kube streams only unbounded reads).
    let limited = ListOptions {
        predicate: SelectionPredicate {
            limit: 10,
            ..SelectionPredicate::default()
        },
        ..recursive()
    };
    let page = kube_1_37.list("/pods/rs", &limited).await.unwrap();
    assert_eq!(page.items.len(), 10);
    assert!(!page.metadata.continue_token.is_empty());

    let streamed = backend.requests_total(&["listStream"]);
    let ranged = backend.requests_total(&["list"]);
    // A stream is one `listStream` request, a page one `list`; a refused stream is not
    // counted (as in kube), and the client's memory above kept the later lists from
    // asking again.
    let expected = if streams { (2, 2) } else { (0, 4) };
    assert_eq!(
        (streamed, ranged),
        expected,
        "(listStream, list) on etcd 3.7+: {streams}"
    );
    assert_eq!(backend.client.range_stream_available(), streams);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_lists_at_a_future_or_compacted_revision_fail_as_paged_ones_do() {
    let backend = Etcd3Backend::dedicated("range_stream_revisions", EtcdOptions::default()).await;
    let store = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    create_pods(&store, "rs", 0..3).await;
    let first = store.list("/pods/rs", &recursive()).await.unwrap();
    let revision: u64 = first.metadata.resource_version.parse().unwrap();

    let future = (revision + 1000).to_string();
    let err = store.list("/pods/rs", &exact(&future)).await.unwrap_err();
    match err {
        StorageError::ResourceVersionTooLarge {
            requested, current, ..
        } => assert_eq!((requested, current), (revision + 1000, revision)),
        other => panic!("a list at a future revision: {other}"),
    }

    create_pods(&store, "rs", 3..5).await;
    let latest = store.list("/pods/rs", &recursive()).await.unwrap();
    assert_eq!(latest.items.len(), 5);
    backend.compact(&latest.metadata.resource_version).await;
    let err = store
        .list("/pods/rs", &exact(&first.metadata.resource_version))
        .await
        .unwrap_err();
    match err {
        StorageError::Expired {
            message,
            continue_token,
            ..
        } => {
            assert_eq!(message, apistore_backend::list::LIST_EXPIRED);
            assert_eq!(continue_token, None);
        }
        other => panic!("a list at a compacted revision: {other}"),
    }
}
