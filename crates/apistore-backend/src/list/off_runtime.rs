//! A list's page read back off the caller's tokio worker.
//!
//! Reading a page of hundreds of Pods back takes milliseconds. Read on a runtime
//! worker, it keeps every task queued there waiting, among them, often, the tasks all
//! of a client's requests pass through (etcd-client's request buffer, the HTTP/2
//! connection reading etcd's next chunk): with 4 callers listing on 2 cores, the cores
//! stood idle 16-36% of the time, where kube's store, whose goroutines the Go scheduler
//! moves off a busy thread, left 1-6% (docs/benchmarks.md).
//!
//! A backend that knows its list runs on a task of its own on a multi-thread runtime
//! reads a large page under `tokio::task::block_in_place` (the etcd3 store does); that
//! panics inside a `LocalSet` and on a current-thread runtime, which a caller's own
//! task cannot tell apart. Everywhere else, [`ListPages::take_page_off_runtime`] reads
//! it on tokio's blocking threads while the caller's task waits: safe on every runtime.

use apistore_storage::{ApiObject, Result, StorageError};
use bytes::Bytes;
use tokio::runtime::Handle;

use super::{ListKey, ListPages};
use crate::object::{DecodeErrors, ObjectLayers};
use crate::read_ahead::{self, PageReader};

/// The fewest values in a page worth reading back off the caller's worker: 64 values
/// are a quarter of a millisecond of work or more (4 µs a small object, 10-25 µs a
/// Pod), against some microseconds to hand a page to another thread and back.
pub const OFF_RUNTIME_VALUES: usize = 64;

impl<T, K> ListPages<'_, T, K>
where
    T: ApiObject + Default + Send + 'static,
    K: ListKey + Send + 'static,
{
    /// [`Self::take_page`] for a caller on a tokio runtime: a page of
    /// [`OFF_RUNTIME_VALUES`] values or more that the list takes whole (it has no limit,
    /// or no selectors to filter with) is read back on tokio's blocking threads,
    /// several at once when it weighs enough (as [`Self::take_page`] reads), and the
    /// caller's task waits for it there instead of holding its worker. Smaller pages,
    /// pages a limit may stop part way, and a caller outside a runtime are read in
    /// place. The list is the same either way (its items, where it stops, the errors
    /// it names and reports).
    pub async fn take_page_off_runtime<E>(
        &mut self,
        layers: &ObjectLayers<T, E>,
        kvs: Vec<(K, Bytes, i64)>,
        more: bool,
        count: i64,
    ) -> Result<bool>
    where
        E: DecodeErrors + Clone + Send + Sync + 'static,
    {
        let whole = !self.paging() || self.predicate.is_empty();
        if kvs.len() < OFF_RUNTIME_VALUES || !whole || Handle::try_current().is_err() {
            return self.take_page(layers, kvs.into_iter(), more, count);
        }
        let first_key = kvs
            .first()
            .map(|(key, _, _)| key.text().into_owned())
            .unwrap_or_default();
        let (reading_layers, predicate) = (layers.clone(), self.predicate.clone());
        let read = tokio::task::spawn_blocking(move || {
            read_ahead::read_all(&reading_layers, &predicate, kvs)
        })
        .await
        .map_err(|err| match err.try_into_panic() {
            // A panic of the codec is the caller's, as when read in place.
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(err) => StorageError::Internal {
                key: first_key,
                message: format!("reading a list's page back did not finish: {err}"),
                source: None,
            },
        })?;
        let page = PageReader::already_read(layers, self.predicate, read, std::iter::empty());
        self.take_from(layers, page, more, count)
    }
}
