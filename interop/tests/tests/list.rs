//! Lists: pages made by one side and continued by the other, the 410 with an
//! inconsistent-continue token after a compaction, and resourceVersion Exact /
//! NotOlderThan at each other's revisions.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore::{
    DynamicObject, Etcd3Store, ListOptions, ResourceVersionMatch, SelectionPredicate, Storage,
    UpdateOptions,
};
use apistore_interop::{
    Failure, Interop, Listed, ReferenceOptions, configmap, dynamic, summary, to_json,
};
use serde_json::json;

fn configmaps(media_type: &str) -> ReferenceOptions {
    ReferenceOptions::new("configmaps", "v1/ConfigMap").media_type(media_type)
}

fn options(rv: &str, rv_match: ResourceVersionMatch, limit: i64, token: &str) -> ListOptions {
    ListOptions {
        resource_version: rv.to_owned(),
        resource_version_match: rv_match,
        predicate: SelectionPredicate {
            limit,
            continue_token: token.to_owned(),
            ..SelectionPredicate::default()
        },
        recursive: true,
        ..ListOptions::default()
    }
}

async fn api_list(
    store: &Etcd3Store<DynamicObject>,
    options: &ListOptions,
) -> Result<Listed, Failure> {
    store
        .list("configmaps", options)
        .await
        .map(|l| Listed::from_apistore(&l))
        .map_err(|e| Failure::from_error(&e))
}

/// Five configmaps over two namespaces, written alternately by the two sides.
async fn seed(t: &mut Interop) {
    for (i, (ns, name)) in [
        ("a", "one"),
        ("a", "two"),
        ("b", "three"),
        ("b", "four"),
        ("c", "five"),
    ]
    .into_iter()
    .enumerate()
    {
        if i % 2 == 0 {
            t.go.create(&format!("/configmaps/{ns}/{name}"), &configmap(ns, name))
                .await
                .unwrap();
        } else {
            t.store
                .create(
                    &format!("configmaps/{ns}/{name}"),
                    dynamic(&configmap(ns, name)),
                    0,
                )
                .await
                .unwrap();
        }
    }
}

async fn pages_continue_across_sides_with_the_same_tokens(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    seed(&mut t).await;
    let unset = ResourceVersionMatch::Unset;

    // kube makes page 1; apistore makes the same page, with the same token.
    let go1 = t.go.list("/configmaps", json!({"limit": 2})).await.unwrap();
    let api1 = api_list(&t.store, &options("", unset, 2, ""))
        .await
        .unwrap();
    assert_eq!(go1.names(), ["one", "two"]);
    assert_eq!(api1.summaries(), go1.summaries());
    assert_eq!(api1.continue_token, go1.continue_token, "page 1 tokens");
    assert_eq!(api1.remaining_item_count, go1.remaining_item_count);
    assert_eq!(api1.resource_version, go1.resource_version);

    // Writes after page 1 are not seen by later pages on either side.
    t.store
        .create("configmaps/b/late", dynamic(&configmap("b", "late")), 0)
        .await
        .unwrap();

    // apistore continues kube's token; kube continues apistore's page 2 token.
    let api2 = api_list(&t.store, &options("", unset, 2, &go1.continue_token))
        .await
        .unwrap();
    let go2 =
        t.go.list(
            "/configmaps",
            json!({"limit": 2, "continue": api1.continue_token}),
        )
        .await
        .unwrap();
    assert_eq!(api2.names(), ["four", "three"]);
    assert_eq!(api2.summaries(), go2.summaries());
    assert_eq!(api2.continue_token, go2.continue_token, "page 2 tokens");
    assert_eq!(api2.remaining_item_count, go2.remaining_item_count);
    assert_eq!(api2.resource_version, go1.resource_version);
    assert_eq!(go2.resource_version, go1.resource_version);

    let go3 =
        t.go.list(
            "/configmaps",
            json!({"limit": 2, "continue": api2.continue_token}),
        )
        .await
        .unwrap();
    let api3 = api_list(&t.store, &options("", unset, 2, &go2.continue_token))
        .await
        .unwrap();
    assert_eq!(go3.names(), ["five"]);
    assert_eq!(api3.summaries(), go3.summaries());
    assert!(go3.continue_token.is_empty() && api3.continue_token.is_empty());
    assert_eq!(api3.remaining_item_count, go3.remaining_item_count);

    // With a label selector too (both filter the same way).
    let go_sel =
        t.go.list(
            "/configmaps",
            json!({"limit": 3, "labelSelector": "app=interop"}),
        )
        .await
        .unwrap();
    let mut sel = options("", unset, 3, "");
    sel.predicate.label = apistore::LabelSelector::parse("app=interop").unwrap();
    let api_sel = api_list(&t.store, &sel).await.unwrap();
    assert_eq!(api_sel.summaries(), go_sel.summaries());
    assert_eq!(api_sel.continue_token, go_sel.continue_token);
}

