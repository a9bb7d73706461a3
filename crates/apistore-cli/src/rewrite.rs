//! `apistore encryption rewrite`: the facade's rewrite with a progress line on a
//! terminal and a summary at the end.

use std::io::{IsTerminal, Write};

use apistore::{DynamicObject, Etcd3Store, rewrite_stale};

use crate::commands::CliError;

/// Rewrites stale values under `prefix`, printing progress on a terminal and the
/// summary (`scanned`, `rewritten`, `failed`) on stdout; fails if any value failed.
pub(crate) async fn rewrite(
    store: &Etcd3Store<DynamicObject>,
    prefix: &str,
    concurrency: usize,
) -> Result<(), CliError> {
    let on_terminal = std::io::stderr().is_terminal();
    let summary = rewrite_stale(store, prefix, concurrency, |done, total| {
        if on_terminal {
            eprint!("\rrewriting {prefix}: {done}/{total}");
            let _ = std::io::stderr().flush();
        }
    })
    .await?;
    if on_terminal {
        eprintln!();
    }
    for err in &summary.failed {
        eprintln!("{}: {err}", err.status().reason);
    }
    println!("scanned: {}", summary.scanned);
    println!("rewritten: {}", summary.rewritten);
    println!("failed: {}", summary.failed.len());
    if summary.failed.is_empty() {
        Ok(())
    } else {
        Err(CliError::Input(format!(
            "{} of {} values under {prefix:?} could not be rewritten",
            summary.failed.len(),
            summary.scanned
        )))
    }
}
