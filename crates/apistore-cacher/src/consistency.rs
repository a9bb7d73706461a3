//! The consistency checker (kube 1.34+'s `DetectCacheInconsistency`: k8s.io/apiserver
//! v0.37 `pkg/storage/cacher/consistency/checker.go`): now and then, the cache's
//! objects are compared with the backend's at the cache's revision, by a digest of
//! every object's namespace, name and resourceVersion in key order (kube's FNV-1 64
//! over `namespace/name/resourceVersion`).
//!
//! On a mismatch kube stops serving from snapshots (`MarkConsistent(false)`) until a
//! later check passes, and otherwise keeps the inconsistent cache. Here the snapshots
//! are dropped the same way and the cache also lists the backend again, which is what
//! makes a later check pass: its watchers are ended, as on any re-list. Every check
//! counts in `apiserver_storage_consistency_checks_total{status=success|failure|error}`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use apistore_storage::{
    ApiObject, ListOptions, ResourceVersionMatch, Result, Storage, StorageError,
};

use crate::cacher::{Cacher, Shared};
use crate::reads::list_prefix;

/// How often kube checks (its `CheckPeriod`: the default compaction period, well above
/// the list latency SLO); each wait is this plus up to half of it again at random.
pub const DEFAULT_CONSISTENCY_CHECK_PERIOD: Duration = Duration::from_secs(5 * 60);

/// The page size of the checker's list of the backend (kube's `checkerListPageSize`).
const CHECK_PAGE_SIZE: i64 = 10_000;

/// What one consistency check found.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsistencyCheck {
    /// The revision both sides were read at.
    pub resource_version: u64,
    /// The digest of the cache's objects (hex, as kube logs it).
    pub cache_digest: String,
    /// The digest of the backend's objects at that revision.
    pub backend_digest: String,
    /// The first object (`namespace/name/resourceVersion`, "" for none) where the two
    /// differ, cache's then backend's; `None` when they agree.
    pub first_difference: Option<(String, String)>,
}

impl ConsistencyCheck {
    /// Whether the cache and the backend agreed.
    pub fn consistent(&self) -> bool {
        self.cache_digest == self.backend_digest
    }
}

/// Go's `hash/fnv` New64 (FNV-1, 64 bits): multiply, then xor.
#[derive(Debug, Clone, Copy)]
struct Fnv1(u64);

impl Fnv1 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Self {
        Self(Self::OFFSET)
    }

    fn write(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 = self.0.wrapping_mul(Self::PRIME) ^ u64::from(*byte);
        }
    }
}

/// One side of a check: the digest and the objects it covered, in order.
struct Digest {
    hash: Fnv1,
    items: Vec<String>,
}

impl Digest {
    fn new() -> Self {
        Self {
            hash: Fnv1::new(),
            items: Vec::new(),
        }
    }

    /// kube's `addObjectToDigest`.
    fn add(&mut self, object: &impl ApiObject) {
        let item = format!(
            "{}/{}/{}",
            object.namespace(),
            object.name(),
            object.resource_version()
        );
        self.hash.write(item.as_bytes());
        self.items.push(item);
    }

    fn hex(&self) -> String {
        format!("{:x}", self.hash.0)
    }
}

