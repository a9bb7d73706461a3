//! The runtime watcher and reflector against a real etcd: list in pages then watch,
//! and a re-list when the watch comes back to a compacted revision.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apistore::runtime::watcher::{Config, Event};
use apistore::runtime::{reflector, watcher};
use apistore::{
    ApiStore, DeleteOptions, DynamicObject, Etcd3Store, GetOptions, ListOptions, ObjectList,
    ResponseMeta, Result, Storage, Update, UpdateOptions, Versioner, WatchStream,
};
use apistore_testing::etcd::{EtcdOptions, EtcdServer, shared_endpoint, unique_prefix};
use futures::{Stream, StreamExt};

fn cm(name: &str) -> DynamicObject {
    DynamicObject::new("v1", "ConfigMap", name)
        .within("default")
        .with("data", serde_json::json!({"k": name}))
}

async fn api(prefix: &str) -> ApiStore {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
    api_at(&endpoint, prefix).await
}

async fn api_at(endpoint: &str, prefix: &str) -> ApiStore {
    ApiStore::builder()
        .endpoints(endpoint.split(','))
        .prefix(prefix)
        .build()
        .await
        .unwrap()
}

async fn next<S>(events: &mut S) -> Result<Event<DynamicObject>>
where
    S: Stream<Item = Result<Event<DynamicObject>>> + Unpin,
{
    tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("no event within 10 s")
        .expect("the watcher never ends")
}

/// A compact description of an event: `Init`, `InitApply a`, `Apply b`...
fn describe(event: &Event<DynamicObject>) -> String {
    match event {
        Event::Init => "Init".to_owned(),
        Event::InitDone => "InitDone".to_owned(),
        Event::InitApply(o) => format!("InitApply {}", o.metadata.name),
        Event::Apply(o) => format!("Apply {}", o.metadata.name),
        Event::Delete(o) => format!("Delete {}", o.metadata.name),
    }
}

#[tokio::test]
async fn lists_in_pages_then_watches_every_change() {
    let prefix = unique_prefix("runtime-watcher");
    let api = api(&prefix).await;
    let store = api.dynamic_store("configmaps").unwrap();
    for name in ["a", "b", "c"] {
        store
            .create(&format!("configmaps/default/{name}"), cm(name), 0)
            .await
            .unwrap();
    }
    let (cache, writer) = reflector::store();
    let events = watcher::watcher(
        store.clone(),
        "configmaps/default",
        Config::default().page_size(2),
    );
    let mut events = Box::pin(reflector::reflector(writer, events));
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(describe(&next(&mut events).await.unwrap()));
    }
    assert_eq!(
        seen,
        [
            "Init",
            "InitApply a",
            "InitApply b",
            "InitApply c",
            "InitDone"
        ]
    );
    assert_eq!(cache.len(), 3);

    store
        .create("configmaps/default/d", cm("d"), 0)
        .await
        .unwrap();
    store
        .guaranteed_update(
            "configmaps/default/a",
            UpdateOptions::default(),
            |mut o, _| {
                o.data
                    .insert("data".into(), serde_json::json!({"k": "changed"}));
                Ok(o.into())
            },
        )
        .await
        .unwrap();
    store
        .delete("configmaps/default/b", DeleteOptions::default())
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(describe(&next(&mut events).await.unwrap()));
    }
    assert_eq!(seen, ["Apply d", "Apply a", "Delete b"]);
    let names: std::collections::BTreeSet<String> = cache
        .state()
        .iter()
        .map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["a", "c", "d"].map(String::from).into());
    assert_eq!(
        cache.get("default", "a").unwrap().data["data"]["k"],
        "changed"
    );
}

#[tokio::test]
async fn a_bad_selector_ends_the_stream_with_its_error() {
    let prefix = unique_prefix("runtime-watcher-selector");
    let api = api(&prefix).await;
    let events = watcher::watcher(
        api.dynamic_store("configmaps").unwrap(),
        "configmaps",
        Config::default().labels("a in (b"),
    );
    let mut events = Box::pin(events);
    let err = next(&mut events).await.unwrap_err();
    assert!(err.is_bad_request(), "{err}");
    assert!(events.next().await.is_none());
}

/// A store whose watch streams end after one event while `cut` is set, as a broken
/// connection would end them.
#[derive(Clone)]
struct Cutting {
    inner: Etcd3Store<DynamicObject>,
    cut: Arc<AtomicBool>,
}

