//! Errors that name their fix. The store's errors are kube-apiserver's and say what
//! went wrong; an operator at a terminal also needs what to do about it, which depends
//! on the command they ran and on bytes the error does not carry. This adds it, after
//! the command failed: the stored value's encryption prefix (which provider and key it
//! needs, and whether `--encryption-config` has them), the revision etcd has compacted
//! to, and the flag that goes past or removes an unreadable value.
//!
//! Every message keeps the store's own text first, so what scripts and searches match
//! stays; the fix follows after `; `.

use std::time::Duration;

use apistore::layers::value::EncryptionConfig;
use apistore::{ApiStore, Status, StorageError};

use crate::args::{Command, GlobalArgs};
use crate::error::CliError;

/// How long a hint may wait for etcd to say its compacted revision; without an answer
/// the error is given without the revision. The question is asked only after etcd
/// refused a compacted revision, when it answers at once: the limit is for a loaded or
/// failing etcd, not a time the command usually spends.
const COMPACTION_QUESTION: Duration = Duration::from_secs(10);

/// What the failed command was doing, which decides the fix to name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Doing {
    /// `get`; `exact` with `--rv N --exact`.
    Get {
        /// Whether the read was at an exact revision.
        exact: bool,
    },
    /// `list`; `at_revision` with `--rv`.
    List {
        /// Whether a resourceVersion was given.
        at_revision: bool,
    },
    /// `watch`.
    Watch,
    /// `update`.
    Update,
    /// `delete` (without `--force`).
    Delete,
    /// Anything else: errors are left as they are.
    Other,
}

impl Doing {
    /// What `command` does, as far as fixes go.
    pub(crate) fn of(command: &Command) -> Self {
        match command {
            Command::Get { exact, .. } => Self::Get { exact: *exact },
            Command::List(args) => Self::List {
                at_revision: args.resource_version.is_some(),
            },
            Command::Watch(_) => Self::Watch,
            Command::Update { .. } => Self::Update,
            Command::Delete { force: false, .. } => Self::Delete,
            _ => Self::Other,
        }
    }
}

/// `err` with its fix named, when there is one to name.
pub(crate) async fn explain(
    api: &ApiStore,
    global: &GlobalArgs,
    doing: Doing,
    err: CliError,
) -> CliError {
    match err {
        CliError::Storage(err) if err.is_corrupt_object() && doing != Doing::Other => {
            let key = err.key().to_owned();
            unreadable_value(api, global, doing, &key, err).await
        }
        // A list that named every value it could not read (kube 1.37): the fix for the
        // first, and the others by key.
        CliError::Storage(err) if err.store_read_errors().is_some() && doing != Doing::Other => {
            let keys: Vec<String> = err
                .store_read_errors()
                .map(|errors| errors.keys().map(str::to_owned).collect())
                .unwrap_or_default();
            let first = keys.first().cloned().unwrap_or_default();
            let others = others_named(api, global, &keys);
            match unreadable_value(api, global, doing, &first, err).await {
                CliError::WithFix { error, fix } if !others.is_empty() => {
                    with_fix(*error, format!("{fix}; {others}"))
                }
                explained => explained,
            }
        }
        CliError::Storage(err) if err.is_expired() => {
            let fix = match doing {
                Doing::Get { exact: true } => "read at a later --rv, or without --exact",
                Doing::List { at_revision: true } => {
                    "list at a later --rv, or without --rv (the current objects)"
                }
                _ => return err.into(),
            };
            let compacted = compaction(api).await;
            with_fix(err.into(), format!("{compacted}: {fix}"))
        }
        CliError::WatchEnded(status) => watch_ended(api, *status).await,
        other => other,
    }
}

/// The other unreadable values a list named, after the first, relative to the store
/// prefix; empty when there are none.
fn others_named(api: &ApiStore, global: &GlobalArgs, keys: &[String]) -> String {
    let store = crate::commands::raw_store(api, global, None);
    let others: Vec<&str> = keys
        .iter()
        .skip(1)
        .map(|key| key.strip_prefix(store.path_prefix()).unwrap_or(key))
        .collect();
    if others.is_empty() {
        return String::new();
    }
    format!(
        "{} more cannot be read, the same way: {}",
        others.len(),
        others.join(", ")
    )
}

/// The fix for a value that could not be decrypted or decoded (stored under `key`):
/// read its bytes, and name the key it needs or the flag that goes past or removes it.
async fn unreadable_value(
    api: &ApiStore,
    global: &GlobalArgs,
    doing: Doing,
    key: &str,
    err: StorageError,
) -> CliError {
    let store = crate::commands::raw_store(api, global, None);
    let Some(relative) = key.strip_prefix(store.path_prefix()) else {
        return err.into();
    };
    let relative = relative.to_owned();
    // A value gone or unreadable now: nothing more to say than the error.
    let Ok(Some(entry)) = store.raw_get(&relative, 0).await else {
        return err.into();
    };
    if let Some(encryption) = apistore::layers::value::encryption_name(&entry.value) {
        return encrypted_value(api, global, doing, &relative, &encryption, err);
    }
    let remove = format!("`apistore delete {relative} --force` removes it without reading it");
    let fix = match doing {
        Doing::List { .. } => format!(
            "--skip-undecodable lists the other objects and names each value it cannot read; \
             {remove}"
        ),
        Doing::Watch => format!("--skip-undecodable goes past such values; {remove}"),
        Doing::Get { .. } | Doing::Update | Doing::Delete => remove,
        Doing::Other => return err.into(),
    };
    with_fix(err.into(), format!("{relative} cannot be decoded: {fix}"))
}

