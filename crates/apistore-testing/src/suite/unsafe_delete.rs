//! Unsafe deletion of a value that cannot be decrypted or decoded (kube 1.37's
//! `ExpectTransformOrDecodeError`): `RunTestDeleteExpectedTransformOrDecodeError`,
//! `RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError` and
//! `RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError` of
//! `store_tests.go` (k8s.io/apiserver v0.37).

use std::sync::{Mutex, mpsc};
use std::time::Duration;

use apistore_storage::{DeleteOptions, GetOptions, Preconditions, Storage};

use super::update::on_two_threads;
use super::{Backend, Pod};

/// How long a case waits for the other side of a handshake before failing.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

fn unsafe_delete() -> DeleteOptions<Pod> {
    DeleteOptions {
        expect_transform_or_decode_error: true,
        ..DeleteOptions::default()
    }
}

/// `RunTestDeleteExpectedTransformOrDecodeError`: a value the transformer cannot read
/// is deleted with the option, and is gone after.
pub async fn run_test_delete_expected_transform_or_decode_error<B: Backend>(backend: &B) {
    let store = backend.store();
    let (key, _) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    assert!(
        backend.set_transformer_failing(true),
        "the backend must be able to fail its transformer for this case"
    );
    // (A normal delete fails on the read here, unless a watch cache hands the backend
    // its cached object, as kube's does.) Preconditions cannot be checked on what cannot
    // be read.
    let err = store
        .delete(
            &key,
            DeleteOptions {
                preconditions: Some(Preconditions::uid("A")),
                ..unsafe_delete()
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("preconditions"), "{err}");

    let deleted = store
        .delete(&key, unsafe_delete())
        .await
        .unwrap_or_else(|err| panic!("unsafe delete: {err}"));
    assert!(
        deleted.metadata.name.is_empty(),
        "nothing was read: {deleted:?}"
    );
    assert!(!deleted.metadata.resource_version.is_empty());
    backend.set_transformer_failing(false);
    let err = store.get(&key, &GetOptions::default()).await.unwrap_err();
    assert!(err.is_not_found(), "after the unsafe delete: {err}");
    // A missing key is not found.
    let err = store.delete(&key, unsafe_delete()).await.unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

/// `RunTestDeleteWithSuggestionAndMissingExpectedTransformOrDecodeError`: a cached
/// object does not let a readable value through: the delete is an invalid object, and
/// the value stays.
pub async fn run_test_delete_with_suggestion_and_missing_expected_transform_or_decode_error<
    B: Backend,
>(
    backend: &B,
) {
    let store = backend.store();
    let (key, stored) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let options = DeleteOptions {
        cached_existing_object: Some(stored.clone()),
        ..unsafe_delete()
    };
    let err = store.delete(&key, options).await.unwrap_err();
    assert!(err.is_invalid_object(), "expected an invalid object: {err}");
    assert!(err.to_string().contains("decodable"), "{err}");
    let still = store.get(&key, &GetOptions::default()).await.unwrap();
    assert_eq!(still, stored);
}

/// `RunTestDeleteWithConflictAndMissingExpectedTransformOrDecodeError`: a write that
/// lands between the read and the delete, and makes the value readable, turns the
/// unsafe delete into an invalid object.
pub async fn run_test_delete_with_conflict_and_missing_expected_transform_or_decode_error<
    B: Backend,
>(
    backend: &B,
) {
    let store = backend.store();
    let (key, _) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    assert!(
        backend.set_transformer_failing(true),
        "the backend must be able to fail its transformer for this case"
    );

    // The first validation asks for the concurrent update (on the other thread: the
    // validation is synchronous) and waits for it; later ones pass.
    let (update_wanted, update_requested) = mpsc::channel::<()>();
    let (update_finished, update_done) = mpsc::channel::<()>();
    let update_done = Mutex::new(update_done);
    let options = DeleteOptions {
        validate_deletion: Some(Box::new(move |_: &Pod| {
            if update_wanted.send(()).is_ok() {
                update_done
                    .lock()
                    .unwrap()
                    .recv_timeout(HANDSHAKE_TIMEOUT)
                    .expect("the concurrent update did not finish");
            }
            Ok(())
        })),
        ..unsafe_delete()
    };
    let concurrent_update = async {
        update_requested
            .recv_timeout(HANDSHAKE_TIMEOUT)
            .expect("the delete never validated");
        backend.set_transformer_failing(false);
        store
            .guaranteed_update(&key, Default::default(), |mut pod: Pod, _| {
                pod.metadata.labels = [("updated".to_owned(), "true".to_owned())].into();
                Ok(pod.into())
            })
            .await
            .unwrap_or_else(|err| panic!("concurrent update: {err}"));
        drop(update_requested);
        update_finished.send(()).unwrap();
    };
    let (deleted, ()) = on_two_threads(store.delete(&key, options), concurrent_update);
    let err = deleted.unwrap_err();
    assert!(err.is_invalid_object(), "expected an invalid object: {err}");
    let still = store.get(&key, &GetOptions::default()).await.unwrap();
    assert_eq!(
        still.metadata.labels.get("updated").map(String::as_str),
        Some("true")
    );
}
