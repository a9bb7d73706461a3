//! The estimate of object sizes behind `Stats` (k8s.io/apiserver v0.35+
//! `etcd3/stats.go`, the `resourceSizeEstimator`; in 1.34 the store's own
//! `statsCache`).
//!
//! Nothing is read for it: the store remembers, per key, the size of the last value it
//! saw in a list page or a watch event and that value's revision, so an older value
//! seen later (a replayed watch, a list at an old revision) never replaces a newer one.
//! A deletion the store never sees would keep its key forever, so the keys are matched
//! against the live ones ([`KeysFn`]) on every [`SizeEstimator::stats`] and, in the
//! background, about once a minute.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use apistore_storage::{KeysFn, Result, Stats};

/// How often the keys are matched against the live ones when nothing asks for stats
/// (kube's `sizerRefreshInterval`).
pub(crate) const CLEANUP_INTERVAL: Duration = Duration::from_secs(60);

/// The size and revision of the last value seen under one key.
#[derive(Debug, Clone, Copy, Default)]
struct SizeRevision {
    size: i64,
    revision: i64,
}

#[derive(Debug, Default)]
struct Sizes {
    keys: HashMap<Vec<u8>, SizeRevision>,
    last_cleanup: Option<Instant>,
}

/// Per-key sizes of the values a store has seen (see the module).
pub(crate) struct SizeEstimator {
    /// The store's path prefix with its trailing `/`: keys the [`KeysFn`] gives without
    /// it (a watch cache's) get it back.
    prefix: String,
    keys: KeysFn,
    sizes: Mutex<Sizes>,
}

impl std::fmt::Debug for SizeEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SizeEstimator")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl SizeEstimator {
    /// An estimator for keys under `prefix`, forgetting those `keys` no longer lists;
    /// inside a tokio runtime it also starts the background clean-up, which ends when
    /// the estimator is dropped.
    pub(crate) fn start(prefix: &str, keys: KeysFn) -> Arc<Self> {
        let mut prefix = prefix.to_owned();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        let estimator = Arc::new(Self {
            prefix,
            keys,
            sizes: Mutex::default(),
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(clean_up_periodically(Arc::downgrade(&estimator)));
        }
        estimator
    }

    fn sizes(&self) -> std::sync::MutexGuard<'_, Sizes> {
        self.sizes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A value of `size` bytes seen under `key` at `revision` (a list item or a put).
    pub(crate) fn update(&self, key: &[u8], size: usize, revision: i64) {
        Self::update_locked(&mut self.sizes(), key, size, revision);
    }

    /// The values of one list page.
    pub(crate) fn update_all<'a>(&self, values: impl IntoIterator<Item = (&'a [u8], usize, i64)>) {
        let mut sizes = self.sizes();
        for (key, size, revision) in values {
            Self::update_locked(&mut sizes, key, size, revision);
        }
    }

    fn update_locked(sizes: &mut Sizes, key: &[u8], size: usize, revision: i64) {
        let entry = sizes.keys.entry(key.to_vec()).or_default();
        if entry.revision >= revision {
            return;
        }
        *entry = SizeRevision {
            size: i64::try_from(size).unwrap_or(i64::MAX),
            revision,
        };
    }

    /// `key` deleted at `revision`; an older deletion than the value known is ignored.
    pub(crate) fn delete(&self, key: &[u8], revision: i64) {
        let mut sizes = self.sizes();
        if sizes
            .keys
            .get(key)
            .is_some_and(|known| known.revision < revision)
        {
            sizes.keys.remove(key);
        }
    }

    /// The live keys' count, and the average size of those of them the estimator has
    /// seen (kube: the count is the number of keys listed, not an etcd count).
    pub(crate) async fn stats(&self) -> Result<Stats> {
        let live = (self.keys)().await?;
        let mut sizes = self.sizes();
        self.keep_only(&mut sizes, &live);
        let seen = i64::try_from(sizes.keys.len()).unwrap_or(i64::MAX);
        let total: i64 = sizes
            .keys
            .values()
            .fold(0i64, |sum, known| sum.saturating_add(known.size));
        Ok(Stats {
            object_count: i64::try_from(live.len()).unwrap_or(i64::MAX),
            estimated_average_object_size_bytes: if seen == 0 { 0 } else { total / seen },
        })
    }

    /// Forgets the keys `live` does not list, unless that was done less than
    /// [`CLEANUP_INTERVAL`] ago.
    async fn clean_up_if_due(&self) {
        let due = self
            .sizes()
            .last_cleanup
            .is_none_or(|at| at.elapsed() >= CLEANUP_INTERVAL);
        if !due {
            return;
        }
        match (self.keys)().await {
            Ok(live) => self.keep_only(&mut self.sizes(), &live),
            Err(err) => {
                tracing::info!(prefix = %self.prefix, error = %err, "size estimation: listing the keys failed")
            }
        }
    }

    fn keep_only(&self, sizes: &mut Sizes, live: &[String]) {
        let mut kept = HashMap::with_capacity(live.len().min(sizes.keys.len()));
        for key in live {
            let full = if key.starts_with(&self.prefix) {
                key.clone()
            } else {
                format!("{}{}", self.prefix, key.strip_prefix('/').unwrap_or(key))
            };
            if let Some((key, known)) = sizes.keys.remove_entry(full.as_bytes()) {
                kept.insert(key, known);
            }
        }
        sizes.keys = kept;
        sizes.last_cleanup = Some(Instant::now());
    }
}

