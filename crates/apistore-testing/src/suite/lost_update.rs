//! No lost updates under contention: many writers incrementing one counter through
//! guaranteed update. Not a reference case; it is what the compare-and-swap loop of
//! `GuaranteedUpdate` exists for.

use std::collections::BTreeSet;

use apistore_storage::{GetOptions, Storage, StorageError, UpdateOptions};

use super::{Backend, Pod};

/// Concurrent writers.
const WRITERS: u64 = 16;
/// Updates each writer makes.
const UPDATES_PER_WRITER: u64 = 100;
/// The annotation holding the counter.
const COUNTER: &str = "counter";

/// Reads the counter of a pod.
fn counter(key: &str, pod: &Pod) -> Result<u64, StorageError> {
    let value = pod.metadata.annotations.get(COUNTER).ok_or_else(|| {
        StorageError::bad_request(key, format!("no {COUNTER} annotation on {pod:?}"))
    })?;
    value
        .parse()
        .map_err(|err| StorageError::bad_request(key, format!("bad {COUNTER} {value:?}: {err}")))
}

/// 16 writers, each on a thread of its own, make 100 guaranteed updates each that
/// increment a counter annotation of one pod. Every update succeeds, the updates
/// return the values 1 to 1600 once each (no two read the same state and both wrote),
/// and the stored counter ends at exactly 1600 with the resourceVersion of the update
/// that wrote it.
pub async fn run_test_no_lost_updates<B: Backend>(backend: &B) {
    let store = backend.store();
    let mut pod = Pod::new("test-ns", "counter");
    pod.metadata
        .annotations
        .insert(COUNTER.to_owned(), "0".to_owned());
    let (key, _) = super::propagate(backend, pod).await;
    let key = key.as_str();

    let writer = || async move {
        let mut seen = Vec::new();
        for _ in 0..UPDATES_PER_WRITER {
            let out = store
                .guaranteed_update(key, UpdateOptions::default(), |mut pod, _| {
                    let next = counter(key, &pod)? + 1;
                    pod.metadata
                        .annotations
                        .insert(COUNTER.to_owned(), next.to_string());
                    Ok(pod.into())
                })
                .await
                .unwrap_or_else(|err| panic!("update of {key} failed: {err}"));
            seen.push((counter(key, &out).unwrap(), out.metadata.resource_version));
        }
        seen
    };

    // Real threads, so that update functions and etcd round trips of different writers
    // overlap in every way the scheduler allows.
    let handle = tokio::runtime::Handle::current();
    let results: Vec<Vec<(u64, String)>> = tokio::task::block_in_place(|| {
        std::thread::scope(|scope| {
            // Collected so that every writer starts before the first is joined.
            #[allow(clippy::needless_collect)]
            let threads: Vec<_> = (0..WRITERS)
                .map(|_| scope.spawn(|| handle.block_on(writer())))
                .collect();
            threads
                .into_iter()
                .map(|thread| {
                    thread
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                })
                .collect()
        })
    });

    let total = WRITERS * UPDATES_PER_WRITER;
    let mut values = BTreeSet::new();
    let mut last_rv = None;
    for (value, rv) in results.into_iter().flatten() {
        assert!(values.insert(value), "two updates both returned {value}");
        if value == total {
            last_rv = Some(rv);
        }
    }
    assert_eq!(
        values,
        (1..=total).collect::<BTreeSet<_>>(),
        "the updates did not return 1..={total} once each"
    );

    let stored = store.get(key, &GetOptions::default()).await.unwrap();
    assert_eq!(counter(key, &stored).unwrap(), total, "final counter");
    assert_eq!(
        Some(stored.metadata.resource_version),
        last_rv,
        "resourceVersion of the final state"
    );
}
