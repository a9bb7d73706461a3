//! The watch cache over an `Etcd3Store<LazyObject>` and the real test etcd (issue 28):
//! lists from the cache and watch events hand out objects whose bodies were never
//! decoded, and a body decodes on first use to what was stored.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../apistore-etcd3/tests/common/lazy_store.rs"]
mod lazy_store;

use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig};
use apistore_protobuf::LazyObject;
use apistore_storage::{
    ApiObject, DynamicObject, ListOptions, ResourceVersionMatch, Storage, UpdateOptions, WatchEvent,
};
use futures::StreamExt as _;
use lazy_store::lazy_store;
use serde_json::json;

fn pod(name: &str, tier: &str) -> LazyObject {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "labels": {"tier": tier}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "api", "image": "api:v1"}]},
        "status": {"phase": "Running"}
    }))
    .unwrap();
    LazyObject::from(object)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_holds_and_hands_out_lazy_objects_with_bodies_undecoded() {
    let (store, _) = lazy_store("cacher-lazy-objects").await;
    let mut created = Vec::new();
    for (name, tier) in [("a", "web"), ("b", "db")] {
        let object = store
            .create(&format!("/pods/ns/{name}"), pod(name, tier), 0)
            .await
            .unwrap();
        created.push(object);
    }
    let cacher = Cacher::new(store.clone(), CacherConfig::new("/pods", "pods"));
    cacher.wait_until_ready().await.unwrap();

    let from_cache =
        |rv: &str| ListOptions::prefix().at(rv.to_owned(), ResourceVersionMatch::NotOlderThan);
    let list = cacher.list("/pods/ns", &from_cache("0")).await.unwrap();
    let names: Vec<&str> = list.items.iter().map(ApiObject::name).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(list.items.iter().all(|o| !o.is_body_decoded()));
    let web = cacher
        .list("/pods/ns", &from_cache("0").labels("tier=web").unwrap())
        .await
        .unwrap();
    assert_eq!(web.items.len(), 1);
    assert_eq!(web.items[0].name(), "a");

    let options = ListOptions::prefix().at(
        list.metadata.resource_version.clone(),
        ResourceVersionMatch::Unset,
    );
    let mut watch = cacher.watch("/pods/ns", &options).await.unwrap();
    let updated = store
        .guaranteed_update("/pods/ns/a", UpdateOptions::default(), |mut object, _| {
            object
                .metadata_mut()
                .labels
                .insert("tier".to_owned(), "api".to_owned());
            Ok(object.into())
        })
        .await
        .unwrap();
    let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("an event within 10 s")
        .expect("the watch goes on");
    let WatchEvent::Modified(object) = event else {
        panic!("expected MODIFIED, got {event:?}");
    };
    assert_eq!(object.resource_version(), updated.resource_version());
    assert_eq!(object.labels()["tier"], "api");
    assert!(!object.is_body_decoded());
    // The body as stored (a protobuf round trip fills in what Go writes for absent
    // fields, so not the object as created).
    assert_eq!(object.body().unwrap(), created[0].body().unwrap());
    assert_eq!(object.body().unwrap()["spec"]["nodeName"], "node-1");
}
