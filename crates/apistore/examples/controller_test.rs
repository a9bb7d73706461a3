//! A controller unit-tested on the in-memory store: no etcd, no waiting on real time.
//!
//! The controller is written against the [`Storage`] trait, so the same code runs on
//! the etcd3 store in production (`ApiStore::builder()...build().await?.dynamic_store(..)`)
//! and on the in-memory store here (`ApiStore::in_memory().dynamic_store(..)`), with the
//! same key layout, encoding and resourceVersion rules. The test drives it through
//! creates, an update, a no-op and a TTL that runs out on a [`ManualClock`].
//!
//! Run with `cargo run -p apistore --example controller_test` (`cargo xtask test` runs
//! it too).

use std::sync::Arc;
use std::time::Duration;

use apistore::{
    ApiStore, DynamicObject, GetOptions, KvConfig, ListOptions, ManualClock, MemoryApiStore,
    MemoryKv, Storage, StorageError, Update, UpdateOptions, WatchEvent,
};
use futures::StreamExt;

/// The annotation the controller keeps: a checksum of the ConfigMap's `data`.
const CHECKSUM: &str = "example.com/data-checksum";

/// The controller under test: every ConfigMap of a namespace gets [`CHECKSUM`] set to
/// the checksum of its data, rewritten when the data changes.
struct ChecksumController<S> {
    store: S,
    /// The namespace's directory in the store (`configmaps/<namespace>`).
    directory: String,
}

impl<S: Storage<Object = DynamicObject>> ChecksumController<S> {
    /// Brings one ConfigMap up to date. A ConfigMap that already carries the right
    /// checksum is left alone: guaranteed update writes nothing when nothing changes.
    async fn reconcile(&self, key: &str) -> Result<(), StorageError> {
        let result = self
            .store
            .guaranteed_update(key, UpdateOptions::default(), |mut cm, _| {
                let sum = checksum(&cm);
                cm.metadata.annotations.insert(CHECKSUM.to_owned(), sum);
                Ok(Update::new(cm))
            })
            .await;
        match result {
            // Deleted meanwhile: nothing to do.
            Err(err) if err.is_not_found() => Ok(()),
            other => other.map(drop),
        }
    }

    /// Lists the namespace, reconciles what is there, then reconciles every change the
    /// watch from the list's resourceVersion reports, until the watch ends.
    async fn run(self) -> Result<(), StorageError> {
        let everything = ListOptions {
            recursive: true,
            ..ListOptions::default()
        };
        let list = self.store.list(&self.directory, &everything).await?;
        for cm in &list.items {
            self.reconcile(&self.key_of(cm)).await?;
        }
        let from_list = ListOptions {
            resource_version: list.metadata.resource_version,
            ..everything
        };
        let mut events = self.store.watch(&self.directory, &from_list).await?;
        while let Some(event) = events.next().await {
            match event {
                WatchEvent::Added(cm) | WatchEvent::Modified(cm) => {
                    self.reconcile(&self.key_of(&cm)).await?;
                }
                WatchEvent::Deleted(_) | WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(status) => {
                    return Err(StorageError::bad_request(&self.directory, status.message));
                }
            }
        }
        Ok(())
    }

    fn key_of(&self, cm: &DynamicObject) -> String {
        format!("{}/{}", self.directory, cm.metadata.name)
    }
}

