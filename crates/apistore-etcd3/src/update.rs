//! The etcd3 store's transactions for create, guaranteed update and delete: a read of
//! one key, and a put or delete conditional on its mod revision, each with the value in
//! the else branch so a conflict retries without another read. The decisions around
//! them (preconditions, cached objects, no-op and stale rewrites) are
//! `apistore_backend::write`'s, shared with every backend.

use apistore_backend::{CompareAndSwap, StoredValue, Swap, WriteTrace, write};
use apistore_storage::{
    ApiObject, DeleteOptions, ResponseMeta, Result, StorageError, Update, UpdateOptions,
};
use bytes::Bytes;
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};

use crate::error::internal;
use crate::instrument::{Operation, Trace};
use crate::store::Etcd3Store;

impl<T> CompareAndSwap for Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    type PutOptions = Option<PutOptions>;

    async fn read_key(&self, key: &str) -> Result<StoredValue> {
        let response = self
            .call(key, Operation::Get, |mut kv| async move {
                kv.get(key, None).await
            })
            .await?;
        Ok(stored_value(response))
    }

    async fn prepare_put(&self, key: &str, ttl: u64) -> Result<Self::PutOptions> {
        self.put_options(key, ttl).await
    }

    async fn put_if_absent(
        &self,
        key: &str,
        value: Bytes,
        options: Self::PutOptions,
    ) -> Result<Swap> {
        // kube-apiserver's create has no else branch (and kine accepts only its shape).
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, Vec::from(value), options)]);
        let response = self
            .call(key, Operation::Create, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?;
        if response.succeeded() {
            return swap(key, &response);
        }
        Ok(Swap::Conflict(None))
    }

    async fn put_if(
        &self,
        key: &str,
        rev: i64,
        value: Bytes,
        options: Self::PutOptions,
    ) -> Result<Swap> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, rev)])
            .and_then([TxnOp::put(key, Vec::from(value), options)])
            .or_else([TxnOp::get(key, None)]);
        let response = self
            .call(key, Operation::Update, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?;
        swap(key, &response)
    }

    async fn delete_if(&self, key: &str, rev: i64) -> Result<Swap> {
        let txn = Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, rev)])
            .and_then([TxnOp::delete(key, None)])
            .or_else([TxnOp::get(key, None)]);
        let response = self
            .call(key, Operation::Delete, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?;
        swap(key, &response)
    }
}

impl WriteTrace for Trace<'_> {
    fn event(&mut self, name: &'static str) {
        Trace::event(self, name);
    }
    fn event_len(&mut self, name: &'static str, len: usize) {
        Trace::event_len(self, name, len);
    }
    fn event_err(&mut self, name: &'static str, err: &dyn std::fmt::Display) {
        Trace::event_err(self, name, err);
    }
    fn event_len_err(&mut self, name: &'static str, len: usize, err: &dyn std::fmt::Display) {
        Trace::event_len_err(self, name, len, err);
    }
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Create: a transaction on "mod revision is 0"; the object comes back with the
    /// revision of the put.
    pub(crate) async fn create_object(&self, key: &str, obj: T, ttl: u64) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        let mut trace = self.instrumentation.create_span(
            key,
            std::any::type_name::<T>(),
            self.scope.group_resource(),
        );
        write::create(self, &self.layers, &prepared, obj, ttl, &mut trace).await
    }

    /// Guaranteed update, bounded as a whole by the store's
    /// [`update_timeout`](crate::StoreConfig::update_timeout) when it has one: past it
    /// the call ends with a timeout, whatever step it is at (a transaction cut short may
    /// or may not have been applied, as with any timeout).
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
        let mut trace = self.instrumentation.update_span(
            key,
            std::any::type_name::<T>(),
            self.scope.group_resource(),
        );
        let update = write::guaranteed_update(
            self,
            &self.layers,
            &prepared,
            options,
            try_update,
            &mut trace,
        );
        let Some(limit) = self.update_timeout else {
            return update.await;
        };
        match tokio::time::timeout(limit, update).await {
            Ok(outcome) => outcome,
            Err(_) => Err(StorageError::Timeout {
                key: prepared,
                message: format!("the update did not complete within {limit:?}"),
            }),
        }
    }

    /// Conditional delete: preconditions and validation on the latest state, then a
    /// compare-and-swap on the mod revision, retried on conflict.
    pub(crate) async fn delete_object(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        write::conditional_delete(self, &self.layers, &prepared, options).await
    }
}

/// The value a range response holds for its one key.
pub(crate) fn stored_value(mut response: etcd_client::GetResponse) -> StoredValue {
    response.take_kvs().into_iter().next().map(|kv| {
        let rev = kv.mod_revision();
        let (_, value) = kv.into_key_value();
        (Bytes::from(value), rev)
    })
}

/// A conditional transaction's outcome: the revision it wrote at, or what its else
/// branch read.
fn swap(key: &str, response: &TxnResponse) -> Result<Swap> {
    if response.succeeded() {
        let Some(header) = response.header() else {
            return Err(internal(key, "invalid transaction response: no header"));
        };
        return Ok(Swap::Done(header.revision()));
    }
    Ok(Swap::Conflict(stored_value(else_get(key, response)?)))
}

/// The range response of a transaction's else branch.
pub(crate) fn else_get(key: &str, response: &TxnResponse) -> Result<etcd_client::GetResponse> {
    match response.op_responses().into_iter().next() {
        Some(TxnOpResponse::Get(get)) => Ok(get),
        Some(_) => Err(internal(
            key,
            "unexpected etcd transaction response: the else branch holds no range",
        )),
        None => Err(internal(
            key,
            "unexpected etcd transaction response: the else branch is empty",
        )),
    }
}
