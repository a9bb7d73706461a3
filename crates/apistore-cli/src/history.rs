//! `apistore history KEY`: every revision of one object, online or from a snapshot.
//!
//! Both sources produce the same raw revisions (revision, event, stored bytes), which
//! are decrypted and decoded here with the resource's codec and transformer, compared
//! with the revision before (the managedFields entry that changed: its manager and
//! operation; a unified diff of the YAML) and printed. From a snapshot the file's
//! revision index gives every revision it holds, deletions and earlier lives included.
//! Online, etcd is read at successive revisions (the value at a revision carries the
//! revision of the write before it through `mod_revision - 1`), back from the current
//! value to its creation: a fixed number of reads with no watch to wait on, but only
//! the object's current life (a deleted object's history needs `--snapshot`).
//! Where compaction cut the history off is said, not hidden.

use apistore::{ApiStore, DynamicObject, StorageError};
use bytes::Bytes;
use serde::Serialize;

use crate::args::{GlobalArgs, OutputFormat};
use crate::error::CliError;
use crate::layers::{Layers, Reader};
use crate::offline::Offline;
use crate::output::{print, write_stdout};

/// What happened at one revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub(crate) enum Event {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted (the value shown is the last one before).
    Deleted,
}

/// One revision as stored.
struct RawRevision {
    revision: i64,
    event: Event,
    /// The stored bytes (for a deletion, the last value before it), when known.
    value: Option<Bytes>,
}