/// FNV-1a of the ConfigMap's `data` as JSON: stable, and good enough for an example.
fn checksum(cm: &DynamicObject) -> String {
    let data = cm
        .data
        .get("data")
        .map(ToString::to_string)
        .unwrap_or_default();
    let hash = data.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

fn config_map(name: &str, value: &str) -> DynamicObject {
    DynamicObject::new("v1", "ConfigMap", name)
        .within("default")
        .with("data", serde_json::json!({ "key": value }))
}

/// Waits (on the real clock, briefly: the in-memory store answers at once) until the
/// object under `key` satisfies `done`.
async fn eventually<S: Storage<Object = DynamicObject>>(
    store: &S,
    key: &str,
    what: &str,
    done: impl Fn(Option<&DynamicObject>) -> bool,
) -> Result<Option<DynamicObject>, Box<dyn std::error::Error>> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let current = match store.get(key, &GetOptions::default()).await {
            Ok(cm) => Some(cm),
            Err(err) if err.is_not_found() => None,
            Err(err) => return Err(err.into()),
        };
        if done(current.as_ref()) {
            return Ok(current);
        }
        if tokio::time::Instant::now() > deadline {
            return Err(format!("{what}: not within 10 s, last seen {current:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn has_right_checksum(cm: Option<&DynamicObject>) -> bool {
    cm.is_some_and(|cm| cm.metadata.annotations.get(CHECKSUM) == Some(&checksum(cm)))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The facade without etcd, on a clock the test moves.
    let clock = ManualClock::new();
    let api: MemoryApiStore = MemoryApiStore::new(MemoryKv::with_clock(
        KvConfig::default(),
        Arc::new(clock.clone()),
    ));
    // `ApiStore::in_memory()` is the same on the system clock.
    let _same_on_the_system_clock: MemoryApiStore = ApiStore::in_memory();
    let configmaps = api.dynamic_store("configmaps")?;
    let layout = api.resource_layout("configmaps");
    let key = |name: &str| layout.key("default", name);

    // Two ConfigMaps before the controller starts, one after.
    configmaps
        .create(&key("a"), config_map("a", "1"), 0)
        .await?;
    configmaps
        .create(&key("b"), config_map("b", "2"), 0)
        .await?;
    let controller = ChecksumController {
        store: configmaps.clone(),
        directory: "configmaps/default".to_owned(),
    };
    let running = tokio::spawn(controller.run());
    configmaps
        .create(&key("c"), config_map("c", "3"), 0)
        .await?;
    for name in ["a", "b", "c"] {
        eventually(&configmaps, &key(name), name, has_right_checksum).await?;
    }
    println!("reconciled a, b and c");

    // Changed data: a new checksum.
    let a = configmaps.get(&key("a"), &GetOptions::default()).await?;
    let old = a.metadata.annotations[CHECKSUM].clone();
    configmaps
        .guaranteed_update(&key("a"), UpdateOptions::default(), |mut cm, _| {
            cm.data
                .insert("data".into(), serde_json::json!({ "key": "changed" }));
            Ok(Update::new(cm))
        })
        .await?;
    let a = eventually(&configmaps, &key("a"), "a after its update", |cm| {
        has_right_checksum(cm) && cm.is_some_and(|cm| cm.metadata.annotations[CHECKSUM] != old)
    })
    .await?
    .ok_or("a vanished")?;
    println!(
        "a re-annotated at resourceVersion {}",
        a.metadata.resource_version
    );

    // The controller's own write brings it a Modified event; reconciling it writes
    // nothing, so the resourceVersion stays and the key space's revision does not move.
    let revision = api.kv().revision();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(api.kv().revision(), revision, "a no-op reconcile wrote");

    // A ConfigMap with a TTL, created already up to date (a write without a TTL would
    // drop it, in etcd as here): the controller leaves it alone, and it is gone once the
    // clock passes its TTL, without the test waiting a minute.
    let mut temp = config_map("temp", "t");
    let sum = checksum(&temp);
    temp.metadata.annotations.insert(CHECKSUM.to_owned(), sum);
    configmaps.create(&key("temp"), temp, 60).await?;
    clock.advance(Duration::from_secs(59));
    assert!(!api.kv().expire_leases(), "expired before its TTL");
    eventually(&configmaps, &key("temp"), "temp", has_right_checksum).await?;
    clock.advance(Duration::from_secs(2));
    api.kv().expire_leases();
    eventually(&configmaps, &key("temp"), "temp expired", |cm| cm.is_none()).await?;
    println!("temp expired after its TTL on the manual clock");

    running.abort();
    println!("controller test passed");
    Ok(())
}
