//! Watches started from each other's resourceVersions.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apistore::{DeleteOptions, Storage, UpdateOptions};
use apistore_interop::{
    Failure, Interop, ReferenceOptions, api_watch_with, configmap, dynamic, event_summaries,
    to_json,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(5);

fn configmaps(media_type: &str) -> ReferenceOptions {
    ReferenceOptions::new("configmaps", "v1/ConfigMap").media_type(media_type)
}

fn rv_of(object: &serde_json::Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn apistore_watches_from_kubes_revisions(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let start = t.go.list("/configmaps", json!({})).await.unwrap();
    let created =
        t.go.create("/configmaps/a/w", &configmap("a", "w"))
            .await
            .unwrap();
    t.go.update_labels("/configmaps/a/w", json!({"step": "2"}), json!(null))
        .await
        .unwrap();
    t.go.delete("/configmaps/a/w", json!(null)).await.unwrap();

    for (from, n) in [(start.resource_version.clone(), 3), (rv_of(&created), 2)] {
        let api = t.api_watch("configmaps", &from, n, WAIT).await.unwrap();
        let go = t.go.watch("/configmaps", &from, n, 5000).await.unwrap();
        assert_eq!(api.len(), n);
        assert_eq!(event_summaries(&api), event_summaries(&go), "from {from}");
    }
    let api = t
        .api_watch("configmaps", &start.resource_version, 3, WAIT)
        .await
        .unwrap();
    let kinds: Vec<_> = api.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED"]);
}

async fn kube_watches_from_apistores_revisions(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let start = t.store.list("configmaps", &Default::default()).await;
    let start = start.unwrap().metadata.resource_version;
    let created = t
        .store
        .create("configmaps/b/w", dynamic(&configmap("b", "w")), 0)
        .await
        .unwrap();
    t.store
        .guaranteed_update("configmaps/b/w", UpdateOptions::default(), |mut c, _| {
            c.metadata.labels.insert("step".into(), "2".into());
            Ok(c.into())
        })
        .await
        .unwrap();
    t.store
        .delete("configmaps/b/w", DeleteOptions::default())
        .await
        .unwrap();

    for (from, n) in [
        (start.clone(), 3),
        (created.metadata.resource_version.clone(), 2),
    ] {
        let go = t.go.watch("/configmaps", &from, n, 5000).await.unwrap();
        let api = t.api_watch("configmaps", &from, n, WAIT).await.unwrap();
        assert_eq!(go.len(), n, "kube from {from}");
        assert_eq!(event_summaries(&go), event_summaries(&api), "from {from}");
    }
    // The deleted event carries the last state at the deletion's revision on both.
    let go = t.go.watch("/configmaps", &start, 3, 5000).await.unwrap();
    assert_eq!(go[2].0, "DELETED");
    assert_eq!(go[2].1["metadata"]["labels"]["step"], "2");
}

/// A watch from "0" begins with the current state as ADDED events on both sides.
async fn watch_from_zero_starts_with_the_current_state(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    t.go.create("/configmaps/a/one", &configmap("a", "one"))
        .await
        .unwrap();
    t.store
        .create("configmaps/a/two", dynamic(&configmap("a", "two")), 0)
        .await
        .unwrap();
    let go = t.go.watch("/configmaps", "0", 2, 5000).await.unwrap();
    let api = t.api_watch("configmaps", "0", 2, WAIT).await.unwrap();
    assert_eq!(go.len(), 2);
    assert_eq!(event_summaries(&api), event_summaries(&go));
}

async fn watch_from_a_compacted_revision_ends_with_the_same_410(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let first =
        t.go.create("/configmaps/a/c", &configmap("a", "c"))
            .await
            .unwrap();
    let second = to_json(
        &t.store
            .guaranteed_update("configmaps/a/c", UpdateOptions::default(), |mut c, _| {
                c.metadata.labels.insert("n".into(), "2".into());
                Ok(c.into())
            })
            .await
            .unwrap(),
    );
    t.go.update_labels("/configmaps/a/c", json!({"n": "3"}), json!(null))
        .await
        .unwrap();
    t.compact().await;
    for from in [rv_of(&first), rv_of(&second)] {
        let go = t.go.watch("/configmaps", &from, 1, 5000).await.unwrap();
        let api = t.api_watch("configmaps", &from, 1, WAIT).await.unwrap();
        assert_eq!(go.len(), 1, "kube: {go:?}");
        assert_eq!(api.len(), 1, "apistore: {api:?}");
        assert_eq!((go[0].0.as_str(), api[0].0.as_str()), ("ERROR", "ERROR"));
        let go = Failure::from_status(&go[0].1);
        let api = Failure::from_status(&api[0].1);
        eprintln!("watch from compacted {from}: kube {go:?}; apistore {api:?}");
        assert_eq!(api.essence(), go.essence());
        // From before the compaction: 410. From the revision just before it, the first
        // event is at the compaction revision itself, whose previous value is gone:
        // kube's watcher ends with a 500 "PrevKv=nil", and so does apistore's.
        let want = if from == rv_of(&first) {
            (410, "Expired")
        } else {
            (500, "InternalError")
        };
        assert_eq!((go.code, go.reason.as_str()), want);
    }
}

/// A label-selected watch sees an object enter (ADDED), change (MODIFIED) and leave
/// the selection (DELETED with the object as it left) the same way on both sides,
/// whichever side wrote; an exact-key watch sees only its key.
async fn selector_and_single_key_watches(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let start = t.go.list("/configmaps", json!({})).await.unwrap();
    let rv = start.resource_version.clone();
    t.go.create("/configmaps/a/s", &configmap("a", "s"))
        .await
        .unwrap();
    t.store
        .create("configmaps/a/other", dynamic(&configmap("a", "other")), 0)
        .await
        .unwrap();
    // Into the selection (by apistore), changed inside it (by kube), out of it (by
    // apistore), back in (by kube), deleted (by apistore).
    let label = |value: &'static str| {
        move |mut c: apistore::DynamicObject, _: &apistore::ResponseMeta| {
            c.metadata.labels.insert("tier".into(), value.into());
            Ok(c.into())
        }
    };
    t.store
        .guaranteed_update("configmaps/a/s", UpdateOptions::default(), label("front"))
        .await
        .unwrap();
    t.go.update_labels("/configmaps/a/s", json!({"step": "2"}), json!(null))
        .await
        .unwrap();
    t.store
        .guaranteed_update("configmaps/a/s", UpdateOptions::default(), label("back"))
        .await
        .unwrap();
    t.go.update_labels("/configmaps/a/s", json!({"tier": "front"}), json!(null))
        .await
        .unwrap();
    t.store
        .delete("configmaps/a/s", DeleteOptions::default())
        .await
        .unwrap();

    let selector = "tier=front";
    let go =
        t.go.watch_with(
            "/configmaps",
            &rv,
            5,
            5000,
            json!({"labelSelector": selector}),
        )
        .await
        .unwrap();
    let mut options = apistore::ListOptions {
        resource_version: rv.clone(),
        recursive: true,
        ..apistore::ListOptions::default()
    };
    options.predicate.label = apistore::LabelSelector::parse(selector).unwrap();
    let api = api_watch_with(&t.store, "configmaps", &options, 5, WAIT)
        .await
        .unwrap();
    let kinds: Vec<_> = go.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "DELETED", "ADDED", "DELETED"]);
    assert_eq!(event_summaries(&api), event_summaries(&go));

    // Exact key, not recursive: only that object's 6 changes, not its neighbour.
    let go =
        t.go.watch_with("/configmaps/a/s", &rv, 7, 1500, json!({"recursive": false}))
            .await
            .unwrap();
    let options = apistore::ListOptions {
        resource_version: rv.clone(),
        ..apistore::ListOptions::default()
    };
    let api = api_watch_with(
        &t.store,
        "configmaps/a/s",
        &options,
        7,
        Duration::from_millis(1500),
    )
    .await
    .unwrap();
    assert_eq!(go.len(), 6, "{go:?}");
    assert_eq!(event_summaries(&api), event_summaries(&go));
}

