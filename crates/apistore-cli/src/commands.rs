//! The dispatch: what `apistore` does with its parsed command line, once per process.
//! It answers `completions` without etcd, refuses `encryption rewrite` without keys
//! before connecting, connects, hands each command to the module that owns it, and
//! writes `--metrics-out` at the end, even after Ctrl-C. Connecting is `connect.rs`'s,
//! the read commands `read.rs`'s, the writes `write.rs`'s, the rewrite `rewrite.rs`'s.

mod connect;
mod read;
mod write;

use crate::args::{Cli, Command, EncryptionCommand, GlobalArgs};
use crate::error::CliError;

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
    let api = connect::connect(global, registry).await?;
    match command {
        // Handled before connecting.
        Command::Completions { .. } => Ok(()),
        Command::Create { key, file, dry_run } => {
            write::create(&api, global, &key, &file, dry_run).await
        }
        Command::Update {
            key,
            file,
            preconditions,
            dry_run,
        } => write::update(&api, global, &key, &file, preconditions, dry_run).await,
        Command::Delete {
            key,
            preconditions,
            dry_run,
            force,
        } => write::delete(&api, global, &key, preconditions, dry_run, force).await,
        Command::Get {
            key,
            resource_version,
            exact,
            raw,
            raw_out,
        } => {
            read::get(
                &api,
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
        } => read::keys(&api, global, key_prefix.as_deref(), revision).await,
        Command::Count { key_prefix } => read::count(&api, global, &key_prefix).await,
        Command::List(args) => read::list(&api, global, args).await,
        Command::Watch(args) => read::watch(&api, global, args).await,
        Command::Encryption(EncryptionCommand::Rewrite {
            key_prefix,
            concurrency,
            dry_run,
            skip_undecodable,
        }) => {
            let resource = connect::resource_of(&api, global, &key_prefix)?;
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
                global.format(),
            )
            .await
        }
    }
}
