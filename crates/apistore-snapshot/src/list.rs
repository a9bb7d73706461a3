//! GetList over the snapshot: each page is a range of the index at the list's
//! revision, its values read from the file. Where a list starts, the loop's selection
//! and doubling pages, the continue token and the 410s after compaction are
//! `apistore_backend::list`'s, shared with the other stores (kube-apiserver's
//! `GetList`, `resolveGetListRev`, `interpretListError`).

use apistore_backend::list::{ListPages, compacted_list_error, list_start};
use apistore_storage::{ApiObject, ListOptions, ObjectList, Result, StorageError};
use bytes::Bytes;

use crate::key::as_directory;
use crate::snapshot::{IndexedRevision, RevisionError};
use crate::store::{FUTURE, SnapshotStore, internal};

impl<T> SnapshotStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) fn list_objects(&self, key: &str, options: &ListOptions) -> Result<ObjectList<T>> {
        let mut prepared = self.prepare_key(key)?;
        if options.recursive {
            prepared = as_directory(prepared);
        }
        let key_prefix = prepared;
        let predicate = &options.predicate;
        let start = list_start(&key_prefix, options)?;
        let mut start_key = start
            .continue_key
            .clone()
            .unwrap_or_else(|| key_prefix.clone());
        let with_rev = match self.snapshot.check_revision(start.rev) {
            Ok(rev) => rev,
            Err(RevisionError::Compacted) => {
                let continue_from = (!predicate.continue_token.is_empty())
                    .then(|| start.continue_key.as_deref().unwrap_or_default());
                return Err(compacted_list_error(
                    &key_prefix,
                    continue_from.map(str::as_bytes),
                ));
            }
            Err(RevisionError::Future) => {
                return Err(StorageError::Internal {
                    key: key_prefix,
                    message: format!("etcd error: etcdserver: {FUTURE}"),
                    source: None,
                });
            }
        };
        self.layers.validate_minimum_resource_version(
            &key_prefix,
            &options.resource_version,
            with_rev,
        )?;

        let mut pages = ListPages::new(predicate);
        loop {
            self.count_read();
            let limit = usize::try_from(pages.page_limit()).unwrap_or(0);
            let range = if options.recursive {
                self.snapshot
                    .range(start_key.as_bytes(), key_prefix.as_bytes(), limit, with_rev)
            } else {
                self.snapshot
                    .range(key_prefix.as_bytes(), key_prefix.as_bytes(), 1, with_rev)
            }
            .map_err(|err| internal(&key_prefix, err))?;
            let (keys, more, count) = if options.recursive {
                (range.keys, range.more, range.count)
            } else {
                // One key: exactly it, not the keys it is a prefix of.
                let keys: Vec<_> = range
                    .keys
                    .into_iter()
                    .filter(|(key, _)| key.as_ref() == key_prefix.as_bytes())
                    .collect();
                let count = keys.len() as i64;
                (keys, false, count)
            };
            let mut kvs = Vec::with_capacity(keys.len());
            for (key, revision) in keys {
                let at = IndexedRevision {
                    revision,
                    tombstone: false,
                };
                let record = self
                    .snapshot
                    .read(&key, at)
                    .map_err(|err| internal(&String::from_utf8_lossy(&key), err))?;
                let key = String::from_utf8_lossy(&key).into_owned();
                kvs.push((key, Bytes::clone(&record.kv.value), record.kv.mod_revision));
            }
            if pages.take_page(&self.layers, kvs.into_iter(), more, count)? {
                break;
            }
            start_key = format!("{}\0", pages.last_key());
        }
        pages.finish(&key_prefix, with_rev, self.layers.versioner())
    }
}
