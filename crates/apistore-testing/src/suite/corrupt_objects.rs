//! Corrupt objects under kube's `AllowUnsafeMalformedObjectDeletion` (on by default
//! from 1.37): `RunTestGetListWithErrorAggregation`,
//! `RunTestGetListWithoutErrorAggregation` and `RunTestWatchWithUnsafeDelete` of
//! k8s.io/apiserver v0.37's `store_tests.go` and `watcher_tests.go`.
//!
//! The reference makes chosen keys corrupt with a transformer that fails for them; here
//! their stored bytes are replaced with bytes the test transformer cannot read (no
//! prefix), which is what a wrong key or flipped bits look like to a store. The
//! reference's cases where a list meets an error that is not a corrupt object (and
//! stops there) have no counterpart: every error apistore's stores meet reading one
//! stored value is a failed transform or decode, which is a corrupt object.

use apistore_storage::{
    DeleteOptions, ErrorKind, ListOptions, MAX_CORRUPT_OBJECTS_IN_LIST, SelectionPredicate,
    Storage, TOO_MANY_CORRUPT_OBJECTS, WatchEvent,
};

use super::watch::expect_event;
use super::{Backend, Pod};

/// The store of the backend with the gate set as asked: the cases need both settings.
fn store_with_gate<B: Backend>(backend: &B, enabled: bool) -> B::Store {
    backend
        .store_with_unsafe_malformed_object_deletion(enabled)
        .expect("the backend must make a store with AllowUnsafeMalformedObjectDeletion set")
}

fn name(id: usize) -> String {
    // Zero-padded, so key order is creation order.
    format!("foo-{id:06}")
}

fn recursive() -> ListOptions {
    ListOptions {
        recursive: true,
        ..ListOptions::default()
    }
}

/// Creates `n` pods `foo-000001`… in `namespace` and makes those `corrupt` picks
/// unreadable; returns the stored keys of the corrupt ones, in key order.
async fn seed<B: Backend>(
    backend: &B,
    store: &B::Store,
    namespace: &str,
    n: usize,
    corrupt: impl Fn(usize) -> bool,
) -> Vec<String> {
    let mut corrupt_keys = Vec::new();
    for id in 1..=n {
        let pod = Pod::new(namespace, &name(id));
        let key = pod.key();
        store.create(&key, pod, 0).await.unwrap();
        if corrupt(id) {
            let stored = backend.stored_key(&key);
            backend.raw_put(&stored, b"bits flipped".to_vec()).await;
            corrupt_keys.push(stored);
        }
    }
    corrupt_keys
}

