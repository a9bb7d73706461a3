//! The reference's test transformer (`PrefixTransformer` of `store_tests.go`), for any
//! backend: prepends a marker on write (to non-empty data), requires and strips it on
//! read, reports reads as stale on demand and counts them. A read hook, when set, runs
//! first: the reference's `reproducingTransformer` (writes in the middle of a list) and
//! `failingTransformer` (every read fails).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use apistore_value::{Plaintext, TransformError, Transformer};
use bytes::Bytes;

/// Something run before every read of the test transformer; an error fails the read.
pub type ReadHook = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// The test transformer a [`Backend`](super::Backend)'s store uses.
pub struct PrefixTransformer {
    /// The marker (`test!` in the reference).
    pub prefix: Vec<u8>,
    /// Whether reads report stale data.
    pub stale: AtomicBool,
    /// Values read since the counter was last taken.
    pub reads: AtomicU64,
    /// Run before every read.
    pub on_read: RwLock<Option<ReadHook>>,
}

impl std::fmt::Debug for PrefixTransformer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrefixTransformer")
            .field("prefix", &String::from_utf8_lossy(&self.prefix))
            .field("stale", &self.stale)
            .field("reads", &self.reads)
            .finish_non_exhaustive()
    }
}

impl PrefixTransformer {
    /// A transformer with this marker.
    pub fn new(prefix: &[u8]) -> Self {
        Self {
            prefix: prefix.to_vec(),
            stale: AtomicBool::new(false),
            reads: AtomicU64::new(0),
            on_read: RwLock::new(None),
        }
    }

    /// Sets or clears the read hook.
    pub fn set_read_hook(&self, hook: Option<ReadHook>) {
        *self.on_read.write().unwrap_or_else(PoisonError::into_inner) = hook;
    }

    /// Makes every read fail (the reference's `failingTransformer`), or restores it.
    pub fn set_failing(&self, failing: bool) {
        let hook: Option<ReadHook> =
            failing.then(|| Arc::new(|| Err("failed transformation".to_owned())) as ReadHook);
        self.set_read_hook(hook);
    }

    /// Values read since the last call (and resets).
    pub fn take_reads(&self) -> u64 {
        self.reads.swap(0, Ordering::SeqCst)
    }
}

impl Transformer for PrefixTransformer {
    fn transform_from_storage(
        &self,
        data: Bytes,
        _aad: &[u8],
    ) -> Result<Plaintext, TransformError> {
        let hook = self
            .on_read
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(hook) = hook {
            hook().map_err(TransformError::Crypto)?;
        }
        self.reads.fetch_add(1, Ordering::SeqCst);
        if !data.starts_with(&self.prefix) {
            return Err(TransformError::Crypto(format!(
                "value does not have expected prefix {:?}",
                String::from_utf8_lossy(&self.prefix)
            )));
        }
        Ok(Plaintext {
            data: data.slice(self.prefix.len()..),
            stale: self.stale.load(Ordering::SeqCst),
        })
    }

    fn transform_to_storage(&self, data: Bytes, _aad: &[u8]) -> Result<Bytes, TransformError> {
        if data.is_empty() {
            return Ok(data);
        }
        let mut out = self.prefix.clone();
        out.extend_from_slice(&data);
        Ok(Bytes::from(out))
    }
}
