//! Key scans: the keys under a prefix without their values, for operator tools that
//! must visit every object even when some cannot be decrypted or decoded (a list would
//! fail on the first such value).

use apistore_storage::{ApiObject, Result};

use crate::instrument::Operation;
use crate::key::{as_directory, prefix_range_end};
use crate::list::pager::Pager;
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
        let mut pager = Pager::new(&prefix, prefix.as_bytes().to_vec(), Operation::List)
            .range_end(prefix_range_end(prefix.as_bytes()))
            .keys_only();
        pager.set_limit(SCAN_PAGE);
        let mut keys = Vec::new();
        loop {
            let page = pager.next_page(self).await?;
            for kv in page.kvs {
                let (full, _) = kv.into_key_value();
                if let Ok(full) = String::from_utf8(full) {
                    if let Some(relative) = full.strip_prefix(self.path_prefix()) {
                        keys.push(relative.to_owned());
                    }
                }
            }
            if !page.more {
                break;
            }
        }
        Ok(keys)
    }
}
