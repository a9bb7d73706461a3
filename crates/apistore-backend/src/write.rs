//! The guaranteed update and the conditional delete, decided once for every backend.
//!
//! Both are kube-apiserver's loop (`GuaranteedUpdate` and `conditionalDelete` of
//! `etcd3/store.go`, k8s.io/apiserver v0.31.1): start from the current state (or the
//! caller's cached object, to save a read), check preconditions, apply the caller's
//! function or validation, then compare-and-swap on the mod revision and, when another
//! write came first, go again from what the failed comparison saw. The rules that make
//! the loop subtle live here and nowhere else:
//!
//! - a cached object is only a guess: a precondition, update function or validation that
//!   fails on it is asked again on the current state, and its error stands only when the
//!   current state is the same revision;
//! - an update that encodes to the bytes already stored writes nothing, unless the
//!   stored value was written with an old key (stale) and should be rewritten; with a
//!   cached object, the stored bytes are read once to be sure;
//! - a codec that carries fields a decode could not show starts from the stored bytes,
//!   and from a cached object only when that object still encodes to the very value it
//!   was read from ([`ObjectLayers::state_from_cached`]; a `LazyObject` from a watch
//!   cache does): then it holds what was stored at its revision, and the first
//!   compare-and-swap needs no read, as kube's.
//!
//! A backend gives only its transactions ([`CompareAndSwap`]): one read of a key, and a
//! put or delete conditional on the mod revision. The steps are reported to a
//! [`WriteTrace`] under kube-apiserver's span event names.

use std::fmt;
use std::future::Future;

use apistore_storage::{
    ApiObject, DeleteOptions, ResponseMeta, Result, StorageError, Update, UpdateOptions, Versioner,
};
use bytes::Bytes;

use crate::object::{DecodeErrors, ObjState, ObjectLayers};

/// A stored value and its mod revision, as a backend reads it; `None` when absent.
pub type StoredValue = Option<(Bytes, i64)>;

/// The outcome of a compare-and-swap.
#[derive(Debug)]
pub enum Swap {
    /// The write went through, at this revision.
    Done(i64),
    /// Another write came first: what the key holds now (the comparison's else branch).
    Conflict(StoredValue),
}

/// The transactions a backend offers the write decisions, on keys already prepared
/// ([`KeyScope::prepare_key`](crate::KeyScope::prepare_key)).
pub trait CompareAndSwap: Sync {
    /// What a put needs ready before its transaction (etcd3: the lease of a TTL).
    type PutOptions: Send;

    /// Reads the current value of `key`.
    fn read_key(&self, key: &str) -> impl Future<Output = Result<StoredValue>> + Send;

    /// Readies a put of `key` with a time to live of `ttl` seconds (0: none).
    fn prepare_put(
        &self,
        key: &str,
        ttl: u64,
    ) -> impl Future<Output = Result<Self::PutOptions>> + Send;

    /// Puts `value` under `key` if no value is there (a create); a conflict need not
    /// say what is there.
    fn put_if_absent(
        &self,
        key: &str,
        value: Bytes,
        options: Self::PutOptions,
    ) -> impl Future<Output = Result<Swap>> + Send;

    /// Puts `value` under `key` if its mod revision is still `rev` (0: absent).
    fn put_if(
        &self,
        key: &str,
        rev: i64,
        value: Bytes,
        options: Self::PutOptions,
    ) -> impl Future<Output = Result<Swap>> + Send;

    /// Deletes `key` if its mod revision is still `rev`.
    fn delete_if(&self, key: &str, rev: i64) -> impl Future<Output = Result<Swap>> + Send;
}

