//! Objects shared behind `Arc`: a cache of `Shared<Pod>` hands every list and every
//! watcher the one decoded object (as kube's cacher hands out pointers), and a write
//! through one holder never shows through another.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use apistore_cacher::{Cacher, CacherConfig};
use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_storage::{ApiObject, ListOptions, ResourceVersionMatch, Shared, Storage, WatchEvent};
use apistore_testing::suite::Pod;
use futures::StreamExt as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_and_watchers_share_one_object() {
    let store: MemoryStore<Shared<Pod>> = MemoryStore::new(
        MemoryKv::new(KvConfig::default()),
        MemoryStoreConfig::for_resource("pods"),
    );
    let pod = Pod::new("ns", "p1");
    let created = store
        .create(&pod.key(), Shared::new(pod.clone()), 0)
        .await
        .unwrap();
    let config = CacherConfig::new("/pods", "pods").with_key_fn(|pod: &Shared<Pod>| pod.key());
    let cacher = Cacher::new(store.clone(), config);
    cacher.wait_until_ready().await.unwrap();

    let from_cache = ListOptions::prefix().at(
        created.resource_version(),
        ResourceVersionMatch::NotOlderThan,
    );
    let first = cacher.list("/pods/ns", &from_cache).await.unwrap();
    let second = cacher.list("/pods/ns", &from_cache).await.unwrap();
    assert_eq!(first.items.len(), 1);
    assert!(
        Shared::ptr_eq(&first.items[0], &second.items[0]),
        "two lists from the cache return the same object, not copies"
    );
    assert_eq!(*first.items[0], *created);

    let mut watches = Vec::new();
    for _ in 0..2 {
        let options = ListOptions::prefix().at("0", ResourceVersionMatch::Unset);
        watches.push(cacher.watch("/pods/ns", &options).await.unwrap());
    }
    let mut added = Vec::new();
    for watch in &mut watches {
        let event = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .expect("an event within 10 s")
            .expect("the watch goes on");
        let WatchEvent::Added(object) = event else {
            panic!("expected ADDED, got {event:?}");
        };
        added.push(object);
    }
    assert!(Shared::ptr_eq(&added[0], &added[1]));
    assert!(Shared::ptr_eq(&added[0], &first.items[0]));

    // Copy on write: changing one holder's object leaves every other holder's alone.
    let mut mine = first.items[0].clone();
    mine.set_resource_version("12345".to_owned());
    assert_eq!(mine.resource_version(), "12345");
    assert_eq!(
        second.items[0].resource_version(),
        created.resource_version()
    );
    assert_eq!(added[1].resource_version(), created.resource_version());
    let again = cacher.list("/pods/ns", &from_cache).await.unwrap();
    assert_eq!(
        again.items[0].resource_version(),
        created.resource_version()
    );
}