impl<S: Storage> Shared<S> {
    /// One check: the cache's objects at its revision against the backend's Exact
    /// list at that revision, in pages.
    pub(crate) async fn calculate_digests(&self) -> Result<ConsistencyCheck> {
        let prefix = self.settings.resource_prefix.as_str();
        if !self.ready.check() {
            return Err(StorageError::Internal {
                key: prefix.to_owned(),
                message: "cache is not ready".to_owned(),
                source: None,
            });
        }
        let (items, resource_version) = self.cache.list(&list_prefix(prefix, true));
        let mut cache = Digest::new();
        for (_, object) in &items {
            cache.add(&**object);
        }
        drop(items);
        let mut backend = Digest::new();
        let mut options = ListOptions::prefix()
            .at(resource_version.to_string(), ResourceVersionMatch::Exact)
            .limit(CHECK_PAGE_SIZE);
        loop {
            let page = self.storage.list(prefix, &options).await?;
            for object in &page.items {
                backend.add(object);
            }
            if page.metadata.continue_token.is_empty() {
                break;
            }
            options = ListOptions::prefix().limit(CHECK_PAGE_SIZE);
            options.predicate.continue_token = page.metadata.continue_token;
        }
        let first_difference = (cache.items != backend.items).then(|| {
            let at = cache
                .items
                .iter()
                .zip(&backend.items)
                .take_while(|(a, b)| a == b)
                .count();
            let side = |items: &[String]| items.get(at).cloned().unwrap_or_default();
            (side(&cache.items), side(&backend.items))
        });
        Ok(ConsistencyCheck {
            resource_version,
            cache_digest: cache.hex(),
            backend_digest: backend.hex(),
            first_difference,
        })
    }

    /// kube's `check`: one check, counted, and acted on.
    pub(crate) async fn check_consistency(&self) -> Result<ConsistencyCheck> {
        let resource = self.settings.group_resource.as_str();
        let checks = &self.metrics.consistency_checks;
        let check = match self.calculate_digests().await {
            Ok(check) => check,
            Err(err) => {
                tracing::warn!(resource, error = %err, "cache consistency check error");
                checks.error.inc();
                return Err(err);
            }
        };
        if check.consistent() {
            tracing::debug!(resource, revision = check.resource_version, digest = %check.cache_digest, "cache consistency check passed");
            checks.success.inc();
            if self.settings.list_from_cache_snapshot && !self.cache.snapshots_enabled() {
                self.cache.set_snapshots_enabled(true);
            }
        } else {
            tracing::error!(
                resource,
                revision = check.resource_version,
                cache_digest = %check.cache_digest,
                backend_digest = %check.backend_digest,
                first_difference = ?check.first_difference,
                "cache consistency check failed; listing the backend again"
            );
            checks.failure.inc();
            self.cache.set_snapshots_enabled(false);
            self.relist.notify_one();
        }
        Ok(check)
    }
}

/// Checks every `period` (plus up to half of it at random, as kube's jitter does, so
/// that the cachers of one process do not all list the backend at once), the first
/// time after a wait.
pub(crate) async fn run<S: Storage>(shared: Arc<Shared<S>>, period: Duration) {
    let seed = RandomState::new();
    loop {
        let mut random = seed.build_hasher();
        random.write_u64(shared.cache.resource_version());
        let jitter = period.mul_f64((random.finish() % 1_000) as f64 / 2_000.0);
        tokio::time::sleep(period + jitter).await;
        // The outcome is counted and logged; the next check comes all the same.
        let _ = shared.check_consistency().await;
    }
}

impl<S: Storage + 'static> Cacher<S> {
    /// Checks now that the cache holds what the backend holds at the cache's revision
    /// (what [`CacherConfig::consistency_check_period`](crate::CacherConfig::consistency_check_period)
    /// does periodically), counts it in `apiserver_storage_consistency_checks_total`,
    /// and on a mismatch drops the snapshots and lists the backend again.
    ///
    /// # Errors
    ///
    /// When the check could not be made: the cache is not ready, or the backend's list
    /// failed (e.g. 410 when the cache's revision was compacted away).
    pub async fn check_consistency(&self) -> Result<ConsistencyCheck> {
        self.shared.check_consistency().await
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1;

    #[test]
    fn fnv1_matches_gos_fnv_new64() {
        // Go: fmt.Sprintf("%x", fnv.New64() after Write(...)).
        let cases: [(&[u8], u64); 3] = [
            (b"", 0xcbf2_9ce4_8422_2325),
            (b"a", 0xaf63_bd4c_8601_b7be),
            (b"foobar", 0x340d_8765_a4dd_a9c2),
        ];
        for (input, want) in cases {
            let mut hash = Fnv1::new();
            hash.write(input);
            assert_eq!(hash.0, want, "{input:?}");
        }
    }
}
