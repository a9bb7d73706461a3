//! Re-encryption after a key rotation: rewrite every stale value under a prefix with the
//! current write key.
//!
//! Works on the stored bytes and never decodes them
//! ([`Etcd3Store::reencrypt`](apistore_etcd3::Etcd3Store::reencrypt)): a value is written
//! only when the transformer says it is stale (read with a key other than the first), by
//! compare-and-swap on its mod revision, so a concurrent writer is never overwritten and
//! a value already under the write key keeps its resourceVersion. Protobuf, JSON and
//! bytes apistore cannot decode are all re-encrypted alike.

use apistore_etcd3::{Etcd3Store, Reencryption};
use apistore_storage::{ApiObject, StorageError};
use futures::StreamExt;

/// How to rewrite.
#[derive(Debug, Clone)]
pub struct RewriteOptions {
    /// How many keys are read and rewritten at once (default 8).
    pub concurrency: usize,
    /// Only find the stale values; write nothing (default off).
    pub dry_run: bool,
}

impl Default for RewriteOptions {
    fn default() -> Self {
        Self {
            concurrency: 8,
            dry_run: false,
        }
    }
}

/// What a rewrite did.
#[derive(Debug, Default)]
pub struct RewriteSummary {
    /// Keys visited.
    pub scanned: u64,
    /// Values written again (with `dry_run`: values that would be).
    pub rewritten: u64,
    /// The keys of the stale values, in the order they were found.
    pub stale_keys: Vec<String>,
    /// Keys that could not be rewritten, with why (an undecryptable value, etcd down...).
    pub failed: Vec<StorageError>,
}

/// Rewrites the stale values under `prefix`. `progress` is called after each key with
/// the number done and the total.
pub async fn rewrite_stale<T>(
    store: &Etcd3Store<T>,
    prefix: &str,
    options: &RewriteOptions,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<RewriteSummary, StorageError>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    let keys = store.keys(prefix).await?;
    let total = keys.len();
    let dry_run = options.dry_run;
    let outcomes: Vec<(String, Result<Reencryption, StorageError>)> = futures::stream::iter(keys)
        .map(|key| async move {
            let outcome = store.reencrypt(&key, dry_run).await;
            (key, outcome)
        })
        .buffer_unordered(options.concurrency.max(1))
        .enumerate()
        .map(|(i, outcome)| {
            progress(i + 1, total);
            outcome
        })
        .collect()
        .await;
    let mut summary = RewriteSummary::default();
    for (key, outcome) in outcomes {
        summary.scanned += 1;
        match outcome {
            Ok(Reencryption::Rewritten | Reencryption::WouldRewrite) => {
                summary.rewritten += 1;
                summary.stale_keys.push(key);
            }
            // Already current, or deleted since the scan: nothing to rewrite.
            Ok(_) => {}
            Err(err) => summary.failed.push(err),
        }
    }
    Ok(summary)
}
