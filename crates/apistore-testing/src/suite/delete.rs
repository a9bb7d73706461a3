//! Delete cases (`RunTestUnconditionalDelete`, `RunTestConditionalDelete`, and the
//! cases of a delete given a cached object: `RunTestDeleteWithSuggestion...`,
//! `RunTestValidateDeletion...`, `RunTestPreconditionalDelete...`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use apistore_storage::{
    DeleteOptions, GetOptions, Preconditions, Status, StatusReason, Storage, StorageError,
    UpdateOptions, ValidateObjectFn,
};

use super::update::on_two_threads;
use super::{Backend, Pod};

/// How long a case waits for the other side of a handshake before failing.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// An error a validation function returns, with a message of its own.
fn validation_error(key: &str, message: &str) -> StorageError {
    StorageError::Api {
        key: key.to_owned(),
        status: Box::new(Status::failure(422, StatusReason::Invalid, message)),
    }
}

/// Asserts that `got` is the error a validation function produced, passed through
/// unchanged (the reference compares the error values themselves).
fn assert_same_error(got: &StorageError, want: &StorageError) {
    assert_eq!(got.kind(), want.kind(), "unexpected error: {got}");
    assert_eq!(got.to_string(), want.to_string(), "unexpected error: {got}");
}

/// The validation of the `...WithSuggestion` cases: only objects labelled `foo=bar`
/// may be deleted; anything else is a `stale object` error.
fn stale_unless_foo_is_bar(
    key: &str,
) -> impl Fn(&Pod) -> Result<(), StorageError> + Send + Sync + 'static {
    let key = key.to_owned();
    move |pod| {
        if pod.metadata.labels.get("foo").map(String::as_str) == Some("bar") {
            Ok(())
        } else {
            Err(validation_error(&key, "stale object"))
        }
    }
}

/// A validation function that counts its calls.
fn counting_validator(
    calls: &Arc<AtomicUsize>,
    validate: impl Fn(&Pod) -> Result<(), StorageError> + Send + Sync + 'static,
) -> ValidateObjectFn<Pod> {
    let calls = Arc::clone(calls);
    Box::new(move |pod| {
        calls.fetch_add(1, Ordering::SeqCst);
        validate(pod)
    })
}

/// Delete options with only a cached object.
fn with_suggestion(cached: &Pod) -> DeleteOptions<Pod> {
    DeleteOptions {
        cached_existing_object: Some(cached.clone()),
        ..DeleteOptions::default()
    }
}

/// Updates the object under `key` with `change`, with no cached object.
async fn update_with<B: Backend>(backend: &B, key: &str, change: impl Fn(&mut Pod) + Send) -> Pod {
    backend
        .store()
        .guaranteed_update(key, UpdateOptions::default(), move |mut pod, _| {
            change(&mut pod);
            Ok(pod.into())
        })
        .await
        .unwrap_or_else(|err| panic!("update of {key} failed: {err}"))
}

/// Asserts that `key` is gone.
async fn assert_gone<B: Backend>(backend: &B, key: &str) {
    match backend.store().get(key, &GetOptions::default()).await {
        Err(err) if err.is_not_found() => {}
        other => panic!("expected {key} to be gone, got {other:?}"),
    }
}

/// `RunTestUnconditionalDelete`: deleting returns the last state with the
/// resourceVersion of the deletion; deleting a missing key is not-found.
pub async fn run_test_unconditional_delete<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;

    // "existing key"
    let mut out = store.delete(&key, DeleteOptions::default()).await.unwrap();
    assert_ne!(
        out.metadata.resource_version, stored.metadata.resource_version,
        "expected the resourceVersion of the deletion"
    );
    out.metadata.resource_version = stored.metadata.resource_version.clone();
    assert_eq!(out, stored, "incorrect pod");

    // "non-existing key"
    let err = store
        .delete("/non-existing", DeleteOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "expected not found, got {err}");
}

/// `RunTestConditionalDelete`: a matching uid precondition deletes, a mismatching one is
/// an invalid-object error.
pub async fn run_test_conditional_delete<B: Backend>(backend: &B) {
    let store = backend.store();
    let obj = Pod::new("test-ns", "foo").with_uid("A");
    let (key, mut stored) = super::propagate(backend, obj.clone()).await;

    for (name, uid, expect_invalid) in [("UID match", "A", false), ("UID mismatch", "B", true)] {
        let options = DeleteOptions {
            preconditions: Some(Preconditions::uid(uid)),
            ..DeleteOptions::default()
        };
        let result = store.delete(&key, options).await;
        if expect_invalid {
            let err = result.unwrap_err();
            assert!(
                err.is_invalid_object(),
                "{name}: expected invalid object, got {err}"
            );
            continue;
        }
        let mut out = result.unwrap_or_else(|err| panic!("{name}: delete failed: {err}"));
        assert_ne!(
            out.metadata.resource_version, stored.metadata.resource_version,
            "{name}: expected the resourceVersion of the deletion"
        );
        out.metadata.resource_version = stored.metadata.resource_version.clone();
        assert_eq!(out, stored, "{name}: incorrect pod");
        (_, stored) = super::propagate(backend, obj.clone()).await;
    }
}

