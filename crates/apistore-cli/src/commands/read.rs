//! The read commands, `get`, `keys`, `count`, `list` and `watch`: the options and
//! selectors each builds, the raw and exact-revision reads, the list that goes past
//! undecodable values, and the warning an empty list of a resource kube's layout does
//! not know adds. How results are printed is `output.rs`'s, `raw.rs`'s and `watch.rs`'s;
//! the fix a failed read's error names, `explain.rs`'s.

use std::path::Path;
use std::time::Duration;

use apistore::layers::etcd3::Etcd3Store;
use apistore::{
    ApiObject, ApiStore, FieldSelector, GetOptions, LabelSelector, ListOptions, ObjectList,
    ResourceVersionMatch, Storage, StorageError,
};

use super::connect::{raw_store, resource_of};
use crate::args::{GlobalArgs, ListArgs, OutputFormat, WatchArgs};
use crate::error::CliError;
use crate::object::{Selectable, selectable_store};
use crate::output::{print, write_stdout};
use crate::raw::{print_keys, print_raw};
use crate::watch::print_watch_events;

/// `get KEY [--rv RV [--exact]] [--raw | --raw-out FILE]`.
pub(super) async fn get(
    api: &ApiStore,
    global: &GlobalArgs,
    key: &str,
    resource_version: Option<String>,
    exact: bool,
    raw: bool,
    raw_out: Option<&Path>,
) -> Result<(), CliError> {
    let store = api.dynamic_store(&resource_of(api, global, key)?)?;
    if raw || raw_out.is_some() {
        let revision = match (&resource_version, exact) {
            (Some(rv), true) => rv.parse::<i64>().map_err(|e| CliError::FlagValue {
                flag: "--rv",
                message: format!("{rv:?} is not a revision: {e}"),
            })?,
            _ => 0,
        };
        let Some(entry) = store.raw_get(key, revision).await? else {
            return Err(StorageError::not_found(store.prepare_key(key)?).into());
        };
        return print_raw(&entry.value, raw_out);
    }
    let read = if exact {
        get_exact(&store, key, resource_version.unwrap_or_default()).await
    } else {
        let options = GetOptions {
            ignore_not_found: false,
            resource_version: resource_version.unwrap_or_default(),
        };
        store.get(key, &options).await
    };
    let object = read?;
    print(global.format(), &object)
}

/// `keys [PREFIX] [--rv REVISION]`: any key, whether or not it names a resource.
pub(super) async fn keys(
    api: &ApiStore,
    global: &GlobalArgs,
    key_prefix: Option<&str>,
    revision: i64,
) -> Result<(), CliError> {
    let store = raw_store(api, global, key_prefix);
    let entries = store
        .raw_entries(key_prefix.unwrap_or_default(), revision)
        .await?;
    print_keys(global.output, &entries)
}

/// `count PREFIX`.
pub(super) async fn count(
    api: &ApiStore,
    global: &GlobalArgs,
    prefix: &str,
) -> Result<(), CliError> {
    let store = api.dynamic_store(&resource_of(api, global, prefix)?)?;
    let count = store.count(prefix).await?;
    // Without -o, the bare number, as always.
    match global.output {
        None | Some(OutputFormat::Table) => write_stdout(&format!("{count}\n")),
        Some(OutputFormat::Name) => write_stdout(&format!("count/{count}\n")),
        Some(format) => print(format, &serde_json::json!({ "count": count })),
    }
}

/// `list PREFIX ...`: one page, or every page with `--all`.
pub(super) async fn list(
    api: &ApiStore,
    global: &GlobalArgs,
    args: ListArgs,
) -> Result<(), CliError> {
    let format = global.format();
    let prefix = args.key_prefix.clone();
    let resource = resource_of(api, global, &prefix)?;
    let store = selectable_store(api, &resource, false)?;
    let mut options = list_options(&args, &resource, &store.prepare_key(&prefix)?)?;
    if args.skip_undecodable {
        let list = list_skipping_undecodable(&store, &prefix, &options).await?;
        warn_if_unknown_and_empty(api, &store, &resource, &prefix, list.items.len()).await;
        return print(format, &list);
    }
    let list: ObjectList<Selectable> = store.list(&prefix, &options).await?;
    let list = follow_pages(&store, &prefix, &mut options, list, args.all).await?;
    warn_if_unknown_and_empty(api, &store, &resource, &prefix, list.items.len()).await;
    print(format, &list)
}

