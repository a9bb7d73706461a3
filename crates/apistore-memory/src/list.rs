//! GetList over the key space: the range reads (one counted read per page, so the same
//! read counts as the etcd3 store's requests) and what a revision error becomes. Where
//! a list starts, the loop's selection and doubling pages, the continue token it ends
//! with and the 410s after compaction are `apistore_backend::list`'s, shared with the
//! etcd3 store (kube-apiserver's `GetList`, `resolveGetListRev`, `interpretListError`).

use apistore_backend::list::{ListPages, compacted_list_error, list_start};
use apistore_storage::{ApiObject, ListOptions, ObjectList, Result, StorageError};

use crate::kv::revision_error;
use crate::mvcc::{Keys, RevisionError};
use crate::store::MemoryStore;
use apistore_backend::key::as_directory;

impl<T> MemoryStore<T>
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
        let continuing = !predicate.continue_token.is_empty();
        let start = list_start(&key_prefix, options)?;
        let mut start_key = start
            .continue_key
            .clone()
            .unwrap_or_else(|| key_prefix.clone());
        let mut with_rev = start.rev;

        let mut pages = ListPages::new(predicate);
        loop {
            let keys = if options.recursive {
                Keys::Prefix {
                    start: &start_key,
                    prefix: &key_prefix,
                }
            } else {
                Keys::One(&key_prefix)
            };
            self.count_read();
            let range = self.kv.read().range(&keys, pages.page_limit(), with_rev);
            let range = match range {
                Ok(range) => range,
                Err(err) => {
                    let continue_from =
                        continuing.then(|| start.continue_key.as_deref().unwrap_or_default());
                    return Err(interpret_list_error(err, continue_from, &key_prefix));
                }
            };
            self.layers.validate_minimum_resource_version(
                &key_prefix,
                &options.resource_version,
                range.revision,
            )?;
            // Every later page reads at the revision of the first.
            if with_rev == 0 {
                with_rev = range.revision;
            }
            let kvs = range
                .kvs
                .into_iter()
                .map(|kv| (kv.key, kv.value, kv.mod_revision));
            if pages.take_page(&self.layers, kvs, range.more, range.count)? {
                break;
            }
            start_key = format!("{}\0", pages.last_key());
        }
        pages.finish(&key_prefix, with_rev, self.layers.versioner())
    }
}

/// A compacted revision is 410 Expired (a continued list gets a token to go on at the
/// latest revision, from `continue_from`); a future one is etcd's error.
fn interpret_list_error(
    err: RevisionError,
    continue_from: Option<&str>,
    key_prefix: &str,
) -> StorageError {
    if err != RevisionError::Compacted {
        return revision_error(key_prefix, err);
    }
    compacted_list_error(key_prefix, continue_from.map(str::as_bytes))
}
