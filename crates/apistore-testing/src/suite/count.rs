//! Count (`RunTestCount`).

use apistore_storage::Storage;

use super::{Backend, Pod};

/// `RunTestCount`: the count of a key counts the objects under it as a directory, not
/// those under a longer key it is a prefix of (`/foo.bar.io/abc` is a prefix of
/// `/foo.bar.io/abcdef`).
pub async fn run_test_count<B: Backend>(backend: &B) {
    let store = backend.store();
    let resource_a = "/foo.bar.io/abc";
    let resource_b = format!("{resource_a}def");

    let resource_a_count = 5;
    for i in 1..=resource_a_count {
        let key = format!("{resource_a}/{i}");
        store
            .create(&key, Pod::new("", &format!("foo-{i}")), 0)
            .await
            .unwrap_or_else(|err| panic!("create of {key} failed: {err}"));
    }
    for i in 1..=4 {
        let key = format!("{resource_b}/{i}");
        store
            .create(&key, Pod::new("", &format!("foo-{i}")), 0)
            .await
            .unwrap_or_else(|err| panic!("create of {key} failed: {err}"));
    }

    let got = store.count(resource_a).await.unwrap();
    assert_eq!(
        got, resource_a_count,
        "count of {resource_a} must not include the objects under {resource_b}"
    );
}
