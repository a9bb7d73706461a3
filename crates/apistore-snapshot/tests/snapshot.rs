//! Snapshots saved from a real etcd, read back object by object and compared with
//! what etcd answered (`get --rev`) before the save: every key at every revision from
//! the compaction to the last, deleted keys absent, history up to the compaction,
//! lists, counts, the watch replay; the member's data directory read the same way.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use apistore_snapshot::{HistoryEvent, Snapshot, SnapshotStore, SnapshotStoreConfig};
use apistore_storage::{
    DeleteOptions, DynamicObject, GetOptions, ListOptions, ResourceVersionMatch, Storage,
    WatchEvent,
};
use futures::StreamExt as _;

use common::{PREFIX, fixture, layers};

fn store(snapshot: &Arc<Snapshot>, resource: &str) -> SnapshotStore<DynamicObject> {
    let layers_codec = match resource {
        "pods" => Arc::new(apistore_protobuf::StorageCodec::<DynamicObject>::new(
            apistore_protobuf::MediaType::Protobuf,
        )) as Arc<dyn apistore_storage::Codec<DynamicObject>>,
        _ => Arc::new(apistore_storage::JsonCodec::<DynamicObject>::new()),
    };
    let transformer: Arc<dyn apistore_value::Transformer> = match resource {
        "secrets" => common::secrets_transformer(),
        _ => Arc::new(apistore_value::IdentityTransformer),
    };
    SnapshotStore::with_parts(
        Arc::clone(snapshot),
        SnapshotStoreConfig::default(),
        layers_codec,
        transformer,
    )
}