async fn inconsistent_continue_after_compaction_gives_the_same_410(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    seed(&mut t).await;
    let unset = ResourceVersionMatch::Unset;
    let go1 = t.go.list("/configmaps", json!({"limit": 1})).await.unwrap();
    let api1 = api_list(&t.store, &options("", unset, 1, ""))
        .await
        .unwrap();
    assert_eq!(go1.continue_token, api1.continue_token);

    t.go.update_labels("/configmaps/a/two", json!({"changed": "yes"}), json!(null))
        .await
        .unwrap();
    t.compact().await;

    let go_err =
        t.go.list(
            "/configmaps",
            json!({"limit": 1, "continue": go1.continue_token}),
        )
        .await
        .unwrap_err();
    let api_err = api_list(&t.store, &options("", unset, 1, &go1.continue_token))
        .await
        .unwrap_err();
    eprintln!("kube:     {go_err:?}\napistore: {api_err:?}");
    assert_eq!((go_err.code, go_err.reason.as_str()), (410, "Expired"));
    assert!(!go_err.continue_token.is_empty());
    assert_eq!(api_err.essence(), go_err.essence());

    // The token in the 410 continues on the other side, at a fresh revision.
    let api2 = api_list(&t.store, &options("", unset, 1, &go_err.continue_token))
        .await
        .unwrap();
    let go2 =
        t.go.list(
            "/configmaps",
            json!({"limit": 1, "continue": api_err.continue_token}),
        )
        .await
        .unwrap();
    assert_eq!(api2.names(), ["two"]);
    assert_eq!(api2.summaries(), go2.summaries());
    assert_eq!(api2.continue_token, go2.continue_token);
    assert_eq!(api2.items[0]["metadata"]["labels"]["changed"], "yes");
}

