//! The List part of `RunTestTransformationFailure`: one value the transformer cannot
//! read fails the whole list, at once or (kube 1.37's default) at its end.

use apistore_storage::{Codec, JsonCodec, ResourceVersionMatch, SelectionPredicate, Storage};

use super::list::options;
use super::{Backend, Pod};

/// `RunTestTransformationFailure`, List part: with `first/bar` stored normally and
/// `second/baz` stored under another transformer's prefix (`otherprefix!`), a
/// recursive list of `/pods` fails with an internal error about `second/baz`'s key.
pub async fn run_test_transformation_failure_list<B: Backend>(backend: &B) {
    let store = backend.store();
    let first = Pod::new("first", "bar");
    store.create(&first.key(), first, 0).await.unwrap();

    // What a store with the transformer `otherprefix!` would have written.
    let other = Pod::new("second", "baz");
    let other_key = backend.stored_key(&other.key());
    let mut value = b"otherprefix!".to_vec();
    value.extend_from_slice(&JsonCodec::new().encode(&other).unwrap());
    backend.raw_put(&other_key, value).await;

    let opts = options(
        "",
        ResourceVersionMatch::Unset,
        SelectionPredicate::everything(),
        true,
    );
    let err = store
        .list("/pods", &opts)
        .await
        .expect_err("a list over an undecryptable value succeeded");
    // kube's own test store reads the bad value with a transformer error it does not
    // take for a corrupt object, so it fails with an internal error; a store that
    // goes past corrupt objects (kube 1.37's default, `corrupt_objects`) fails at the
    // end with a store-read error naming it. Either is a 500 naming the key.
    match err.store_read_errors() {
        Some(errors) => assert_eq!(errors.keys().collect::<Vec<_>>(), [other_key.as_str()]),
        None => {
            assert!(err.is_internal(), "expected an internal error, got {err}");
            assert!(err.is_corrupt_object(), "{err}");
            assert_eq!(err.key(), other_key, "the error names the wrong key: {err}");
        }
    }
    assert_eq!(err.status().code, 500, "{err}");
    assert!(
        err.to_string().contains(&other_key),
        "the message does not name the key: {err}"
    );
}
