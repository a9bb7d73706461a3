//! kube 1.34+'s `ListFromCacheSnapshot` against the backend: for a history of creates,
//! updates and deletes in two namespaces, every Exact list at every revision since the
//! cache's list and every continued list (pages of 1, 2 and 3) answers from the cache
//! exactly what the backend answers for the same request (items, resourceVersion,
//! continue token, remaining item count), over the in-memory store and over the etcd3
//! store and a real etcd. At kube 1.31 the same requests reach the backend (the cache's
//! `apiserver_cache_list_total` does not move); at 1.37 the cache serves them.
//!
//! With a label selector the cache's continue tokens name the last *selected* key and
//! etcd's the last key it *read* (kube's cacher and etcd3 store differ the same way),
//! so there the pages are walked to the end on each side and the items compared.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../apistore-etcd3/tests/common/mod.rs"]
mod etcd3;

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{
    DeleteOptions, KubeVersion, ListOptions, ObjectList, ResourceVersionMatch, Storage, Update,
    UpdateOptions,
};
use apistore_testing::metrics::counter;
use apistore_testing::suite::{Needs, Pod};

const KEYS: [&str; 3] = ["/pods", "/pods/a", "/pods/b"];

fn exact(at: u64, limit: i64) -> ListOptions {
    ListOptions::prefix()
        .at(at.to_string(), ResourceVersionMatch::Exact)
        .limit(limit)
}

fn continued(token: &str, limit: i64) -> ListOptions {
    let mut options = ListOptions::prefix().limit(limit);
    options.predicate.continue_token = token.to_owned();
    options
}

fn rv(pod: &Pod) -> u64 {
    pod.metadata.resource_version.parse().unwrap()
}

/// Writes a history under `/pods/a` and `/pods/b` (creates, label changes, deletes)
/// and returns the revision of every write.
async fn write_history(store: &impl Storage<Object = Pod>) -> Vec<u64> {
    let mut revisions = Vec::new();
    for i in 0..6 {
        for namespace in ["a", "b"] {
            let app = if i % 2 == 0 { "web" } else { "db" };
            let pod = Pod::new(namespace, &format!("pod-{i}")).with_label("app", app);
            revisions.push(rv(&store.create(&pod.key(), pod, 0).await.unwrap()));
        }
    }
    for i in [1, 4] {
        let key = format!("/pods/a/pod-{i}");
        let updated = store
            .guaranteed_update(&key, UpdateOptions::default(), |mut pod: Pod, _| {
                pod.metadata
                    .labels
                    .insert("app".to_owned(), "web".to_owned());
                pod.metadata.labels.insert("rev".to_owned(), "2".to_owned());
                Ok(Update::from(pod))
            })
            .await
            .unwrap();
        revisions.push(rv(&updated));
    }
    for key in ["/pods/a/pod-0", "/pods/b/pod-5", "/pods/b/pod-2"] {
        let deleted = store.delete(key, DeleteOptions::default()).await.unwrap();
        revisions.push(rv(&deleted));
    }
    let last = rv(&store
        .create("/pods/a/pod-9", Pod::new("a", "pod-9"), 0)
        .await
        .unwrap());
    revisions.push(last);
    revisions
}

/// Every page of a list, first `options`, then its continue tokens.
async fn all_pages<S: Storage<Object = Pod>>(
    store: &S,
    key: &str,
    options: ListOptions,
) -> Vec<ObjectList<Pod>> {
    let limit = options.predicate.limit;
    let selector = options.predicate.label.clone();
    let mut pages = vec![store.list(key, &options).await.unwrap()];
    while let Some(token) = pages
        .last()
        .map(|page| page.metadata.continue_token.clone())
        .filter(|token| !token.is_empty())
    {
        let mut next = continued(&token, limit);
        next.predicate.label = selector.clone();
        pages.push(store.list(key, &next).await.unwrap());
    }
    pages
}

/// The cache's answer to `options`, checked against the backend's answer to the same.
async fn same_answer(
    cacher: &impl Storage<Object = Pod>,
    backend: &impl Storage<Object = Pod>,
    key: &str,
    options: &ListOptions,
    what: &str,
) -> ObjectList<Pod> {
    let from_cache = cacher.list(key, options).await.unwrap();
    let from_backend = backend.list(key, options).await.unwrap();
    assert_eq!(from_cache, from_backend, "{what}, {key}");
    from_cache
}

