//! Paged lists: `RunTestListContinuation`, `RunTestListPaginationRareObject` and
//! `RunTestListContinuationWithFilter` with the etcd3 wiring's call-count validation
//! (`checkStorageCallsInvariants`), `RunTestListInconsistentContinuation` and
//! `RunTestListResourceVersionMatch`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use apistore_storage::{ObjectList, ResourceVersionMatch, Storage, Update, UpdateOptions};

use super::list::{check_not_older_than, field_predicate, label_predicate, options, paging};
use super::{Backend, Pod, PodFactory};

/// The largest page the store asks its storage for when selectors drop objects (the
/// reference's `maxLimit`).
const MAX_LIMIT: u64 = 10_000;

/// How many storage reads a list makes that starts with pages of `page_size` and
/// processes `processed` objects, when it doubles its page size after every page that
/// selectors left short: `n + 1` for the smallest `n` with
/// `page_size + 2·page_size + … + 2ⁿ·page_size ≥ processed`. One read when nothing
/// limits the page. (As in the reference, the running sum starts at 1, not at the
/// first page's size.)
fn estimated_storage_reads(page_size: u64, processed: u64) -> u64 {
    let mut reads = 1;
    if page_size != 0 {
        let mut limit = page_size;
        let mut sum = 1;
        while sum < processed {
            limit = (limit * 2).min(MAX_LIMIT);
            sum += limit;
            reads += 1;
        }
    }
    reads
}

/// The etcd3 wiring's `checkStorageCallsInvariants`: since the last check, the test
/// transformer read exactly `processed` values and the store made the number of storage
/// reads (etcd range requests, for the etcd3 store) a list with pages of `page_size`
/// needs for them.
fn check_calls<B: Backend>(backend: &B, step: &str, page_size: u64, processed: u64) {
    let reads = backend.take_transformer_reads();
    let storage_reads = backend.take_storage_reads();
    assert_eq!(
        reads, processed,
        "{step}: unexpected transformer reads: {reads}, expected: {processed}"
    );
    let expected = estimated_storage_reads(page_size, processed);
    assert_eq!(
        storage_reads, expected,
        "{step}: unexpected storage reads: {storage_reads}, expected: {expected}"
    );
}

/// Creates `pods` in order; returns the stored objects.
async fn create_all<B: Backend>(backend: &B, pods: Vec<Pod>) -> Vec<Pod> {
    let mut stored = Vec::with_capacity(pods.len());
    for pod in pods {
        let key = pod.key();
        let out = backend
            .store()
            .create(&key, pod, 0)
            .await
            .unwrap_or_else(|err| panic!("create of {key} failed: {err}"));
        stored.push(out);
    }
    stored
}

/// A consistent recursive list of `/pods` (or of the given prefix) with a predicate.
async fn list_pods<B: Backend>(
    backend: &B,
    step: &str,
    rv: &str,
    predicate: apistore_storage::SelectionPredicate,
) -> ObjectList<Pod> {
    backend
        .store()
        .list(
            "/pods",
            &options(rv, ResourceVersionMatch::Unset, predicate, true),
        )
        .await
        .unwrap_or_else(|err| panic!("{step}: GetList failed: {err}"))
}

/// `RunTestListContinuation` with the etcd3 call counts: three pods read one page at
/// a time and then the rest in one page, every page at the revision of the first (the
/// last create's). Each page is one storage read and decodes only what it returns. The
/// resourceVersion checks need a key space no other test writes to.
pub async fn run_test_list_continuation<B: Backend>(backend: &B) {
    let preset = create_all(
        backend,
        vec![
            Pod::new("first", "bar"),
            Pod::new("second", "bar"),
            Pod::new("second", "foo"),
        ],
    )
    .await;
    let current_rv = preset[2].metadata.resource_version.clone();

    // A consistent read: the limit is honoured (at resourceVersion 0 it need not be).
    let out = list_pods(backend, "first page", "", paging(1, "")).await;
    assert!(
        !out.metadata.continue_token.is_empty(),
        "no continuation token set"
    );
    assert_eq!(out.items, [preset[0].clone()], "incorrect first page");
    assert_eq!(
        out.metadata.resource_version, current_rv,
        "first page resourceVersion"
    );
    check_calls(backend, "first page", 1, 1);
    let continue_from_second = out.metadata.continue_token;

    // No limit: the two remaining items.
    let out = list_pods(backend, "rest", "", paging(0, &continue_from_second)).await;
    assert!(
        out.metadata.continue_token.is_empty(),
        "unexpected continuation token set"
    );
    assert_eq!(
        out.items,
        [preset[1].clone(), preset[2].clone()],
        "incorrect second page"
    );
    assert_eq!(
        out.metadata.resource_version, current_rv,
        "rest resourceVersion"
    );
    check_calls(backend, "rest", 0, 2);

    // With a limit: two more pages.
    let out = list_pods(backend, "second page", "", paging(1, &continue_from_second)).await;
    assert!(
        !out.metadata.continue_token.is_empty(),
        "no continuation token set"
    );
    assert_eq!(out.items, [preset[1].clone()], "incorrect second page");
    assert_eq!(
        out.metadata.resource_version, current_rv,
        "second page resourceVersion"
    );
    check_calls(backend, "second page", 1, 1);
    let continue_from_third = out.metadata.continue_token;

    let out = list_pods(backend, "third page", "", paging(1, &continue_from_third)).await;
    assert!(
        out.metadata.continue_token.is_empty(),
        "unexpected continuation token set"
    );
    assert_eq!(out.items, [preset[2].clone()], "incorrect third page");
    assert_eq!(
        out.metadata.resource_version, current_rv,
        "third page resourceVersion"
    );
    check_calls(backend, "third page", 1, 1);
}