/// An object created with a TTL by one side expires, and the other side's watch sees
/// the DELETED event.
async fn ttl_expiry_is_watched_across_sides(media_type: &str) {
    let mut t = Interop::start(&configmaps(media_type)).await;
    let by_go =
        t.go.create_with_ttl("/configmaps/a/ttl-go", &configmap("a", "ttl-go"), 1)
            .await
            .unwrap();
    let by_api = t
        .store
        .create(
            "configmaps/a/ttl-api",
            dynamic(&configmap("a", "ttl-api")),
            1,
        )
        .await
        .unwrap();
    // Exact-key watches (not recursive), from each creation's resourceVersion.
    let options = apistore::ListOptions {
        resource_version: rv_of(&by_go),
        ..apistore::ListOptions::default()
    };
    let api = api_watch_with(
        &t.store,
        "configmaps/a/ttl-go",
        &options,
        1,
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    let go =
        t.go.watch_with(
            "/configmaps/a/ttl-api",
            &by_api.metadata.resource_version,
            1,
            10_000,
            json!({"recursive": false}),
        )
        .await
        .unwrap();
    assert_eq!(api.len(), 1, "apistore saw no expiry of kube's object");
    assert_eq!(go.len(), 1, "kube saw no expiry of apistore's object");
    assert_eq!(
        (api[0].0.as_str(), go[0].0.as_str()),
        ("DELETED", "DELETED")
    );
    assert_eq!(api[0].1["metadata"]["name"], "ttl-go");
    assert_eq!(go[0].1["metadata"]["name"], "ttl-api");
}

apistore_interop::per_media_type!(
    apistore_watches_from_kubes_revisions,
    kube_watches_from_apistores_revisions,
    watch_from_zero_starts_with_the_current_state,
    watch_from_a_compacted_revision_ends_with_the_same_410,
    selector_and_single_key_watches,
    ttl_expiry_is_watched_across_sides
);
