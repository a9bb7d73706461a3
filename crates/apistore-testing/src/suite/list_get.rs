//! The list cases of kube-apiserver's `pkg/storage/testing/store_tests.go` that read
//! one key or a prefix at chosen resourceVersions: `RunTestConsistentList`,
//! `RunTestGetListNonRecursive` and `RunTestGetListRecursivePrefix`, with the row
//! checks `list.rs` has for `RunTestList`.

use apistore_storage::{ResourceVersionMatch, SelectionPredicate, Storage, Update, UpdateOptions};
use futures::future::join_all;

use super::list::{Items, check_items, field_predicate, options, parse_rv, report};
use super::{Backend, Pod};

/// `RunTestConsistentList` as the etcd3 store runs it (no watch cache, consistent
/// reads supported): after a create and a compaction that moves the global revision,
/// lists at resourceVersion `0`, `""` and `0` again all answer the current revision.
pub async fn run_test_consistent_list<B: Backend>(backend: &B) {
    let store = backend.store();
    let pod = Pod::new("default", "foo");
    let created = store.create(&pod.key(), pod, 0).await.unwrap();
    let created_rv = created.metadata.resource_version;
    backend.compact(&created_rv).await;
    let current_rv = (parse_rv(&created_rv) + 1).to_string();

    // cacheEnabled=false and consistentReadsSupported=true: every answer is current.
    let cases = [
        ("Non-consistent list before sync", "0", &current_rv),
        ("Consistent request returns currentRV", "", &current_rv),
        (
            "Non-consistent request after sync returns currentRV",
            "0",
            &current_rv,
        ),
    ];
    for (name, request_rv, want) in cases {
        let opts = options(
            request_rv,
            ResourceVersionMatch::Unset,
            SelectionPredicate::everything(),
            false,
        );
        let out = store
            .list("/pods/empty", &opts)
            .await
            .unwrap_or_else(|err| panic!("{name}: GetList failed: {err}"));
        assert_eq!(
            &out.metadata.resource_version, want,
            "{name}: resourceVersion in list response"
        );
    }
}

/// One row of the `RunTestGetListNonRecursive` table.
struct NonRecursiveCase {
    name: &'static str,
    key: String,
    pred: SelectionPredicate,
    rv: String,
    rv_match: ResourceVersionMatch,
    /// `None`: a too-large-resourceVersion error.
    items: Option<Items>,
}

/// `RunTestGetListNonRecursive`: lists of one exact key after an update and a
/// compaction at the previous resourceVersion, at no, zero, current, previous and too
/// large resourceVersions, with and without a match; of a missing key; with a field
/// selector that does not match. The backend must compact.
pub async fn run_test_get_list_non_recursive<B: Backend>(backend: &B) {
    use ResourceVersionMatch::{Exact, NotOlderThan, Unset};

    let store = backend.store();
    let (key, prev) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let prev_rv = prev.metadata.resource_version.clone();
    let stored = store
        .guaranteed_update(&key, UpdateOptions::default(), |_, _| {
            let mut pod = prev.clone();
            pod.metadata
                .annotations
                .insert("version".to_owned(), "second".to_owned());
            Ok(Update::new(pod))
        })
        .await
        .unwrap_or_else(|err| panic!("update failed: {err}"));
    let obj_rv = stored.metadata.resource_version.clone();
    // Moves the global revision without touching any object.
    backend.compact(&prev_rv).await;

    let not_named = field_predicate(&format!("metadata.name!={}", stored.metadata.name), 0, "");
    let row = |name, key: &str, rv: &str, rv_match, items| NonRecursiveCase {
        name,
        key: key.to_owned(),
        pred: SelectionPredicate::everything(),
        rv: rv.to_owned(),
        rv_match,
        items,
    };
    let exactly = |pods: &[&Pod]| Some(Items::Exactly(pods.iter().map(|p| (*p).clone()).collect()));
    let any_state = || {
        Some(Items::OneOf(vec![
            Vec::new(),
            vec![prev.clone()],
            vec![stored.clone()],
        ]))
    };
    let cases = vec![
        row("existing key", &key, "", Unset, exactly(&[&stored])),
        row(
            "existing key, resourceVersion=0",
            &key,
            "0",
            Unset,
            any_state(),
        ),
        row(
            "existing key, resourceVersion=0, resourceVersionMatch=notOlderThan",
            &key,
            "0",
            NotOlderThan,
            any_state(),
        ),
        row(
            "existing key, resourceVersion=current",
            &key,
            &obj_rv,
            Unset,
            exactly(&[&stored]),
        ),
        row(
            "existing key, resourceVersion=current, resourceVersionMatch=notOlderThan",
            &key,
            &obj_rv,
            NotOlderThan,
            exactly(&[&stored]),
        ),
        row(
            "existing key, resourceVersion=previous, resourceVersionMatch=notOlderThan",
            &key,
            &prev_rv,
            NotOlderThan,
            Some(Items::OneOf(vec![vec![prev.clone()], vec![stored.clone()]])),
        ),
        row(
            "existing key, resourceVersion=current, resourceVersionMatch=exact",
            &key,
            &obj_rv,
            Exact,
            exactly(&[&stored]),
        ),
        row(
            "existing key, resourceVersion=previous, resourceVersionMatch=exact",
            &key,
            &prev_rv,
            Exact,
            exactly(&[&prev]),
        ),
        row(
            "existing key, resourceVersion=too high",
            &key,
            &i64::MAX.to_string(),
            Unset,
            None,
        ),
        row("non-existing key", "/non-existing", "", Unset, exactly(&[])),
        NonRecursiveCase {
            pred: not_named.clone(),
            ..row(
                "with matching pod name",
                "/non-existing",
                "",
                Unset,
                exactly(&[]),
            )
        },
        NonRecursiveCase {
            pred: not_named,
            ..row(
                "existing key, resourceVersion=current, with not matching pod name",
                &key,
                &obj_rv,
                Unset,
                exactly(&[]),
            )
        },
    ];

    let failures = join_all(cases.iter().map(|case| async move {
        let name = case.name;
        let opts = options(&case.rv, case.rv_match, case.pred.clone(), false);
        let result = backend.store().list(&case.key, &opts).await;
        match (&case.items, result) {
            (None, Err(err)) if err.is_too_large_resource_version() => String::new(),
            (None, other) => {
                format!("{name}: expecting resource version too high error, but got {other:?}")
            }
            (Some(_), Err(err)) => format!("{name}: GetList failed: {err}"),
            (Some(items), Ok(out)) => {
                let mut problems = Vec::new();
                if out.metadata.resource_version.is_empty() {
                    problems.push("unset resourceVersion".to_owned());
                }
                // The reference compares these rows without sorting (one key at most).
                let unsorted = match items {
                    Items::Exactly(want) => (out.items != *want).then(|| {
                        format!("incorrect list pods: want {want:?}, got {:?}", out.items)
                    }),
                    Items::OneOf(_) => check_items(items, &out),
                };
                problems.extend(unsorted);
                if problems.is_empty() {
                    String::new()
                } else {
                    format!("{name}: {}", problems.join("; "))
                }
            }
        }
    }))
    .await;
    report("RunTestGetListNonRecursive", failures);
}

