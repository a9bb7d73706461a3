//! Guaranteed update: read, apply the caller's function, compare-and-swap on the mod
//! revision, retry on conflict. Follows `GuaranteedUpdate` in kube-apiserver's
//! `etcd3/store.go`, including its cached-object and stale-data rules.

use apistore_backend::ObjState;
use apistore_storage::{ApiObject, ResponseMeta, Result, StorageError, Update, UpdateOptions};
use etcd_client::{Compare, CompareOp, Txn, TxnOp, TxnOpResponse, TxnResponse};

use crate::error::internal;
use crate::instrument::Operation;
use crate::store::Etcd3Store;

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
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
        let Some(limit) = self.update_timeout else {
            return self
                .guaranteed_update_unbounded(key, options, try_update)
                .await;
        };
        match tokio::time::timeout(
            limit,
            self.guaranteed_update_unbounded(key, options, try_update),
        )
        .await
        {
            Ok(outcome) => outcome,
            Err(_) => Err(StorageError::Timeout {
                key: self.prepare_key(key).unwrap_or_else(|_| key.to_owned()),
                message: format!("the update did not complete within {limit:?}"),
            }),
        }
    }

    async fn guaranteed_update_unbounded<F>(
        &self,
        key: &str,
        options: UpdateOptions<T>,
        mut try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
    {
        let prepared = self.prepare_key(key)?;
        let mut trace =
            self.instrumentation
                .update_span(key, std::any::type_name::<T>(), &self.group_resource);
        let ignore_not_found = options.ignore_not_found;
        // A codec that carries what a decode could not show needs the bytes really
        // stored: an encoding of the caller's decoded object has lost it already.
        let cached = options
            .cached_existing_object
            .filter(|_| !self.layers.update_needs_stored_value());
        let (mut state, mut is_current) = match cached {
            Some(cached) => (self.layers.state_from_object(&prepared, cached)?, false),
            None => (self.current_state(&prepared, ignore_not_found).await?, true),
        };
        trace.event("initial value restored");

        loop {
            if let Some(preconditions) = &options.preconditions {
                if let Err(err) = preconditions.check(&prepared, &state.obj) {
                    if is_current {
                        return Err(err);
                    }
                    // The cached object may just be old: decide on the current one.
                    state = self.current_state(&prepared, ignore_not_found).await?;
                    is_current = true;
                    continue;
                }
            }

            let ObjState {
                obj,
                meta,
                mut rev,
                data: mut stored_data,
                mut stale,
            } = state;
            let Update { object, ttl } = match try_update(obj, &meta) {
                Ok(update) => update,
                Err(err) => {
                    if is_current {
                        return Err(err);
                    }
                    let cached_rev = rev;
                    state = self.current_state(&prepared, ignore_not_found).await?;
                    is_current = true;
                    if cached_rev == state.rev {
                        // The cached object was current after all: its error stands.
                        return Err(err);
                    }
                    continue;
                }
            };
            let mut object = object;
            let ttl = ttl.unwrap_or(0);

            trace.event("About to Encode");
            let data = match self
                .layers
                .encode_replacing(&prepared, &mut object, &stored_data)
            {
                Ok(data) => data,
                Err(err) => {
                    trace.event_len_err("Encode failed", 0, &err);
                    return Err(err);
                }
            };
            trace.event_len("Encode succeeded", data.len());
            let mut object = self.layers.as_written(&prepared, object, &data)?;

            if !stale && data == stored_data {
                if !is_current {
                    // A cached object let us skip the read: make sure etcd really holds
                    // these bytes before deciding there is nothing to write.
                    let fresh = self.current_state(&prepared, ignore_not_found).await?;
                    is_current = true;
                    if data != fresh.data {
                        state = fresh;
                        continue;
                    }
                    rev = fresh.rev;
                    stale = fresh.stale;
                    stored_data = fresh.data;
                }
                if !stale {
                    // Nothing changed: no write. The result is the stored object, which
                    // encodes to exactly these bytes.
                    self.layers.set_revision(&mut object, rev);
                    return Ok(object);
                }
            }
            drop(stored_data);

            // The encoded length is all that is needed later; handing `data` over unshared
            // lets an identity transform's output become the request without a copy.
            let len = data.len();
            let stored = match self.layers.transform_to_storage(&prepared, data) {
                Ok(stored) => stored,
                Err(err) => {
                    trace.event_err("TransformToStorage failed", &err);
                    return Err(err);
                }
            };
            trace.event("TransformToStorage succeeded");
            let put_options = self.put_options(&prepared, ttl).await?;
            trace.event("Transaction prepared");

            let txn = Txn::new()
                .when([Compare::mod_revision(
                    prepared.as_str(),
                    CompareOp::Equal,
                    rev,
                )])
                .and_then([TxnOp::put(
                    prepared.as_str(),
                    Vec::from(stored),
                    put_options,
                )])
                .or_else([TxnOp::get(prepared.as_str(), None)]);
            let response = match self
                .call(&prepared, Operation::Update, |mut kv| {
                    let txn = txn.clone();
                    async move { kv.txn(txn).await }
                })
                .await
            {
                Ok(response) => response,
                Err(err) => {
                    trace.event_err("Txn call failed", &err);
                    return Err(err);
                }
            };
            trace.event("Txn call completed");
            trace.event("Transaction committed");
            if !response.succeeded() {
                // Someone wrote first: the else branch read the new value, retry on it.
                let current = else_get(&prepared, &response)?;
                state = self.state_from_response(&prepared, current, ignore_not_found)?;
                trace.event("Retry value restored");
                is_current = true;
                continue;
            }
            let revision = response.header().map_or(0, |h| h.revision());
            self.layers.set_revision(&mut object, revision);
            trace.event_len("decode succeeded", len);
            return Ok(object);
        }
    }
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
