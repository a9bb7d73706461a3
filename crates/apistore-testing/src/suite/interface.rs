//! The interface kube-apiserver's storage gained after v0.31.1, case by case from
//! k8s.io/apiserver v0.37's `store_tests.go` and `etcd3/store_test.go`:
//! `GetCurrentResourceVersion` (1.33), `Stats` with and without size estimation
//! (1.34-1.35) and `CompactRevision` (1.34).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use apistore_storage::{
    DeleteOptions, GetOptions, KeysFn, ListOptions, ResourceVersionMatch, Stats, Storage,
    UpdateOptions,
};

use super::{Backend, Pod};

/// The longest a case waits for a store to see a compaction.
const COMPACTION_SEEN_WITHIN: Duration = Duration::from_secs(60);

/// etcd3/store_test.go `TestGetCurrentResourceVersion`: the current resourceVersion is
/// the storage's revision: a create's resourceVersion right after it, moved by a write
/// outside every store's prefix, and reading an object does not change the object's.
pub async fn run_test_get_current_resource_version<B: Backend>(backend: &B) {
    let store = backend.store();
    let pod = store
        .create("pods/ns/pod-1", Pod::new("ns", "pod-1"), 0)
        .await
        .unwrap();
    let pod_rv: u64 = pod.metadata.resource_version.parse().unwrap();
    let current = store.get_current_resource_version().await.unwrap();
    assert_eq!(
        current, pod_rv,
        "the current resourceVersion after a create"
    );

    // An unrelated write (the reference writes compact_rev_key).
    let unrelated = backend.stored_key("unrelated/current-rv");
    backend.raw_put(&unrelated, b"ok".to_vec()).await;
    let current = store.get_current_resource_version().await.unwrap();
    assert_eq!(
        current,
        pod_rv + 1,
        "a write outside the store's prefix moves the current resourceVersion"
    );

    let read = store
        .get("pods/ns/pod-1", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(
        read.metadata.resource_version, pod.metadata.resource_version,
        "the pod's resourceVersion did not change"
    );
}

/// The keys a test says the store holds: the keys function a watch cache would hand
/// over (the reference's tests set `getKeys` the same way).
#[derive(Clone, Default)]
struct LiveKeys(Arc<Mutex<Vec<String>>>);

impl LiveKeys {
    fn keys_fn(&self) -> KeysFn {
        let live = Arc::clone(&self.0);
        Arc::new(move || {
            let keys = live.lock().unwrap_or_else(PoisonError::into_inner).clone();
            Box::pin(async move { Ok(keys) })
        })
    }

    fn add(&self, key: String) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(key);
    }

    fn remove(&self, key: &str) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|k| k != key);
    }
}

/// store_tests.go `RunTestStats` with `sizeEnabled` false: the count follows creates
/// and deletes, and no size is estimated.
pub async fn run_test_stats<B: Backend>(backend: &B) {
    stats_case(backend, None).await;
}

/// store_tests.go `RunTestStats` with `sizeEnabled` true: after
/// `enable_resource_size_estimation`, the average size is that of the values as stored
/// (encoded, then transformed), following updates and deletions; a second enabling is
/// refused.
pub async fn run_test_stats_with_size_estimation<B: Backend>(backend: &B) {
    let live = LiveKeys::default();
    backend
        .store()
        .enable_resource_size_estimation(live.keys_fn())
        .unwrap();
    let again = backend
        .store()
        .enable_resource_size_estimation(live.keys_fn());
    assert!(again.is_err(), "size estimation enabled twice: {again:?}");
    stats_case(backend, Some(live)).await;
}