async fn exact_and_not_older_than_at_each_others_revisions(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let by_go =
        t.go.create("/configmaps/a/x", &configmap("a", "x"))
            .await
            .unwrap();
    let go_rv = by_go["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let by_api = t
        .store
        .guaranteed_update("configmaps/a/x", UpdateOptions::default(), |mut c, _| {
            c.metadata.labels.insert("v".into(), "2".into());
            Ok(c.into())
        })
        .await
        .unwrap();
    let api_rv = by_api.metadata.resource_version.clone();
    t.go.create("/configmaps/a/y", &configmap("a", "y"))
        .await
        .unwrap();

    for (rv, want_labels) in [
        (&go_rv, json!({"app": "interop"})),
        (&api_rv, json!({"app": "interop", "v": "2"})),
    ] {
        // Exact at the revision: both read the past, and echo the revision.
        let go =
            t.go.list(
                "/configmaps",
                json!({"resourceVersion": rv, "resourceVersionMatch": "Exact"}),
            )
            .await
            .unwrap();
        let api = api_list(&t.store, &options(rv, ResourceVersionMatch::Exact, 0, ""))
            .await
            .unwrap();
        assert_eq!(go.names(), ["x"], "Exact {rv}");
        assert_eq!(go.items[0]["metadata"]["labels"], want_labels);
        assert_eq!(api.summaries(), go.summaries(), "Exact {rv}");
        assert_eq!(api.resource_version, *rv);
        assert_eq!(go.resource_version, *rv);
        // Exact with a limit: a page at that revision and a token carrying it.
        let go =
            t.go.list(
                "/configmaps",
                json!({"resourceVersion": rv, "resourceVersionMatch": "Exact", "limit": 1}),
            )
            .await
            .unwrap();
        let api = api_list(&t.store, &options(rv, ResourceVersionMatch::Exact, 1, ""))
            .await
            .unwrap();
        assert_eq!(api.summaries(), go.summaries());
        assert_eq!(api.continue_token, go.continue_token);

        // NotOlderThan: the current state, at least as new.
        let go =
            t.go.list(
                "/configmaps",
                json!({"resourceVersion": rv, "resourceVersionMatch": "NotOlderThan"}),
            )
            .await
            .unwrap();
        let api = api_list(
            &t.store,
            &options(rv, ResourceVersionMatch::NotOlderThan, 0, ""),
        )
        .await
        .unwrap();
        assert_eq!(go.names(), ["x", "y"]);
        assert_eq!(api.summaries(), go.summaries(), "NotOlderThan {rv}");
        assert_eq!(api.resource_version, go.resource_version);

        // Get at the other's revision: the current object (get is NotOlderThan).
        let go = t.go.get("/configmaps/a/x", rv).await.unwrap();
        let api = t
            .store
            .get(
                "configmaps/a/x",
                &apistore::GetOptions {
                    resource_version: rv.clone(),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(summary(&to_json(&api)), summary(&go));
    }

    // Exact at a compacted revision: the same 410 on both sides.
    t.compact().await;
    let go =
        t.go.list(
            "/configmaps",
            json!({"resourceVersion": go_rv, "resourceVersionMatch": "Exact"}),
        )
        .await
        .unwrap_err();
    let api = api_list(
        &t.store,
        &options(&go_rv, ResourceVersionMatch::Exact, 0, ""),
    )
    .await
    .unwrap_err();
    eprintln!("Exact at a compacted revision: kube {go:?}, apistore {api:?}");
    assert_eq!(api.essence(), go.essence());
}

/// 25 objects over namespaces `n`, `n1`, `n10` (prefixes of each other), listed 4 at a
/// time with the sides taking turns page by page: every page and token the same as the
/// other side would make, and a namespace's list never leaks into its neighbour's.
async fn many_pages_taking_turns(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    for i in 0..25 {
        let ns = ["n", "n1", "n10"][i % 3];
        let name = format!("cm-{i:02}");
        if i % 2 == 0 {
            t.go.create(&format!("/configmaps/{ns}/{name}"), &configmap(ns, &name))
                .await
                .unwrap();
        } else {
            t.store
                .create(
                    &format!("configmaps/{ns}/{name}"),
                    dynamic(&configmap(ns, &name)),
                    0,
                )
                .await
                .unwrap();
        }
    }
    let unset = ResourceVersionMatch::Unset;
    let mut token = String::new();
    let mut seen = Vec::new();
    let mut rv = String::new();
    for page in 0.. {
        let go =
            t.go.list("/configmaps", json!({"limit": 4, "continue": token}))
                .await
                .unwrap();
        let api = api_list(&t.store, &options("", unset, 4, &token))
            .await
            .unwrap();
        assert_eq!(api.essence(), go.essence(), "page {page}");
        if page == 0 {
            rv.clone_from(&go.resource_version);
        }
        assert_eq!(go.resource_version, rv, "page {page}");
        seen.extend(go.names());
        // Turns: even pages continue kube's token, odd ones apistore's (equal anyway).
        token = if page % 2 == 0 {
            go.continue_token
        } else {
            api.continue_token
        };
        if token.is_empty() {
            break;
        }
        // A write between pages is never seen by the rest of the list.
        t.store
            .create(
                &format!("configmaps/n/late-{page}"),
                dynamic(&configmap("n", &format!("late-{page}"))),
                0,
            )
            .await
            .unwrap();
    }
    assert_eq!(seen.len(), 25);

    // One namespace, recursive: `n` holds neither `n1`'s nor `n10`'s objects.
    for ns in ["n", "n1", "n10"] {
        let go =
            t.go.list(&format!("/configmaps/{ns}"), json!({"limit": 3}))
                .await
                .unwrap();
        let api = t
            .store
            .list(&format!("configmaps/{ns}"), &options("", unset, 3, ""))
            .await
            .map(|l| Listed::from_apistore(&l))
            .unwrap();
        assert_eq!(api.essence(), go.essence(), "namespace {ns}");
        for item in &go.items {
            assert_eq!(item["metadata"]["namespace"], ns);
        }
        // ...and continuing it on the other side stays in the namespace.
        let rest = t
            .store
            .list(
                &format!("configmaps/{ns}"),
                &options("", unset, 0, &go.continue_token),
            )
            .await
            .map(|l| Listed::from_apistore(&l))
            .unwrap();
        let go_rest =
            t.go.list(
                &format!("/configmaps/{ns}"),
                json!({"continue": api.continue_token}),
            )
            .await
            .unwrap();
        assert_eq!(rest.essence(), go_rest.essence(), "rest of namespace {ns}");
        assert!(rest.items.iter().all(|i| i["metadata"]["namespace"] == ns));
    }
}

/// A non-recursive list of one key at an Exact past revision, and lists at "0"
/// (served from etcd's latest revision by both, with or without a limit).
async fn single_key_and_zero_lists(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let first = t
        .store
        .create("configmaps/a/k", dynamic(&configmap("a", "k")), 0)
        .await
        .unwrap();
    t.go.update_labels("/configmaps/a/k", json!({"v": "2"}), json!(null))
        .await
        .unwrap();
    t.go.create("/configmaps/a/k2", &configmap("a", "k2"))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.clone();
    let go =
        t.go.list(
            "/configmaps/a/k",
            json!({"recursive": false, "resourceVersion": rv, "resourceVersionMatch": "Exact"}),
        )
        .await
        .unwrap();
    let api = t
        .store
        .list(
            "configmaps/a/k",
            &ListOptions {
                recursive: false,
                ..options(&rv, ResourceVersionMatch::Exact, 0, "")
            },
        )
        .await
        .map(|l| Listed::from_apistore(&l))
        .unwrap();
    assert_eq!(go.names(), ["k"]);
    assert!(go.items[0]["metadata"]["labels"].get("v").is_none());
    assert_eq!(api.essence(), go.essence());

    for (rv_match, text) in [
        (ResourceVersionMatch::Unset, ""),
        (ResourceVersionMatch::NotOlderThan, "NotOlderThan"),
    ] {
        for limit in [0, 1] {
            let go =
                t.go.list(
                    "/configmaps",
                    json!({"resourceVersion": "0", "resourceVersionMatch": text, "limit": limit}),
                )
                .await
                .unwrap();
            let api = api_list(&t.store, &options("0", rv_match, limit, ""))
                .await
                .unwrap();
            assert_eq!(api.essence(), go.essence(), "RV 0 {text} limit {limit}");
        }
    }
}

apistore_interop::per_media_type!(
    pages_continue_across_sides_with_the_same_tokens,
    inconsistent_continue_after_compaction_gives_the_same_410,
    exact_and_not_older_than_at_each_others_revisions,
    many_pages_taking_turns,
    single_key_and_zero_lists
);