/// `RunTestGetListRecursivePrefix`: with `test-ns/foo`, `test-ns/foobar` and
/// `test-ns2/baz`, recursive and non-recursive lists of the resource prefix, a
/// namespace prefix and object keys that are prefixes of one another, each at the last
/// resourceVersion exactly, consistently, and not older than 0. A recursive list of an
/// object key lists `key/`, so it finds nothing.
pub async fn run_test_get_list_recursive_prefix<B: Backend>(backend: &B) {
    let (foo_key, foo_pod) = super::propagate(backend, Pod::new("test-ns", "foo")).await;
    let (foobar_key, foobar_pod) = super::propagate(backend, Pod::new("test-ns", "foobar")).await;
    let (_, other_ns) = super::propagate(backend, Pod::new("test-ns2", "baz")).await;
    let last_rv = other_ns.metadata.resource_version.clone();

    let cases: [(&str, &str, bool, Vec<Pod>); 8] = [
        (
            "NonRecursive on resource prefix doesn't return any objects",
            "/pods/",
            false,
            vec![],
        ),
        (
            "Recursive on resource prefix returns all objects",
            "/pods/",
            true,
            vec![foo_pod.clone(), foobar_pod.clone(), other_ns.clone()],
        ),
        (
            "NonRecursive on namespace prefix doesn't return any objects",
            "/pods/test-ns/",
            false,
            vec![],
        ),
        (
            "Recursive on resource prefix returns objects in the namespace",
            "/pods/test-ns/",
            true,
            vec![foo_pod.clone(), foobar_pod.clone()],
        ),
        (
            "NonRecursive on object key (prefix) returns object and no other objects with the same prefix",
            &foo_key,
            false,
            vec![foo_pod.clone()],
        ),
        (
            "Recursive on object key (prefix) doesn't return anything",
            &foo_key,
            true,
            vec![],
        ),
        (
            "NonRecursive on object key (no-prefix) return object",
            &foobar_key,
            false,
            vec![foobar_pod.clone()],
        ),
        (
            "Recursive on object key (no-prefix) doesn't return anything",
            &foobar_key,
            true,
            vec![],
        ),
    ];
    let list_types = [
        ("Exact", last_rv.as_str(), ResourceVersionMatch::Exact),
        ("Consistent", "", ResourceVersionMatch::Unset),
        ("NotOlderThan", "0", ResourceVersionMatch::NotOlderThan),
    ];

    // The NotOlderThan "0" lists read whatever a cache holds; see `Backend::caught_up`.
    backend.caught_up(&last_rv).await;
    let mut failures = Vec::new();
    for (list_type, rv, rv_match) in list_types {
        for (name, key, recursive, want) in &cases {
            let opts = options(rv, rv_match, SelectionPredicate::everything(), *recursive);
            match backend.store().list(key, &opts).await {
                Err(err) => failures.push(format!("{list_type}/{name}: GetList failed: {err}")),
                Ok(out) if out.items != *want => failures.push(format!(
                    "{list_type}/{name}: incorrect list pods: want {want:?}, got {:?}",
                    out.items
                )),
                Ok(_) => {}
            }
        }
    }
    report("RunTestGetListRecursivePrefix", failures);
}