/// Where a guaranteed update reports its steps: the etcd3 store's span; `()` nowhere.
pub trait WriteTrace: Send {
    /// A step, by kube-apiserver's event name.
    fn event(&mut self, name: &'static str);
    /// A step with the length of the bytes it produced.
    fn event_len(&mut self, name: &'static str, len: usize);
    /// A step that failed.
    fn event_err(&mut self, name: &'static str, err: &dyn fmt::Display);
    /// A step that failed, with the length of the bytes it had.
    fn event_len_err(&mut self, name: &'static str, len: usize, err: &dyn fmt::Display);
}

impl WriteTrace for () {
    fn event(&mut self, _: &'static str) {}
    fn event_len(&mut self, _: &'static str, _: usize) {}
    fn event_err(&mut self, _: &'static str, _: &dyn fmt::Display) {}
    fn event_len_err(&mut self, _: &'static str, _: usize, _: &dyn fmt::Display) {}
}

/// The state of `key` as `store` holds it now.
async fn current_state<T, E, S>(
    store: &S,
    layers: &ObjectLayers<T, E>,
    key: &str,
    ignore_not_found: bool,
) -> Result<ObjState<T>>
where
    T: ApiObject + Default + 'static,
    E: DecodeErrors,
    S: CompareAndSwap,
{
    let stored = store.read_key(key).await?;
    layers.state_from_value(key, stored, ignore_not_found)
}

/// Create of the prepared `key` with a time to live of `ttl` seconds (0: none): a put
/// on "absent", already-exists when another object holds the key; the object comes back
/// as stored, with the revision of its put.
pub async fn create<T, E, S>(
    store: &S,
    layers: &ObjectLayers<T, E>,
    key: &str,
    mut obj: T,
    ttl: u64,
    trace: &mut impl WriteTrace,
) -> Result<T>
where
    T: ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    S: CompareAndSwap,
{
    if matches!(layers.versioner().object_resource_version(&obj), Ok(v) if v != 0) {
        return Err(StorageError::ResourceVersionSetOnCreate {
            key: key.to_owned(),
        });
    }
    trace.event("About to Encode");
    let data = layers
        .encode(key, &mut obj)
        .inspect_err(|err| trace.event_len_err("Encode failed", 0, err))?;
    trace.event_len("Encode succeeded", data.len());
    // What a read of these bytes will return, when the codec's round trip is not the
    // identity (kube's store decodes what it wrote); decoded before the bytes are handed
    // to the transformer, so they need no copy.
    let mut obj = layers.as_written(key, obj, &data)?;
    let put_options = store.prepare_put(key, ttl).await?;
    let len = data.len();
    let value = layers
        .transform_to_storage(key, data)
        .inspect_err(|err| trace.event_err("TransformToStorage failed", err))?;
    trace.event("TransformToStorage succeeded");
    let swap = store
        .put_if_absent(key, value, put_options)
        .await
        .inspect_err(|err| trace.event_err("Txn call failed", err))?;
    trace.event("Txn call succeeded");
    match swap {
        Swap::Done(revision) => {
            // The object as written: stamping its revision gives what decoding the
            // stored bytes would.
            layers.set_revision(&mut obj, revision);
            trace.event_len("decode succeeded", len);
            Ok(obj)
        }
        Swap::Conflict(_) => Err(StorageError::KeyExists {
            key: key.to_owned(),
            resource_version: 0,
        }),
    }
}

/// Guaranteed update of the prepared `key`: the object `try_update` makes from the
/// current one is written by compare-and-swap, retried on conflict; the result is the
/// object as stored, with its new resourceVersion (or the unchanged object when the
/// update changed nothing).
pub async fn guaranteed_update<T, E, S, F>(
    store: &S,
    layers: &ObjectLayers<T, E>,
    key: &str,
    options: UpdateOptions<T>,
    mut try_update: F,
    trace: &mut impl WriteTrace,
) -> Result<T>
where
    T: ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    S: CompareAndSwap,
    F: FnMut(T, &ResponseMeta) -> Result<Update<T>> + Send,
{
    let ignore_not_found = options.ignore_not_found;
    let cached = match options.cached_existing_object {
        Some(cached) => layers.state_from_cached(key, cached)?,
        None => None,
    };
    let (mut state, mut is_current) = match cached {
        Some(cached) => (cached, false),
        None => (
            current_state(store, layers, key, ignore_not_found).await?,
            true,
        ),
    };
    trace.event("initial value restored");

    loop {
        if let Some(preconditions) = &options.preconditions {
            if let Err(err) = preconditions.check(key, &state.obj) {
                if is_current {
                    return Err(err);
                }
                // The cached object may just be old: decide on the current one.
                state = current_state(store, layers, key, ignore_not_found).await?;
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
        let Update { mut object, ttl } = match try_update(obj, &meta) {
            Ok(update) => update,
            Err(err) => {
                if is_current {
                    return Err(err);
                }
                let cached_rev = rev;
                state = current_state(store, layers, key, ignore_not_found).await?;
                is_current = true;
                if cached_rev == state.rev {
                    // The cached object was current after all: its error stands.
                    return Err(err);
                }
                continue;
            }
        };

        trace.event("About to Encode");
        let data = layers
            .encode_replacing(key, &mut object, &stored_data)
            .inspect_err(|err| trace.event_len_err("Encode failed", 0, err))?;
        trace.event_len("Encode succeeded", data.len());
        let mut object = layers.as_written(key, object, &data)?;

        if !stale && data == stored_data {
            if !is_current {
                // A cached object let us skip the read: make sure the store really holds
                // these bytes before deciding there is nothing to write.
                let fresh = current_state(store, layers, key, ignore_not_found).await?;
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
                layers.set_revision(&mut object, rev);
                return Ok(object);
            }
        }
        drop(stored_data);

        // Only the length is needed later; handing `data` over unshared lets an identity
        // transform's output become the request without a copy.
        let len = data.len();
        let value = layers
            .transform_to_storage(key, data)
            .inspect_err(|err| trace.event_err("TransformToStorage failed", err))?;
        trace.event("TransformToStorage succeeded");
        let put_options = store.prepare_put(key, ttl.unwrap_or(0)).await?;
        trace.event("Transaction prepared");
        let swap = store
            .put_if(key, rev, value, put_options)
            .await
            .inspect_err(|err| trace.event_err("Txn call failed", err))?;
        trace.event("Txn call completed");
        trace.event("Transaction committed");
        match swap {
            Swap::Done(revision) => {
                layers.set_revision(&mut object, revision);
                trace.event_len("decode succeeded", len);
                return Ok(object);
            }
            Swap::Conflict(current) => {
                // Someone wrote first: retry on what the comparison saw.
                state = layers.state_from_value(key, current, ignore_not_found)?;
                trace.event("Retry value restored");
                is_current = true;
            }
        }
    }
}

/// Conditional delete of the prepared `key`: preconditions and validation on the latest
/// state, then a delete by compare-and-swap, retried on conflict. The result is the last
/// state seen, with the revision of its deletion as resourceVersion.
///
/// With [`DeleteOptions::expect_transform_or_decode_error`], only a value that cannot be
/// decrypted or decoded is deleted ([`unreadable_state`]).
pub async fn conditional_delete<T, E, S>(
    store: &S,
    layers: &ObjectLayers<T, E>,
    key: &str,
    options: DeleteOptions<T>,
) -> Result<T>
where
    T: ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    S: CompareAndSwap,
{
    if options.expect_transform_or_decode_error {
        return delete_unreadable(store, layers, key, options).await;
    }
    let (mut state, mut is_current) = match options.cached_existing_object {
        Some(cached) => (layers.state_from_object(key, cached)?, false),
        None => (current_state(store, layers, key, false).await?, true),
    };

    loop {
        let verdict = match &options.preconditions {
            Some(preconditions) => preconditions.check(key, &state.obj),
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
            // The cached object may be old: decide on the current one, unless it turns
            // out to be the same revision.
            let cached_rev = state.rev;
            state = current_state(store, layers, key, false).await?;
            is_current = true;
            if cached_rev == state.rev {
                return Err(err);
            }
            continue;
        }

        match store.delete_if(key, state.rev).await? {
            Swap::Done(revision) => {
                let mut deleted = state.obj;
                layers.set_revision(&mut deleted, revision);
                return Ok(deleted);
            }
            Swap::Conflict(current) => {
                state = layers.state_from_value(key, current, false)?;
                is_current = true;
            }
        }
    }
}

/// The mod revision of a value that cannot be read: one whose transform or decode
/// fails (kube's `getState` with `expectTransformOrDecodeError`). Absent is not found; a
/// readable value is an invalid object, since unsafe deletion is only for what the
/// normal flow cannot delete.
pub fn unreadable_state<T, E>(
    layers: &ObjectLayers<T, E>,
    key: &str,
    stored: StoredValue,
) -> Result<i64>
where
    T: ApiObject + Default + 'static,
    E: DecodeErrors,
{
    let Some((value, rev)) = stored else {
        return Err(StorageError::not_found(key));
    };
    let readable = layers
        .transform_from_storage(key, value)
        .and_then(|(data, _)| layers.decode_uncounted(key, &data, rev));
    match readable {
        Ok(_) => Err(StorageError::InvalidObject {
            key: key.to_owned(),
            message: "unsafe deletion is not allowed because the object is decodable from storage"
                .to_owned(),
        }),
        Err(_) => Ok(rev),
    }
}

/// Deletes a value that cannot be read, at the revision it was read at, retried on
/// conflict with what the comparison saw. As kube, the deletion validation runs (on the
/// empty object: there is none to give it) before each attempt, and preconditions,
/// which cannot be checked on what cannot be read, are an error.
async fn delete_unreadable<T, E, S>(
    store: &S,
    layers: &ObjectLayers<T, E>,
    key: &str,
    options: DeleteOptions<T>,
) -> Result<T>
where
    T: ApiObject + Default + Send + 'static,
    E: DecodeErrors + Sync,
    S: CompareAndSwap,
{
    let mut rev = unreadable_state(layers, key, store.read_key(key).await?)?;
    if options.preconditions.is_some() {
        return Err(StorageError::Internal {
            key: key.to_owned(),
            message:
                "preconditions cannot be checked on an object that cannot be decrypted or decoded"
                    .to_owned(),
            source: None,
        });
    }
    let unread = T::default();
    loop {
        if let Some(validate) = &options.validate_deletion {
            validate(&unread)?;
        }
        match store.delete_if(key, rev).await? {
            Swap::Done(revision) => {
                let mut deleted = T::default();
                layers.set_revision(&mut deleted, revision);
                return Ok(deleted);
            }
            Swap::Conflict(current) => rev = unreadable_state(layers, key, current)?,
        }
    }
}
