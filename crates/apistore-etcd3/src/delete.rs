//! Conditional delete: preconditions and validation on the latest state, then a
//! compare-and-swap on the mod revision, retried on conflict. Follows
//! `conditionalDelete` in kube-apiserver's `etcd3/store.go`.

use apistore_storage::{ApiObject, DeleteOptions, Result};
use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use crate::instrument::Operation;
use crate::store::Etcd3Store;
use crate::update::else_get;

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) async fn delete_object(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        let (mut state, mut is_current) = match options.cached_existing_object {
            Some(cached) => (self.layers.state_from_object(&prepared, cached)?, false),
            None => (self.current_state(&prepared, false).await?, true),
        };

        loop {
            let verdict = match &options.preconditions {
                Some(preconditions) => preconditions.check(&prepared, &state.obj),
                None => Ok(()),
            }
            .and_then(|()| match &options.validate_deletion {
                Some(validate) => validate(&state.obj),
                None => Ok(()),
            });
            if let Err(err) = verdict {
                if is_current {
                    return Err(err);
                }
                // The cached object may be old: decide on the current one, unless it
                // turns out to be the same revision.
                let cached_rev = state.rev;
                state = self.current_state(&prepared, false).await?;
                is_current = true;
                if cached_rev == state.rev {
                    return Err(err);
                }
                continue;
            }

            let txn = Txn::new()
                .when([Compare::mod_revision(
                    prepared.as_str(),
                    CompareOp::Equal,
                    state.rev,
                )])
                .and_then([TxnOp::delete(prepared.as_str(), None)])
                .or_else([TxnOp::get(prepared.as_str(), None)]);
            let response = self
                .call(&prepared, Operation::Delete, |mut kv| {
                    let txn = txn.clone();
                    async move { kv.txn(txn).await }
                })
                .await?;
            if !response.succeeded() {
                let current = else_get(&prepared, &response)?;
                state = self.state_from_response(&prepared, current, false)?;
                is_current = true;
                continue;
            }
            let Some(header) = response.header() else {
                return Err(crate::error::internal(
                    prepared,
                    "invalid DeleteRange response: no header",
                ));
            };
            // The last state we saw, with the revision of its deletion.
            let mut deleted = state.obj;
            self.layers.set_revision(&mut deleted, header.revision());
            return Ok(deleted);
        }
    }
}
