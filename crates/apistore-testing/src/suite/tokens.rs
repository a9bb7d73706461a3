//! Continue tokens byte for byte: a paged list's tokens are kube-apiserver's
//! (`EncodeContinue` of the stored key after the last item, at the list's revision,
//! relative to the listed prefix), so every backend hands out the same token for the
//! same data and revision, and a token from one reads in another.

use apistore_storage::{ListOptions, SelectionPredicate, Storage};
use apistore_versioning::continue_token;

use super::{Backend, Pod};

/// Three pods paged one at a time: each token is `continue_token::encode` of the stored
/// key of the page's last pod, at the first page's revision, with the remaining count;
/// the last page has none.
pub async fn run_test_continue_tokens_are_kube_apiservers<B: Backend>(backend: &B) {
    let store = backend.store();
    let mut pods = Vec::new();
    for name in ["a", "b", "c"] {
        let pod = Pod::new("tokens", name);
        pods.push(store.create(&pod.key(), pod, 0).await.unwrap());
    }
    let prefix = format!("{}/", backend.stored_key("/pods/tokens"));
    let page = |token: String| ListOptions {
        predicate: SelectionPredicate {
            limit: 1,
            continue_token: token,
            ..SelectionPredicate::default()
        },
        recursive: true,
        ..ListOptions::default()
    };

    let first = store
        .list("/pods/tokens", &page(String::new()))
        .await
        .unwrap();
    let rv: i64 = first.metadata.resource_version.parse().unwrap();
    assert_eq!(first.items, [pods[0].clone()]);
    let expected =
        continue_token::encode(backend.stored_key("/pods/tokens/a"), rv, &prefix).unwrap();
    assert_eq!(
        first.metadata.continue_token, expected,
        "first page's token"
    );
    assert_eq!(first.metadata.remaining_item_count, Some(2));

    let second = store
        .list("/pods/tokens", &page(first.metadata.continue_token))
        .await
        .unwrap();
    assert_eq!(second.items, [pods[1].clone()]);
    assert_eq!(second.metadata.resource_version, rv.to_string());
    let expected =
        continue_token::encode(backend.stored_key("/pods/tokens/b"), rv, &prefix).unwrap();
    assert_eq!(
        second.metadata.continue_token, expected,
        "second page's token"
    );
    assert_eq!(second.metadata.remaining_item_count, Some(1));

    let last = store
        .list("/pods/tokens", &page(second.metadata.continue_token))
        .await
        .unwrap();
    assert_eq!(last.items, [pods[2].clone()]);
    assert_eq!(
        last.metadata.continue_token, "",
        "the last page has no token"
    );
    assert_eq!(last.metadata.remaining_item_count, None);
}
