//! `apistore encryption rewrite`: the facade's byte-level rewrite with a progress line
//! on a terminal and a summary at the end.

use std::io::{IsTerminal, Write};

use apistore::{ApiStore, RewriteOptions};

use crate::args::OutputFormat;
use crate::error::CliError;

/// Rewrites stale values of `resource` under `prefix`, printing progress on a terminal,
/// each stale key on stderr for a dry run, and the summary on stdout (`scanned`,
/// `rewritten` (`would rewrite` for a dry run), `skipped`, `failed`: YAML lines, or one
/// JSON object with `-o json`, where a dry run adds `dryRun` and `wouldRewrite`);
/// fails if any value failed. With `skip_undecodable`, a value that cannot be decrypted
/// (the store's internal error) is named on stderr and counted as skipped instead.
pub(crate) async fn rewrite(
    api: &ApiStore,
    resource: &str,
    prefix: &str,
    options: &RewriteOptions,
    skip_undecodable: bool,
    format: OutputFormat,
) -> Result<(), CliError> {
    let on_terminal = std::io::stderr().is_terminal();
    let summary = api
        .rewrite_stale(resource, prefix, options, |done, total| {
            if on_terminal {
                eprint!("\rrewriting {prefix}: {done}/{total}");
                let _ = std::io::stderr().flush();
            }
        })
        .await?;
    if on_terminal {
        eprintln!();
    }
    if options.dry_run {
        for key in &summary.stale_keys {
            eprintln!("would rewrite {key}");
        }
    }
    // Unreachable etcd, timeouts and lost races are failures whatever the flag says.
    let (skipped, failed): (Vec<_>, Vec<_>) = summary
        .failed
        .iter()
        .partition(|err| skip_undecodable && err.is_corrupt_object());
    let store_prefix = api.store_config(resource).resource.prefix;
    for err in &skipped {
        let key = err.key().strip_prefix(store_prefix.as_str());
        let key = key.map_or_else(|| err.key(), |k| k.trim_start_matches('/'));
        eprintln!("skipped {key}: {err}");
    }
    for err in &failed {
        eprintln!("{}: {err}", err.status().reason);
    }
    let (skipped, failed) = (skipped.len(), failed.len());
    let text = match format {
        OutputFormat::Json => {
            let mut json = serde_json::json!({
                "scanned": summary.scanned,
                "rewritten": summary.rewritten,
                "skipped": skipped,
                "failed": failed,
            });
            // `rewritten` stays for the scripts that read it; a dry run says it is one
            // and that nothing was written.
            if options.dry_run {
                json["dryRun"] = true.into();
                json["wouldRewrite"] = summary.rewritten.into();
            }
            format!("{json}\n")
        }
        OutputFormat::Yaml | OutputFormat::Table | OutputFormat::Name => {
            // A dry run wrote nothing: "rewritten" would say it had.
            let done = if options.dry_run {
                "would rewrite"
            } else {
                "rewritten"
            };
            format!(
                "scanned: {}\n{done}: {}\nskipped: {skipped}\nfailed: {failed}\n",
                summary.scanned, summary.rewritten
            )
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::Output(e.to_string()))?;
    if failed == 0 {
        Ok(())
    } else {
        Err(CliError::RewriteFailed {
            failed,
            scanned: summary.scanned,
            prefix: prefix.to_owned(),
        })
    }
}
