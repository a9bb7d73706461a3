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
    version_streams(status.version())
}

/// Whether an etcd of this version has `RangeStream`: 3.7 or later.
fn version_streams(version: &str) -> bool {
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

/// How many calls etcd member `endpoint` has started of the KV service's `method`
/// (`grpc_server_started_total`).
fn kv_calls_started(endpoint: &str, method: &str) -> u64 {
    let method = format!("grpc_method=\"{method}\"");
    common::etcd_metrics(endpoint)
        .lines()
        .filter(|line| line.starts_with("grpc_server_started_total{"))
        .filter(|line| line.contains(&method) && line.contains("grpc_service=\"etcdserverpb.KV\""))
        .filter_map(|line| line.rsplit(' ').next())
        .map(|value| value.parse::<f64>().unwrap() as u64)
        .sum()
}

/// The one member whose count of `method` calls went past `before` (one per member).
fn member_that_served(endpoints: &[String], method: &str, before: &[u64]) -> usize {
    let served: Vec<usize> = endpoints
        .iter()
        .zip(before)
        .enumerate()
        .filter(|(_, (endpoint, before))| kv_calls_started(endpoint, method) > **before)
        .map(|(index, _)| index)
        .collect();
    match served[..] {
        [member] => member,
        _ => panic!("expected one member to have served the list's {method}, found {served:?}"),
    }
}

/// A member dying in the middle of a streamed list fails the list, as in kube 1.37: its
/// `streamChunks` hands a broken stream's error to the caller (etcd's client retries a
/// server stream only before its first message, and `RangeStream` not even then), who
/// lists again (a reflector relists); nothing partial is returned. The next list is
/// served whole by a member still up. Before etcd 3.7 the same list is one `Range`,
/// whose answer has all arrived by the time the member dies: it succeeds.
///
/// Deterministic: the member is killed from the transformer while the first value of
/// the first chunk is decoded, when at most a few MiB of the 26 MiB list can have left
/// etcd (HTTP/2 flow control holds the rest until the client reads on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_dying_mid_stream_fails_the_list_and_the_next_list_is_whole() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use apistore_etcd3::{ClientConfig, EtcdClient, StoreConfig};
    use apistore_testing::etcd::EtcdCluster;
    use apistore_testing::suite::PrefixTransformer;
    use futures::StreamExt;
    use tokio::task::block_in_place;

    const PODS: usize = 400;
    let options = EtcdOptions {
        name: "range-stream-member-dies".to_owned(),
        ..EtcdOptions::default()
    };
    let cluster = block_in_place(|| EtcdCluster::start(3, options)).unwrap();
    let endpoints = cluster.endpoints();
    let cluster = Arc::new(Mutex::new(cluster));
    let client = EtcdClient::connect(&ClientConfig {
        dial_timeout: Duration::from_secs(5),
        ..ClientConfig::new(endpoints.clone())
    })
    .await
    .unwrap();
    let transformer = Arc::new(PrefixTransformer::new(b"test!"));
    let store = Etcd3Store::<Pod>::new(
        client,
        StoreConfig {
            request_timeout: Some(Duration::from_secs(10)),
            ..StoreConfig::for_resource("pods")
        },
    )
    .with_transformer(transformer.clone())
    .with_kube_version(KubeVersion::V1_37);
    let mut raw = etcd_client::Client::connect(endpoints.clone(), None)
        .await
        .unwrap();
    let version = raw.status().await.unwrap().version().to_owned();
    let streams = version_streams(&version);

    // 400 pods of 64 KiB: a 26 MiB list, of which etcd sends 10 keys first.
    futures::stream::iter(0..PODS)
        .map(|i| {
            let store = store.clone();
            async move {
                let mut pod = Pod::new("rs", &format!("pod-{i:03}"));
                pod.metadata
                    .annotations
                    .insert("payload".into(), "x".repeat(64 * 1024));
                store.create(&pod.key(), pod, 0).await.unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;

    let method = if streams { "RangeStream" } else { "Range" };
    let before: Vec<u64> = endpoints
        .iter()
        .map(|endpoint| kv_calls_started(endpoint, method))
        .collect();
    let killed = Arc::new(Mutex::new(None));
    let fired = AtomicBool::new(false);
    let hook_cluster = Arc::clone(&cluster);
    let hook_killed = Arc::clone(&killed);
    let hook_endpoints = endpoints.clone();
    transformer.set_read_hook(Some(Arc::new(move || {
        if !fired.swap(true, Ordering::SeqCst) {
            let member = member_that_served(&hook_endpoints, method, &before);
            hook_cluster.lock().unwrap().kill_member(member).unwrap();
            *hook_killed.lock().unwrap() = Some(member);
        }
        Ok(())
    })));

    let first = store.list("/pods/rs", &recursive()).await;
    let killed = killed.lock().unwrap().expect("the list decoded a value");
    transformer.set_read_hook(None);
    let expected: Vec<String> = (0..PODS).map(|i| format!("pod-{i:03}")).collect();
    if streams {
        let err = first.expect_err("a list whose stream broke fails");
        match &err {
            StorageError::Unreachable { key, .. } => assert!(key.ends_with("/pods/rs/"), "{key}"),
            other => panic!("a list whose member died mid-stream: {other:?}"),
        }
        // A broken connection to the member that served the stream, named: not a
        // server that does not speak gRPC (which h2 hiding the io error once made it).
        let source = std::error::Error::source(&err).map(ToString::to_string);
        let expected = format!("the connection to etcd at {} broke", endpoints[killed]);
        assert!(
            source
                .as_deref()
                .is_some_and(|text| text.starts_with(&expected)),
            "{expected}: {source:?}"
        );
    } else {
        assert_eq!(
            names(&first.unwrap()),
            expected,
            "etcd {version}: one Range"
        );
    }

    // The next list goes to a member that is up (once they have a leader again, if the
    // dead member led) and is whole.
    block_in_place(|| {
        cluster
            .lock()
            .unwrap()
            .wait_for_leader(Duration::from_secs(30))
    })
    .unwrap();
    let second = store.list("/pods/rs", &recursive()).await.unwrap();
    assert_eq!(names(&second), expected);
    let served = kv_calls_started(&endpoints[(killed + 1) % 3], method)
        + kv_calls_started(&endpoints[(killed + 2) % 3], method);
    assert!(served > 0, "a member still up served the second list");
}

/// `list_chunks` hands out the list `list` returns, in key order, chunk by chunk: the
/// `RangeStream`'s chunks at kube 1.37 on etcd 3.7+ (etcd sends 10 keys first), pages of
/// 1,000 keys at one revision otherwise, a limited list's own page; the metadata is the
/// list's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_chunks_hands_out_the_list_chunk_by_chunk() {
    use futures::StreamExt;

    const PODS: usize = 2_500;
    let backend = Etcd3Backend::new("range_stream_chunks").await;
    let streams = etcd_streams(&backend).await;
    let kube_1_31 = backend.store.clone();
    let kube_1_37 = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    futures::stream::iter(0..PODS)
        .map(|i| {
            let store = kube_1_31.clone();
            async move {
                let pod = Pod::new("chunks", &format!("pod-{i:04}"));
                store.create(&pod.key(), pod, 0).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
    let whole = kube_1_31.list("/pods/chunks", &recursive()).await.unwrap();
    assert_eq!(whole.items.len(), PODS);
    let revision = whole.metadata.resource_version.clone();

    let chunked = |store: Etcd3Store<Pod>, options: ListOptions| async move {
        let mut chunks: Vec<Vec<Pod>> = Vec::new();
        let metadata = store
            .list_chunks("/pods/chunks", &options, |chunk| chunks.push(chunk))
            .await
            .unwrap();
        (chunks, metadata)
    };
    for (store, version) in [(&kube_1_31, "1.31"), (&kube_1_37, "1.37")] {
        let streamed_before = backend.requests_total(&["listStream"]);
        let (chunks, metadata) = chunked(store.clone(), exact(&revision)).await;
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        let items: Vec<Pod> = chunks.into_iter().flatten().collect();
        assert_eq!(items, whole.items, "kube {version}: chunks {sizes:?}");
        assert_eq!(metadata, whole.metadata, "kube {version}");
        let streamed = backend.requests_total(&["listStream"]) - streamed_before;
        if version == "1.37" && streams {
            assert_eq!(streamed, 1, "one RangeStream");
            assert_eq!(sizes.first(), Some(&10), "etcd's first chunk: {sizes:?}");
            assert!(sizes.len() > 1, "chunks as etcd sent them: {sizes:?}");
        } else {
            assert_eq!(streamed, 0);
            assert_eq!(sizes, [1000, 1000, 500], "pages of 1,000 keys");
        }
    }

    // At the latest revision too: the list's revision is one the chunks were read at.
    // Other tests write to the same etcd meanwhile, so it may be later than `revision`.
    let (chunks, metadata) = chunked(kube_1_37.clone(), recursive()).await;
    assert_eq!(chunks.concat(), whole.items);
    let listed_at: u64 = metadata.resource_version.parse().unwrap();
    assert!(
        listed_at >= revision.parse::<u64>().unwrap(),
        "{listed_at} before {revision}"
    );
    let exact_at = kube_1_37
        .list("/pods/chunks", &exact(&metadata.resource_version))
        .await
        .unwrap();
    assert_eq!(exact_at.items, whole.items);
    assert_eq!(
        exact_at.metadata.resource_version,
        metadata.resource_version
    );

    // A limited list is its pages; its continue token is the list's.
    let limited = ListOptions {
        predicate: SelectionPredicate {
            limit: 1_200,
            ..SelectionPredicate::default()
        },
        ..exact(&revision)
    };
    let page = kube_1_37.list("/pods/chunks", &limited).await.unwrap();
    let (chunks, metadata) = chunked(kube_1_37.clone(), limited).await;
    assert_eq!(chunks.concat(), page.items);
    assert_eq!(metadata, page.metadata);
    assert!(!metadata.continue_token.is_empty());
}

/// A watch's initial state over a prefix (a watch from resourceVersion 0) reads with one
/// `RangeStream` from kube 1.37 on etcd 3.7+, as 1.37's `syncStreamRecursive`, with pages
/// of `Range` before 3.7 and at kube 1.31; the events are the same: every object Added,
/// in key order, then the changes after the revision read at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watchs_initial_state_streams_at_kube_1_37_on_etcd_3_7() {
    use futures::StreamExt;

    let backend = Etcd3Backend::new("range_stream_watch_sync").await;
    let streams = etcd_streams(&backend).await;
    let kube_1_31 = backend.store.clone();
    let kube_1_37 = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    create_pods(&kube_1_31, "sync", 0..30).await;
    let from_zero = ListOptions {
        resource_version: "0".to_owned(),
        ..recursive()
    };
    // The first watch's later create is in the second watch's initial state.
    for (store, version, later) in [(&kube_1_31, "1.31", 30), (&kube_1_37, "1.37", 31)] {
        let expected: Vec<String> = (0..later).map(|i| format!("pod-{i:03}")).collect();
        let (streamed, ranged) = (
            backend.requests_total(&["listStream"]),
            backend.requests_total(&["list"]),
        );
        let mut watch = store.watch("/pods/sync", &from_zero).await.unwrap();
        let mut added = Vec::new();
        while added.len() < expected.len() {
            match watch.next().await.expect("the watch goes on") {
                apistore_storage::WatchEvent::Added(pod) => added.push(pod.metadata.name),
                other => panic!("kube {version}: an initial event {other:?}"),
            }
        }
        assert_eq!(added, expected, "kube {version}");
        // A stream is recorded when it ends, after its last chunk's events were sent
        // on (as kube records it when its iterator ends): the watch can hand out every
        // Added event before that. Wait (bounded) until the read is on record.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (streamed, ranged) = loop {
            let reads = (
                backend.requests_total(&["listStream"]) - streamed,
                backend.requests_total(&["list"]) - ranged,
            );
            if reads != (0, 0) || std::time::Instant::now() >= deadline {
                break reads;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        };
        let expected_reads = if version == "1.37" && streams {
            (1, 0)
        } else {
            (0, 1)
        };
        assert_eq!(
            (streamed, ranged),
            expected_reads,
            "kube {version}: (listStream, list)"
        );
        // Changes after the revision the state was read at follow.
        create_pods(store, "sync", later..later + 1).await;
        match watch.next().await.expect("the watch goes on") {
            apistore_storage::WatchEvent::Added(pod) => {
                assert_eq!(pod.metadata.name, format!("pod-{later:03}"));
            }
            other => panic!("kube {version}: after the initial state {other:?}"),
        }
    }
}

/// The names a list of `/pods/{namespace}` returns, and the names `list_chunks` hands
/// out, on the runtime the caller runs on. Three lists run at once, more than the
/// test's two workers, so that on a multi-thread runtime their large pages go under
/// `block_in_place` while the lists overlap (a list alone reads them in place).
async fn listed_both_ways(store: &Etcd3Store<Pod>, namespace: &str) -> (Vec<String>, Vec<String>) {
    let key = format!("/pods/{namespace}");
    let options = recursive();
    let (listed, second, third) = tokio::join!(
        store.list(&key, &options),
        store.list(&key, &options),
        store.list(&key, &options)
    );
    let listed = listed.unwrap();
    assert_eq!(names(&second.unwrap()), names(&listed));
    assert_eq!(names(&third.unwrap()), names(&listed));
    let mut chunked = Vec::new();
    store
        .list_chunks(&key, &recursive(), |chunk| {
            chunked.extend(chunk.into_iter().map(|pod| pod.metadata.name))
        })
        .await
        .unwrap();
    (names(&listed), chunked)
}

/// Lists whose pages and chunks are large enough to be read back off the caller's
/// worker (64 values or more) answer alike wherever the caller runs: on a worker of a
/// multi-thread runtime and in its `block_on`, inside a `LocalSet` on it (where tokio's
/// `block_in_place` panics), and on a current-thread runtime (where it panics too);
/// streamed at kube 1.37 on etcd 3.7, paged at kube 1.31.
#[test]
fn large_lists_answer_alike_on_every_runtime_and_inside_a_local_set() {
    let multi = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let backend = multi.block_on(Etcd3Backend::new("range_stream_runtimes"));
    let kube_1_37 = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    multi.block_on(create_pods(&kube_1_37, "rt", 0..200));
    let expected: Vec<String> = (0..200).map(|i| format!("pod-{i:03}")).collect();
    let expected = (expected.clone(), expected);
    for store in [backend.store.clone(), kube_1_37] {
        assert_eq!(multi.block_on(listed_both_ways(&store, "rt")), expected);
        let on_worker = store.clone();
        let listed = multi
            .block_on(multi.spawn(async move { listed_both_ways(&on_worker, "rt").await }))
            .unwrap();
        assert_eq!(listed, expected);
        let local = tokio::task::LocalSet::new();
        let in_local_set = store.clone();
        let listed = local.block_on(&multi, async move {
            tokio::task::spawn_local(async move { listed_both_ways(&in_local_set, "rt").await })
                .await
                .unwrap()
        });
        assert_eq!(listed, expected);
    }
    drop(backend);

    let current = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A client of its own: a client's connection lives on the runtime it was made on.
    let backend = current.block_on(Etcd3Backend::new("range_stream_runtimes"));
    let kube_1_37 = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    current.block_on(create_pods(&kube_1_37, "rt", 0..200));
    for store in [backend.store, kube_1_37] {
        assert_eq!(current.block_on(listed_both_ways(&store, "rt")), expected);
        let local = tokio::task::LocalSet::new();
        let listed = local.block_on(&current, listed_both_ways(&store, "rt"));
        assert_eq!(listed, expected);
    }
}
