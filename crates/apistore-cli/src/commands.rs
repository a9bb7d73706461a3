//! The dispatch: what `apistore` does with its parsed command line, once per process.
//! It answers `completions` without etcd, refuses `encryption rewrite` without keys
//! before connecting, connects, hands each command to the module that owns it, and
//! writes `--metrics-out` at the end, even after Ctrl-C; an online command's error gets
//! the fix it names from `explain.rs`. Connecting is `connect.rs`'s,
//! the read commands `read.rs`'s, the writes `write.rs`'s, the rewrite `rewrite.rs`'s.

mod connect;
mod offline;
mod read;
mod restore;
mod write;

use std::path::Path;

use crate::args::{Cli, Command, EncryptionCommand, GlobalArgs};
use crate::error::CliError;
use crate::offline::Offline;

pub(crate) use connect::{
    kube_version, raw_store, resource_of, storage_media_type, warn_partial_reads,
};
pub(crate) use offline::path_prefix;

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
    if let Command::Decode { file, etcd_key } = &cli.command {
        // Needs no etcd either: the bytes come from the file.
        return crate::decode::decode(&cli.global, file.as_deref(), etcd_key.as_deref());
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
    // Online and offline alike: the layout is the kube version's either way.
    let layout = apistore::StorageLayout::for_kube(connect::kube_version(global)?);
    let command = crate::keys::normalize(command, layout, global)?;
    if let Some(path) = &global.snapshot {
        return run_offline(command, global, path).await;
    }
    let api = connect::connect(global, registry).await?;
    let doing = crate::explain::Doing::of(&command);
    match run_online(&api, command, global).await {
        Err(err) => Err(crate::explain::explain(&api, global, doing, err).await),
        Ok(()) => Ok(()),
    }
}

/// Hands a command to the module that owns it.
async fn run_online(
    api: &apistore::ApiStore,
    command: Command,
    global: &GlobalArgs,
) -> Result<(), CliError> {
    match command {
        // Handled before connecting.
        Command::Completions { .. } | Command::Decode { .. } => Ok(()),
        Command::Create { key, file, dry_run } => {
            write::create(api, global, &key, &file, dry_run).await
        }
        Command::Update {
            key,
            file,
            preconditions,
            dry_run,
        } => write::update(api, global, &key, &file, preconditions, dry_run).await,
        Command::Delete {
            key,
            preconditions,
            dry_run,
            force,
        } => write::delete(api, global, &key, preconditions, dry_run, force).await,
        Command::Get {
            key,
            resource_version,
            exact,
            raw,
            raw_out,
        } => {
            read::get(
                api,
                global,
                &key,
                resource_version,
                exact,
                raw,
                raw_out.as_deref(),
            )
            .await
        }
        Command::Keys {
            key_prefix,
            revision,
        } => read::keys(api, global, key_prefix.as_deref(), revision).await,
        Command::Count { key_prefix } => read::count(api, global, &key_prefix).await,
        Command::History { key } => crate::history::online(api, global, &key).await,
        Command::Analyze(args) => crate::analyze::online(api, global, &args).await,
        Command::Restore(args) => restore::restore(api, global, args).await,
        Command::List(args) => read::list(api, global, args).await,
        Command::Watch(args) => read::watch(api, global, args).await,
        Command::Encryption(EncryptionCommand::Rewrite {
            key_prefix,
            concurrency,
            dry_run,
            skip_undecodable,
        }) => {
            let resource = connect::resource_of(api, global, &key_prefix)?;
            let options = apistore::RewriteOptions {
                concurrency,
                dry_run,
            };
            crate::rewrite::rewrite(
                api,
                &resource,
                &key_prefix,
                &options,
                skip_undecodable,
                global.format(),
            )
            .await
        }
    }
}

/// A reading command answered from the `--snapshot` file, with no etcd; the others
/// are refused, since the file is read-only and has no live changes.
async fn run_offline(command: Command, global: &GlobalArgs, path: &Path) -> Result<(), CliError> {
    let name = match &command {
        Command::Get { .. }
        | Command::Keys { .. }
        | Command::Count { .. }
        | Command::List(_)
        | Command::History { .. }
        | Command::Analyze(_) => None,
        Command::Create { .. } => Some("create"),
        Command::Update { .. } => Some("update"),
        Command::Delete { .. } => Some("delete"),
        Command::Watch(_) => Some("watch"),
        Command::Restore(_) => Some("restore (it reads --from-snapshot and writes to etcd)"),
        Command::Encryption(_) => Some("encryption rewrite"),
        Command::Completions { .. } => Some("completions"),
        Command::Decode { .. } => Some("decode (it reads a value from a file or stdin)"),
    };
    if let Some(name) = name {
        return Err(CliError::Usage(format!(
            "{name} does not take --snapshot: a snapshot is read-only, for get, list, keys, \
             count, history and analyze"
        )));
    }
    let offline = Offline::open(global, path)?;
    match command {
        Command::Get {
            key,
            resource_version,
            raw,
            raw_out,
            ..
        } => {
            offline::get(
                &offline,
                global,
                &key,
                resource_version.as_deref(),
                raw,
                raw_out.as_deref(),
            )
            .await
        }
        Command::Keys {
            key_prefix,
            revision,
        } => offline::keys(&offline, global, key_prefix.as_deref(), revision),
        Command::Count { key_prefix } => offline::count(&offline, global, &key_prefix).await,
        Command::List(args) => offline::list(&offline, global, args).await,
        Command::History { key } => crate::history::offline(&offline, global, &key),
        Command::Analyze(args) => crate::analyze::offline(&offline, global, &args),
        _ => Ok(()),
    }
}