/// One revision as printed by `-o json`.
#[derive(Debug, Serialize)]
struct Entry {
    revision: i64,
    #[serde(rename = "type")]
    event: Event,
    object: Option<serde_json::Value>,
    diff: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    manager: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    operation: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// The revisions of a key, oldest first, and the compaction that cut off older ones.
struct Revisions {
    etcd_key: String,
    revisions: Vec<RawRevision>,
    /// The compacted revision, when it may hide older revisions of the key.
    compacted: Option<i64>,
}

/// `history KEY` from etcd.
pub(crate) async fn online(api: &ApiStore, global: &GlobalArgs, key: &str) -> Result<(), CliError> {
    let resource = crate::commands::resource_of(api, global, key)?;
    let store = api.dynamic_store(&resource)?;
    let etcd_key = store.prepare_key(key)?;
    let mut newest_first = Vec::new();
    let mut compacted = None;
    let mut at = 0;
    loop {
        let entry = match store.raw_get(key, at).await {
            Ok(entry) => entry,
            // Older revisions than this are compacted away.
            Err(err) if at > 0 && err.is_expired() => {
                compacted = Some(at + 1);
                break;
            }
            Err(err) => return Err(err.into()),
        };
        let Some(entry) = entry else {
            if at == 0 {
                // A deleted object's history is in a snapshot (--snapshot FILE).
                return Err(StorageError::not_found(etcd_key).into());
            }
            break;
        };
        let created = entry.mod_revision == entry.create_revision;
        newest_first.push(RawRevision {
            revision: entry.mod_revision,
            event: if created {
                Event::Added
            } else {
                Event::Modified
            },
            value: Some(entry.value),
        });
        if created {
            break;
        }
        at = entry.mod_revision - 1;
    }
    newest_first.reverse();
    let revisions = Revisions {
        etcd_key,
        revisions: newest_first,
        compacted,
    };
    let reader = Layers::Online(api).reader(&resource);
    print_history(global, key, &revisions, &reader)
}

/// `--snapshot FILE history KEY`.
pub(crate) fn offline(offline: &Offline, global: &GlobalArgs, key: &str) -> Result<(), CliError> {
    let resource = offline.resource_of(global, key)?;
    let store = offline.store::<DynamicObject>(&resource);
    let etcd_key = store.prepare_key(key)?;
    let records = offline
        .snapshot
        .history(etcd_key.as_bytes())
        .map_err(CliError::Snapshot)?;
    if records.is_empty() {
        return Err(StorageError::not_found(etcd_key).into());
    }
    let mut revisions = Vec::with_capacity(records.len());
    let mut previous: Option<Bytes> = None;
    for record in records {
        let (event, value) = if record.tombstone {
            (Event::Deleted, previous.take())
        } else if record.kv.create_revision == record.revision.main {
            (Event::Added, Some(record.kv.value.clone()))
        } else {
            (Event::Modified, Some(record.kv.value.clone()))
        };
        if !record.tombstone {
            previous = Some(record.kv.value);
        }
        revisions.push(RawRevision {
            revision: record.revision.main,
            event,
            value,
        });
    }
    let compact = offline.snapshot.compact_revision();
    let revisions = Revisions {
        etcd_key,
        revisions,
        // etcd keeps, per key, the last revision at or below the compaction: anything
        // before the first revision held may be gone.
        compacted: (compact > 0).then_some(compact),
    };
    let reader = Layers::Offline(offline).reader(&resource);
    print_history(global, key, &revisions, &reader)
}

fn print_history(
    global: &GlobalArgs,
    key: &str,
    revisions: &Revisions,
    reader: &Reader,
) -> Result<(), CliError> {
    let entries = entries(key, revisions, reader)?;
    let ends = revisions.compacted.map(|rev| {
        format!("history before revision {rev} is compacted away: older revisions are gone")
    });
    match global.output {
        Some(format @ (OutputFormat::Json | OutputFormat::Yaml)) => {
            if let Some(ends) = &ends {
                eprintln!("{ends}");
            }
            print(format, &entries)
        }
        _ => {
            let mut text = String::new();
            if let Some(ends) = &ends {
                text.push_str(&format!("# {ends}\n"));
            }
            for entry in &entries {
                text.push_str(&format!("revision {} {:?}", entry.revision, entry.event));
                if let Some(manager) = &entry.manager {
                    text.push_str(&format!(" by {manager}"));
                }
                if let Some(operation) = &entry.operation {
                    text.push_str(&format!(" ({operation})"));
                }
                text.push('\n');
                if let Some(error) = &entry.error {
                    text.push_str(&format!("  {error}\n"));
                }
                text.push_str(&entry.diff);
            }
            write_stdout(&text)
        }
    }
}

/// Each revision decoded and compared with the one before.
fn entries(key: &str, revisions: &Revisions, reader: &Reader) -> Result<Vec<Entry>, CliError> {
    let mut entries = Vec::with_capacity(revisions.revisions.len());
    let mut before: Option<(i64, serde_json::Value)> = None;
    for raw in &revisions.revisions {
        let read = raw
            .value
            .as_ref()
            .map(|value| {
                let (_, mut object) = reader.read(&revisions.etcd_key, value)?;
                object.metadata.resource_version = raw.revision.to_string();
                Ok::<_, String>(object)
            })
            .transpose();
        let (object, error) = match read {
            Ok(object) => (object, None),
            Err(error) => (None, Some(error)),
        };
        let object = object
            .map(|o| serde_json::to_value(&o))
            .transpose()
            .map_err(|e| CliError::Output(format!("cannot print {key}: {e}")))?;
        let (old_name, old_text) = match &before {
            Some((rev, old)) => (format!("{key}@{rev}"), diff_text(old)?),
            None => (format!("{key}@none"), String::new()),
        };
        let new_text = match (&object, raw.event) {
            (Some(object), Event::Added | Event::Modified) => diff_text(object)?,
            _ => String::new(),
        };
        let new_name = match raw.event {
            Event::Deleted => format!("{key}@{} (deleted)", raw.revision),
            _ => format!("{key}@{}", raw.revision),
        };
        let diff = crate::diff::unified(&old_text, &new_text, &old_name, &new_name);
        let changed = match (&object, raw.event) {
            (Some(object), Event::Added | Event::Modified) => {
                changed_manager(before.as_ref().map(|(_, o)| o), object)
            }
            _ => None,
        };
        let (manager, operation) = changed.unzip();
        match (raw.event, &object) {
            (Event::Deleted, _) => before = None,
            (_, Some(object)) => before = Some((raw.revision, object.clone())),
            (_, None) => {}
        }
        entries.push(Entry {
            revision: raw.revision,
            event: raw.event,
            object,
            diff,
            manager,
            operation,
            error,
        });
    }
    Ok(entries)
}

/// The YAML compared between revisions: without resourceVersion, which is the
/// revision itself and would make every diff show it.
fn diff_text(object: &serde_json::Value) -> Result<String, CliError> {
    let mut object = object.clone();
    if let Some(metadata) = object
        .get_mut("metadata")
        .and_then(serde_json::Value::as_object_mut)
    {
        metadata.remove("resourceVersion");
    }
    serde_norway::to_string(&object).map_err(|e| CliError::Output(e.to_string()))
}

/// The manager and operation of the managedFields entry that is new or changed since
/// `before` (the latest by time when several changed).
fn changed_manager(
    before: Option<&serde_json::Value>,
    after: &serde_json::Value,
) -> Option<(String, String)> {
    let entries = |object: &serde_json::Value| -> Vec<serde_json::Value> {
        object
            .pointer("/metadata/managedFields")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let old = before.map(entries).unwrap_or_default();
    let text = |entry: &serde_json::Value, field: &str| -> String {
        entry
            .get(field)
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    entries(after)
        .into_iter()
        .filter(|entry| !old.contains(entry))
        // The latest; of equal times, the first listed.
        .fold(None::<serde_json::Value>, |best, entry| match best {
            Some(best) if text(&best, "time") >= text(&entry, "time") => Some(best),
            _ => Some(entry),
        })
        .map(|entry| (text(&entry, "manager"), text(&entry, "operation")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_manager_of_the_changed_entry_is_named() {
        let before = json!({"metadata": {"managedFields": [
            {"manager": "kubectl", "operation": "Apply", "time": "2026-01-01T00:00:00Z"},
            {"manager": "kube-controller-manager", "operation": "Update", "time": "2026-01-01T00:00:00Z"}
        ]}});
        let after = json!({"metadata": {"managedFields": [
            {"manager": "kubectl", "operation": "Apply", "time": "2026-01-01T00:00:00Z"},
            {"manager": "kube-controller-manager", "operation": "Update", "time": "2026-01-02T00:00:00Z"}
        ]}});
        assert_eq!(
            changed_manager(Some(&before), &after),
            Some(("kube-controller-manager".to_owned(), "Update".to_owned()))
        );
        assert_eq!(changed_manager(Some(&after), &after), None);
        assert_eq!(
            changed_manager(None, &before).map(|(m, _)| m),
            Some("kubectl".to_owned())
        );
    }

    #[test]
    fn resource_version_is_left_out_of_diffs() {
        let object = json!({"metadata": {"name": "a", "resourceVersion": "7"}});
        assert_eq!(diff_text(&object).unwrap(), "metadata:\n  name: a\n");
    }
}
