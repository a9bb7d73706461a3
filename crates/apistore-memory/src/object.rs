//! Objects to stored bytes and back, as the etcd3 store does it: the codec, then the
//! value transformer with the stored key as authenticated data; the resourceVersion
//! cleared before encoding and set from the mod revision after decoding. And the state
//! a write starts from: the current value, or the caller's cached object.

use apistore_storage::{ApiObject, ResponseMeta, Result, StorageError, Versioner};
use bytes::Bytes;

use crate::mvcc::KeyValue;
use crate::store::MemoryStore;

/// What a delete or update knows about the object it works on.
pub(crate) struct ObjState<T> {
    pub(crate) obj: T,
    pub(crate) meta: ResponseMeta,
    /// The mod revision; 0 when the object does not exist.
    pub(crate) rev: i64,
    /// The plain (untransformed) stored bytes.
    pub(crate) data: Bytes,
    /// Whether the stored bytes should be rewritten with the current write key.
    pub(crate) stale: bool,
}

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Reads stored bytes back to plain bytes; a failure is an internal error naming the key.
    pub(crate) fn transform_from_storage(&self, key: &str, value: Bytes) -> Result<(Bytes, bool)> {
        match self
            .transformer
            .transform_from_storage(value, key.as_bytes())
        {
            Ok(plain) => Ok((plain.data, plain.stale)),
            Err(err) => Err(StorageError::Internal {
                key: key.to_owned(),
                message: format!("unable to transform value: {err}"),
                source: Some(Box::new(err)),
            }),
        }
    }

    /// Prepares plain bytes for storage; a failure is an internal error naming the key.
    pub(crate) fn transform_to_storage(&self, key: &str, data: Bytes) -> Result<Bytes> {
        self.transformer
            .transform_to_storage(data, key.as_bytes())
            .map_err(|err| StorageError::Internal {
                key: key.to_owned(),
                message: format!("unable to transform value for storage: {err}"),
                source: Some(Box::new(err)),
            })
    }

    /// Decodes plain bytes and stamps the revision as resourceVersion.
    pub(crate) fn decode(&self, key: &str, data: &[u8], rev: i64) -> Result<T> {
        let mut obj = self
            .codec
            .decode(data)
            .map_err(|err| StorageError::Internal {
                key: key.to_owned(),
                message: format!("unable to decode value: {err}"),
                source: Some(Box::new(err)),
            })?;
        self.set_revision(&mut obj, rev);
        Ok(obj)
    }

    /// `object` as a read of `data` (its encoding) will return it: itself when the
    /// codec's round trip is the identity, else the decoded bytes (as the etcd3 store and
    /// kube's answer a write).
    pub(crate) fn as_written(&self, key: &str, object: T, data: &[u8]) -> Result<T> {
        if self.codec.round_trips() {
            Ok(object)
        } else {
            self.decode(key, data, 0)
        }
    }

    /// Encodes an object for storage (resourceVersion and selfLink cleared).
    pub(crate) fn encode(&self, key: &str, obj: &mut T) -> Result<Bytes> {
        self.versioner.prepare_object_for_storage(obj)?;
        self.codec
            .encode(obj)
            .map_err(|err| StorageError::Internal {
                key: key.to_owned(),
                message: format!("unable to encode object: {err}"),
                source: Some(Box::new(err)),
            })
    }

    pub(crate) fn set_revision(&self, obj: &mut T, rev: i64) {
        // Cannot fail for this versioner; a revision is never negative.
        let _ = self.versioner.update_object(obj, rev.max(0).unsigned_abs());
    }

    /// Reads the current state of `key` (one counted read).
    pub(crate) fn current_state(&self, key: &str, ignore_not_found: bool) -> Result<ObjState<T>> {
        self.count_read();
        let kv = self.kv.read().get(key);
        self.state_from_kv(key, kv, ignore_not_found)
    }

    /// Builds an object state from a stored key-value (`None`: absent).
    pub(crate) fn state_from_kv(
        &self,
        key: &str,
        kv: Option<KeyValue>,
        ignore_not_found: bool,
    ) -> Result<ObjState<T>> {
        let Some(kv) = kv else {
            if !ignore_not_found {
                return Err(StorageError::not_found(key));
            }
            return Ok(ObjState {
                obj: T::default(),
                meta: ResponseMeta::default(),
                rev: 0,
                data: Bytes::new(),
                stale: false,
            });
        };
        let (data, stale) = self.transform_from_storage(key, kv.value)?;
        let obj = self.decode(key, &data, kv.mod_revision)?;
        Ok(ObjState {
            obj,
            meta: ResponseMeta {
                ttl: 0,
                resource_version: kv.mod_revision.max(0).unsigned_abs(),
            },
            rev: kv.mod_revision,
            data,
            stale,
        })
    }

    /// The state of a caller's cached object: its resourceVersion and its encoding.
    pub(crate) fn state_from_object(&self, key: &str, mut obj: T) -> Result<ObjState<T>> {
        let rv = self
            .versioner
            .object_resource_version(&obj)
            .map_err(|err| StorageError::Internal {
                key: key.to_owned(),
                message: format!("couldn't get resource version: {err}"),
                source: Some(Box::new(err)),
            })?;
        let rev = i64::try_from(rv).map_err(|_| {
            StorageError::bad_request(key, format!("resource version {rv} is out of range"))
        })?;
        let data = self.encode(key, &mut obj)?;
        self.set_revision(&mut obj, rev);
        Ok(ObjState {
            obj,
            meta: ResponseMeta {
                ttl: 0,
                resource_version: rv,
            },
            rev,
            data,
            stale: false,
        })
    }

    /// Fails with too-large-resourceVersion when the caller asked for a revision the
    /// store has not reached.
    pub(crate) fn validate_minimum_resource_version(
        &self,
        key: &str,
        minimum: &str,
        actual: i64,
    ) -> Result<()> {
        if minimum.is_empty() {
            return Ok(());
        }
        let minimum_rv = self
            .versioner
            .parse_resource_version(minimum)
            .map_err(|err| {
                StorageError::bad_request(key, format!("invalid resource version: {err}"))
            })?;
        let actual = actual.max(0).unsigned_abs();
        if minimum_rv > actual {
            return Err(StorageError::ResourceVersionTooLarge {
                key: key.to_owned(),
                requested: minimum_rv,
                current: actual,
                retry_after_seconds: 0,
            });
        }
        Ok(())
    }
}
