//! Re-encryption on the stored bytes: read a value, ask the transformer whether it is
//! stale (read with a key other than the first write key), and only then write the
//! re-encrypted bytes back by compare-and-swap on the mod revision.
//!
//! Nothing is decoded: a value apistore cannot decode (protobuf of a kind it does not
//! know, a foreign format) is re-encrypted all the same, and a value already under the
//! write key is never written, so no watcher sees a MODIFIED event for it. The lease
//! of the key is kept. kube-apiserver reaches the same end through a no-op update,
//! which re-encodes; this is what `kubectl get secrets -A -o json | kubectl replace -f -`
//! would be if it could not change a byte of the object.

use apistore_storage::{ApiObject, Result, StorageError};
use etcd_client::{Compare, CompareOp, PutOptions, Txn, TxnOp};

use crate::instrument::Operation;
use crate::store::Etcd3Store;
use crate::update::else_get;

/// What [`Etcd3Store::reencrypt`] found or did for one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reencryption {
    /// The value is already under the write key: nothing was written.
    Current,
    /// The value was stale and was written again under the write key.
    Rewritten,
    /// The value is stale; a dry run wrote nothing.
    WouldRewrite,
    /// The key is gone (deleted since it was listed).
    Gone,
}

/// Compare-and-swap attempts before giving up on a key that keeps changing.
const ATTEMPTS: usize = 16;

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Re-encrypts the value under `key` with the current write key if, and only if,
    /// the transformer says it is stale. With `dry_run`, only says whether it would.
    ///
    /// A value that cannot be decrypted is an internal error naming the key (nothing is
    /// written). A concurrent write between the read and the write makes the
    /// compare-and-swap fail; the key is then read again, so a newer value written by
    /// someone else is never overwritten with older bytes.
    pub async fn reencrypt(&self, key: &str, dry_run: bool) -> Result<Reencryption> {
        let prepared = self.prepare_key(key)?;
        let mut response = self
            .call(&prepared, Operation::Get, |mut kv| {
                let prepared = prepared.clone();
                async move { kv.get(prepared, None).await }
            })
            .await?;
        for _ in 0..ATTEMPTS {
            let Some(kv) = response.take_kvs().into_iter().next() else {
                return Ok(Reencryption::Gone);
            };
            let (revision, lease) = (kv.mod_revision(), kv.lease());
            let (_, value) = kv.into_key_value();
            let (plain, stale) = self
                .layers
                .transform_from_storage(&prepared, value.into())?;
            if !stale {
                return Ok(Reencryption::Current);
            }
            if dry_run {
                return Ok(Reencryption::WouldRewrite);
            }
            let stored = self.layers.transform_to_storage(&prepared, plain)?;
            let put_options = (lease != 0).then(|| PutOptions::new().with_lease(lease));
            let txn = Txn::new()
                .when([Compare::mod_revision(
                    prepared.as_str(),
                    CompareOp::Equal,
                    revision,
                )])
                .and_then([TxnOp::put(
                    prepared.as_str(),
                    Vec::from(stored),
                    put_options,
                )])
                .or_else([TxnOp::get(prepared.as_str(), None)]);
            let outcome = self
                .call(&prepared, Operation::Update, |mut kv| {
                    let txn = txn.clone();
                    async move { kv.txn(txn).await }
                })
                .await?;
            if outcome.succeeded() {
                return Ok(Reencryption::Rewritten);
            }
            // Changed under us: decide again on what is there now.
            response = else_get(&prepared, &outcome)?;
        }
        Err(StorageError::conflict(
            prepared,
            format!("the value changed {ATTEMPTS} times while it was being re-encrypted"),
        ))
    }
}
