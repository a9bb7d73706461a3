//! The cache of decrypted DEK sources (kube's `simpleCache` in `kmsv2/cache.go`): from
//! the SHA-256 of an object's cache key (source type, encrypted DEK source, key id,
//! annotations) to the transformer its decrypted DEK source gives, so that reads call
//! the plugin once per DEK source rather than once per value.
//!
//! kube bounds the cache only by a 24 h TTL (and keeps serving expired entries, since
//! a key's transformer never changes); here it is bounded by entry count, the least
//! recently used entry making room. Entries never go stale for the same reason.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use sha2::{Digest, Sha256};

use crate::Transformer;

/// The number of DEK sources kept when nothing else is said.
pub const DEFAULT_DEK_CACHE_SIZE: usize = 1000;

type Key = [u8; 32];

#[derive(Debug)]
pub(crate) struct DekCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    tick: u64,
    entries: HashMap<Key, (Arc<dyn Transformer>, u64)>,
}

fn hash(cache_key: &[u8]) -> Key {
    Sha256::digest(cache_key).into()
}

impl DekCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    pub(crate) fn get(&self, cache_key: &[u8]) -> Option<Arc<dyn Transformer>> {
        let key = hash(cache_key);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        let (transformer, used) = inner.entries.get_mut(&key)?;
        *used = tick;
        Some(Arc::clone(transformer))
    }

    pub(crate) fn set(&self, cache_key: &[u8], transformer: Arc<dyn Transformer>) {
        let key = hash(cache_key);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        if !inner.entries.contains_key(&key) && inner.entries.len() >= self.capacity {
            let oldest = inner
                .entries
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                inner.entries.remove(&oldest);
            }
        }
        inner.entries.insert(key, (transformer, tick));
    }

    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(crate) fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .len()
    }
}