/// A ready cache over `backend`, recording into a registry of its own, that has seen
/// all of `write_history`: the cache, the registry, the revision the cache listed at
/// and the history's revisions.
async fn cache_a_history<S>(
    backend: &S,
    mut config: CacherConfig<Pod>,
) -> (Cacher<S>, prometheus::Registry, u64, Vec<u64>)
where
    S: Storage<Object = Pod> + Clone + 'static,
{
    let registry = prometheus::Registry::new();
    // kube 1.36's families: their `apiserver_cache_list_*` (hidden from 1.37) are
    // what shows which lists the cache served.
    config.metrics = Some(CacherMetrics::register_for(&registry, KubeVersion::V1_36).unwrap());
    let cacher = Cacher::new(backend.clone(), config.with_key_fn(Pod::key));
    cacher.wait_until_ready().await.unwrap();
    let listed_at = cacher.resource_version();
    let revisions = write_history(backend).await;
    cacher
        .wait_until_fresh(*revisions.last().unwrap())
        .await
        .unwrap();
    (cacher, registry, listed_at, revisions)
}

fn lists_served_by_cache(registry: &prometheus::Registry) -> f64 {
    counter(registry, "apiserver_cache_list_total", &[])
}

/// The whole comparison over `backend`, with the cacher of kube `version`.
async fn compare<S>(backend: S, version: KubeVersion)
where
    S: Storage<Object = Pod> + Clone + 'static,
{
    let config = CacherConfig::new("/pods", "pods").with_kube_version(version);
    let (cacher, registry, listed_at, history) = cache_a_history(&backend, config).await;
    let mut revisions = vec![listed_at];
    revisions.extend(history);
    let snapshots = version >= KubeVersion::V1_34;
    assert_eq!(
        cacher.snapshot_count() > 0,
        snapshots,
        "kube {version}: snapshots taken"
    );

    let before = lists_served_by_cache(&registry);
    let mut requests = 0.0;
    for &at in &revisions {
        for key in KEYS {
            for limit in [0, 1, 2, 3] {
                let what = format!("kube {version}: Exact {at}, limit {limit}");
                let first = same_answer(&cacher, &backend, key, &exact(at, limit), &what).await;
                requests += 1.0;
                if limit == 0 {
                    continue;
                }
                // The whole walk: each continuation from the cache against the backend's
                // answer to the same token.
                let mut token = first.metadata.continue_token;
                while !token.is_empty() {
                    let what = format!("kube {version}: continued at {at}, limit {limit}");
                    let next = continued(&token, limit);
                    token = same_answer(&cacher, &backend, key, &next, &what)
                        .await
                        .metadata
                        .continue_token;
                    requests += 1.0;
                }
            }
            // With a selector the tokens differ by design; the items do not.
            let selected = exact(at, 2).labels("app=web").unwrap();
            let items = |pages: Vec<ObjectList<Pod>>| {
                pages
                    .into_iter()
                    .flat_map(|page| page.items)
                    .collect::<Vec<_>>()
            };
            let from_cache = items(all_pages(&cacher, key, selected.clone()).await);
            let from_backend = items(all_pages(&backend, key, selected).await);
            assert_eq!(
                from_cache, from_backend,
                "kube {version}: app=web at {at}, {key}"
            );
        }
    }
    let served = lists_served_by_cache(&registry) - before;
    if snapshots {
        assert!(
            served >= requests,
            "kube {version}: {served} of {requests} lists from the cache"
        );
    } else {
        assert_eq!(served, 0.0, "kube {version}: every list from the backend");
    }
}

