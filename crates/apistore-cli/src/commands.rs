//! What each command does.

use std::io::Read;
use std::path::Path;
use std::time::Duration;

use apistore::layers::etcd3::Etcd3Store;
use apistore::{
    ApiObject, ApiStore, DeleteOptions, DynamicObject, FieldSelector, GetOptions, LabelSelector,
    ListOptions, ObjectList, Preconditions, ResourceVersionMatch, Storage, StorageError,
    UpdateOptions,
};

use crate::args::{Cli, Command, EncryptionCommand, GlobalArgs, OutputFormat, PreconditionArgs};
use crate::error::CliError;
use crate::object::{Selectable, selectable_store};
use crate::output::{print, write_stdout};
use crate::raw::{print_keys, print_raw};
use crate::watch::print_watch_events;

pub(crate) async fn run(cli: Cli) -> Result<(), CliError> {
    if let Command::Completions { shell } = cli.command {
        // Needs no etcd.
        let mut command = <Cli as clap::CommandFactory>::command();
        // Into a buffer first: the generator panics if its writer fails (a closed pipe).
        let mut script = Vec::new();
        clap_complete::generate(shell, &mut command, "apistore", &mut script);
        return std::io::Write::write_all(&mut std::io::stdout().lock(), &script)
            .map_err(|e| CliError::Output(format!("cannot write the completion script: {e}")));
    }
    let registry = cli
        .global
        .metrics_out
        .as_ref()
        .map(|_| apistore::prometheus::Registry::new());
    let outcome = until_interrupted(run_command(cli.command, &cli.global, registry.as_ref())).await;
    if let (Some(path), Some(registry)) = (&cli.global.metrics_out, &registry) {
        let text = apistore::layers::telemetry::encode_text(registry);
        let written = std::fs::write(path, text).map_err(|e| {
            CliError::Output(format!("cannot write metrics to {}: {e}", path.display()))
        });
        // The command's own failure is the one to report.
        outcome?;
        return written;
    }
    outcome
}

/// Runs `command` until it ends or SIGINT (Ctrl-C) arrives. On SIGINT the command is
/// dropped, which ends its watch or request cleanly, and the outcome is
/// [`CliError::Interrupted`], so that `--metrics-out` is still written.
async fn until_interrupted(
    command: impl std::future::Future<Output = Result<(), CliError>>,
) -> Result<(), CliError> {
    // Installed before the command starts: a SIGINT from then on is ours, not the
    // default handler's, which would end the process without writing anything.
    #[cfg(unix)]
    let interrupted = {
        use tokio::signal::unix::{SignalKind, signal};
        let mut signals = signal(SignalKind::interrupt())
            .map_err(|e| CliError::Output(format!("cannot install the SIGINT handler: {e}")))?;
        async move { signals.recv().await }
    };
    #[cfg(not(unix))]
    let interrupted = tokio::signal::ctrl_c();
    tokio::select! {
        outcome = command => outcome,
        _ = interrupted => Err(CliError::Interrupted),
    }
}

