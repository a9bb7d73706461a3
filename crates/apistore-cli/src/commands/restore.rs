//! `apistore restore KEY... --from-snapshot FILE`: objects read from a snapshot (at its
//! last revision or `--rv`) written into the live etcd of `--endpoints`.
//!
//! Every object is read and decoded from the file first, with the
//! `--encryption-config` (which must still hold the key it was stored under), so a
//! file that cannot be read fails before anything is written. Each is then written by
//! the resource's store as the cluster writes that resource today: encoded as kube
//! stores it, encrypted with the current write key, the etcd key as authenticated
//! data. A write is one etcd transaction, so an object is restored whole or not at all:
//! create-only (AlreadyExists is skipped, and said), or with `--overwrite` a guaranteed
//! update, compare-and-swap on the revision it read. The object keeps everything the
//! snapshot holds (uid, creationTimestamp, managedFields); its resourceVersion becomes
//! the revision of the write. An object with fields the chosen kube version's schema
//! does not know (a newer kube wrote it) is refused rather than restored without them.

use std::sync::{Arc, Mutex, PoisonError};

use apistore::{
    ApiStore, DynamicObject, PartialRead, Storage, StorageError, UnknownFieldsObserver,
    UpdateOptions,
};
use apistore_snapshot::SnapshotStore;
use serde::Serialize;

use super::connect::partial_read_message;
use super::offline::{checked, path_prefix};
use crate::args::{GlobalArgs, OutputFormat, RestoreArgs};
use crate::error::CliError;
use crate::offline::Offline;
use crate::output::{print, write_stdout};

/// What happened to each key.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    dry_run: bool,
    /// The snapshot revision read.
    revision: i64,
    restored: Vec<String>,
    skipped: Vec<Outcome>,
    failed: Vec<Outcome>,
}

/// A key that was not restored, and why.
#[derive(Debug, Serialize)]
struct Outcome {
    key: String,
    reason: String,
}

/// One object to write.
struct Planned {
    key: String,
    resource: String,
    object: DynamicObject,
}

/// `restore KEY... --from-snapshot FILE [--rv N] [--dry-run] [--overwrite]`.
pub(super) async fn restore(
    api: &ApiStore,
    global: &GlobalArgs,
    args: RestoreArgs,
) -> Result<(), CliError> {
    let offline = Offline::open(global, &args.from_snapshot)?;
    let prefix = path_prefix(&offline.prefix);
    let revision = checked(&offline, &prefix, args.revision)?;
    let mut summary = Summary {
        dry_run: args.dry_run,
        revision,
        ..Summary::default()
    };
    let mut planned = Vec::new();
    for wanted in &args.keys {
        let keys = keys_at(&offline, &prefix, wanted, revision)?;
        if keys.is_empty() {
            summary.failed.push(Outcome {
                key: wanted.clone(),
                reason: format!(
                    "NotFound: nothing under it in the snapshot at revision {revision}"
                ),
            });
        }
        for key in keys {
            match read(&offline, global, &key, revision) {
                Ok(object) => planned.push(object),
                Err(reason) => summary.failed.push(Outcome { key, reason }),
            }
        }
    }
    if !summary.failed.is_empty() {
        // Nothing half-done: a key the file cannot give back stops the whole restore.
        for plan in planned {
            summary.skipped.push(Outcome {
                key: plan.key,
                reason: "not written: another key could not be read from the snapshot".to_owned(),
            });
        }
        print_summary(global, &summary)?;
        return Err(incomplete(&summary));
    }
    for plan in planned {
        let store = api.dynamic_store(&plan.resource)?;
        let outcome = if args.dry_run {
            would_write(&store, &plan.key, args.overwrite).await
        } else {
            write(&store, &plan.key, plan.object, args.overwrite).await
        };
        match outcome {
            Ok(()) => summary.restored.push(plan.key),
            Err(err) if err.is_exists() => summary.skipped.push(Outcome {
                key: plan.key,
                reason: "AlreadyExists: --overwrite replaces it".to_owned(),
            }),
            Err(err) => summary.failed.push(Outcome {
                key: plan.key,
                reason: format!("{}: {err}", err.status().reason),
            }),
        }
    }
    print_summary(global, &summary)?;
    if !summary.failed.is_empty() || !summary.skipped.is_empty() {
        return Err(incomplete(&summary));
    }
    Ok(())
}

fn incomplete(summary: &Summary) -> CliError {
    CliError::RestoreIncomplete {
        failed: summary.failed.len(),
        skipped: summary.skipped.len(),
    }
}

