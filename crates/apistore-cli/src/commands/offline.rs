//! The read commands over `--snapshot FILE`: `get` (`--rv N` the object as of revision
//! N), `list`, `keys` and `count`, answered by `apistore-snapshot`'s read-only store
//! with the options, selectors and printing of the online commands (`read.rs`), so
//! that the two print the same thing for the same data.

use std::path::Path;

use apistore::{DynamicObject, GetOptions, ObjectList, Storage, StorageError};
use apistore_snapshot::{RevisionError, SnapshotStore};

use super::read::{follow_pages, list_options};
use crate::args::{GlobalArgs, ListArgs, OutputFormat};
use crate::error::CliError;
use crate::object::Selectable;
use crate::offline::Offline;
use crate::output::{print, write_stdout};
use crate::raw::{KeyRow, print_key_rows, print_raw};

/// `--snapshot FILE get KEY [--rv N] [--raw | --raw-out FILE]`.
pub(super) async fn get(
    offline: &Offline,
    global: &GlobalArgs,
    key: &str,
    resource_version: Option<&str>,
    raw: bool,
    raw_out: Option<&Path>,
) -> Result<(), CliError> {
    let resource = offline.resource_of(global, key)?;
    let store: SnapshotStore<DynamicObject> = offline.store(&resource);
    let revision = match resource_version {
        Some(rv) => rv.parse::<i64>().map_err(|e| CliError::FlagValue {
            flag: "--rv",
            message: format!("{rv:?} is not a revision: {e}"),
        })?,
        None => 0,
    };
    if raw || raw_out.is_some() {
        let prepared = store.prepare_key(key)?;
        let revision = checked(offline, &prepared, revision)?;
        let stored = offline
            .snapshot
            .get(prepared.as_bytes(), revision)
            .map_err(CliError::Snapshot)?;
        let Some(kv) = stored else {
            return Err(StorageError::not_found(prepared).into());
        };
        return print_raw(&kv.value, raw_out);
    }
    let object = if revision == 0 {
        store.get(key, &GetOptions::default()).await
    } else {
        store.get_at(key, revision)
    };
    match object {
        Ok(object) => print(global.format(), &object),
        Err(err) => Err(explain(offline, &store, key, revision, err)),
    }
}

/// `--snapshot FILE list PREFIX ...`: one page, or every page with `--all`.
pub(super) async fn list(
    offline: &Offline,
    global: &GlobalArgs,
    args: ListArgs,
) -> Result<(), CliError> {
    if args.skip_undecodable {
        return Err(CliError::Usage(
            "--skip-undecodable is for etcd; with --snapshot, `keys` names every value and \
             `get` reads one"
                .to_owned(),
        ));
    }
    let resource = offline.resource_of(global, &args.key_prefix)?;
    let store: SnapshotStore<Selectable> = offline.store(&resource);
    let mut options = list_options(&args, &resource, &store.prepare_key(&args.key_prefix)?)?;
    let list: ObjectList<Selectable> = match store.list(&args.key_prefix, &options).await {
        Ok(list) => list,
        Err(err) => return Err(explain(offline, &store, &args.key_prefix, 0, err)),
    };
    let list = follow_pages(&store, &args.key_prefix, &mut options, list, args.all).await?;
    print(global.format(), &list)
}

/// `--snapshot FILE keys [PREFIX] [--rv REVISION]`: every key under the prefix that
/// exists at the revision, with etcd's metadata, whether or not it names a resource.
pub(super) fn keys(
    offline: &Offline,
    global: &GlobalArgs,
    key_prefix: Option<&str>,
    revision: i64,
) -> Result<(), CliError> {
    let snapshot = &offline.snapshot;
    let path_prefix = path_prefix(&offline.prefix);
    let prefix = format!("{path_prefix}{}", key_prefix.unwrap_or_default());
    let revision = checked(offline, &prefix, revision)?;
    let range = snapshot
        .range(prefix.as_bytes(), prefix.as_bytes(), 0, revision)
        .map_err(CliError::Snapshot)?;
    let mut rows = Vec::with_capacity(range.keys.len());
    for (key, _) in &range.keys {
        let Some(kv) = snapshot.get(key, revision).map_err(CliError::Snapshot)? else {
            continue;
        };
        let text = String::from_utf8_lossy(&kv.key);
        let relative = text.strip_prefix(&path_prefix).unwrap_or(&text).to_owned();
        let meta = [kv.mod_revision, kv.create_revision, kv.version, kv.lease];
        rows.push(KeyRow::new(relative, meta, &kv.value));
    }
    print_key_rows(global.output, rows)
}

/// `--snapshot FILE count PREFIX`.
pub(super) async fn count(
    offline: &Offline,
    global: &GlobalArgs,
    prefix: &str,
) -> Result<(), CliError> {
    let resource = offline.resource_of(global, prefix)?;
    let store: SnapshotStore<DynamicObject> = offline.store(&resource);
    let count = store.count(prefix).await?;
    match global.output {
        None | Some(OutputFormat::Table) => write_stdout(&format!("{count}\n")),
        Some(OutputFormat::Name) => write_stdout(&format!("count/{count}\n")),
        Some(format) => print(format, &serde_json::json!({ "count": count })),
    }
}

/// `/registry` → `/registry/`: what stored keys start with.
pub(crate) fn path_prefix(prefix: &str) -> String {
    format!("{}/", prefix.trim_end_matches('/'))
}

/// `revision` (0: the snapshot's last) checked against the file: below its compaction
/// 410 Expired, past its end a too-large resourceVersion, as the store answers.
pub(crate) fn checked(offline: &Offline, key: &str, revision: i64) -> Result<i64, CliError> {
    let snapshot = &offline.snapshot;
    snapshot.check_revision(revision).map_err(|err| {
        CliError::Storage(match err {
            RevisionError::Compacted => StorageError::Expired {
                key: key.to_owned(),
                message: format!(
                    "revision {revision} is compacted: the file holds revisions {} to {}",
                    snapshot.compact_revision(),
                    snapshot.revision()
                ),
                continue_token: None,
            },
            RevisionError::Future => StorageError::ResourceVersionTooLarge {
                key: key.to_owned(),
                requested: revision.unsigned_abs(),
                current: snapshot.revision().unsigned_abs(),
                retry_after_seconds: 0,
            },
        })
    })
}

/// A read that failed on an encrypted value without `--encryption-config` says to pass
/// it, as online; other errors stay as they are.
fn explain<T>(
    offline: &Offline,
    store: &SnapshotStore<T>,
    key: &str,
    revision: i64,
    err: StorageError,
) -> CliError
where
    T: apistore::ApiObject + Clone + Default + Send + Sync + 'static,
{
    if offline.encryption.is_some() || !err.is_corrupt_object() {
        return err.into();
    }
    let stored = offline
        .snapshot
        .check_revision(revision)
        .ok()
        .and_then(|rev| store.snapshot().get(err.key().as_bytes(), rev).ok())
        .flatten();
    match stored {
        Some(kv) if kv.value.starts_with(b"k8s:enc:") => {
            let relative = err
                .key()
                .strip_prefix(store.path_prefix())
                .map_or_else(|| key.to_owned(), str::to_owned);
            CliError::Usage(format!(
                "{relative} is encrypted ({}): pass --encryption-config FILE with its key to read it",
                crate::raw::encoding(&kv.value)
            ))
        }
        _ => err.into(),
    }
}
