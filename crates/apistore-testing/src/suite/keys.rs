//! Key validation across every operation (the etcd3 store's `TestInvalidKeys`, which
//! holds for any store that follows kube-apiserver's key rules).

use apistore_storage::{
    DeleteOptions, GetOptions, ListOptions, Storage, StorageError, UpdateOptions,
};

use super::{Backend, Pod};

/// A key with a `..` segment.
const INVALID_KEY: &str = "/foo/bar/../baz";

/// `TestInvalidKeys`: create, delete, get, guaranteed update, count, list and watch of
/// `/foo/bar/../baz` all fail with exactly `invalid key: "/foo/bar/../baz"`, before any
/// other work: the update function is never called and no value is read.
pub async fn run_test_invalid_keys<B: Backend>(backend: &B) {
    let store = backend.store();
    backend.take_transformer_reads();

    let expect_invalid_key = |method: &str, result: Result<(), StorageError>| {
        let err = result.expect_err(method);
        assert_eq!(
            err.to_string(),
            format!("invalid key: {INVALID_KEY:?}"),
            "[{method}] expected an invalid key error"
        );
        assert_eq!(err.key(), INVALID_KEY, "[{method}] key of the error");
    };

    expect_invalid_key(
        "Create",
        store.create(INVALID_KEY, Pod::default(), 0).await.map(drop),
    );
    expect_invalid_key(
        "Delete",
        store
            .delete(INVALID_KEY, DeleteOptions::default())
            .await
            .map(drop),
    );
    expect_invalid_key(
        "Watch",
        store
            .watch(INVALID_KEY, &ListOptions::default())
            .await
            .map(drop),
    );
    expect_invalid_key(
        "Get",
        store
            .get(INVALID_KEY, &GetOptions::default())
            .await
            .map(drop),
    );
    expect_invalid_key(
        "GetList",
        store
            .list(INVALID_KEY, &ListOptions::default())
            .await
            .map(drop),
    );
    let options = UpdateOptions {
        ignore_not_found: true,
        ..UpdateOptions::default()
    };
    expect_invalid_key(
        "GuaranteedUpdate",
        store
            .guaranteed_update(INVALID_KEY, options, |_, _| {
                panic!("the update function was called for an invalid key")
            })
            .await
            .map(drop),
    );
    expect_invalid_key("Count", store.count(INVALID_KEY).await.map(drop));

    assert_eq!(
        backend.take_transformer_reads(),
        0,
        "a value was read for an invalid key"
    );
}