/// `RunTestListPaginationRareObject` with the etcd3 call counts: of 1000 pods, a list
/// with limit 1 selecting only `pod-999` (the last key) returns just it, with no
/// continue token, after decoding all 1000 in 10 storage reads of doubling size.
pub async fn run_test_list_pagination_rare_object<B: Backend>(backend: &B) {
    const POD_COUNT: u64 = 1000;
    let pods = (0..POD_COUNT)
        .map(|i| Pod::new("", &format!("pod-{i}")))
        .collect();
    let pods = create_all(backend, pods).await;

    let out = list_pods(
        backend,
        "rare object",
        "",
        field_predicate("metadata.name=pod-999", 1, ""),
    )
    .await;
    assert!(
        out.metadata.continue_token.is_empty(),
        "unexpected continuation token set: {:?}",
        out.metadata.continue_token
    );
    assert_eq!(out.items, [pods[999].clone()], "unexpected first page");
    check_calls(backend, "rare object", 1, POD_COUNT);
}

/// `RunTestListContinuationWithFilter` with the etcd3 call counts: of `1/foo`,
/// `2/bar`, `3/foo`, `4/foo`, pages of 2 selecting `metadata.name!=bar` are
/// `[1/foo, 3/foo]` (two storage reads, three decodes: `4/foo` is fetched but not
/// decoded) and then `[4/foo]` (one read, one decode), both at the last create's
/// revision. The resourceVersion checks need a key space no other test writes to.
pub async fn run_test_list_continuation_with_filter<B: Backend>(backend: &B) {
    let preset = create_all(
        backend,
        vec![
            Pod::new("1", "foo"),
            Pod::new("2", "bar"),
            Pod::new("3", "foo"),
            Pod::new("4", "foo"),
        ],
    )
    .await;
    let current_rv = preset[3].metadata.resource_version.clone();
    let not_bar = |continue_token: &str| field_predicate("metadata.name!=bar", 2, continue_token);

    let out = list_pods(backend, "first page", "", not_bar("")).await;
    assert!(
        !out.metadata.continue_token.is_empty(),
        "no continuation token set"
    );
    assert_eq!(
        out.items,
        [preset[0].clone(), preset[2].clone()],
        "incorrect first page"
    );
    assert_eq!(
        out.metadata.resource_version, current_rv,
        "first page resourceVersion"
    );
    check_calls(backend, "first page", 2, 3);

    let out = list_pods(
        backend,
        "second page",
        "",
        not_bar(&out.metadata.continue_token),
    )
    .await;
    assert!(
        out.metadata.continue_token.is_empty(),
        "unexpected continuation token set"
    );
    assert_eq!(out.items, [preset[3].clone()], "incorrect second page");
    assert_eq!(
        out.metadata.resource_version, current_rv,
        "second page resourceVersion"
    );
    check_calls(backend, "second page", 2, 1);
}