fn memory_store() -> MemoryStore<Pod> {
    MemoryStore::new(
        MemoryKv::new(KvConfig::default()),
        MemoryStoreConfig::for_resource("pods"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_and_continued_lists_match_the_memory_store_at_1_37() {
    compare(memory_store(), KubeVersion::V1_37).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_and_continued_lists_go_to_the_memory_store_at_1_31() {
    compare(memory_store(), KubeVersion::V1_31).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_and_continued_lists_match_etcd_at_1_37() {
    let backend = etcd3::backend("snapshots_1_37", Needs::Shared).await;
    compare(
        backend.store.clone().with_kube_version(KubeVersion::V1_37),
        KubeVersion::V1_37,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_and_continued_lists_go_to_etcd_at_1_31() {
    let backend = etcd3::backend("snapshots_1_31", Needs::Shared).await;
    compare(backend.store.clone(), KubeVersion::V1_31).await;
}

/// After the backend compacts, the cache drops its snapshots below the compacted
/// revision and answers what the backend answers there: 410 Gone below it, the
/// snapshot's items at and above it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_drops_the_snapshots_below_it() {
    let kv = MemoryKv::new(KvConfig::default());
    let backend: MemoryStore<Pod> =
        MemoryStore::new(kv.clone(), MemoryStoreConfig::for_resource("pods"));
    let config = CacherConfig::new("/pods", "pods");
    let (cacher, registry, _, revisions) = cache_a_history(&backend, config).await;
    let last = *revisions.last().unwrap();
    let held = cacher.snapshot_count();
    let compacted = revisions[5];
    kv.compact(i64::try_from(compacted).unwrap()).unwrap();
    assert_eq!(cacher.compact_revision(), i64::try_from(compacted).unwrap());
    assert!(
        cacher.snapshot_count() < held,
        "{} of {held} snapshots left",
        cacher.snapshot_count()
    );

    let before = lists_served_by_cache(&registry);
    let below = exact(compacted - 1, 0);
    let from_cache = cacher.list("/pods", &below).await.unwrap_err();
    let from_backend = backend.list("/pods", &below).await.unwrap_err();
    assert!(from_cache.is_expired(), "{from_cache}");
    assert_eq!(from_cache.to_string(), from_backend.to_string());
    assert_eq!(
        lists_served_by_cache(&registry),
        before,
        "410 from the backend"
    );
    for at in [compacted, compacted + 1, last] {
        let options = exact(at, 2);
        assert_eq!(
            cacher.list("/pods", &options).await.unwrap(),
            backend.list("/pods", &options).await.unwrap(),
            "at {at}"
        );
    }
    assert_eq!(
        lists_served_by_cache(&registry),
        before + 3.0,
        "at and above the compaction from the snapshots"
    );
}

/// A continue token whose revision left the window (the window is four events here)
/// is answered by the backend, with the backend's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_older_than_the_window_goes_to_the_backend() {
    let backend = memory_store();
    let mut config = CacherConfig::new("/pods", "pods");
    config.lower_bound_capacity = 4;
    config.upper_bound_capacity = 4;
    let (cacher, registry, _, revisions) = cache_a_history(&backend, config).await;
    let last = *revisions.last().unwrap();
    assert!(cacher.snapshot_count() <= 5, "{}", cacher.snapshot_count());

    let early = revisions[2];
    let first = backend.list("/pods", &exact(early, 2)).await.unwrap();
    let before = lists_served_by_cache(&registry);
    let next = continued(&first.metadata.continue_token, 2);
    assert_eq!(
        cacher.list("/pods", &next).await.unwrap(),
        backend.list("/pods", &next).await.unwrap()
    );
    assert_eq!(lists_served_by_cache(&registry), before, "from the backend");
    // A token of the newest revision is still answered from the snapshots.
    let first = backend.list("/pods", &exact(last, 2)).await.unwrap();
    let next = continued(&first.metadata.continue_token, 2);
    assert_eq!(
        cacher.list("/pods", &next).await.unwrap(),
        backend.list("/pods", &next).await.unwrap()
    );
    assert_eq!(lists_served_by_cache(&registry), before + 1.0);
}

/// A continue token of revision −1, as the backend issues with a 410 when the revision a
/// walk was pinned to is compacted: "the rest of the list from after `last_key`, at the
/// latest revision".
fn latest_token(last_key: &str, key: &str) -> String {
    let prefix = format!("{}/", key.trim_end_matches('/'));
    apistore_versioning::continue_token::encode(last_key, -1, &prefix).unwrap()
}

/// kube 1.34+'s `ShouldDelegateContinue` for what v0.31.1 always delegated, against the
/// backend: (1) a token of revision −1 is a consistent read from its key, answered by
/// the cache (when consistent reads may come from it) with what the backend answers:
/// items, resourceVersion, a continue token at that revision and the remaining item
/// count; (2) a token with resourceVersion "0" is answered from the snapshot of the
/// token's revision, whole: the limit is ignored at "0" (`computeListLimit`), so the
/// items are those of the backend's pages from the same token, concatenated, and no
/// token follows. At kube 1.31 both reach the backend, whose answers they are.
async fn compare_continuations<S>(backend: S, version: KubeVersion)
where
    S: Storage<Object = Pod> + Clone + 'static,
{
    let mut config = CacherConfig::new("/pods", "pods").with_kube_version(version);
    config.consistent_reads_from_cache = true;
    let (cacher, registry, _, history) = cache_a_history(&backend, config).await;
    let from_cache = version >= KubeVersion::V1_34;
    let before = lists_served_by_cache(&registry);
    let mut requests = 0.0;
    let mut consistent_requests = 0.0;
    let keys = backend
        .list("/pods", &ListOptions::prefix())
        .await
        .unwrap()
        .items
        .iter()
        .map(Pod::key)
        .collect::<Vec<_>>();
    for key in KEYS {
        for last_key in keys.iter().filter(|k| k.starts_with(&format!("{key}/"))) {
            for limit in [0, 1, 2, 3] {
                let mut walk = continued(&latest_token(last_key, key), limit);
                let what = format!("kube {version}: revision -1 after {last_key}, limit {limit}");
                let first = same_answer(&cacher, &backend, key, &walk, &what).await;
                requests += 1.0;
                assert_eq!(
                    first.metadata.resource_version,
                    history.last().unwrap().to_string(),
                    "{what}: at the latest revision"
                );
                // A label selector: no remaining item count, on either side.
                walk = walk.labels("app=web").unwrap();
                same_answer(&cacher, &backend, key, &walk, &what).await;
                requests += 1.0;
                consistent_requests += 2.0;
            }
        }
        // resourceVersion "0" with tokens of every revision of the history.
        for &at in &history {
            let first = backend.list(key, &exact(at, 1)).await.unwrap();
            if first.metadata.continue_token.is_empty() {
                continue;
            }
            let mut at_zero = continued(&first.metadata.continue_token, 1);
            at_zero.resource_version = "0".to_owned();
            let answer = cacher.list(key, &at_zero).await.unwrap();
            requests += 1.0;
            let what = format!("kube {version}: resourceVersion 0, token at {at}, {key}");
            if !from_cache {
                assert_eq!(answer, backend.list(key, &at_zero).await.unwrap(), "{what}");
                continue;
            }
            let pages =
                all_pages(&backend, key, continued(&first.metadata.continue_token, 1)).await;
            let rest: Vec<Pod> = pages.into_iter().flat_map(|page| page.items).collect();
            assert_eq!(answer.items, rest, "{what}: the rest of the list, whole");
            assert_eq!(answer.metadata.resource_version, at.to_string(), "{what}");
            assert!(answer.metadata.continue_token.is_empty(), "{what}");
            assert_eq!(answer.metadata.remaining_item_count, None, "{what}");
        }
    }
    let served = lists_served_by_cache(&registry) - before;
    // The −1 continuations are consistent reads the cache took on, each counted once.
    let consistent = counter(
        &registry,
        "apiserver_watch_cache_consistent_read_total",
        &[("success", "true"), ("fallback", "false")],
    );
    if from_cache {
        assert!(
            served >= requests,
            "kube {version}: {served} of {requests} lists from the cache"
        );
        assert_eq!(consistent, consistent_requests, "kube {version}");
    } else {
        assert_eq!(served, 0.0, "kube {version}: every list from the backend");
        assert_eq!(consistent, 0.0, "kube {version}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuations_at_minus_one_and_at_0_match_the_memory_store_at_1_37() {
    compare_continuations(memory_store(), KubeVersion::V1_37).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuations_at_minus_one_and_at_0_go_to_the_memory_store_at_1_31() {
    compare_continuations(memory_store(), KubeVersion::V1_31).await;
}

// An etcd of its own: the latest revision must be the history's last, which writes by
// other tests to a shared etcd would move.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuations_at_minus_one_and_at_0_match_etcd_at_1_37() {
    let backend = etcd3::backend("continuations_1_37", Needs::Fresh).await;
    compare_continuations(
        backend.store.clone().with_kube_version(KubeVersion::V1_37),
        KubeVersion::V1_37,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuations_at_minus_one_and_at_0_go_to_etcd_at_1_31() {
    let backend = etcd3::backend("continuations_1_31", Needs::Fresh).await;
    compare_continuations(backend.store.clone(), KubeVersion::V1_31).await;
}

/// The walk a client makes after a compaction: its pinned continuation fails with 410
/// and a token of revision −1, which it follows to the end. At kube 1.37 the cache
/// answers each page of the new walk as the backend does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_walk_resumed_after_compaction_matches_the_backend_at_1_37() {
    let kv = MemoryKv::new(KvConfig::default());
    let backend: MemoryStore<Pod> =
        MemoryStore::new(kv.clone(), MemoryStoreConfig::for_resource("pods"));
    let mut config = CacherConfig::new("/pods", "pods").with_kube_version(KubeVersion::V1_37);
    config.consistent_reads_from_cache = true;
    let (cacher, registry, _, revisions) = cache_a_history(&backend, config).await;
    let first = backend
        .list("/pods", &exact(revisions[4], 2))
        .await
        .unwrap();
    kv.compact(i64::try_from(revisions[8]).unwrap()).unwrap();
    let pinned = continued(&first.metadata.continue_token, 2);
    let expired = backend.list("/pods", &pinned).await.unwrap_err();
    let from_cache = cacher.list("/pods", &pinned).await.unwrap_err();
    assert_eq!(from_cache.to_string(), expired.to_string());
    let apistore_storage::StorageError::Expired {
        continue_token: Some(mut token),
        ..
    } = expired
    else {
        panic!("a 410 for a compacted continuation carries a token: {expired:?}");
    };
    let before = lists_served_by_cache(&registry);
    let mut pages = 0.0;
    while !token.is_empty() {
        let next = continued(&token, 2);
        token = same_answer(&cacher, &backend, "/pods", &next, "after compaction")
            .await
            .metadata
            .continue_token;
        pages += 1.0;
    }
    assert!(pages >= 2.0, "{pages} pages");
    assert_eq!(lists_served_by_cache(&registry) - before, pages);
}
