//! The write commands, `create`, `update` and `delete`, with their `--dry-run` checks
//! (the key is free, the preconditions and the file's resourceVersion hold) and
//! `delete --force`; and what kube's registry checks of an object read from a file
//! before it is written.

use std::io::Read;
use std::path::Path;

use apistore::{
    ApiStore, DeleteOptions, DynamicObject, Etcd3Store, GetOptions, Preconditions, Storage,
    StorageError, UpdateOptions,
};

use super::connect::resource_of;
use crate::args::{GlobalArgs, PreconditionArgs};
use crate::error::CliError;
use crate::output::print;

/// `create KEY -f FILE [--dry-run]`.
pub(super) async fn create(
    api: &ApiStore,
    global: &GlobalArgs,
    key: &str,
    file: &Path,
    dry_run: bool,
) -> Result<(), CliError> {
    let format = global.format();
    let mut object = read_object(file)?;
    let resource = resource_of(api, global, key)?;
    check_object(key, &api.resource_layout(&resource).key_prefix, &mut object)?;
    let store = api.dynamic_store(&resource)?;
    if dry_run {
        if let Some(entry) = store.raw_get(key, 0).await? {
            return Err(StorageError::KeyExists {
                key: store.prepare_key(key)?,
                resource_version: u64::try_from(entry.mod_revision).unwrap_or(0),
            }
            .into());
        }
        eprintln!("would create {key}");
        return print(format, &object);
    }
    print(format, &store.create(key, object, 0).await?)
}

/// `update KEY -f FILE [--precondition-…] [--dry-run]`.
pub(super) async fn update(
    api: &ApiStore,
    global: &GlobalArgs,
    key: &str,
    file: &Path,
    preconditions: PreconditionArgs,
    dry_run: bool,
) -> Result<(), CliError> {
    let format = global.format();
    let mut desired = read_object(file)?;
    let resource = resource_of(api, global, key)?;
    check_object(
        key,
        &api.resource_layout(&resource).key_prefix,
        &mut desired,
    )?;
    let store = api.dynamic_store(&resource)?;
    let etcd_key = store.prepare_key(key)?;
    let wanted_rv = desired.metadata.resource_version.clone();
    let preconditions = preconditions_of(preconditions);
    if dry_run {
        let current = store.get(key, &GetOptions::default()).await?;
        check_preconditions(&etcd_key, preconditions.as_ref(), &current)?;
        if !wanted_rv.is_empty() && wanted_rv != current.metadata.resource_version {
            return Err(file_rv_conflict(etcd_key, &wanted_rv, &current).into());
        }
        eprintln!(
            "would update {key} (stored resourceVersion {})",
            current.metadata.resource_version
        );
        return print(format, &desired);
    }
    let options = UpdateOptions {
        preconditions,
        ..UpdateOptions::default()
    };
    let updated = store
        .guaranteed_update(key, options, move |current, _| {
            // Like `kubectl replace`: a resourceVersion in the file is a condition.
            if !wanted_rv.is_empty() && wanted_rv != current.metadata.resource_version {
                return Err(file_rv_conflict(etcd_key.clone(), &wanted_rv, &current));
            }
            Ok(desired.clone().into())
        })
        .await?;
    print(format, &updated)
}

/// `delete KEY [--precondition-…] [--dry-run] [--force]`.
pub(super) async fn delete(
    api: &ApiStore,
    global: &GlobalArgs,
    key: &str,
    preconditions: PreconditionArgs,
    dry_run: bool,
    force: bool,
) -> Result<(), CliError> {
    let format = global.format();
    let store = api.dynamic_store(&resource_of(api, global, key)?)?;
    if force {
        return delete_unreadable(&store, key, dry_run).await;
    }
    let preconditions = preconditions_of(preconditions);
    if dry_run {
        let current = store.get(key, &GetOptions::default()).await?;
        check_preconditions(&store.prepare_key(key)?, preconditions.as_ref(), &current)?;
        eprintln!("would delete {key}");
        return print(format, &current);
    }
    let options = DeleteOptions {
        preconditions,
        ..DeleteOptions::default()
    };
    print(format, &store.delete(key, options).await?)
}

