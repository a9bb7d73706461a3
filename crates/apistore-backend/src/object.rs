//! Objects to stored bytes and back, and the state a write starts from.
//!
//! Owns the layering both backends put between an object and the bytes under its key,
//! as `pkg/storage/etcd3/store.go` of k8s.io/apiserver v0.31.1 does: on the way in the
//! versioner clears resourceVersion and selfLink, the codec encodes, the value
//! transformer transforms with the stored key as authenticated data; on the way out the
//! reverse, and the mod revision becomes the resourceVersion. A failure is an internal
//! error naming the key, in kube-apiserver's words (`unable to transform value`,
//! `unable to decode value`, ...). Also the object state a delete or a guaranteed update
//! starts from (kube-apiserver's `objState`), read from a stored value or taken from a
//! caller's cached object, and the minimum-resourceVersion check of get and list.
//!
//! What a backend leaves here is only the bytes and revisions it read; the reads
//! themselves, and whether a decode failure is counted in a metric
//! ([`DecodeErrors`]), stay with the backend.

use std::fmt;
use std::sync::Arc;

use apistore_storage::{
    ApiObject, Codec, CorruptObjectError, ResponseMeta, Result, SelectionPredicate, StorageError,
    StoredSelector, Versioner,
};
use apistore_value::Transformer;
use apistore_versioning::ApiObjectVersioner;
use bytes::Bytes;

/// Where a failed decode of a read is reported: the etcd3 store counts them in
/// `apiserver_storage_decode_errors_total`; `()` reports nowhere.
pub trait DecodeErrors {
    /// One value could not be decoded.
    fn record_decode_error(&self);
}

impl DecodeErrors for () {
    fn record_decode_error(&self) {}
}

/// The codec, the value transformer and the versioner of one store: everything between
/// a `T` and the bytes stored under its key. Cheap to clone (shared parts).
pub struct ObjectLayers<T, E = ()> {
    codec: Arc<dyn Codec<T>>,
    transformer: Arc<dyn Transformer>,
    versioner: ApiObjectVersioner,
    decode_errors: E,
    /// The group-resource, when kube's `AllowUnsafeMalformedObjectDeletion` is on: lists
    /// name every corrupt object and a watch's delete of one is a store-read error.
    corrupt_objects_reported_as: Option<Arc<str>>,
    /// The most threads a list's page is read back on; 0 for one per core.
    read_threads: usize,
    /// Judges a list's selectors on the stored bytes, when set: values it drops are
    /// not decoded.
    stored_selector: Option<Arc<dyn StoredSelector>>,
}

impl<T, E: Clone> Clone for ObjectLayers<T, E> {
    fn clone(&self) -> Self {
        Self {
            codec: Arc::clone(&self.codec),
            transformer: Arc::clone(&self.transformer),
            versioner: self.versioner,
            decode_errors: self.decode_errors.clone(),
            corrupt_objects_reported_as: self.corrupt_objects_reported_as.clone(),
            read_threads: self.read_threads,
            stored_selector: self.stored_selector.clone(),
        }
    }
}

impl<T, E> fmt::Debug for ObjectLayers<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ObjectLayers")
            .field("transformer", &self.transformer)
            .finish_non_exhaustive()
    }
}

/// A stored value that could not be read back, its failure not yet reported: a list
/// reading values ahead reports only those it reaches, as one reading them in turn.
#[derive(Debug)]
pub struct UnreadValue {
    error: StorageError,
    /// Whether the decode failed (counted by [`DecodeErrors`]), not the transform.
    undecodable: bool,
}

/// What a delete or update knows about the object it works on (kube-apiserver's
/// `objState`).
#[derive(Debug)]
pub struct ObjState<T> {
    /// The object, with its resourceVersion set (the default object when absent).
    pub obj: T,
    /// The response metadata of the read.
    pub meta: ResponseMeta,
    /// The mod revision; 0 when the object does not exist.
    pub rev: i64,
    /// The plain (untransformed) stored bytes.
    pub data: Bytes,
    /// Whether the stored bytes were written with an old key and should be rewritten.
    pub stale: bool,
}