/// The background clean-up: every [`CLEANUP_INTERVAL`] (after a first wait), as long as
/// the estimator lives.
async fn clean_up_periodically(estimator: Weak<SizeEstimator>) {
    loop {
        tokio::time::sleep(CLEANUP_INTERVAL).await;
        let Some(estimator) = estimator.upgrade() else {
            return;
        };
        estimator.clean_up_if_due().await;
    }
}

#[cfg(test)]
mod tests {
    //! stats_test.go `TestStatsCache`, step by step.

    use super::*;

    /// A keys function whose answer the test sets.
    fn keys_from(live: &Arc<Mutex<Vec<String>>>) -> KeysFn {
        let live = Arc::clone(live);
        Arc::new(move || {
            let keys = live.lock().unwrap_or_else(PoisonError::into_inner).clone();
            Box::pin(async move { Ok(keys) })
        })
    }

    fn set(live: &Arc<Mutex<Vec<String>>>, keys: &[&str]) {
        *live.lock().unwrap_or_else(PoisonError::into_inner) =
            keys.iter().map(|k| (*k).to_owned()).collect();
    }

    async fn average(estimator: &SizeEstimator) -> i64 {
        match estimator.stats().await {
            Ok(stats) => stats.estimated_average_object_size_bytes,
            Err(err) => panic!("stats failed: {err}"),
        }
    }

    #[tokio::test]
    async fn sizes_follow_the_newest_value_of_each_live_key() {
        let live = Arc::new(Mutex::new(Vec::new()));
        let estimator = SizeEstimator::start("/prefix", keys_from(&live));
        assert_eq!(average(&estimator).await, 0);

        estimator.update(b"/prefix/foo1", 10, 2);
        set(&live, &["/prefix/foo1"]);
        assert_eq!(average(&estimator).await, 10);

        estimator.update(b"/prefix/foo2", 20, 3);
        set(&live, &["/prefix/foo1", "/prefix/foo2"]);
        assert_eq!(average(&estimator).await, 15);

        estimator.update(b"/prefix/foo1", 30, 4);
        assert_eq!(average(&estimator).await, 25);

        estimator.update(b"/prefix/foo2", 10, 5);
        assert_eq!(average(&estimator).await, 20);

        estimator.delete(b"/prefix/foo1", 6);
        set(&live, &["/prefix/foo2"]);
        assert_eq!(average(&estimator).await, 10);

        // A list at revision 3 (older than what is known) changes nothing.
        estimator.update_all([(&b"/prefix/foo1"[..], 10, 2), (&b"/prefix/foo2"[..], 20, 3)]);
        assert_eq!(average(&estimator).await, 10);

        // A replay from revision 2 changes nothing either.
        estimator.update(b"/prefix/foo1", 10, 2);
        assert_eq!(average(&estimator).await, 10);
        estimator.update(b"/prefix/foo2", 20, 3);
        assert_eq!(average(&estimator).await, 10);
        estimator.update(b"/prefix/foo1", 30, 4);
        assert_eq!(average(&estimator).await, 10);
        estimator.update(b"/prefix/foo2", 10, 5);
        assert_eq!(average(&estimator).await, 10);
        estimator.delete(b"/prefix/foo1", 6);
        assert_eq!(average(&estimator).await, 10);

        estimator.delete(b"/prefix/foo1", 7);
        set(&live, &[]);
        assert_eq!(average(&estimator).await, 0);

        // An old list may bring back old values when the keys were created again; keys
        // without the prefix (a watch cache's) match those with it.
        set(&live, &["foo1", "foo2"]);
        estimator.update_all([(&b"/prefix/foo1"[..], 10, 2), (&b"/prefix/foo2"[..], 20, 3)]);
        assert_eq!(average(&estimator).await, 15);

        // Keys deleted unseen are forgotten.
        set(&live, &[]);
        assert_eq!(average(&estimator).await, 0);
    }

    #[tokio::test]
    async fn the_count_is_the_live_keys() {
        let live = Arc::new(Mutex::new(Vec::new()));
        let estimator = SizeEstimator::start("/prefix/", keys_from(&live));
        set(&live, &["/prefix/a", "/prefix/b"]);
        estimator.update(b"/prefix/a", 8, 2);
        let stats = estimator.stats().await.ok();
        assert_eq!(
            stats,
            Some(Stats {
                object_count: 2,
                estimated_average_object_size_bytes: 8,
            })
        );
    }

    #[tokio::test]
    async fn a_failing_key_listing_is_the_error_of_stats() {
        let failing: KeysFn = Arc::new(|| {
            Box::pin(async {
                Err(apistore_storage::StorageError::bad_request(
                    "/prefix/",
                    "no keys today",
                ))
            })
        });
        let estimator = SizeEstimator::start("/prefix", failing);
        let err = estimator.stats().await.err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("no keys today")),
            "{err:?}"
        );
    }
}