/// The keys (relative to the prefix) `wanted` names in the snapshot at `revision`: the
/// key itself when it holds an object then, else every key under it as a directory.
fn keys_at(
    offline: &Offline,
    prefix: &str,
    wanted: &str,
    revision: i64,
) -> Result<Vec<String>, CliError> {
    let snapshot = &offline.snapshot;
    let relative = wanted.trim_matches('/');
    let exact = format!("{prefix}{relative}");
    let exists = |key: &[u8]| {
        snapshot
            .revision_at(key, revision)
            .map(|at| at.is_some())
            .map_err(CliError::Snapshot)
    };
    if exists(exact.as_bytes())? {
        return Ok(vec![relative.to_owned()]);
    }
    let directory = format!("{exact}/");
    let mut keys = Vec::new();
    for (key, _) in snapshot
        .keys_under(directory.as_bytes())
        .map_err(CliError::Snapshot)?
    {
        if exists(key)? {
            let key = String::from_utf8_lossy(key);
            keys.push(key.strip_prefix(prefix).unwrap_or(&key).to_owned());
        }
    }
    Ok(keys)
}

/// The object under `key` in the snapshot at `revision`, decrypted and decoded.
fn read(
    offline: &Offline,
    global: &GlobalArgs,
    key: &str,
    revision: i64,
) -> Result<Planned, String> {
    let resource = offline
        .resource_of(global, key)
        .map_err(|e| format!("{}: {e}", e.reason()))?;
    // A read that could not show some fields (a newer kube wrote them) would lose them
    // on the write: such an object is refused, never restored without them.
    let partial: Arc<Mutex<Option<PartialRead>>> = Arc::default();
    let seen = Arc::clone(&partial);
    let observer: UnknownFieldsObserver = Arc::new(move |read: &PartialRead| {
        *seen.lock().unwrap_or_else(PoisonError::into_inner) = Some(read.clone());
    });
    let store: SnapshotStore<DynamicObject> = offline.store_observed(&resource, observer);
    let mut object = store
        .get_at(key, revision)
        .map_err(|e| format!("{}: {e}", e.status().reason))?;
    if let Some(read) = partial
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
    {
        return Err(format!(
            "Invalid: {}; restoring it would drop them (pass the --kube-version of the cluster that wrote it)",
            partial_read_message(offline.kube_version, &read)
        ));
    }
    // A resourceVersion is the revision of a write; the create sets the new one.
    object.metadata.resource_version.clear();
    Ok(Planned {
        key: key.to_owned(),
        resource,
        object,
    })
}

/// Writes `object` at `key`: created, or with `overwrite` replaced by guaranteed update
/// (compare-and-swap, retried on a concurrent write with the fresh value).
async fn write(
    store: &apistore::Etcd3Store<DynamicObject>,
    key: &str,
    object: DynamicObject,
    overwrite: bool,
) -> Result<(), StorageError> {
    match store.create(key, object.clone(), 0).await {
        Err(err) if err.is_exists() && overwrite => {
            let options = UpdateOptions::default();
            store
                .guaranteed_update(key, options, move |_current, _| Ok(object.clone().into()))
                .await
                .map(drop)
        }
        outcome => outcome.map(drop),
    }
}

/// What `write` would do, read from etcd: an error for a key that exists (without
/// `overwrite`), nothing written.
async fn would_write(
    store: &apistore::Etcd3Store<DynamicObject>,
    key: &str,
    overwrite: bool,
) -> Result<(), StorageError> {
    let exists = store.raw_get(key, 0).await?.is_some();
    if exists && !overwrite {
        return Err(StorageError::KeyExists {
            key: store.prepare_key(key)?,
            resource_version: 0,
        });
    }
    Ok(())
}

fn print_summary(global: &GlobalArgs, summary: &Summary) -> Result<(), CliError> {
    if let Some(format @ (OutputFormat::Json | OutputFormat::Yaml)) = global.output {
        return print(format, summary);
    }
    let verb = if summary.dry_run {
        "would restore"
    } else {
        "restored"
    };
    let mut text = String::new();
    for key in &summary.restored {
        text.push_str(&format!("{verb} {key}\n"));
    }
    let skip = if summary.dry_run {
        "would skip"
    } else {
        "skipped"
    };
    for outcome in &summary.skipped {
        text.push_str(&format!("{skip} {}: {}\n", outcome.key, outcome.reason));
    }
    for outcome in &summary.failed {
        text.push_str(&format!("failed {}: {}\n", outcome.key, outcome.reason));
    }
    let (restored, skipped) = if summary.dry_run {
        ("would be restored", "would be skipped")
    } else {
        ("restored", "skipped")
    };
    text.push_str(&format!(
        "{} {restored}, {} {skipped}, {} failed (snapshot revision {})\n",
        summary.restored.len(),
        summary.skipped.len(),
        summary.failed.len(),
        summary.revision
    ));
    write_stdout(&text)
}
