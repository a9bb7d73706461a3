//! Raw reads and deletes: the stored bytes and etcd's metadata of each key, neither
//! decrypted nor decoded, for operator tools (`apistore keys`, `get --raw`,
//! `delete --force`) that must see and remove values no codec or key can read. The
//! equivalent of `etcdctl get -w json` and of kube-apiserver's
//! `unsafe-delete-ignore-read-errors`.

use apistore_storage::{ApiObject, Result, StorageError};
use bytes::Bytes;
use etcd_client::{Compare, CompareOp, Txn, TxnOp};

use crate::instrument::Operation;
use crate::key::{as_directory, prefix_range_end};
use crate::list::pager::Pager;
use crate::store::Etcd3Store;

/// Keys read per etcd request by [`Etcd3Store::raw_entries`].
const RAW_PAGE: i64 = 500;

/// One key as etcd holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RawEntry {
    /// The key, relative to the store's path prefix.
    pub key: String,
    /// The revision of the last write (the object's resourceVersion).
    pub mod_revision: i64,
    /// The revision that created the key.
    pub create_revision: i64,
    /// How many times the key was written since it was created.
    pub version: i64,
    /// The lease the key is attached to (0: none).
    pub lease: i64,
    /// The stored bytes, as written: maybe encrypted, JSON or protobuf.
    pub value: Bytes,
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Every key under `key` (as a directory) with its stored bytes, at `revision`
    /// (0: the latest), in key order; every key under the path prefix when `key` is
    /// empty. Keys that are not UTF-8 are skipped.
    pub async fn raw_entries(&self, key: &str, revision: i64) -> Result<Vec<RawEntry>> {
        let prefix = if key.trim_matches('/').is_empty() {
            self.path_prefix().to_owned()
        } else {
            as_directory(self.prepare_key(key)?)
        };
        let mut pager = Pager::new(&prefix, prefix.as_bytes().to_vec(), Operation::List)
            .range_end(prefix_range_end(prefix.as_bytes()))
            .at_revision(revision);
        pager.set_limit(RAW_PAGE);
        let mut entries = Vec::new();
        loop {
            let page = pager.next_page(self).await?;
            entries.extend(page.kvs.into_iter().filter_map(|kv| self.raw_entry(kv)));
            if !page.more {
                break;
            }
        }
        Ok(entries)
    }

    /// The one key `key` with its stored bytes, at `revision` (0: the latest); `None`
    /// when nothing is stored there.
    pub async fn raw_get(&self, key: &str, revision: i64) -> Result<Option<RawEntry>> {
        let prepared = self.prepare_key(key)?;
        let mut pager = Pager::new(&prepared, prepared.as_bytes().to_vec(), Operation::Get)
            .at_revision(revision);
        let page = pager.next_page(self).await?;
        Ok(page.kvs.into_iter().find_map(|kv| self.raw_entry(kv)))
    }

    /// The object a read of `entry` (from [`Self::raw_get`] or [`Self::raw_entries`])
    /// returns: its value decrypted and decoded, its mod revision as resourceVersion, as
    /// [`Storage::get`](apistore_storage::Storage::get) would, but without reading etcd
    /// again. A value that cannot be read is the get's error
    /// ([`StorageError::is_corrupt_object`]).
    pub fn decode_entry(&self, entry: &RawEntry) -> Result<T> {
        let prepared = self.prepare_key(&entry.key)?;
        self.layers
            .decode_stored(&prepared, entry.value.clone(), entry.mod_revision)
    }

    /// Deletes `key` without reading its value: for a value that cannot be decrypted or
    /// decoded. Deletes only if the key's mod revision is still `mod_revision`, so that
    /// a concurrent write is never lost (a 409 Conflict otherwise). Returns the revision
    /// of the deletion.
    ///
    /// The transaction is kube-apiserver's conditional delete (`etcd3/store.go`
    /// `conditionalDelete`), the read on failure included even though nothing reads it:
    /// kine accepts only the transaction shapes kube-apiserver sends, and refuses a delete
    /// without that `Else(OpGet(key))` as an unsupported operation.
    pub async fn raw_delete(&self, key: &str, mod_revision: i64) -> Result<i64> {
        let prepared = self.prepare_key(key)?;
        let txn = Txn::new()
            .when([Compare::mod_revision(
                prepared.as_str(),
                CompareOp::Equal,
                mod_revision,
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
            return Err(StorageError::conflict(
                prepared,
                format!("the value changed after revision {mod_revision}; read it again"),
            ));
        }
        Ok(response.header().map_or(0, |h| h.revision()))
    }

    fn raw_entry(&self, kv: etcd_client::KeyValue) -> Option<RawEntry> {
        let (mod_revision, create_revision, version, lease) = (
            kv.mod_revision(),
            kv.create_revision(),
            kv.version(),
            kv.lease(),
        );
        let (key, value) = kv.into_key_value();
        let key = String::from_utf8(key).ok()?;
        let key = key.strip_prefix(self.path_prefix())?.to_owned();
        Some(RawEntry {
            key,
            mod_revision,
            create_revision,
            version,
            lease,
            value: Bytes::from(value),
        })
    }
}
