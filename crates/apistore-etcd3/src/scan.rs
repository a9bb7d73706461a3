//! Key scans: the keys under a prefix without their values, for operator tools that
//! must visit every object even when some cannot be decrypted or decoded (a list would
//! fail on the first such value).

use apistore_storage::{ApiObject, Result};
use etcd_client::GetOptions as EtcdGetOptions;

use crate::instrument::Operation;
use crate::key::{as_directory, prefix_range_end};
use crate::store::Etcd3Store;

/// Keys read per etcd request.
const SCAN_PAGE: i64 = 1000;

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Every key under `key` (as a directory), relative to the store's path prefix so
    /// that each can be passed back to the store, read at one revision. Keys that are not
    /// UTF-8 are skipped: no store key can name them.
    pub async fn keys(&self, key: &str) -> Result<Vec<String>> {
        let prefix = as_directory(self.prepare_key(key)?);
        let end = prefix_range_end(prefix.as_bytes());
        let mut start = prefix.clone().into_bytes();
        let mut revision = 0;
        let mut keys = Vec::new();
        loop {
            let mut options = EtcdGetOptions::new()
                .with_range(end.clone())
                .with_keys_only()
                .with_limit(SCAN_PAGE);
            if revision != 0 {
                options = options.with_revision(revision);
            }
            let mut response = self
                .call(&prefix, Operation::List, |mut kv| {
                    let (start, options) = (start.clone(), options.clone());
                    async move { kv.get(start, Some(options)).await }
                })
                .await?;
            if revision == 0 {
                revision = response.header().map_or(0, |h| h.revision());
            }
            let more = response.more();
            let page = response.take_kvs();
            let Some(last) = page.last().map(|kv| kv.key().to_vec()) else {
                break;
            };
            for kv in page {
                let (full, _) = kv.into_key_value();
                if let Ok(full) = String::from_utf8(full) {
                    if let Some(relative) = full.strip_prefix(&*self.path_prefix) {
                        keys.push(relative.to_owned());
                    }
                }
            }
            if !more {
                break;
            }
            start = last;
            start.push(0);
        }
        Ok(keys)
    }
}
