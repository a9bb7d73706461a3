//! A read-mostly map from a label value to handles resolved for it.
//!
//! Lookups borrow the key as `&str` under a read lock; the write lock is taken only the
//! first time a label value is seen.
//!
//! Keys are hashed with FNV-1a rather than the standard SipHash: label values are
//! short, come from the server's own configuration (resource names, key prefixes,
//! transformer prefixes) rather than from clients, and the lookup is on every recorded
//! request. (Measured on short labels, FNV-1a beat both SipHash and the Fx hash here.)

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{PoisonError, RwLock};

pub(crate) struct LabelCache<T> {
    map: RwLock<HashMap<Box<str>, T, BuildHasherDefault<Fnv1a>>>,
}

/// 64-bit FNV-1a.
pub(crate) struct Fnv1a(u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for Fnv1a {
    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl<T> Default for LabelCache<T> {
    fn default() -> Self {
        Self {
            map: RwLock::new(HashMap::default()),
        }
    }
}

impl<T> LabelCache<T> {
    /// Runs `f` on the handles for `label`, creating them with `make` on first use.
    pub(crate) fn with<R>(
        &self,
        label: &str,
        make: impl FnOnce(&str) -> T,
        f: impl FnOnce(&T) -> R,
    ) -> R {
        // A panic while holding the lock cannot leave the map half-updated (insertion
        // is one call), so a poisoned lock is still safe to use.
        {
            let map = self.map.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(handles) = map.get(label) {
                return f(handles);
            }
        }
        let mut map = self.map.write().unwrap_or_else(PoisonError::into_inner);
        let handles = map.entry(label.into()).or_insert_with(|| make(label));
        f(handles)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_once_per_label() {
        let cache = LabelCache::<usize>::default();
        let mut made = 0;
        for label in ["a", "b", "a", "a", "b"] {
            cache.with(
                label,
                |l| {
                    made += 1;
                    l.len()
                },
                |_| (),
            );
        }
        assert_eq!(made, 2);
        assert_eq!(cache.with("a", |_| 99, |v| *v), 1);
    }

    #[test]
    fn similar_labels_stay_apart() {
        let cache = LabelCache::<String>::default();
        let labels = [
            "k8s:enc:aesgcm:v1:key1:",
            "k8s:enc:aesgcm:v1:key2:",
            "k8s:enc:aesgcm:v1:key1",
            "",
            "identity",
            "pods",
            "pods\0",
        ];
        for label in labels {
            cache.with(label, str::to_owned, |_| ());
        }
        for label in labels {
            assert_eq!(cache.with(label, |_| String::new(), String::clone), label);
        }
    }
}
