//! GetList over etcd: the key prefix, the paged reads of [`pager`] or the one
//! `RangeStream` of [`stream`], and the list metrics, after `GetList` in
//! kube-apiserver's `etcd3/store.go`. Where a list starts, the loop's selection and
//! doubling pages, and the continue token it ends with are `apistore_backend::list`'s,
//! shared with the memory store. The paged read itself is [`pager`], shared with the
//! watcher's initial sync and key scans; from kube 1.37 an unlimited recursive list
//! streams instead where etcd can (3.7+), and falls back to the pages where it cannot.

use apistore_backend::list::{ListPages, list_start};
use apistore_storage::{ApiObject, KubeVersion, ListOptions, ObjectList, Result, StorageError};
use bytes::Bytes;

use crate::instrument::{Instrumentation, Operation};
use crate::key::{as_directory, prefix_range_end};
use crate::store::Etcd3Store;

pub(crate) mod pager;
pub(crate) mod stream;

use pager::{OnCompacted, Pager};
use stream::Streamed;

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
        if let (Some(end), true) = (&range_end, self.lists_with_stream(options)) {
            let streamed = self
                .stream_list(
                    &key_prefix,
                    end.clone(),
                    start.rev,
                    &options.resource_version,
                    &mut list.pages,
                )
                .await;
            match streamed {
                Ok(Streamed::Read { revision }) => {
                    return list
                        .pages
                        .finish(&key_prefix, revision, self.layers.versioner());
                }
                Ok(Streamed::Unsupported) => {}
                Err(err) => return Err(self.with_current_revision(&key_prefix, err).await),
            }
        }
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
                Err(err) => return Err(self.with_current_revision(&key_prefix, err).await),
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

    /// A too-large resourceVersion whose current revision is not known yet (0) with
    /// etcd's current revision: kube 1.34+ says how far etcd is (its
    /// GetCurrentResourceVersion), 0 when that read fails too. Other errors as they are.
    async fn with_current_revision(&self, key_prefix: &str, err: StorageError) -> StorageError {
        match err {
            StorageError::ResourceVersionTooLarge {
                key,
                requested,
                current: 0,
                retry_after_seconds,
            } => {
                let current = self.current_revision(key_prefix).await.unwrap_or(0);
                StorageError::ResourceVersionTooLarge {
                    key,
                    requested,
                    current,
                    retry_after_seconds,
                }
            }
            err => err,
        }
    }

    /// etcd's current revision, from the header of a one-key read of `key`.
    async fn current_revision(&self, key: &str) -> Result<u64> {
        let mut pager = Pager::new(key, key.as_bytes().to_vec(), Operation::Get).keys_only();
        pager.set_limit(1);
        let page = pager.next_page(self).await?;
        Ok(page.header_revision.max(0).unsigned_abs())
    }
}