/// `RunTestGetListWithErrorAggregation`, the cases of corrupt objects only: with the
/// gate on, a list goes past corrupt objects and fails at its end with one 500
/// `StoreReadError` naming each (a cause per key, in key order), up to 100; at the
/// hundredth it stops, with a `FieldValueTooMany` cause last.
pub async fn run_test_get_list_with_error_aggregation<B: Backend>(backend: &B) {
    let store = store_with_gate(backend, true);

    // Seven objects, the even ones corrupt.
    let corrupt = seed(backend, &store, "ns-1", 7, |id| id % 2 == 0).await;
    let err = store.list("/pods/ns-1/", &recursive()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StoreRead, "{err}");
    let errors = err.store_read_errors().unwrap();
    assert_eq!(errors.keys().collect::<Vec<_>>(), corrupt, "{err}");
    assert!(!errors.truncated);
    for item in &errors.items {
        assert!(item.error.is_corrupt_object(), "{}", item.error);
    }
    let status = err.status();
    assert_eq!(
        (status.code, status.reason.as_str()),
        (500, "StorageReadError")
    );
    let details = status.details.unwrap();
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("list", "pods")
    );
    let fields: Vec<&str> = details.causes.iter().map(|c| c.field.as_str()).collect();
    assert_eq!(fields, corrupt);
    assert!(
        details
            .causes
            .iter()
            .all(|c| c.reason == "UnexpectedServerResponse"
                && c.message
                    .starts_with("StorageError: corrupt object, Code: 7, Key: ")),
        "{details:?}"
    );
    assert!(
        status.message.starts_with(
            "failed to read one or more pods from the storage: StorageError: corrupt object"
        ) && status.message.contains(&corrupt[0])
            && status.message.ends_with(" (and 2 more)"),
        "{}",
        status.message
    );

    // 210 objects, 105 corrupt: the list stops at the limit.
    let corrupt = seed(backend, &store, "ns-2", 210, |id| id % 2 == 0).await;
    let err = store.list("/pods/ns-2/", &recursive()).await.unwrap_err();
    let errors = err.store_read_errors().unwrap();
    assert_eq!(errors.items.len(), MAX_CORRUPT_OBJECTS_IN_LIST);
    assert_eq!(
        errors.keys().collect::<Vec<_>>(),
        corrupt[..MAX_CORRUPT_OBJECTS_IN_LIST]
    );
    assert!(errors.truncated);
    let causes = err.status().details.unwrap().causes;
    assert_eq!(causes.len(), MAX_CORRUPT_OBJECTS_IN_LIST + 1);
    let sentinel = &causes[MAX_CORRUPT_OBJECTS_IN_LIST];
    assert_eq!(
        (
            sentinel.reason.as_str(),
            sentinel.message.as_str(),
            sentinel.field.as_str()
        ),
        ("FieldValueTooMany", TOO_MANY_CORRUPT_OBJECTS, "")
    );

    // Exactly 100, all corrupt: the hundredth is the limit too.
    seed(backend, &store, "ns-3", 100, |_| true).await;
    let err = store.list("/pods/ns-3/", &recursive()).await.unwrap_err();
    let causes = err.status().details.unwrap().causes;
    assert_eq!(causes.len(), MAX_CORRUPT_OBJECTS_IN_LIST + 1);
    assert_eq!(
        causes[MAX_CORRUPT_OBJECTS_IN_LIST].reason,
        "FieldValueTooMany"
    );

    // A paged list fails only on the pages it reads corrupt objects in, naming those.
    let mut paged = ListOptions {
        predicate: SelectionPredicate {
            limit: 1,
            ..SelectionPredicate::everything()
        },
        ..recursive()
    };
    let first = store.list("/pods/ns-1/", &paged).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert_eq!(first.items[0].metadata.name, name(1));
    paged.predicate.continue_token = first.metadata.continue_token.clone();
    let err = store.list("/pods/ns-1/", &paged).await.unwrap_err();
    let errors = err.store_read_errors().unwrap();
    let ns1_first_corrupt = backend.stored_key(&Pod::new("ns-1", &name(2)).key());
    assert_eq!(errors.keys().collect::<Vec<_>>(), [ns1_first_corrupt]);
}

/// `RunTestGetListWithoutErrorAggregation`: with the gate off (kube before 1.37), a
/// list fails at the first corrupt object with the store's internal error, still
/// known to be a corrupt object.
pub async fn run_test_get_list_without_error_aggregation<B: Backend>(backend: &B) {
    let store = store_with_gate(backend, false);
    let corrupt = seed(backend, &store, "ns", 7, |id| id % 2 == 0).await;
    let err = store.list("/pods/ns/", &recursive()).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Internal, "{err}");
    assert!(err.is_corrupt_object(), "{err}");
    assert_eq!(err.key(), corrupt[0], "{err}");
    assert_eq!(err.status().reason, "InternalError");
}

/// `RunTestWatchWithUnsafeDelete`: a watch that sees an object deleted unread (its
/// value corrupt) ends with a 500 `StoreReadError` saying so.
pub async fn run_test_watch_with_unsafe_delete<B: Backend>(backend: &B) {
    let store = store_with_gate(backend, true);
    let pod = Pod::new("test-ns", "foo");
    let key = pod.key();
    store.create(&key, pod, 0).await.unwrap();
    let list = store.list("/pods/", &recursive()).await.unwrap();

    assert!(
        backend.set_transformer_failing(true),
        "the backend must be able to fail its transformer for this case"
    );
    let options = ListOptions {
        resource_version: list.metadata.resource_version.clone(),
        ..ListOptions::default()
    };
    let mut watch = store.watch(&key, &options).await.unwrap();

    let normal = store.delete(&key, DeleteOptions::default()).await;
    assert!(
        normal.is_err(),
        "a normal delete of a corrupt object succeeded"
    );
    let unsafe_delete = DeleteOptions {
        expect_transform_or_decode_error: true,
        ..DeleteOptions::default()
    };
    store
        .delete(&key, unsafe_delete)
        .await
        .unwrap_or_else(|err| panic!("unsafe delete: {err}"));

    // The transformer fails until the event is seen: the watch reads the deleted value
    // when it delivers the change, not when etcd sends it.
    let event = expect_event(&mut watch, "the unsafe delete").await;
    backend.set_transformer_failing(false);
    match event {
        WatchEvent::Error(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (500, "StorageReadError")
            );
            assert!(
                status
                    .message
                    .contains("saw a DELETED event, but object data is corrupt"),
                "{status:?}"
            );
        }
        other => panic!("expected an error event, got {other:?}"),
    }
}