/// With `all`, the pages after `list` (each from the previous one's continue token)
/// added to it; `list` as it is otherwise.
pub(super) async fn follow_pages<S: Storage>(
    store: &S,
    prefix: &str,
    options: &mut ListOptions,
    mut list: ObjectList<S::Object>,
    all: bool,
) -> Result<ObjectList<S::Object>, CliError> {
    while all && !list.metadata.continue_token.is_empty() {
        options.predicate.continue_token = std::mem::take(&mut list.metadata.continue_token);
        // A continued list takes its revision from the token.
        options.resource_version.clear();
        options.resource_version_match = ResourceVersionMatch::Unset;
        let next = store.list(prefix, options).await?;
        list.items.extend(next.items);
        list.metadata.continue_token = next.metadata.continue_token;
        list.metadata.remaining_item_count = next.metadata.remaining_item_count;
    }
    Ok(list)
}

/// The options of `list`: resourceVersion and its match, paging, selectors (the field
/// selector checked against `resource`'s fields; `etcd_key` names the list in errors).
pub(super) fn list_options(
    args: &ListArgs,
    resource: &str,
    etcd_key: &str,
) -> Result<ListOptions, CliError> {
    let mut options = ListOptions {
        resource_version: args.resource_version.clone().unwrap_or_default(),
        resource_version_match: args
            .resource_version_match
            .as_deref()
            .unwrap_or_default()
            .parse::<ResourceVersionMatch>()
            .map_err(|e| CliError::FlagValue {
                flag: "--rv-match",
                message: e.to_string(),
            })?,
        recursive: true,
        ..ListOptions::default()
    };
    options.predicate.limit = args.limit;
    options.predicate.continue_token = args.continue_token.clone().unwrap_or_default();
    label_selector_of(&mut options, args.selector.as_deref())?;
    field_selector_of(
        &mut options,
        args.field_selector.as_deref(),
        resource,
        etcd_key,
    )?;
    Ok(options)
}

/// `watch PREFIX ...`: events (from the current revision with `--from-now`) until
/// `--max-events`, `--timeout` or an ERROR event.
pub(super) async fn watch(
    api: &ApiStore,
    global: &GlobalArgs,
    args: WatchArgs,
) -> Result<(), CliError> {
    let WatchArgs {
        key_prefix,
        resource_version,
        from_now,
        bookmarks,
        send_initial_events,
        selector,
        field_selector,
        max_events,
        timeout,
        skip_undecodable,
    } = args;
    let resource = resource_of(api, global, &key_prefix)?;
    // Asking for initial events is asking for kube-apiserver's WatchList feature.
    let store =
        selectable_store(api, &resource, skip_undecodable)?.with_watch_list(send_initial_events);
    let resource_version = if from_now {
        // The changes after the current revision: no ADDED event for what exists.
        store.get_current_resource_version().await?.to_string()
    } else {
        resource_version.unwrap_or_default()
    };
    let mut options = ListOptions {
        resource_version,
        recursive: true,
        send_initial_events: send_initial_events.then_some(true),
        ..ListOptions::default()
    };
    options.predicate.allow_watch_bookmarks = bookmarks;
    label_selector_of(&mut options, selector.as_deref())?;
    field_selector_of(
        &mut options,
        field_selector.as_deref(),
        &resource,
        &store.prepare_key(&key_prefix)?,
    )?;
    let events = store.watch(&key_prefix, &options).await?;
    let printing = print_watch_events(&store, &key_prefix, events, max_events, global.output);
    match timeout {
        Some(seconds) => tokio::time::timeout(Duration::from_secs(seconds), printing)
            .await
            .unwrap_or(Ok(())),
        None => printing.await,
    }
}