/// The fix for an encrypted value that did not decrypt: pass the configuration, add
/// the key it names, or find why a key the file has does not open it.
fn encrypted_value(
    api: &ApiStore,
    global: &GlobalArgs,
    doing: Doing,
    relative: &str,
    encryption: &str,
    err: StorageError,
) -> CliError {
    let Some(path) = &global.encryption_config else {
        return CliError::Usage(format!(
            "{relative} is encrypted ({encryption}): pass --encryption-config FILE with its \
             key to read it"
        ));
    };
    let resource = api.layout().resolve_key(relative).map_or_else(
        |_| "its resource".to_owned(),
        |l| l.group_resource.to_string(),
    );
    let keys = api
        .encryption_config()
        .map(|config: &EncryptionConfig| config.read_keys(&resource))
        .unwrap_or_default();
    let file = path.display();
    let fix = if keys.iter().any(|key| key == encryption) {
        format!(
            "{relative} is encrypted with {encryption}, which {file} has, but it does not \
             decrypt the value: the key's secret is not the one that encrypted it, or the \
             value was copied from another etcd key (the key is authenticated data)"
        )
    } else {
        let has = if keys.is_empty() {
            "nothing for it".to_owned()
        } else {
            keys.join(", ")
        };
        let rewrite = resource_prefix(api, &resource);
        format!(
            "{relative} is encrypted with {encryption}, which {file} does not have for \
             {resource} (it has {has}): add that key to the resource's providers after the \
             write key (every key reads, the first writes), then `apistore \
             --encryption-config {file} encryption rewrite {rewrite}` re-encrypts every \
             value with the write key"
        )
    };
    let fix = if doing == Doing::Delete {
        format!("{fix}; `apistore delete {relative} --force` deletes it unread, for good")
    } else {
        fix
    };
    with_fix(err.into(), fix)
}

/// The key prefix of a resource, relative to the store prefix, for a command line.
fn resource_prefix(api: &ApiStore, resource: &str) -> String {
    api.resource_layout(resource).key_prefix
}

/// A watch that ended with an ERROR event: kube's status as it is (its message names
/// the key), with the fix for a compacted start or an unreadable value.
async fn watch_ended(api: &ApiStore, status: Status) -> CliError {
    let fix = if status.code == 410 {
        let compacted = compaction(api).await;
        Some(format!(
            "{compacted}: watch from a later --rv, or without --rv (the current objects, \
             then their changes), or with --from-now"
        ))
    } else if status.reason == "StorageReadError" {
        // kube 1.37: a value that could not be read was deleted (`delete --force`).
        Some(
            "an object whose value could not be read was deleted unread: watch again with \
             --from-now, or from a later --rv"
                .to_owned(),
        )
    } else if status.reason == "InternalError" && is_unreadable(&status.message) {
        Some(
            "--skip-undecodable goes past values that cannot be decrypted or decoded, naming \
             each; `apistore delete KEY --force` removes one without reading it"
                .to_owned(),
        )
    } else {
        None
    };
    let ended = CliError::WatchEnded(Box::new(status));
    match fix {
        Some(fix) => with_fix(ended, fix),
        None => ended,
    }
}

/// Whether a watch's internal-error status is about a stored value that could not be
/// decrypted or decoded (kube's words for those, which the store's errors keep), rather
/// than etcd answering unexpectedly: only then do `--force` and `--skip-undecodable`
/// apply. A watch ends with a status, not the store's error, so the words are what
/// there is; reads and lists ask the error itself
/// ([`StorageError::is_corrupt_object`]).
fn is_unreadable(message: &str) -> bool {
    message.contains("unable to decode value") || message.contains("unable to transform value")
}

/// What etcd says of its compacted history, in words for an error.
async fn compaction(api: &ApiStore) -> String {
    match api
        .client()
        .etcd_compacted_revision(COMPACTION_QUESTION)
        .await
    {
        Ok(Some(revision)) => {
            format!("etcd has compacted its history up to revision {revision}")
        }
        _ => "etcd has compacted that revision".to_owned(),
    }
}

fn with_fix(error: CliError, fix: String) -> CliError {
    CliError::WithFix {
        error: Box::new(error),
        fix,
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::Cli;

    fn doing(args: &[&str]) -> Doing {
        let cli = Cli::try_parse_from([&["apistore"], args].concat())
            .unwrap_or_else(|err| panic!("{err}"));
        Doing::of(&cli.command)
    }

    #[test]
    fn the_fix_depends_on_what_the_command_was_doing() {
        assert_eq!(doing(&["get", "cm/a"]), Doing::Get { exact: false });
        assert_eq!(
            doing(&["get", "cm/a", "--rv", "3", "--exact"]),
            Doing::Get { exact: true }
        );
        assert_eq!(
            doing(&["list", "cm", "--rv", "3"]),
            Doing::List { at_revision: true }
        );
        assert_eq!(doing(&["watch", "cm"]), Doing::Watch);
        assert_eq!(doing(&["delete", "cm/a"]), Doing::Delete);
        // `delete --force` is the fix itself: nothing to add to its errors.
        assert_eq!(doing(&["delete", "cm/a", "--force"]), Doing::Other);
        assert_eq!(doing(&["keys"]), Doing::Other);
    }

    #[test]
    fn only_values_that_cannot_be_read_get_the_unreadable_fixes() {
        assert!(is_unreadable(
            "unable to decode value: decode failed (key \"/k\")"
        ));
        assert!(is_unreadable(
            "unable to transform value: no matching prefix found"
        ));
        // etcd answering unexpectedly is internal too, but --force would be wrong.
        assert!(!is_unreadable(
            "etcd event received with PrevKv=nil (key=\"/k\", modRevision=3, type=PUT)"
        ));
    }
}