/// `RunTestDeleteWithSuggestion`: a delete given the current object deletes it.
pub async fn run_test_delete_with_suggestion<B: Backend>(backend: &B) {
    let (key, original) = super::propagate(backend, Pod::new("test-ns", "name")).await;
    backend
        .store()
        .delete(&key, with_suggestion(&original))
        .await
        .unwrap();
    assert_gone(backend, &key).await;
}

/// `RunTestDeleteWithSuggestionAndConflict`: a delete given an outdated object still
/// deletes, and returns the latest state with the resourceVersion of the deletion.
pub async fn run_test_delete_with_suggestion_and_conflict<B: Backend>(backend: &B) {
    let (key, original) = super::propagate(backend, Pod::new("test-ns", "name")).await;
    let mut updated = update_with(backend, &key, |pod| {
        pod.metadata.labels = [("foo".to_owned(), "bar".to_owned())].into();
    })
    .await;

    let out = backend
        .store()
        .delete(&key, with_suggestion(&original))
        .await
        .unwrap();
    assert_gone(backend, &key).await;
    updated.metadata.resource_version = out.metadata.resource_version.clone();
    assert_eq!(out, updated, "incorrect pod");
}

/// `RunTestDeleteWithConflict`: an update that lands between the delete's read and its
/// write makes the delete validate again on the new state (two validations, one update)
/// and return that state.
pub async fn run_test_delete_with_conflict<B: Backend>(backend: &B) {
    let (key, _) = super::propagate(backend, Pod::new("test-ns", "name")).await;

    // The validation function is synchronous and owns nothing of the test's, so the
    // conflicting update runs on a thread of its own; the first validation asks for it
    // and waits until it is done, as the reference's validation performs it inline.
    let (update_wanted, update_requested) = mpsc::channel::<()>();
    let (update_finished, update_done) = mpsc::channel::<()>();
    let update_done = Mutex::new(update_done);
    let validations = Arc::new(AtomicUsize::new(0));
    let updates = AtomicUsize::new(0);
    let validate = counting_validator(&validations, move |_| {
        if update_wanted.send(()).is_ok() {
            update_done
                .lock()
                .unwrap()
                .recv_timeout(HANDSHAKE_TIMEOUT)
                .expect("the conflicting update did not finish");
        }
        Ok(())
    });
    let options = DeleteOptions {
        validate_deletion: Some(validate),
        ..DeleteOptions::default()
    };

    let conflicting_update = async {
        update_requested
            .recv_timeout(HANDSHAKE_TIMEOUT)
            .expect("the delete never validated");
        let updated = update_with(backend, &key, |pod| {
            pod.metadata.labels = [("foo".to_owned(), "bar".to_owned())].into();
        })
        .await;
        updates.fetch_add(1, Ordering::SeqCst);
        // Dropping the receiver turns every later validation into a plain pass.
        drop(update_requested);
        update_finished.send(()).unwrap();
        updated
    };
    let (deleted, updated) =
        on_two_threads(backend.store().delete(&key, options), conflicting_update);
    let out = deleted.unwrap_or_else(|err| panic!("delete failed: {err}"));

    assert_eq!(validations.load(Ordering::SeqCst), 2, "validation calls");
    assert_eq!(updates.load(Ordering::SeqCst), 1, "update calls");
    assert_gone(backend, &key).await;
    let mut updated = updated;
    updated.metadata.resource_version = out.metadata.resource_version.clone();
    assert_eq!(out, updated, "incorrect pod");
}

/// `RunTestDeleteWithSuggestionOfDeletedObject`: a delete given an object that has been
/// deleted meanwhile is not-found.
pub async fn run_test_delete_with_suggestion_of_deleted_object<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, original) = super::propagate(backend, Pod::new("test-ns", "name")).await;
    store
        .delete(&key, with_suggestion(&original))
        .await
        .unwrap();

    let err = store
        .delete(&key, with_suggestion(&original))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "expected not found, got {err}");
}

