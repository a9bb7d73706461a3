//! GetList over etcd: the key prefix, the paged reads of [`pager`] and the list metrics,
//! after `GetList` in kube-apiserver's `etcd3/store.go`. Where a list starts, the loop's
//! selection and doubling pages, and the continue token it ends with are
//! `apistore_backend::list`'s, shared with the memory store. The paged read itself is
//! [`pager`], shared with the watcher's initial sync and key scans.

use apistore_backend::list::{ListPages, list_start};
use apistore_storage::{ApiObject, KubeVersion, ListOptions, ObjectList, Result, StorageError};
use bytes::Bytes;

use crate::instrument::{Instrumentation, Operation};
use crate::key::{as_directory, prefix_range_end};
use crate::store::Etcd3Store;

pub(crate) mod pager;

use pager::{OnCompacted, Pager};

/// A list in progress whose counts go to `apiserver_storage_list_*` when dropped: on
/// every exit once the list got as far as reading etcd (kube-apiserver counts a list
/// only once its continue token and resourceVersion were accepted).
struct RecordedList<'a, T> {
    instrumentation: &'a Instrumentation,
    pages: ListPages<'a, T, Vec<u8>>,
}

impl<T> Drop for RecordedList<'_, T> {
    fn drop(&mut self) {
        let (fetched, evaluated, returned) = self.pages.counts();
        self.instrumentation
            .record_list(fetched, evaluated, returned);
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) async fn list_objects(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<ObjectList<T>> {
        let mut key_prefix = self.prepare_key(key)?;
        let _span = self.instrumentation.list_span(key, options);
        if options.recursive {
            key_prefix = as_directory(key_prefix);
        }
        let predicate = &options.predicate;
        let continuing = !predicate.continue_token.is_empty();
        let start = list_start(&key_prefix, options)?;
        let start_key = start
            .continue_key
            .map_or_else(|| key_prefix.as_bytes().to_vec(), String::into_bytes);
        let mut list = RecordedList {
            instrumentation: &self.instrumentation,
            pages: ListPages::new(predicate),
        };

        let (operation, range_end) = if options.recursive {
            let end = prefix_range_end(key_prefix.as_bytes());
            (Operation::List, Some(end))
        } else {
            (Operation::Get, None)
        };
        let mut pager = Pager::new(&key_prefix, start_key, operation)
            .at_revision(start.rev)
            .future_revision_is_too_large(self.kube_version >= KubeVersion::V1_34)
            .on_compacted(if continuing {
                OnCompacted::ContinueFromFirst
            } else {
                OnCompacted::Expired
            });
        if let Some(end) = range_end {
            pager = pager.range_end(end);
        }
        loop {
            pager.set_limit(list.pages.page_limit());
            let page = match pager.next_page(self).await {
                Ok(page) => page,
                Err(StorageError::ResourceVersionTooLarge {
                    key,
                    requested,
                    current: 0,
                    retry_after_seconds,
                }) => {
                    // kube 1.34+ says how far etcd is (its GetCurrentResourceVersion),
                    // 0 when that read fails too.
                    let current = self.current_revision(&key_prefix).await.unwrap_or(0);
                    return Err(StorageError::ResourceVersionTooLarge {
                        key,
                        requested,
                        current,
                        retry_after_seconds,
                    });
                }
                Err(err) => return Err(err),
            };
            self.layers.validate_minimum_resource_version(
                &key_prefix,
                &options.resource_version,
                page.header_revision,
            )?;
            self.saw_values(&page.kvs);
            let kvs = page.kvs.into_iter().map(|kv| {
                let mod_revision = kv.mod_revision();
                let (item_key, value) = kv.into_key_value();
                (item_key, Bytes::from(value), mod_revision)
            });
            if list
                .pages
                .take_page(&self.layers, kvs, page.more, page.count)?
            {
                break;
            }
        }
        list.pages
            .finish(&key_prefix, pager.revision(), self.layers.versioner())
    }

    /// etcd's current revision, from the header of a one-key read of `key`.
    async fn current_revision(&self, key: &str) -> Result<u64> {
        let mut pager = Pager::new(key, key.as_bytes().to_vec(), Operation::Get).keys_only();
        pager.set_limit(1);
        let page = pager.next_page(self).await?;
        Ok(page.header_revision.max(0).unsigned_abs())
    }
}
