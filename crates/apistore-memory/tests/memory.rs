//! What the in-memory store offers beyond the shared conformance suite: TTLs on a manual
//! clock, the bounded history's 410s, progress requests, encryption at rest with stale
//! rewrites, one revision across stores, selectors judged on the stored bytes. (The
//! tokens' bytes are a suite case.)

// A failed step must fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use apistore_memory::{KvConfig, ManualClock, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{
    DynamicObject, GetOptions, JsonCodec, ListOptions, ObjectList, ResourceVersionMatch,
    SelectByView, SelectionPredicate, Storage, StoredSelector, Update, UpdateOptions, WatchEvent,
    WatchStream,
};
use apistore_value::EncryptionConfig;
use bytes::Bytes;
use futures::StreamExt;

const TIMEOUT: Duration = Duration::from_secs(10);

fn store(kv: &MemoryKv, resource: &str) -> MemoryStore<DynamicObject> {
    MemoryStore::new(kv.clone(), MemoryStoreConfig::for_resource(resource))
}

fn pod(name: &str) -> DynamicObject {
    DynamicObject::new("v1", "Pod", name).within("ns")
}

fn from(rv: &str) -> ListOptions {
    ListOptions {
        resource_version: rv.to_owned(),
        recursive: true,
        ..ListOptions::default()
    }
}

async fn next(w: &mut WatchStream<DynamicObject>) -> WatchEvent<DynamicObject> {
    tokio::time::timeout(TIMEOUT, w.next())
        .await
        .expect("an event in time")
        .expect("the watch goes on")
}

async fn quiet(w: &mut WatchStream<DynamicObject>) {
    if let Ok(event) = tokio::time::timeout(Duration::from_millis(100), w.next()).await {
        panic!("unexpected {event:?}");
    }
}

#[tokio::test]
async fn ttl_runs_out_on_the_manual_clock_and_watches_see_the_delete() {
    let clock = ManualClock::new();
    let kv = MemoryKv::with_clock(KvConfig::default(), Arc::new(clock.clone()));
    let pods = store(&kv, "pods");
    let created = pods.create("pods/ns/p", pod("p"), 10).await.unwrap();
    let mut w = pods
        .watch("pods/ns", &from(&created.metadata.resource_version))
        .await
        .unwrap();

    clock.advance(Duration::from_secs(9));
    assert!(!kv.expire_leases(), "expired a second early");
    quiet(&mut w).await;
    clock.advance(Duration::from_secs(1));
    assert!(kv.expire_leases());
    match next(&mut w).await {
        WatchEvent::Deleted(last) => {
            assert_eq!(last.metadata.name, "p");
            assert_eq!(last.metadata.resource_version, kv.revision().to_string());
        }
        other => panic!("expected Deleted, got {other:?}"),
    }
    let err = pods
        .get("pods/ns/p", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err}");
}