/// `/registry/configmaps/default/cm1` → (`configmaps`, `configmaps/default/cm1`).
fn split(key: &str) -> (&str, &str) {
    let relative = key.strip_prefix(PREFIX).unwrap().trim_start_matches('/');
    (relative.split('/').next().unwrap(), relative)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_snapshot_reads_as_etcd_answered_revision_by_revision() {
    let mut fx = fixture().await;
    let snapshot = Arc::new(Snapshot::open(&fx.snapshot).unwrap());
    assert!(snapshot.bolt().has_hash(), "etcd appends a sha256");
    assert!(snapshot.bolt().verify_hash().unwrap());
    assert_eq!(snapshot.revision(), fx.current);
    assert_eq!(snapshot.compact_revision(), fx.compacted);

    // Every key at every revision from the compaction on: the raw key-value, and the
    // object decoded through the store as through the writer's layers.
    let mut compared = 0;
    for ((key, rev), seen) in &fx.seen {
        let kv = snapshot.get(key.as_bytes(), *rev).unwrap();
        let (resource, relative) = split(key);
        let store = store(&snapshot, resource);
        match (seen, kv) {
            (None, None) => {
                let err = store.get_at(relative, *rev).unwrap_err();
                assert!(err.is_not_found(), "{key}@{rev}: {err}");
            }
            (Some(seen), Some(kv)) => {
                assert_eq!(kv.value.as_ref(), seen.value.as_slice(), "{key}@{rev}");
                assert_eq!(
                    (kv.mod_revision, kv.create_revision, kv.version),
                    (seen.mod_revision, seen.create_revision, seen.version),
                    "{key}@{rev}"
                );
                let got = store.get_at(relative, *rev).unwrap();
                let want = layers(resource)
                    .decode_stored(key, seen.value.clone().into(), seen.mod_revision)
                    .unwrap();
                assert_eq!(got, want, "{key}@{rev}");
                assert_eq!(got.metadata.resource_version, seen.mod_revision.to_string());
                compared += 1;
            }
            (seen, kv) => panic!("{key}@{rev}: etcd had {seen:?}, the snapshot {kv:?}"),
        }
    }
    assert!(compared > 50, "{compared}");
    // Those gets looked back from the newest records (the file is smaller than the
    // look back); with the index built, each raw answer is the same.
    assert!(!snapshot.is_indexed());
    let (revisions, keys) = snapshot.counts().unwrap();
    assert!(snapshot.is_indexed() && revisions > keys && keys > 0);
    for ((key, rev), seen) in &fx.seen {
        let kv = snapshot.get(key.as_bytes(), *rev).unwrap();
        let ours = kv.map(|kv| (kv.value.to_vec(), kv.mod_revision, kv.version));
        let etcds = seen
            .as_ref()
            .map(|seen| (seen.value.clone(), seen.mod_revision, seen.version));
        assert_eq!(ours, etcds, "{key}@{rev}, indexed");
    }

    // Below the compaction: gone, as in etcd.
    let cms = store(&snapshot, "configmaps");
    let err = cms
        .get_at("configmaps/default/cm1", fx.compacted - 1)
        .unwrap_err();
    assert!(err.is_expired(), "{err}");
    let err = cms
        .get_at("configmaps/default/cm1", fx.current + 1)
        .unwrap_err();
    assert!(err.is_too_large_resource_version(), "{err}");

    // The latest state through the Storage contract.
    let secrets = store(&snapshot, "secrets");
    let s1 = secrets
        .get("secrets/default/s1", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(s1.data["data"]["password"], "c2VjcmV02");
    assert!(
        secrets
            .get("secrets/default/s2", &GetOptions::default())
            .await
            .unwrap_err()
            .is_not_found()
    );
    let pods = store(&snapshot, "pods");
    let p1 = pods
        .get("pods/default/p1", &GetOptions::default())
        .await
        .unwrap();
    assert_eq!(p1.data["spec"]["containers"][0]["image"], "nginx:1.2");
    assert_eq!(p1.kind, "Pod");
    let err = pods
        .get(
            "pods/default/p1",
            &GetOptions {
                resource_version: (fx.current + 5).to_string(),
                ..GetOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.is_too_large_resource_version(), "{err}");

    // Lists: the latest, paged with continue tokens, at an exact past revision, with a
    // label selector; counts.
    let live: Vec<String> = ["cm1", "cm2", "cm3", "cm5", "cm6"]
        .iter()
        .map(|n| n.to_string())
        .collect();
    let list = cms
        .list("configmaps", &ListOptions::prefix())
        .await
        .unwrap();
    let names: Vec<_> = list.items.iter().map(|o| o.metadata.name.clone()).collect();
    assert_eq!(names, live);
    assert_eq!(list.metadata.resource_version, fx.current.to_string());
    assert_eq!(cms.count("configmaps").await.unwrap(), 5);
    assert_eq!(pods.count("pods").await.unwrap(), 2);
    let mut paged = Vec::new();
    let mut options = ListOptions::prefix().limit(2);
    loop {
        let page = cms.list("configmaps", &options).await.unwrap();
        assert!(page.items.len() <= 2);
        paged.extend(page.items.into_iter().map(|o| o.metadata.name));
        if page.metadata.continue_token.is_empty() {
            break;
        }
        options = ListOptions::prefix()
            .limit(2)
            .continue_from(page.metadata.continue_token);
    }
    assert_eq!(paged, live);
    let at_compaction = cms
        .list(
            "configmaps",
            &ListOptions::prefix().at(fx.compacted.to_string(), ResourceVersionMatch::Exact),
        )
        .await
        .unwrap();
    let want: Vec<String> = fx
        .keys
        .iter()
        .filter(|k| k.contains("/configmaps/"))
        .filter(|k| fx.seen[&((*k).clone(), fx.compacted)].is_some())
        .map(|k| k.rsplit('/').next().unwrap().to_owned())
        .collect();
    let got: Vec<_> = at_compaction
        .items
        .iter()
        .map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(got, want);
    let err = cms
        .list(
            "configmaps",
            &ListOptions::prefix().at((fx.compacted - 1).to_string(), ResourceVersionMatch::Exact),
        )
        .await
        .unwrap_err();
    assert!(err.is_expired(), "{err}");
    let selected = cms
        .list(
            "configmaps",
            &ListOptions::prefix().labels("generation=2").unwrap(),
        )
        .await
        .unwrap();
    let names: Vec<_> = selected
        .items
        .iter()
        .map(|o| o.metadata.name.clone())
        .collect();
    assert_eq!(names, ["cm3", "cm5"]);

    // History: every revision from the compaction on, and the deletion in it.
    let history = cms.history("configmaps/default/cm2").unwrap();
    let events: Vec<_> = history.iter().map(|e| (e.event, e.revision)).collect();
    let mut want: Vec<(HistoryEvent, i64)> = Vec::new();
    for op in fx.ops.iter().filter(|op| op.key.ends_with("/cm2")) {
        let event = match op.kind {
            "ADDED" => HistoryEvent::Added,
            "MODIFIED" => HistoryEvent::Modified,
            _ => HistoryEvent::Deleted,
        };
        want.push((event, op.revision));
    }
    // The compaction keeps the last revision at or before it, and nothing older.
    let kept: Vec<_> = want
        .iter()
        .copied()
        .filter(|(_, rev)| *rev >= fx.compacted)
        .collect();
    let last_before = want.iter().copied().rfind(|(_, rev)| *rev < fx.compacted);
    let mut expected: Vec<_> = last_before.into_iter().collect();
    expected.extend(kept);
    assert_eq!(events, expected);
    let deleted = history
        .iter()
        .find(|e| e.event == HistoryEvent::Deleted)
        .unwrap();
    assert_eq!(
        deleted.object.as_ref().unwrap().metadata.resource_version,
        deleted.revision.to_string()
    );
    assert!(cms.history("configmaps/default/cm4").unwrap().is_empty());

    // The watch replays every change after a revision, then ends.
    let options = ListOptions::prefix().at(fx.compacted.to_string(), ResourceVersionMatch::Unset);
    let stream = cms.watch("configmaps", &options).await.unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    let got: Vec<_> = events
        .iter()
        .map(|e| {
            let o = e.object().unwrap();
            (
                e.type_name(),
                o.metadata.name.clone(),
                o.metadata.resource_version.clone(),
            )
        })
        .collect();
    let want: Vec<_> = fx
        .ops
        .iter()
        .filter(|op| op.key.contains("/configmaps/") && op.revision > fx.compacted)
        .map(|op| {
            let name = op.key.rsplit('/').next().unwrap().to_owned();
            (op.kind, name, op.revision.to_string())
        })
        .collect();
    assert_eq!(got, want);
    // From below the compaction: a 410 Error event.
    let options =
        ListOptions::prefix().at((fx.compacted - 2).to_string(), ResourceVersionMatch::Unset);
    let stream = cms.watch("configmaps", &options).await.unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    match events.as_slice() {
        [WatchEvent::Error(status)] => assert_eq!(status.code, 410),
        other => panic!("{other:?}"),
    }
    // From 0: the current state, then the end.
    let stream = cms
        .watch("configmaps", &ListOptions::prefix())
        .await
        .unwrap();
    let events: Vec<_> = tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .unwrap();
    assert_eq!(events.len(), 5);
    assert!(events.iter().all(|e| e.type_name() == "ADDED"));

    // Writes are refused.
    let err = cms
        .create("configmaps/default/new", DynamicObject::default(), 0)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("read-only: a snapshot"), "{err}");
    let err = cms
        .delete("configmaps/default/cm1", DeleteOptions::default())
        .await
        .unwrap_err();
    assert!(err.is_bad_request(), "{err}");

    // The member's data directory, once etcd has stopped, reads the same.
    fx.etcd.stop();
    let data_dir = Snapshot::open(fx.etcd.data_dir()).unwrap();
    assert!(!data_dir.bolt().has_hash());
    assert_eq!(data_dir.revision(), fx.current);
    assert_eq!(data_dir.compact_revision(), fx.compacted);
    for ((key, rev), seen) in &fx.seen {
        let kv = data_dir.get(key.as_bytes(), *rev).unwrap();
        assert_eq!(
            kv.map(|kv| kv.value.to_vec()),
            seen.as_ref().map(|s| s.value.clone()),
            "{key}@{rev}"
        );
    }

    // One pass in the file's order: every revision under a prefix, by revision, each
    // what a lookup of it reads; and a pass that stops when told.
    for prefix in [PREFIX.to_owned(), format!("{PREFIX}/configmaps/")] {
        let mut scanned = Vec::new();
        data_dir
            .scan_under(prefix.as_bytes(), |record| {
                scanned.push(record);
                Ok(true)
            })
            .unwrap();
        let mut want: Vec<_> = data_dir
            .keys_under(prefix.as_bytes())
            .unwrap()
            .flat_map(|(key, _)| data_dir.history(key).unwrap())
            .collect();
        want.sort_by_key(|record| record.revision);
        assert!(want.len() > 5, "{prefix}: {}", want.len());
        assert_eq!(scanned, want, "{prefix}");
    }
    let mut seen_records = 0;
    data_dir
        .scan_under(b"", |_| {
            seen_records += 1;
            Ok(seen_records < 3)
        })
        .unwrap();
    assert_eq!(seen_records, 3);
}