/// A list that goes past the values it cannot decrypt or decode, naming each on
/// stderr: every key under the prefix read one by one at the revision of the key scan,
/// the selectors applied here. Paging does not apply.
async fn list_skipping_undecodable(
    store: &Etcd3Store<Selectable>,
    prefix: &str,
    options: &ListOptions,
) -> Result<ObjectList<Selectable>, CliError> {
    let entries = store.raw_entries(prefix, 0).await?;
    let revision = entries.iter().map(|e| e.mod_revision).max().unwrap_or(0);
    let mut items = Vec::new();
    for entry in entries {
        let read = get_exact(store, &entry.key, entry.mod_revision.to_string()).await;
        match read {
            Ok(object) => {
                if options.predicate.matches(&object) {
                    items.push(object);
                }
            }
            Err(err) if err.is_not_found() => {}
            Err(err) => eprintln!("skipped {}: {}: {err}", entry.key, err.status().reason),
        }
    }
    let mut list = ObjectList::<Selectable> {
        items,
        ..ObjectList::default()
    };
    list.metadata.resource_version = revision.to_string();
    Ok(list)
}

/// Puts `--selector` in `options`.
fn label_selector_of(options: &mut ListOptions, text: Option<&str>) -> Result<(), CliError> {
    let Some(text) = text else {
        return Ok(());
    };
    options.predicate.label = LabelSelector::parse(text).map_err(|source| CliError::Selector {
        flag: "--selector",
        source,
    })?;
    Ok(())
}

/// Checks `--field-selector` against the fields kube supports for the resource and puts
/// it in `options`: the store evaluates all of it on [`Selectable`] objects.
fn field_selector_of(
    options: &mut ListOptions,
    text: Option<&str>,
    resource: &str,
    etcd_key: &str,
) -> Result<(), CliError> {
    let Some(text) = text else {
        return Ok(());
    };
    let selector = FieldSelector::parse(text).map_err(|source| CliError::Selector {
        flag: "--field-selector",
        source,
    })?;
    crate::fields::check(resource, etcd_key, &selector)?;
    options.predicate.field = selector;
    Ok(())
}

/// A list of a resource kube's layout does not know (a custom resource, or one named by
/// `--resource`) that found nothing, with no key at all under its prefix, is most
/// likely a misspelt resource or group: said on stderr, the empty list still printed.
async fn warn_if_unknown_and_empty(
    api: &ApiStore,
    store: &Etcd3Store<Selectable>,
    resource: &str,
    prefix: &str,
    items: usize,
) {
    if items > 0 || api.layout().resource(resource).built_in.is_some() {
        return;
    }
    let resource_prefix = store.resource_prefix().trim_start_matches('/').to_owned();
    // A failed look is no reason to fail a list that succeeded: no warning then.
    let keys = store.raw_entries(&resource_prefix, 0).await;
    if keys.is_ok_and(|entries| entries.is_empty()) {
        eprintln!(
            "warning: {resource:?} is not a resource of kube's storage layout and there are no keys under {}/{resource_prefix}: check the spelling of {prefix:?}",
            store.path_prefix().trim_end_matches('/')
        );
    }
}

/// The object under `key` as of exactly `resource_version`: a non-recursive list at
/// that revision, which reads the one key (kube's `GetList` on a key).
async fn get_exact<T>(
    store: &Etcd3Store<T>,
    key: &str,
    resource_version: String,
) -> Result<T, StorageError>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    let options = ListOptions {
        resource_version,
        resource_version_match: ResourceVersionMatch::Exact,
        recursive: false,
        ..ListOptions::default()
    };
    let list: ObjectList<T> = store.list(key, &options).await?;
    list.items
        .into_iter()
        .next()
        .map_or_else(|| Err(StorageError::not_found(store.prepare_key(key)?)), Ok)
}