/// `RunTestValidateDeletionWithSuggestion`: a validation error on a cached object that
/// is still current is returned after one call; a validation that rejects an outdated
/// cached object is repeated on the current one, which it accepts.
pub async fn run_test_validate_deletion_with_suggestion<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, original) = super::propagate(backend, Pod::new("test-ns", "name")).await;

    reject_current_suggestion_once(backend, &key, &original).await;

    // Outdate the cached object.
    update_with(backend, &key, |pod| {
        pod.metadata.labels = [("foo".to_owned(), "bar".to_owned())].into();
    })
    .await;

    let calls = Arc::new(AtomicUsize::new(0));
    let validate = counting_validator(&calls, stale_unless_foo_is_bar(&key));
    let options = DeleteOptions {
        validate_deletion: Some(validate),
        cached_existing_object: Some(original),
        ..DeleteOptions::default()
    };
    store.delete(&key, options).await.unwrap();
    // A store may ignore the cached object, and then validates only once.
    let calls = calls.load(Ordering::SeqCst);
    assert!(
        calls <= 2,
        "validation called {calls} times, at most 2 expected"
    );
    assert_gone(backend, &key).await;
}

/// `RunTestValidateDeletionWithOnlySuggestionValid`: a validation that accepts the
/// outdated cached object but rejects the current one fails the delete with its error,
/// and the object stays as it was updated.
pub async fn run_test_validate_deletion_with_only_suggestion_valid<B: Backend>(backend: &B) {
    let store = backend.store();
    let obj = Pod::new("test-ns", "name").with_label("foo", "bar");
    let (key, original) = super::propagate(backend, obj).await;

    reject_current_suggestion_once(backend, &key, &original).await;

    // Outdate the cached object, with a label the validation rejects.
    let updated = update_with(backend, &key, |pod| {
        pod.metadata.labels = [("foo".to_owned(), "barbar".to_owned())].into();
    })
    .await;

    let calls = Arc::new(AtomicUsize::new(0));
    let validate = counting_validator(&calls, stale_unless_foo_is_bar(&key));
    let options = DeleteOptions {
        validate_deletion: Some(validate),
        cached_existing_object: Some(original),
        ..DeleteOptions::default()
    };
    let err = store.delete(&key, options).await.unwrap_err();
    assert_same_error(&err, &validation_error(&key, "stale object"));
    let calls = calls.load(Ordering::SeqCst);
    assert!(
        calls <= 2,
        "validation called {calls} times, at most 2 expected"
    );

    let out = store.get(&key, &GetOptions::default()).await.unwrap();
    assert_eq!(out, updated, "incorrect pod");
}

/// The first half of both `RunTestValidateDeletion...` cases: a validation that always
/// fails, given the current object as the cached one, fails the delete with its own
/// error after exactly one call.
async fn reject_current_suggestion_once<B: Backend>(backend: &B, key: &str, current: &Pod) {
    let calls = Arc::new(AtomicUsize::new(0));
    let rejection = validation_error(key, "validation error");
    let rejection_key = rejection.key().to_owned();
    let validate = counting_validator(&calls, move |_| {
        Err(validation_error(&rejection_key, "validation error"))
    });
    let options = DeleteOptions {
        validate_deletion: Some(validate),
        cached_existing_object: Some(current.clone()),
        ..DeleteOptions::default()
    };
    let err = backend.store().delete(key, options).await.unwrap_err();
    assert_same_error(&err, &rejection);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "validation calls");
}

/// `RunTestPreconditionalDeleteWithSuggestion`: a uid precondition that fails on the
/// outdated cached object but holds on the current one deletes.
pub async fn run_test_preconditional_delete_with_suggestion<B: Backend>(backend: &B) {
    let (key, original) = super::propagate(backend, Pod::new("test-ns", "name")).await;
    update_with(backend, &key, |pod| pod.metadata.uid = "myUID".into()).await;

    let options = DeleteOptions {
        preconditions: Some(Preconditions::uid("myUID")),
        cached_existing_object: Some(original),
        ..DeleteOptions::default()
    };
    backend.store().delete(&key, options).await.unwrap();
    assert_gone(backend, &key).await;
}

/// `RunTestPreconditionalDeleteWithOnlySuggestionPass`: a uid precondition that holds on
/// the outdated cached object but fails on the current one is an invalid-object error,
/// and the object stays.
pub async fn run_test_preconditional_delete_with_only_suggestion_pass<B: Backend>(backend: &B) {
    let store = backend.store();
    let obj = Pod::new("test-ns", "name").with_uid("myUID");
    let (key, original) = super::propagate(backend, obj).await;
    let updated = update_with(backend, &key, |pod| pod.metadata.uid = "otherUID".into()).await;

    // The cached object passes, its delete conflicts; the current one fails.
    let options = DeleteOptions {
        preconditions: Some(Preconditions::uid("myUID")),
        cached_existing_object: Some(original),
        ..DeleteOptions::default()
    };
    let err = store.delete(&key, options).await.unwrap_err();
    assert!(
        err.is_invalid_object(),
        "expected invalid object, got {err}"
    );

    let out = store.get(&key, &GetOptions::default()).await.unwrap();
    assert_eq!(out, updated, "incorrect pod");
}
