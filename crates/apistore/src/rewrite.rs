//! Re-encryption after a key rotation: rewrite every stale value under a prefix with the
//! current write key.
//!
//! Each object goes through a guaranteed update that changes nothing: the store writes
//! only when the stored value is stale (read with a key other than the first) or its
//! bytes differ from the current encoding, and always by compare-and-swap on the mod
//! revision, so a concurrent writer is never overwritten.

use apistore_etcd3::Etcd3Store;
use apistore_storage::{ApiObject, Storage, StorageError, UpdateOptions};
use futures::StreamExt;

/// What a rewrite did.
#[derive(Debug, Default)]
pub struct RewriteSummary {
    /// Keys visited.
    pub scanned: u64,
    /// Values written again.
    pub rewritten: u64,
    /// Keys that could not be rewritten, with why (an undecryptable value, etcd down...).
    pub failed: Vec<StorageError>,
}

/// Rewrites the stale values under `prefix`, `concurrency` at a time. `progress` is
/// called after each key with the number done and the total.
pub async fn rewrite_stale<T>(
    store: &Etcd3Store<T>,
    prefix: &str,
    concurrency: usize,
    progress: impl Fn(usize, usize) + Sync,
) -> Result<RewriteSummary, StorageError>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    let keys = store.keys(prefix).await?;
    let total = keys.len();
    let outcomes: Vec<Result<bool, StorageError>> = futures::stream::iter(keys)
        .map(|key| async move { rewrite_one(store, &key).await })
        .buffer_unordered(concurrency.max(1))
        .enumerate()
        .map(|(i, outcome)| {
            progress(i + 1, total);
            outcome
        })
        .collect()
        .await;
    let mut summary = RewriteSummary::default();
    for outcome in outcomes {
        summary.scanned += 1;
        match outcome {
            Ok(true) => summary.rewritten += 1,
            Ok(false) => {}
            Err(err) => summary.failed.push(err),
        }
    }
    Ok(summary)
}

/// Rewrites one key if needed; whether a write happened.
async fn rewrite_one<T>(store: &Etcd3Store<T>, key: &str) -> Result<bool, StorageError>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    let mut seen = 0;
    let result = store
        .guaranteed_update(key, UpdateOptions::default(), |current, meta| {
            seen = meta.resource_version;
            Ok(current.into())
        })
        .await;
    match result {
        Ok(updated) => Ok(updated.resource_version() != seen.to_string()),
        // Deleted since the scan: nothing left to rewrite.
        Err(err) if err.is_not_found() => Ok(false),
        Err(err) => Err(err),
    }
}