#[tokio::test]
async fn the_background_task_expires_ttls_without_being_asked() {
    let clock = ManualClock::new();
    let config = KvConfig {
        lease_check_interval: Duration::from_millis(5),
        ..KvConfig::default()
    };
    let kv = MemoryKv::with_clock(config, Arc::new(clock.clone()));
    let pods = store(&kv, "pods");
    pods.create("pods/ns/p", pod("p"), 1).await.unwrap();
    clock.advance(Duration::from_secs(1));
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while kv.raw_get("/registry/pods/ns/p").is_some() {
        assert!(tokio::time::Instant::now() < deadline, "never expired");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_write_without_a_ttl_drops_the_ttl_as_in_etcd() {
    let clock = ManualClock::new();
    let kv = MemoryKv::with_clock(KvConfig::default(), Arc::new(clock.clone()));
    let pods = store(&kv, "pods");
    pods.create("pods/ns/p", pod("p"), 5).await.unwrap();
    pods.guaranteed_update("pods/ns/p", UpdateOptions::default(), |mut p, _| {
        p.metadata.labels.insert("a".into(), "b".into());
        Ok(Update::new(p))
    })
    .await
    .unwrap();
    clock.advance(Duration::from_secs(60));
    assert!(!kv.expire_leases());
    assert!(pods.get("pods/ns/p", &GetOptions::default()).await.is_ok());
}

#[tokio::test]
async fn the_bounded_history_expires_old_lists_and_watches_with_kubes_messages() {
    let kv = MemoryKv::new(KvConfig {
        history_limit: 5,
        ..KvConfig::default()
    });
    let pods = store(&kv, "pods");
    for i in 0..10 {
        pods.create(&format!("pods/ns/p{i}"), pod(&format!("p{i}")), 0)
            .await
            .unwrap();
    }
    assert_eq!(kv.revision(), 11);
    assert_eq!(kv.compacted_revision(), 6);
    let mut exact = from("2");
    exact.resource_version_match = ResourceVersionMatch::Exact;
    let err = pods.list("pods", &exact).await.unwrap_err();
    assert!(err.is_expired(), "{err}");
    assert_eq!(
        err.status().message,
        "The resourceVersion for the provided list is too old."
    );
    let mut w = pods.watch("pods", &from("2")).await.unwrap();
    match next(&mut w).await {
        WatchEvent::Error(status) => {
            assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
            assert_eq!(
                status.message,
                "The resourceVersion for the provided watch is too old."
            );
        }
        other => panic!("expected a 410, got {other:?}"),
    }
    // Revision 6 itself is still readable, as after an etcd compaction at 6.
    let mut at_six = from("6");
    at_six.resource_version_match = ResourceVersionMatch::Exact;
    assert_eq!(pods.list("pods", &at_six).await.unwrap().items.len(), 5);
}

#[tokio::test]
async fn progress_requests_bookmark_every_watch_that_has_caught_up() {
    let kv = MemoryKv::default();
    let pods = store(&kv, "pods");
    let created = pods.create("pods/ns/p", pod("p"), 0).await.unwrap();
    let rv = created.metadata.resource_version.clone();
    let mut synced = pods.watch("pods/ns", &from(&rv)).await.unwrap();
    let mut future = pods.watch("pods/ns", &from("1000")).await.unwrap();
    kv.raw_put("/elsewhere", "x");
    pods.request_watch_progress().await.unwrap();
    match next(&mut synced).await {
        WatchEvent::Bookmark(bookmark) => {
            assert_eq!(
                bookmark.metadata.resource_version,
                kv.revision().to_string()
            );
            assert_eq!(
                bookmark,
                DynamicObject {
                    metadata: bookmark.metadata.clone(),
                    ..DynamicObject::default()
                }
            );
        }
        other => panic!("expected a Bookmark, got {other:?}"),
    }
    // A watch waiting for a revision not reached yet stays quiet, as etcd 3.5.23+'s.
    quiet(&mut future).await;
    assert_eq!(pods.active_watches(), 2);
    drop((synced, future));
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    while pods.active_watches() != 0 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn encryption_at_rest_binds_values_to_their_keys_and_rewrites_stale_ones() {
    let config = EncryptionConfig::parse(
        r#"
apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: c25vcmxheF9hd2Vzb21lcw==
      - identity: {}
"#,
    )
    .unwrap();
    let kv = MemoryKv::default();
    let secrets = store(&kv, "secrets").with_transformer(config.transformer_for("secrets"));
    let secret = DynamicObject::new("v1", "Secret", "s").within("ns");
    secrets.create("secrets/ns/s", secret, 0).await.unwrap();
    let stored = kv.raw_get("/registry/secrets/ns/s").unwrap();
    assert!(stored.starts_with(b"k8s:enc:aesgcm:v1:key1:"));

    // The same ciphertext under another key does not decrypt: the key is the AAD.
    kv.raw_put("/registry/secrets/ns/moved", stored.clone());
    let err = secrets
        .get("secrets/ns/moved", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_internal(), "{err}");
    assert!(
        err.to_string().contains("/registry/secrets/ns/moved"),
        "{err}"
    );

    // A plain value reads (through identity) as stale: a no-op update rewrites it.
    let plain =
        serde_json::to_vec(&DynamicObject::new("v1", "Secret", "old").within("ns")).unwrap();
    kv.raw_put("/registry/secrets/ns/old", plain);
    let before = kv.revision();
    secrets
        .guaranteed_update("secrets/ns/old", UpdateOptions::default(), |s, _| {
            Ok(Update::new(s))
        })
        .await
        .unwrap();
    assert_eq!(
        kv.revision(),
        before + 1,
        "the stale value was not rewritten"
    );
    let rewritten = kv.raw_get("/registry/secrets/ns/old").unwrap();
    assert!(rewritten.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
    // Now fresh: another no-op update writes nothing.
    secrets
        .guaranteed_update("secrets/ns/old", UpdateOptions::default(), |s, _| {
            Ok(Update::new(s))
        })
        .await
        .unwrap();
    assert_eq!(kv.revision(), before + 1);
}

#[tokio::test]
async fn stores_of_one_key_space_share_its_revision() {
    let kv = MemoryKv::default();
    let pods = store(&kv, "pods");
    let configmaps = store(&kv, "configmaps");
    let p = pods.create("pods/ns/p", pod("p"), 0).await.unwrap();
    let cm = DynamicObject::new("v1", "ConfigMap", "c").within("ns");
    let cm = configmaps.create("configmaps/ns/c", cm, 0).await.unwrap();
    assert_eq!(p.metadata.resource_version, "2");
    assert_eq!(cm.metadata.resource_version, "3");
    let list = pods.list("pods", &from("")).await.unwrap();
    assert_eq!(list.metadata.resource_version, "3");
}

/// A [`SelectByView`] that counts the values it is asked about.
struct CountingSelector {
    view: SelectByView<DynamicObject>,
    asked: AtomicUsize,
}

impl StoredSelector for CountingSelector {
    fn matches_stored(&self, data: &Bytes, predicate: &SelectionPredicate) -> Option<bool> {
        self.asked.fetch_add(1, Ordering::Relaxed);
        self.view.matches_stored(data, predicate)
    }
}

#[tokio::test]
async fn a_stored_selector_lists_what_decoding_every_value_lists() {
    let kv = MemoryKv::new(KvConfig::default());
    let plain = store(&kv, "pods");
    for i in 0..400 {
        let mut object = pod(&format!("p-{i:03}"));
        let tier = if i % 9 == 0 { "db" } else { "web" };
        object
            .metadata
            .labels
            .insert("tier".to_owned(), tier.to_owned());
        plain
            .create(&format!("pods/ns/p-{i:03}"), object, 0)
            .await
            .unwrap();
    }
    let selector = Arc::new(CountingSelector {
        view: SelectByView::new(Arc::new(JsonCodec::<DynamicObject>::new())),
        asked: AtomicUsize::new(0),
    });
    let selected = store(&kv, "pods").with_stored_selector(Arc::clone(&selector) as _);
    let summary = |list: ObjectList<DynamicObject>| {
        let names: Vec<String> = list.items.iter().map(|o| o.metadata.name.clone()).collect();
        (names, list.metadata.continue_token)
    };
    for (labels, limit) in [("tier=db", 0), ("tier=db", 10), ("tier!=db", 300), ("", 50)] {
        let options = from("").labels(labels).unwrap().limit(limit);
        let every = summary(plain.list("pods/ns", &options).await.unwrap());
        assert!(!every.0.is_empty());
        assert_eq!(
            summary(selected.list("pods/ns", &options).await.unwrap()),
            every,
            "{labels} {limit}"
        );
    }
    // Asked about every value the selecting lists read (none for the list without a
    // selector): 400, at least 10 db Pods' worth, and 300 and more.
    assert!(selector.asked.load(Ordering::Relaxed) >= 400 + 90 + 300);
}