async fn run_command(
    command: Command,
    global: &GlobalArgs,
    registry: Option<&apistore::prometheus::Registry>,
) -> Result<(), CliError> {
    if let Command::Encryption(EncryptionCommand::Rewrite { .. }) = &command {
        if global.encryption_config.is_none() {
            return Err(CliError::Usage(
                "encryption rewrite needs --encryption-config FILE: without the keys there is \
                 nothing to re-encrypt with"
                    .to_owned(),
            ));
        }
    }
    let api = connect(global, registry).await?;
    let format = global.format();
    let resource_of = |key: &str| resource_of(&api, global, key);
    match command {
        // Handled before connecting.
        Command::Completions { .. } => Ok(()),
        Command::Create { key, file, dry_run } => {
            let mut object = read_object(&file)?;
            check_object(&key, &mut object)?;
            let store = api.dynamic_store(&resource_of(&key)?);
            if dry_run {
                if let Some(entry) = store.raw_get(&key, 0).await? {
                    return Err(StorageError::KeyExists {
                        key: store.prepare_key(&key)?,
                        resource_version: u64::try_from(entry.mod_revision).unwrap_or(0),
                    }
                    .into());
                }
                eprintln!("would create {key}");
                return print(format, &object);
            }
            print(format, &store.create(&key, object, 0).await?)
        }
        Command::Keys {
            key_prefix,
            revision,
        } => {
            let store = raw_store(&api, global, key_prefix.as_deref());
            let entries = store
                .raw_entries(key_prefix.as_deref().unwrap_or_default(), revision)
                .await?;
            print_keys(global.output, &entries)
        }
        Command::Get {
            key,
            resource_version,
            exact,
            raw,
            raw_out,
        } => {
            let store = api.dynamic_store(&resource_of(&key)?);
            if raw || raw_out.is_some() {
                let revision = match (&resource_version, exact) {
                    (Some(rv), true) => rv.parse::<i64>().map_err(|e| CliError::FlagValue {
                        flag: "--rv",
                        message: format!("{rv:?} is not a revision: {e}"),
                    })?,
                    _ => 0,
                };
                let Some(entry) = store.raw_get(&key, revision).await? else {
                    return Err(StorageError::not_found(store.prepare_key(&key)?).into());
                };
                return print_raw(&entry, raw_out.as_deref());
            }
            let read = if exact {
                get_exact(&store, &key, resource_version.unwrap_or_default()).await
            } else {
                let options = GetOptions {
                    ignore_not_found: false,
                    resource_version: resource_version.unwrap_or_default(),
                };
                store.get(&key, &options).await
            };
            let object = match read {
                Ok(object) => object,
                Err(err) => return Err(explain_read_error(&store, global, &key, err).await),
            };
            print(format, &object)
        }
        Command::Update {
            key,
            file,
            preconditions,
            dry_run,
        } => {
            let mut desired = read_object(&file)?;
            check_object(&key, &mut desired)?;
            let store = api.dynamic_store(&resource_of(&key)?);
            let etcd_key = store.prepare_key(&key)?;
            let wanted_rv = desired.metadata.resource_version.clone();
            let preconditions = preconditions_of(preconditions);
            if dry_run {
                let current = store.get(&key, &GetOptions::default()).await?;
                check_preconditions(&etcd_key, preconditions.as_ref(), &current)?;
                if !wanted_rv.is_empty() && wanted_rv != current.metadata.resource_version {
                    return Err(StorageError::conflict(
                        etcd_key,
                        format!(
                            "the object has been modified; please apply your changes to the latest version and try again (file has resourceVersion {wanted_rv}, stored is {})",
                            current.metadata.resource_version
                        ),
                    )
                    .into());
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
                .guaranteed_update(&key, options, move |current, _| {
                    // Like `kubectl replace`: a resourceVersion in the file is a condition.
                    if !wanted_rv.is_empty() && wanted_rv != current.metadata.resource_version {
                        return Err(StorageError::conflict(
                            etcd_key.clone(),
                            format!(
                                "the object has been modified; please apply your changes to the latest version and try again (file has resourceVersion {wanted_rv}, stored is {})",
                                current.metadata.resource_version
                            ),
                        ));
                    }
                    Ok(desired.clone().into())
                })
                .await?;
            print(format, &updated)
        }
        Command::Delete {
            key,
            preconditions,
            dry_run,
            force,
        } => {
            let store = api.dynamic_store(&resource_of(&key)?);
            if force {
                let Some(entry) = store.raw_get(&key, 0).await? else {
                    return Err(StorageError::not_found(store.prepare_key(&key)?).into());
                };
                if dry_run {
                    eprintln!(
                        "would delete {key} (modRevision {}, {} bytes) without reading it",
                        entry.mod_revision,
                        entry.value.len()
                    );
                    return Ok(());
                }
                let revision = store.raw_delete(&key, entry.mod_revision).await?;
                eprintln!("deleted {key} without reading it, at revision {revision}");
                return Ok(());
            }
            let preconditions = preconditions_of(preconditions);
            if dry_run {
                let current = store.get(&key, &GetOptions::default()).await?;
                check_preconditions(&store.prepare_key(&key)?, preconditions.as_ref(), &current)?;
                eprintln!("would delete {key}");
                return print(format, &current);
            }
            let options = DeleteOptions {
                preconditions,
                ..DeleteOptions::default()
            };
            print(format, &store.delete(&key, options).await?)
        }
        Command::Count { key_prefix: prefix } => {
            let store = api.dynamic_store(&resource_of(&prefix)?);
            let count = store.count(&prefix).await?;
            // Without -o, the bare number, as always.
            match global.output {
                None | Some(OutputFormat::Table) => write_stdout(&format!("{count}\n")),
                Some(OutputFormat::Name) => write_stdout(&format!("count/{count}\n")),
                Some(format) => print(format, &serde_json::json!({ "count": count })),
            }
        }
        Command::List {
            key_prefix: prefix,
            limit,
            continue_token,
            resource_version,
            resource_version_match,
            selector,
            field_selector,
            all,
            skip_undecodable,
        } => {
            let resource = resource_of(&prefix)?;
            let store = selectable_store(&api, &resource, false);
            let mut options = ListOptions {
                resource_version: resource_version.unwrap_or_default(),
                resource_version_match: resource_version_match
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
            options.predicate.limit = limit;
            options.predicate.continue_token = continue_token.unwrap_or_default();
            if let Some(text) = selector {
                options.predicate.label =
                    LabelSelector::parse(&text).map_err(|source| CliError::Selector {
                        flag: "--selector",
                        source,
                    })?;
            }
            field_selector_of(
                &mut options,
                field_selector.as_deref(),
                &resource,
                &store.prepare_key(&prefix)?,
            )?;
            if skip_undecodable {
                let list = list_skipping_undecodable(&store, &prefix, &options).await?;
                warn_if_unknown_and_empty(&api, &store, &resource, &prefix, list.items.len()).await;
                return print(format, &list);
            }
            let mut list: ObjectList<Selectable> = match store.list(&prefix, &options).await {
                Ok(list) => list,
                Err(err) => return Err(explain_read_error(&store, global, &prefix, err).await),
            };
            while all && !list.metadata.continue_token.is_empty() {
                options.predicate.continue_token =
                    std::mem::take(&mut list.metadata.continue_token);
                // A continued list takes its revision from the token.
                options.resource_version.clear();
                options.resource_version_match = ResourceVersionMatch::Unset;
                let next = store.list(&prefix, &options).await?;
                list.items.extend(next.items);
                list.metadata.continue_token = next.metadata.continue_token;
                list.metadata.remaining_item_count = next.metadata.remaining_item_count;
            }
            warn_if_unknown_and_empty(&api, &store, &resource, &prefix, list.items.len()).await;
            print(format, &list)
        }
        Command::Encryption(EncryptionCommand::Rewrite {
            key_prefix,
            concurrency,
            dry_run,
            skip_undecodable,
        }) => {
            let resource = resource_of(&key_prefix)?;
            let options = apistore::RewriteOptions {
                concurrency,
                dry_run,
            };
            crate::rewrite::rewrite(
                &api,
                &resource,
                &key_prefix,
                &options,
                skip_undecodable,
                format,
            )
            .await
        }
        Command::Watch {
            key_prefix,
            resource_version,
            bookmarks,
            send_initial_events,
            selector,
            field_selector,
            max_events,
            timeout,
            skip_undecodable,
        } => {
            let resource = resource_of(&key_prefix)?;
            // Asking for initial events is asking for kube-apiserver's WatchList feature.
            let store = selectable_store(&api, &resource, skip_undecodable)
                .with_watch_list(send_initial_events);
            let mut options = ListOptions {
                resource_version: resource_version.unwrap_or_default(),
                recursive: true,
                send_initial_events: send_initial_events.then_some(true),
                ..ListOptions::default()
            };
            options.predicate.allow_watch_bookmarks = bookmarks;
            if let Some(text) = selector {
                options.predicate.label =
                    LabelSelector::parse(&text).map_err(|source| CliError::Selector {
                        flag: "--selector",
                        source,
                    })?;
            }
            field_selector_of(
                &mut options,
                field_selector.as_deref(),
                &resource,
                &store.prepare_key(&key_prefix)?,
            )?;
            let events = store.watch(&key_prefix, &options).await?;
            let printing =
                print_watch_events(&store, &key_prefix, events, max_events, global.output);
            match timeout {
                Some(seconds) => tokio::time::timeout(Duration::from_secs(seconds), printing)
                    .await
                    .unwrap_or(Ok(())),
                None => printing.await,
            }
        }
    }
}

async fn connect(
    global: &GlobalArgs,
    registry: Option<&apistore::prometheus::Registry>,
) -> Result<ApiStore, CliError> {
    let mut builder = ApiStore::builder()
        .endpoints(global.endpoints.iter().cloned())
        .prefix(global.prefix.clone())
        .request_timeout(Some(Duration::from_secs(global.request_timeout.max(1))))
        .dial_timeout(Duration::from_secs(5)); // etcdctl's --dial-timeout
    if let Some(path) = &global.encryption_config {
        builder = builder.encryption_config_file(path);
    }
    if let Some(media_type) = &global.storage_media_type {
        let media_type =
            media_type
                .parse::<apistore::MediaType>()
                .map_err(|e| CliError::FlagValue {
                    flag: "--storage-media-type",
                    message: e.to_string(),
                })?;
        builder = builder.storage_media_type(media_type);
    }
    let tls = apistore::TlsConfig::from_files(
        global.cacert.as_deref(),
        global.client_cert.as_deref(),
        global.client_key.as_deref(),
    )
    .map_err(CliError::Tls)?;
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    match (&global.user, &global.password) {
        (Some(user), Some(password)) => {
            builder = builder.credentials(user.clone(), password.expose());
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err(CliError::Usage(
                "--user needs a password: set APISTORE_PASSWORD (or --password)".to_owned(),
            ));
        }
        (None, Some(_)) => {
            return Err(CliError::Usage(
                "a password (APISTORE_PASSWORD or --password) needs --user".to_owned(),
            ));
        }
    }
    if let Some(registry) = registry {
        builder = builder
            .metrics_registry(registry)
            .map_err(CliError::Connect)?;
    }
    let api = builder.build().await.map_err(CliError::Connect)?;
    crate::kms::warn_unhealthy(&api);
    Ok(api)
}

/// The resource a key belongs to, as kube-apiserver's storage layout places it
/// (`deployments/default/d1` is `deployments.apps`, `example.com/widgets/default/w1` is
/// `widgets.example.com`), or `--resource` when given.
fn resource_of(api: &ApiStore, global: &GlobalArgs, key: &str) -> Result<String, CliError> {
    if let Some(resource) = &global.resource {
        return Ok(resource.clone());
    }
    api.layout()
        .resolve_key(key)
        .map(|layout| layout.group_resource.to_string())
        .map_err(|e| CliError::Key(e.to_string()))
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

/// A store that reads any key under the prefix, for `keys` (which need not name a
/// resource): the resource of the prefix when the layout places it, for its metrics.
fn raw_store(
    api: &ApiStore,
    global: &GlobalArgs,
    prefix: Option<&str>,
) -> Etcd3Store<DynamicObject> {
    let resource = global.resource.clone().or_else(|| {
        prefix
            .and_then(|p| api.layout().resolve_key(p).ok())
            .map(|l| l.group_resource.to_string())
    });
    let mut config = api.store_config(resource.as_deref().unwrap_or("keys"));
    config.confine_keys = false;
    Etcd3Store::new(api.client().clone(), config)
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

/// A read that failed on an encrypted value without `--encryption-config` says to pass
/// it (the value is named by its provider and key); other errors stay as they are.
async fn explain_read_error<T>(
    store: &Etcd3Store<T>,
    global: &GlobalArgs,
    key: &str,
    err: StorageError,
) -> CliError
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    if global.encryption_config.is_some() || !err.is_internal() {
        return err.into();
    }
    let relative = err
        .key()
        .strip_prefix(store.path_prefix())
        .map_or_else(|| key.to_owned(), str::to_owned);
    match store.raw_get(&relative, 0).await {
        Ok(Some(entry)) if entry.value.starts_with(b"k8s:enc:") => CliError::Usage(format!(
            "{relative} is encrypted ({}): pass --encryption-config FILE with its key to read it",
            crate::raw::encoding(&entry.value)
        )),
        _ => err.into(),
    }
}

/// What kube's registry checks of an object before it is written: apiVersion and kind
/// are set, and the name and namespace are the key's (an empty namespace is taken from
/// a namespaced key, as kube takes it from the request).
fn check_object(key: &str, object: &mut DynamicObject) -> Result<(), CliError> {
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
    let key_namespace = (segments.len() >= 3).then(|| segments[segments.len() - 2]);
    match key_namespace {
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