/// `delete KEY --force`: the storage contract's unsafe deletion (kube's
/// `ExpectTransformOrDecodeError`): only a value that cannot be decrypted or decoded is
/// deleted, at the revision it was read at, without being read into an object; a
/// readable value is refused (delete it without `--force`).
async fn delete_unreadable(
    store: &Etcd3Store<DynamicObject>,
    key: &str,
    dry_run: bool,
) -> Result<(), CliError> {
    let readable_refused = |err: StorageError| match err {
        StorageError::InvalidObject { key, message } => StorageError::InvalidObject {
            key,
            message: format!("{message}; delete it without --force"),
        },
        other => other,
    };
    if dry_run {
        // One read: the stored bytes, decoded here as the delete would try them.
        let Some(entry) = store.raw_get(key, 0).await? else {
            return Err(StorageError::not_found(store.prepare_key(key)?).into());
        };
        match store.decode_entry(&entry) {
            Ok(_) => {
                return Err(readable_refused(StorageError::InvalidObject {
                    key: store.prepare_key(key)?,
                    message: "unsafe deletion is not allowed because the object is decodable \
                              from storage"
                        .to_owned(),
                })
                .into());
            }
            Err(err) if err.is_corrupt_object() => {}
            Err(err) => return Err(err.into()),
        }
        eprintln!(
            "would delete {key} (modRevision {}, {} bytes) without reading it",
            entry.mod_revision,
            entry.value.len()
        );
        return Ok(());
    }
    let options = DeleteOptions {
        expect_transform_or_decode_error: true,
        ..DeleteOptions::default()
    };
    let deleted = store.delete(key, options).await.map_err(readable_refused)?;
    eprintln!(
        "deleted {key} without reading it, at revision {}",
        deleted.metadata.resource_version
    );
    Ok(())
}

/// The conflict of an update whose file names a resourceVersion the stored object no
/// longer has, in kube-apiserver's words.
fn file_rv_conflict(etcd_key: String, wanted_rv: &str, current: &DynamicObject) -> StorageError {
    StorageError::conflict(
        etcd_key,
        format!(
            "the object has been modified; please apply your changes to the latest version and try again (file has resourceVersion {wanted_rv}, stored is {})",
            current.metadata.resource_version
        ),
    )
}

/// What kube's registry checks of an object before it is written: apiVersion and kind
/// are set, and the name and namespace are the key's (an empty namespace is taken from
/// a namespaced key, as kube takes it from the request). `key_prefix` is the resource's
/// (`pods`, `apiextensions.k8s.io/customresourcedefinitions`): what follows it is
/// `<namespace>/<name>` or `<name>`.
fn check_object(key: &str, key_prefix: &str, object: &mut DynamicObject) -> Result<(), CliError> {
    let mut missing = Vec::new();
    if object.api_version.is_empty() {
        missing.push("apiVersion");
    }
    if object.kind.is_empty() {
        missing.push("kind");
    }
    if !missing.is_empty() {
        return Err(CliError::BadObject(format!(
            "the object has no {}: kube-apiserver would not know its type",
            missing.join(" and ")
        )));
    }
    let segments: Vec<&str> = key.trim_matches('/').split('/').collect();
    let name = segments.last().copied().unwrap_or_default();
    if object.metadata.name != name {
        return Err(CliError::BadObject(format!(
            "the object's name {:?} does not match the key {key:?} (name {name:?})",
            object.metadata.name
        )));
    }
    match key_namespace(key, key_prefix) {
        Some(namespace) if object.metadata.namespace.is_empty() => {
            namespace.clone_into(&mut object.metadata.namespace);
        }
        Some(namespace) if object.metadata.namespace != namespace => {
            return Err(CliError::BadObject(format!(
                "the object's namespace {:?} does not match the key {key:?} (namespace {namespace:?})",
                object.metadata.namespace
            )));
        }
        None if !object.metadata.namespace.is_empty() => {
            return Err(CliError::BadObject(format!(
                "the object has namespace {:?} but the key {key:?} has none",
                object.metadata.namespace
            )));
        }
        _ => {}
    }
    Ok(())
}