async fn stats_case<B: Backend>(backend: &B, live: Option<LiveKeys>) {
    let store = backend.store();
    let sized = live.is_some();
    let size_of = |key: &str| {
        let stored = backend.stored_key(key);
        async move {
            let value = backend.raw_get(&stored).await.unwrap();
            i64::try_from(value.len()).unwrap()
        }
    };
    let track = |key: &str, add: bool| {
        if let Some(live) = &live {
            let stored = backend.stored_key(key);
            if add {
                live.add(stored)
            } else {
                live.remove(&stored)
            }
        }
    };
    assert_stats(backend, sized, 0, 0).await;

    let foo_key = "pods/stats/foo";
    store
        .create(foo_key, Pod::new("stats", "foo"), 0)
        .await
        .unwrap();
    track(foo_key, true);
    let foo_size = size_of(foo_key).await;
    assert_stats(backend, sized, 1, foo_size).await;

    let bar_key = "pods/stats/bar";
    store
        .create(bar_key, Pod::new("stats", "bar"), 0)
        .await
        .unwrap();
    track(bar_key, true);
    let bar_size = size_of(bar_key).await;
    assert_stats(backend, sized, 2, (foo_size + bar_size) / 2).await;

    store
        .guaranteed_update(bar_key, UpdateOptions::default(), |mut pod: Pod, _| {
            pod.metadata.labels.insert("foo".into(), "bar".into());
            Ok(pod.into())
        })
        .await
        .unwrap();
    let bar_size = size_of(bar_key).await;
    assert_stats(backend, sized, 2, (foo_size + bar_size) / 2).await;

    store
        .delete(foo_key, DeleteOptions::default())
        .await
        .unwrap();
    track(foo_key, false);
    assert_stats(backend, sized, 1, bar_size).await;

    let again = store.delete(foo_key, DeleteOptions::default()).await;
    assert!(again.is_err(), "a second delete must fail: {again:?}");
    assert_stats(backend, sized, 1, bar_size).await;

    store
        .delete(bar_key, DeleteOptions::default())
        .await
        .unwrap();
    track(bar_key, false);
    assert_stats(backend, sized, 0, 0).await;
}

/// A consistent list of the pods first (it refreshes a cache, and is traffic a size
/// estimate learns from), then the stats.
async fn assert_stats<B: Backend>(backend: &B, sized: bool, count: i64, average: i64) {
    let store = backend.store();
    let everything = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    store.list("pods", &everything).await.unwrap();
    let stats = store.stats().await.unwrap();
    let expected = Stats {
        object_count: count,
        estimated_average_object_size_bytes: if sized { average } else { 0 },
    };
    assert_eq!(stats, expected, "stats (size estimation {sized})");
}

/// store_tests.go `RunTestCompactRevision`: the compacted revision starts below the
/// current one, and after a compaction at the revision after it (by the backend, as
/// another server's compactor would) the store reports that revision (within a
/// generous deadline: a store may learn it from a watch) and an exact list at the
/// compacted-away revision is 410 "too old".
pub async fn run_test_compact_revision<B: Backend>(backend: &B) {
    let store = backend.store();
    let everything = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store.list("pods", &everything).await.unwrap();
    let current: i64 = list.metadata.resource_version.parse().unwrap();
    let compacted = store.compact_revision();
    assert!(
        compacted < current,
        "the current revision {current} must not be compacted (compacted: {compacted})"
    );
    let exact = ListOptions {
        resource_version: list.metadata.resource_version.clone(),
        resource_version_match: ResourceVersionMatch::Exact,
        ..everything.clone()
    };
    store.list("pods", &exact).await.unwrap();

    // increaseRV (the reference writes a key outside the store; a write through the
    // store moves the revision alike, and a watch cache in front of it sees it).
    let increase = store
        .create("pods/ns/increase-rv", Pod::new("ns", "increase-rv"), 0)
        .await
        .unwrap();
    let expected = current + 1;
    assert_eq!(increase.metadata.resource_version, expected.to_string());
    backend.compact(&expected.to_string()).await;

    let err = store.list("pods", &exact).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("The resourceVersion for the provided list is too old"),
        "an exact list at a compacted revision: {err}"
    );
    let deadline = Instant::now() + COMPACTION_SEEN_WITHIN;
    loop {
        let seen = store.compact_revision();
        if seen == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "compact_revision() is {seen}, expected {expected}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
