//! The state a write starts from, read from the key space: the current value of a key.
//! The layering between objects and stored bytes, and the state of a caller's cached
//! object, are `apistore_backend::object`'s, shared with the etcd3 store.

use apistore_backend::ObjState;
use apistore_storage::{ApiObject, Result};

use crate::mvcc::KeyValue;
use crate::store::MemoryStore;

impl<T> MemoryStore<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
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
        let stored = kv.map(|kv| (kv.value, kv.mod_revision));
        self.layers.state_from_value(key, stored, ignore_not_found)
    }
}