/// The namespace a key names: the segment between the resource's key prefix and the
/// name (`pods/default/p1`: `default`), none for a cluster-scoped key, whose prefix may
/// have several segments itself
/// (`apiextensions.k8s.io/customresourcedefinitions/widgets.example.com`). A key outside
/// the prefix (refused by the store later) is read as `.../<namespace>/<name>` when it
/// has three segments or more.
fn key_namespace<'k>(key: &'k str, key_prefix: &str) -> Option<&'k str> {
    let key = key.trim_matches('/');
    let under_prefix = key
        .strip_prefix(key_prefix.trim_matches('/'))
        .and_then(|rest| rest.strip_prefix('/'));
    match under_prefix {
        Some(rest) => rest.split_once('/').map(|(namespace, _)| namespace),
        None => {
            let segments: Vec<&str> = key.split('/').collect();
            (segments.len() >= 3).then(|| segments[segments.len() - 2])
        }
    }
}

/// The preconditions against the stored object, for a dry run (the store checks them on
/// a real write).
fn check_preconditions(
    etcd_key: &str,
    preconditions: Option<&Preconditions>,
    current: &DynamicObject,
) -> Result<(), CliError> {
    let Some(preconditions) = preconditions else {
        return Ok(());
    };
    if let Some(uid) = &preconditions.uid {
        if *uid != current.metadata.uid {
            return Err(StorageError::conflict(
                etcd_key,
                format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    current.metadata.uid
                ),
            )
            .into());
        }
    }
    if let Some(rv) = &preconditions.resource_version {
        if *rv != current.metadata.resource_version {
            return Err(StorageError::conflict(
                etcd_key,
                format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    current.metadata.resource_version
                ),
            )
            .into());
        }
    }
    Ok(())
}

fn preconditions_of(args: PreconditionArgs) -> Option<Preconditions> {
    (args.uid.is_some() || args.resource_version.is_some()).then_some(Preconditions {
        uid: args.uid,
        resource_version: args.resource_version,
    })
}

/// Reads an object from a JSON or YAML file, or stdin for `-`.
fn read_object(path: &Path) -> Result<DynamicObject, CliError> {
    let text = if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|source| CliError::ReadFile {
                path: path.to_owned(),
                source,
            })?;
        text
    } else {
        std::fs::read_to_string(path).map_err(|source| CliError::ReadFile {
            path: path.to_owned(),
            source,
        })?
    };
    // YAML is a superset of JSON: one parser reads both.
    serde_norway::from_str(&text).map_err(|e| CliError::NotAnObject {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_follows_the_resource_key_prefix() {
        assert_eq!(key_namespace("pods/default/p1", "pods"), Some("default"));
        assert_eq!(
            key_namespace("services/specs/default/s1", "services/specs"),
            Some("default")
        );
        assert_eq!(key_namespace("namespaces/default", "namespaces"), None);
        // Cluster-scoped resources under a prefix of two segments: no namespace (kube
        // served a CRD updated through such a key with metadata.namespace set).
        assert_eq!(
            key_namespace(
                "apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
                "apiextensions.k8s.io/customresourcedefinitions"
            ),
            None
        );
        assert_eq!(
            key_namespace(
                "apiregistration.k8s.io/apiservices/v1.apps",
                "apiregistration.k8s.io/apiservices"
            ),
            None
        );
        assert_eq!(
            key_namespace("example.com/widgets/ns1/w1", "example.com/widgets"),
            Some("ns1")
        );
        assert_eq!(
            key_namespace("example.com/gadgets/g1", "example.com/gadgets"),
            None
        );
        // Outside the prefix: the segment before the name.
        assert_eq!(key_namespace("a/b/c", "x"), Some("b"));
        assert_eq!(key_namespace("a/b", "x"), None);
    }

    #[test]
    fn a_cluster_scoped_object_under_a_two_segment_prefix_keeps_no_namespace() {
        let mut crd: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"}
        }))
        .unwrap();
        check_object(
            "apiextensions.k8s.io/customresourcedefinitions/widgets.example.com",
            "apiextensions.k8s.io/customresourcedefinitions",
            &mut crd,
        )
        .unwrap();
        assert_eq!(crd.metadata.namespace, "");
    }
}