impl<T, E> ObjectLayers<T, E> {
    /// The layers of a store: `decode_errors` hears of every failed decode of a read.
    pub fn new(
        codec: Arc<dyn Codec<T>>,
        transformer: Arc<dyn Transformer>,
        decode_errors: E,
    ) -> Self {
        Self {
            codec,
            transformer,
            versioner: ApiObjectVersioner,
            decode_errors,
            corrupt_objects_reported_as: None,
            read_threads: 0,
            stored_selector: None,
        }
    }

    /// Sets the most threads a large page of a list is read back (transformed and
    /// decoded) on at once: 0 (the default) for one per core the process may use, 1
    /// for the caller's thread alone, as kube-apiserver decodes a list. The list is the
    /// same either way (its items, where it stops, the error it names); only a page
    /// holding a MiB or more of stored values is split, half a MiB or more a thread.
    /// See [`crate::list::ListPages::take_page`].
    pub fn set_read_threads(&mut self, threads: usize) {
        self.read_threads = threads;
    }

    /// The most threads a page of a list is read back on (see [`Self::set_read_threads`]).
    pub fn read_threads(&self) -> usize {
        if self.read_threads == 0 {
            crate::read_ahead::cores()
        } else {
            self.read_threads
        }
    }

    /// Lets a list judge its selectors on each value's stored bytes through `selector`
    /// and decode only the values they keep (see [`StoredSelector`]: the list is the
    /// same, but a value the selectors drop is never decoded, so a fault only
    /// its decode would find fails no list); `None` (the default) decodes every value
    /// first, as kube-apiserver does.
    pub fn set_stored_selector(&mut self, selector: Option<Arc<dyn StoredSelector>>) {
        self.stored_selector = selector;
    }

    /// Turns kube's `AllowUnsafeMalformedObjectDeletion` behaviour on for a store of
    /// `group_resource` ([`crate::ResourceConfig::unsafe_malformed_object_deletion`]), or
    /// off with `None`.
    pub fn set_unsafe_malformed_object_deletion(&mut self, group_resource: Option<Arc<str>>) {
        self.corrupt_objects_reported_as = group_resource;
    }

    /// The group-resource corrupt objects are reported for, when kube's
    /// `AllowUnsafeMalformedObjectDeletion` behaviour is on.
    pub fn unsafe_malformed_object_deletion(&self) -> Option<&Arc<str>> {
        self.corrupt_objects_reported_as.as_ref()
    }

    /// The value transformer.
    pub fn transformer(&self) -> &Arc<dyn Transformer> {
        &self.transformer
    }

    /// Replaces the value transformer.
    pub fn set_transformer(&mut self, transformer: Arc<dyn Transformer>) {
        self.transformer = transformer;
    }

    /// Replaces where failed decodes are reported.
    pub fn set_decode_errors(&mut self, decode_errors: E) {
        self.decode_errors = decode_errors;
    }

    /// The versioner: resourceVersion is the mod revision.
    pub fn versioner(&self) -> &ApiObjectVersioner {
        &self.versioner
    }
}