impl Storage for Cutting {
    type Object = DynamicObject;
    fn versioner(&self) -> &dyn Versioner {
        self.inner.versioner()
    }
    async fn create(&self, key: &str, object: DynamicObject, ttl: u64) -> Result<DynamicObject> {
        self.inner.create(key, object, ttl).await
    }
    async fn get(&self, key: &str, options: &GetOptions) -> Result<DynamicObject> {
        self.inner.get(key, options).await
    }
    async fn delete(
        &self,
        key: &str,
        options: DeleteOptions<DynamicObject>,
    ) -> Result<DynamicObject> {
        self.inner.delete(key, options).await
    }
    async fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<DynamicObject>,
        try_update: F,
    ) -> Result<DynamicObject>
    where
        F: FnMut(DynamicObject, &ResponseMeta) -> Result<Update<DynamicObject>> + Send,
    {
        self.inner.guaranteed_update(key, options, try_update).await
    }
    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<DynamicObject>> {
        self.inner.list(key, options).await
    }
    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<DynamicObject>> {
        let stream = self.inner.watch(key, options).await?;
        if self.cut.load(Ordering::SeqCst) {
            Ok(Box::pin(stream.take(1)))
        } else {
            Ok(stream)
        }
    }
    async fn count(&self, key: &str) -> Result<i64> {
        self.inner.count(key).await
    }
    async fn readiness_check(&self) -> Result<()> {
        self.inner.readiness_check().await
    }
    async fn request_watch_progress(&self) -> Result<()> {
        self.inner.request_watch_progress().await
    }
    async fn get_current_resource_version(&self) -> Result<u64> {
        self.inner.get_current_resource_version().await
    }
    async fn stats(&self) -> Result<apistore::Stats> {
        self.inner.stats().await
    }
    fn enable_resource_size_estimation(&self, keys: apistore::KeysFn) -> Result<()> {
        self.inner.enable_resource_size_estimation(keys)
    }
    fn compact_revision(&self) -> i64 {
        self.inner.compact_revision()
    }
}

#[tokio::test]
async fn a_watch_resumed_at_a_compacted_revision_relists_and_drops_what_is_gone() {
    // An etcd of its own: compacting the shared one would expire the revisions the
    // other tests of this file are watching from, as they run at the same time.
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let endpoint = etcd.endpoint();
    let prefix = unique_prefix("runtime-watcher-relist");
    let api = api_at(&endpoint, &prefix).await;
    let store = api.dynamic_store("configmaps").unwrap();
    store
        .create("configmaps/default/a", cm("a"), 0)
        .await
        .unwrap();
    let cutting = Cutting {
        inner: store.clone(),
        cut: Arc::new(AtomicBool::new(true)),
    };
    let (cache, writer) = reflector::store();
    let config = Config::default().backoff(Duration::from_millis(10), Duration::from_millis(50));
    let mut events = Box::pin(reflector::reflector(
        writer,
        watcher::watcher(cutting.clone(), "configmaps/default", config),
    ));
    for want in ["Init", "InitApply a", "InitDone"] {
        assert_eq!(describe(&next(&mut events).await.unwrap()), want);
    }
    // One change reaches the watcher, then its watch ends.
    store
        .create("configmaps/default/b", cm("b"), 0)
        .await
        .unwrap();
    assert_eq!(describe(&next(&mut events).await.unwrap()), "Apply b");
    // While it is away: more changes, and the history it would resume from is compacted.
    cutting.cut.store(false, Ordering::SeqCst);
    store
        .create("configmaps/default/c", cm("c"), 0)
        .await
        .unwrap();
    store
        .delete("configmaps/default/a", DeleteOptions::default())
        .await
        .unwrap();
    let last = store
        .create("configmaps/default/d", cm("d"), 0)
        .await
        .unwrap();
    let revision: i64 = last.metadata.resource_version.parse().unwrap();
    let mut client = etcd_client::Client::connect([endpoint.as_str()], None)
        .await
        .unwrap();
    client.compact(revision, None).await.unwrap();

    let err = next(&mut events).await.unwrap_err();
    assert!(err.is_expired(), "{err}");
    let mut seen = Vec::new();
    for _ in 0..5 {
        seen.push(describe(&next(&mut events).await.unwrap()));
    }
    assert_eq!(
        seen,
        [
            "Init",
            "InitApply b",
            "InitApply c",
            "InitApply d",
            "InitDone"
        ]
    );
    assert!(
        cache.get("default", "a").is_none(),
        "a was deleted while the watch was away"
    );
    assert_eq!(cache.len(), 3);
    // And it watches on from the re-list.
    store
        .create("configmaps/default/e", cm("e"), 0)
        .await
        .unwrap();
    assert_eq!(describe(&next(&mut events).await.unwrap()), "Apply e");
}