/// `RunTestListInconsistentContinuation`: a continue token whose revision was
/// compacted away is refused with a 410 whose status carries a token to go on at the
/// latest revision; that token lists the rest (with the update made meanwhile), and
/// its own next token keeps the revision it resolved to. The backend must compact.
pub async fn run_test_list_inconsistent_continuation<B: Backend>(backend: &B) {
    let store = backend.store();
    let mut preset = create_all(
        backend,
        vec![
            Pod::new("first", "bar"),
            Pod::new("second", "bar"),
            Pod::new("second", "foo"),
        ],
    )
    .await;

    let out = list_pods(backend, "first page", "0", paging(1, "")).await;
    assert!(
        !out.metadata.continue_token.is_empty(),
        "no continuation token set"
    );
    assert_eq!(out.items, [preset[0].clone()], "incorrect first page");
    let continue_from_second = out.metadata.continue_token;

    // Replace second/foo (with a pod that has a name and a label only), offering the
    // new pod as the cached current state, as the reference does.
    let new_pod = Pod::new("", &preset[2].metadata.name).with_label("state", "new");
    let key = preset[2].key();
    let update_options = UpdateOptions {
        cached_existing_object: Some(new_pod.clone()),
        ..UpdateOptions::default()
    };
    preset[2] = store
        .guaranteed_update(&key, update_options, |_, _| {
            Ok(Update::new(new_pod.clone()))
        })
        .await
        .unwrap_or_else(|err| panic!("update failed: {err}"));

    // Compact at the latest object revision.
    let last_rv = preset[2].metadata.resource_version.clone();
    backend.compact(&last_rv).await;

    // The old token has expired.
    let err = store
        .list(
            "/pods",
            &options(
                "0",
                ResourceVersionMatch::Unset,
                paging(0, &continue_from_second),
                true,
            ),
        )
        .await
        .expect_err("a continue token from before the compaction was accepted");
    assert!(
        err.to_string()
            .contains("The provided continue parameter is too old "),
        "unexpected error message {err}"
    );
    assert!(err.is_expired(), "expected a 410: {err}");
    let inconsistent_continue = err.status().metadata.continue_token.unwrap_or_default();
    assert!(
        !inconsistent_continue.is_empty(),
        "expect non-empty continue token in {:?}",
        err.status()
    );

    let out = list_pods(
        backend,
        "second page",
        "0",
        paging(1, &inconsistent_continue),
    )
    .await;
    assert!(
        !out.metadata.continue_token.is_empty(),
        "no continuation token set"
    );
    assert_eq!(out.items, [preset[1].clone()], "incorrect second page");
    check_not_older_than(&out.metadata.resource_version, &last_rv).unwrap();
    let continue_from_third = out.metadata.continue_token;
    let resolved_rv = out.metadata.resource_version;

    let out = list_pods(backend, "third page", "0", paging(1, &continue_from_third)).await;
    assert!(
        out.metadata.continue_token.is_empty(),
        "unexpected continuation token set"
    );
    assert_eq!(out.items, [preset[2].clone()], "incorrect third page");
    assert_eq!(
        out.metadata.resource_version, resolved_rv,
        "expected list resource version to be {resolved_rv}"
    );
}

/// Turns the backend's create-on-read hook off when dropped, even if the case fails.
struct CreateOnRead<'a, B: Backend>(&'a B);

impl<B: Backend> Drop for CreateOnRead<'_, B> {
    fn drop(&mut self) {
        self.0.create_on_read(None);
    }
}

/// `RunTestListResourceVersionMatch`: while every read of a stored value creates a new
/// pod (the reference's `reproducingTransformer`), a list selecting `even=true` with
/// limit 4 needs several etcd pages; listing again at its resourceVersion with
/// `match=Exact` gives an identical list, and so does an `Exact` list at the
/// resourceVersion a `NotOlderThan` list answered. Every page of one list reads at
/// one revision. Needs [`Backend::create_on_read`].
pub async fn run_test_list_resource_version_match<B: Backend>(backend: &B) {
    let store = backend.store();
    let index = Arc::new(AtomicU32::new(0));
    let created = Arc::clone(&index);
    let next_pod: PodFactory = Arc::new(move || {
        let i = index.fetch_add(1, Ordering::SeqCst) + 1;
        Some(Pod::new("", &format!("pod-{i}")).with_label("even", &(i % 2 == 0).to_string()))
    });
    assert!(
        backend.create_on_read(Some(Arc::clone(&next_pod))),
        "RunTestListResourceVersionMatch needs a backend that creates objects during reads"
    );
    let _revert = CreateOnRead(backend);

    for _ in 0..5 {
        let Some(pod) = next_pod() else {
            panic!("the pod factory made no pod for the case's own create")
        };
        let key = pod.key();
        store
            .create(&key, pod, 0)
            .await
            .unwrap_or_else(|err| panic!("failed to create {key}: {err}"));
    }

    let predicate = label_predicate("even=true", 4);
    let list = |rv: String, rv_match| {
        let opts = options(&rv, rv_match, predicate.clone(), true);
        async move {
            store
                .list("/pods", &opts)
                .await
                .unwrap_or_else(|err| panic!("failed to list objects: {err}"))
        }
    };

    let result1 = list(String::new(), ResourceVersionMatch::Unset).await;
    // The premise of the case: the list's own reads wrote under its prefix.
    assert!(
        created.load(Ordering::SeqCst) > 5,
        "no pod was created while the list read values"
    );
    let result2 = list(
        result1.metadata.resource_version.clone(),
        ResourceVersionMatch::Exact,
    )
    .await;
    assert_eq!(result1, result2, "incorrect lists");

    let result3 = list(
        result1.metadata.resource_version.clone(),
        ResourceVersionMatch::NotOlderThan,
    )
    .await;
    let result4 = list(
        result3.metadata.resource_version.clone(),
        ResourceVersionMatch::Exact,
    )
    .await;
    assert_eq!(result3, result4, "incorrect lists");
}

#[cfg(test)]
mod tests {
    use super::estimated_storage_reads;

    #[test]
    fn estimated_storage_reads_follow_the_reference() {
        assert_eq!(estimated_storage_reads(1, 1000), 10);
        assert_eq!(estimated_storage_reads(1, 1), 1);
        assert_eq!(estimated_storage_reads(0, 2), 1);
        assert_eq!(estimated_storage_reads(2, 3), 2);
        assert_eq!(estimated_storage_reads(2, 1), 1);
    }
}
