//! Guaranteed update and conditional delete: read, decide, compare-and-swap on the mod
//! revision, retry on conflict with the value the failed comparison saw. The same
//! steps, cached-object rules and stale rewrites as the etcd3 store (kube-apiserver's
//! `GuaranteedUpdate` and `conditionalDelete`).

use apistore_backend::ObjState;
use apistore_storage::{ApiObject, DeleteOptions, ResponseMeta, Result, Update, UpdateOptions};

use crate::store::MemoryStore;

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    pub(crate) fn guaranteed_update_object<F>(
        &self,
        key: &str,
        options: UpdateOptions<T>,
        mut try_update: F,
    ) -> Result<T>
    where
        F: FnMut(T, &ResponseMeta) -> Result<Update<T>>,
    {
        let prepared = self.prepare_key(key)?;
        let ignore_not_found = options.ignore_not_found;
        // A codec that carries what a decode could not show needs the bytes really
        // stored: an encoding of the caller's decoded object has lost it already.
        let cached = options
            .cached_existing_object
            .filter(|_| !self.layers.update_needs_stored_value());
        let (mut state, mut is_current) = match cached {
            Some(cached) => (self.layers.state_from_object(&prepared, cached)?, false),
            None => (self.current_state(&prepared, ignore_not_found)?, true),
        };

        loop {
            if let Some(preconditions) = &options.preconditions {
                if let Err(err) = preconditions.check(&prepared, &state.obj) {
                    if is_current {
                        return Err(err);
                    }
                    // The cached object may just be old: decide on the current one.
                    state = self.current_state(&prepared, ignore_not_found)?;
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
                    state = self.current_state(&prepared, ignore_not_found)?;
                    is_current = true;
                    if cached_rev == state.rev {
                        // The cached object was current after all: its error stands.
                        return Err(err);
                    }
                    continue;
                }
            };
            let data = self
                .layers
                .encode_replacing(&prepared, &mut object, &stored_data)?;
            let mut object = self.layers.as_written(&prepared, object, &data)?;

            if !stale && data == stored_data {
                if !is_current {
                    // A cached object let us skip the read: make sure the store really
                    // holds these bytes before deciding there is nothing to write.
                    let fresh = self.current_state(&prepared, ignore_not_found)?;
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
                    // Nothing changed: no write.
                    self.layers.set_revision(&mut object, rev);
                    return Ok(object);
                }
            }
            drop(stored_data);

            let stored = self.layers.transform_to_storage(&prepared, data)?;
            let deadline = self.deadline(&prepared, ttl.unwrap_or(0))?;
            match self
                .kv
                .write(|mvcc| mvcc.put_if(&prepared, rev, stored, deadline))
            {
                Ok(revision) => {
                    self.layers.set_revision(&mut object, revision);
                    return Ok(object);
                }
                Err(current) => {
                    // Someone wrote first: retry on what the comparison saw.
                    state = self.state_from_kv(&prepared, current, ignore_not_found)?;
                    is_current = true;
                }
            }
        }
    }

    pub(crate) fn delete_object(&self, key: &str, options: DeleteOptions<T>) -> Result<T> {
        let prepared = self.prepare_key(key)?;
        let (mut state, mut is_current) = match options.cached_existing_object {
            Some(cached) => (self.layers.state_from_object(&prepared, cached)?, false),
            None => (self.current_state(&prepared, false)?, true),
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
                let cached_rev = state.rev;
                state = self.current_state(&prepared, false)?;
                is_current = true;
                if cached_rev == state.rev {
                    return Err(err);
                }
                continue;
            }

            match self.kv.write(|mvcc| mvcc.delete_if(&prepared, state.rev)) {
                Ok(revision) => {
                    // The last state we saw, with the revision of its deletion.
                    let mut deleted = state.obj;
                    self.layers.set_revision(&mut deleted, revision);
                    return Ok(deleted);
                }
                Err(current) => {
                    state = self.state_from_kv(&prepared, current, false)?;
                    is_current = true;
                }
            }
        }
    }
}
