//! The memory store's transactions for create, guaranteed update and delete: a read of
//! one key, and a put or delete conditional on its mod revision, each returning what the
//! key holds when the comparison fails, as etcd's else branch does. The decisions around
//! them (preconditions, cached objects, no-op and stale rewrites) are
//! `apistore_backend::write`'s, shared with the etcd3 store.

use std::time::Duration;

use apistore_backend::{CompareAndSwap, StoredValue, Swap, write};
use apistore_storage::{ApiObject, DeleteOptions, ResponseMeta, Result, Update, UpdateOptions};
use bytes::Bytes;

use crate::mvcc::KeyValue;
use crate::store::MemoryStore;

impl<T> CompareAndSwap for MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// When the value's lease runs out.
    type PutOptions = Option<Duration>;

    async fn read_key(&self, key: &str) -> Result<StoredValue> {
        self.count_read();
        Ok(stored_value(self.kv.read().get(key)))
    }

    async fn prepare_put(&self, key: &str, ttl: u64) -> Result<Self::PutOptions> {
        self.deadline(key, ttl)
    }

    async fn put_if_absent(
        &self,
        key: &str,
        value: Bytes,
        deadline: Self::PutOptions,
    ) -> Result<Swap> {
        self.put_if(key, 0, value, deadline).await
    }

    async fn put_if(
        &self,
        key: &str,
        rev: i64,
        value: Bytes,
        deadline: Self::PutOptions,
    ) -> Result<Swap> {
        Ok(swap(
            self.kv.write(|mvcc| mvcc.put_if(key, rev, value, deadline)),
        ))
    }

    async fn delete_if(&self, key: &str, rev: i64) -> Result<Swap> {
        Ok(swap(self.kv.write(|mvcc| mvcc.delete_if(key, rev))))
    }
}

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Create: "mod revision is 0" then put; the object comes back with the put's
    /// revision.
    pub(crate) async fn create_object(&self, key: &str, obj: T, ttl: u64) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        write::create(self, &self.layers, &prepared, obj, ttl, &mut ()).await
    }

    /// Guaranteed update: read, apply, compare-and-swap, retry on conflict.
    pub(crate) async fn guaranteed_update_object<F>(
        &self,
        key: &str,
        options: UpdateOptions<T>,
        try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
    {
        let prepared = self.prepare_key(key)?;
        write::guaranteed_update(self, &self.layers, &prepared, options, try_update, &mut ()).await
    }

    /// Conditional delete: preconditions and validation on the latest state, then a
    /// compare-and-swap, retried on conflict.
    pub(crate) async fn delete_object(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        write::conditional_delete(self, &self.layers, &prepared, options).await
    }
}

fn stored_value(kv: Option<KeyValue>) -> StoredValue {
    kv.map(|kv| (kv.value, kv.mod_revision))
}

/// A conditional change's outcome: the revision it made, or what the key holds.
fn swap(outcome: Result<i64, Option<KeyValue>>) -> Swap {
    match outcome {
        Ok(revision) => Swap::Done(revision),
        Err(current) => Swap::Conflict(stored_value(current)),
    }
}