impl<T, E> ObjectLayers<T, E>
where
    T: ApiObject + Default + 'static,
    E: DecodeErrors,
{
    /// Reads stored bytes back to plain bytes and whether they are stale; a failure is
    /// an internal error naming the key.
    pub fn transform_from_storage(&self, key: &str, value: Bytes) -> Result<(Bytes, bool)> {
        match self
            .transformer
            .transform_from_storage(value, key.as_bytes())
        {
            Ok(plain) => Ok((plain.data, plain.stale)),
            Err(err) => Err(StorageError::internal(
                key,
                format!("unable to transform value: {err}"),
                Box::new(CorruptObjectError::untransformable(Box::new(err))),
            )),
        }
    }

    /// Prepares plain bytes for storage; a failure is an internal error naming the key.
    pub fn transform_to_storage(&self, key: &str, data: Bytes) -> Result<Bytes> {
        self.transformer
            .transform_to_storage(data, key.as_bytes())
            .map_err(|err| {
                StorageError::internal(
                    key,
                    format!("unable to transform value for storage: {err}"),
                    Box::new(err),
                )
            })
    }

    /// Decodes plain bytes of a read and stamps the revision as resourceVersion; a
    /// failure is reported to [`DecodeErrors`].
    pub fn decode(&self, key: &str, data: &[u8], rev: i64) -> Result<T> {
        self.decode_uncounted(key, data, rev)
            .inspect_err(|_| self.decode_errors.record_decode_error())
    }

    /// [`Self::decode`] without reporting a failure, for watch events: kube-apiserver
    /// counts decode errors of get, list and writes only.
    pub fn decode_uncounted(&self, key: &str, data: &[u8], rev: i64) -> Result<T> {
        let mut obj = self.codec.decode(data).map_err(|err| {
            StorageError::internal(
                key,
                format!("unable to decode value: {err}"),
                Box::new(CorruptObjectError::undecodable(rev, Box::new(err))),
            )
        })?;
        self.set_revision(&mut obj, rev);
        Ok(obj)
    }

    /// The object a stored value at mod revision `rev` holds: transformed back, then
    /// decoded ([`Self::decode`]); whether it was stale is not asked.
    pub fn decode_stored(&self, key: &str, value: Bytes, rev: i64) -> Result<T> {
        self.read_stored(key, value, rev)
            .map_err(|unread| self.report_unread(unread))
    }

    /// [`Self::decode_stored`] with a failure returned to report later
    /// ([`Self::report_unread`]) or never, instead of reported now.
    pub fn read_stored(
        &self,
        key: &str,
        value: Bytes,
        rev: i64,
    ) -> std::result::Result<T, UnreadValue> {
        let data = self.plain_for_read(key, value)?;
        self.decode_for_read(key, &data, rev)
    }

    /// [`Self::read_stored`] for a list selecting with `predicate`: `Ok(None)` when the
    /// [stored selector](Self::set_stored_selector) finds from the plain bytes that the
    /// object does not match, which is then not decoded. Otherwise the object decoded,
    /// which the caller still judges itself.
    pub fn read_selected(
        &self,
        key: &str,
        value: Bytes,
        rev: i64,
        predicate: &SelectionPredicate,
    ) -> std::result::Result<Option<T>, UnreadValue> {
        let data = self.plain_for_read(key, value)?;
        let dropped = match &self.stored_selector {
            Some(selector) if !predicate.is_empty() => {
                selector.matches_stored(&data, predicate) == Some(false)
            }
            _ => false,
        };
        if dropped {
            return Ok(None);
        }
        self.decode_for_read(key, &data, rev).map(Some)
    }

    /// A read's stored value transformed back to plain bytes, a failure not yet
    /// reported.
    fn plain_for_read(&self, key: &str, value: Bytes) -> std::result::Result<Bytes, UnreadValue> {
        self.transform_from_storage(key, value)
            .map(|(data, _)| data)
            .map_err(|error| UnreadValue {
                error,
                undecodable: false,
            })
    }

    /// A read's plain bytes decoded, a failure not yet reported.
    fn decode_for_read(
        &self,
        key: &str,
        data: &[u8],
        rev: i64,
    ) -> std::result::Result<T, UnreadValue> {
        self.decode_uncounted(key, data, rev)
            .map_err(|error| UnreadValue {
                error,
                undecodable: true,
            })
    }

    /// The error of a value [`Self::read_stored`] could not read, a failed decode
    /// reported to [`DecodeErrors`] as [`Self::decode`] reports it.
    pub fn report_unread(&self, unread: UnreadValue) -> StorageError {
        if unread.undecodable {
            self.decode_errors.record_decode_error();
        }
        unread.error
    }

    /// `object` as a read of `data` (its encoding) will return it: itself when the
    /// codec's round trip is the identity, else the decoded bytes (kube's store answers
    /// a write with what it decodes from the bytes it wrote).
    pub fn as_written(&self, key: &str, object: T, data: &[u8]) -> Result<T> {
        if self.codec.round_trips() {
            Ok(object)
        } else {
            self.decode(key, data, 0)
        }
    }

    /// Encodes an object for storage (resourceVersion and selfLink cleared).
    pub fn encode(&self, key: &str, obj: &mut T) -> Result<Bytes> {
        self.versioner.prepare_object_for_storage(obj)?;
        self.codec.encode(obj).map_err(|err| {
            StorageError::internal(
                key,
                format!("unable to encode object: {err}"),
                Box::new(err),
            )
        })
    }

    /// Encodes an object to replace `previous` (the plain bytes stored under `key`),
    /// carrying over what `previous` holds that a decode could not show
    /// ([`Codec::encode_replacing`]); with no previous value, as [`Self::encode`].
    pub fn encode_replacing(&self, key: &str, obj: &mut T, previous: &[u8]) -> Result<Bytes> {
        if previous.is_empty() {
            return self.encode(key, obj);
        }
        self.versioner.prepare_object_for_storage(obj)?;
        self.codec.encode_replacing(obj, previous).map_err(|err| {
            StorageError::internal(
                key,
                format!("unable to encode object: {err}"),
                Box::new(err),
            )
        })
    }

    /// Whether an update must start from the bytes really stored rather than from a
    /// caller's cached object ([`Codec::carries_previous`]): an encoding of a decoded
    /// object has already lost what the decode could not show.
    pub fn update_needs_stored_value(&self) -> bool {
        self.codec.carries_previous()
    }

    /// Stamps a revision as the object's resourceVersion.
    pub fn set_revision(&self, obj: &mut T, rev: i64) {
        // Setting a resourceVersion cannot fail for this versioner; a revision is never
        // negative.
        let _ = self.versioner.update_object(obj, rev.max(0).unsigned_abs());
    }

    /// The state of `key` from its stored value and mod revision, `None` when absent:
    /// not found, unless `ignore_not_found` asks for the empty state.
    pub fn state_from_value(
        &self,
        key: &str,
        stored: Option<(Bytes, i64)>,
        ignore_not_found: bool,
    ) -> Result<ObjState<T>> {
        let Some((value, rev)) = stored else {
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
        let (data, stale) = self.transform_from_storage(key, value)?;
        let obj = self.decode(key, &data, rev)?;
        Ok(ObjState {
            obj,
            meta: ResponseMeta {
                ttl: 0,
                resource_version: rev.max(0).unsigned_abs(),
            },
            rev,
            data,
            stale,
        })
    }

    /// The state of a caller's cached object (as [`Self::state_from_object`]) when an
    /// update may start from it: always for a codec that carries nothing over from the
    /// stored value, else only when the object encodes to the very value it was read
    /// from ([`Codec::stored_value`]); `None` when the stored value must be read.
    pub fn state_from_cached(&self, key: &str, obj: T) -> Result<Option<ObjState<T>>> {
        if !self.update_needs_stored_value() {
            return self.state_from_object(key, obj).map(Some);
        }
        // Most codecs keep nothing: no encode to find that out.
        if self.codec.stored_value(&obj).is_none() {
            return Ok(None);
        }
        let state = self.state_from_object(key, obj)?;
        let unchanged = self
            .codec
            .stored_value(&state.obj)
            .is_some_and(|stored| stored == state.data.as_ref());
        Ok(unchanged.then_some(state))
    }

    /// The state of a caller's cached object: its resourceVersion and its encoding.
    pub fn state_from_object(&self, key: &str, mut obj: T) -> Result<ObjState<T>> {
        let rv = self
            .versioner
            .object_resource_version(&obj)
            .map_err(|err| {
                StorageError::internal(
                    key,
                    format!("couldn't get resource version: {err}"),
                    Box::new(err),
                )
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
    /// store has not reached (`actual`, the revision of its answer).
    pub fn validate_minimum_resource_version(
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
