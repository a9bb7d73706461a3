//! Create cases (`RunTestCreate`, `RunTestCreateWithKeyExist`, `RunTestCreateWithTTL`).

use apistore_storage::{
    ApiObject, Codec, GetOptions, JsonCodec, ListOptions, Storage, StorageError,
};

use super::{Backend, Pod};

/// `RunTestCreate`: a created object has a resourceVersion; etcd holds the transformer's
/// marker and the encoding with no resourceVersion and no selfLink; an object that
/// already has a resourceVersion is refused.
pub async fn run_test_create<B: Backend>(backend: &B) {
    let store = backend.store();
    let key = "/pods/test-ns/foo";
    let err = store.get(key, &GetOptions::default()).await.unwrap_err();
    assert!(err.is_not_found(), "get before create: {err}");

    let mut obj = Pod::new("test-ns", "foo");
    obj.metadata.self_link = "testlink".into();
    let out = store.create(key, obj, 0).await.unwrap();
    assert_eq!(out.name(), "foo");
    assert!(
        !out.resource_version().is_empty(),
        "no resourceVersion on {out:?}"
    );

    let raw = backend
        .raw_get(&backend.stored_key(key))
        .await
        .expect("stored value");
    let prefix = backend.transformer_prefix();
    assert!(
        raw.starts_with(prefix),
        "stored value lacks the transformer prefix"
    );
    let stored: Pod = JsonCodec::new().decode(&raw[prefix.len()..]).unwrap();
    assert_eq!(stored.resource_version(), "", "resourceVersion was stored");
    assert_eq!(stored.metadata.self_link, "", "selfLink was stored");

    let mut with_rv = Pod::new("test-ns", "bar");
    with_rv.metadata.resource_version = "1".into();
    let err = store
        .create("/pods/test-ns/bar", with_rv, 0)
        .await
        .unwrap_err();
    assert!(
        matches!(err, StorageError::ResourceVersionSetOnCreate { .. }),
        "create with a resourceVersion: {err}"
    );
}

/// `RunTestCreateWithKeyExist`: a second create of a key is a key-exists error.
pub async fn run_test_create_with_key_exist<B: Backend>(backend: &B) {
    let (key, _) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let err = backend
        .store()
        .create(&key, Pod::new("test-ns", "foo"), 0)
        .await
        .unwrap_err();
    assert!(err.is_exists(), "second create: {err}");
    assert_eq!(err.key(), backend.stored_key(&key));
}

/// `RunTestCreateWithTTL`: an object created with a 1 s TTL disappears: a watch from
/// the create's resourceVersion sees it deleted.
pub async fn run_test_create_with_ttl<B: Backend>(backend: &B) {
    let store = backend.store();
    let key = "/pods/test-ns/foo";
    let out = store
        .create(key, Pod::new("test-ns", "foo"), 1)
        .await
        .unwrap();
    let options = ListOptions {
        resource_version: out.metadata.resource_version,
        ..ListOptions::default()
    };
    let mut w = super::watch::watch(store, key, &options).await;
    super::watch::check_event_type(&mut w, "DELETED").await;
}
