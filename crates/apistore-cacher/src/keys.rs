//! The cache's keys for its backend's size estimate: kube's `Cacher.getKeys`
//! (k8s.io/apiserver v0.35+), which its cacher hands to the storage with
//! `EnableResourceSizeEstimation` when `SizeBasedListCostEstimate` is on. The keys come
//! from memory once the cache has caught up with the backend's current revision, so
//! the estimate costs etcd one small read instead of a keys-only range.

use std::sync::Arc;

use apistore_storage::{KeysFn, Result, Storage, StorageError};

use crate::cacher::Cacher;
use crate::reads::list_prefix;

impl<S: Storage + 'static> Cacher<S> {
    /// The keys the cache holds under its resource prefix, once it has reached the
    /// backend's current revision (asking for progress meanwhile): kube's `getKeys`.
    /// The function holds the cache weakly; once every handle is gone it fails.
    pub fn keys_fn(&self) -> KeysFn {
        let shared = Arc::downgrade(&self.shared);
        Arc::new(move || {
            let shared = shared.clone();
            Box::pin(async move {
                let Some(shared) = shared.upgrade() else {
                    return Err(StorageError::Internal {
                        key: String::new(),
                        message: "the watch cache is gone".to_owned(),
                        source: None,
                    });
                };
                let prefix = &shared.settings.resource_prefix;
                let current = shared.storage.get_current_resource_version().await?;
                shared.wait_with_progress_requests(current, prefix).await?;
                let (items, _) = shared.cache.list(&list_prefix(prefix, true));
                Ok(items.into_iter().map(|(key, _)| key.to_string()).collect())
            })
        })
    }

    /// Turns on the backend's size estimate with the cache's keys ([`Self::keys_fn`]),
    /// as kube 1.35's cacher does when it is made. Fails as the backend's
    /// `enable_resource_size_estimation` does (on already, or not supported).
    pub fn enable_size_estimation_with_cache_keys(&self) -> Result<()> {
        self.shared
            .storage
            .enable_resource_size_estimation(self.keys_fn())
    }
}
