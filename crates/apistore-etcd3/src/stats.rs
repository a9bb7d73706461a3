//! The etcd3 store's answers about its resource as a whole: `Stats`,
//! `GetCurrentResourceVersion`, `EnableResourceSizeEstimation` and `CompactRevision`
//! (k8s.io/apiserver v0.37 `etcd3/store.go`), and where they differ between kube
//! versions:
//!
//! | kube | stats | size estimation | compact revision |
//! |---|---|---|---|
//! | 1.31–1.33 | a count-only range | only when enabled | this client's compactors |
//! | 1.34 | a count-only range, or the keys when estimating | on from the start, with the keys from etcd | also any server's, from a watch of `compact_rev_key` |
//! | 1.35+ | the same | only when enabled (a watch cache enables it with its keys) | the same |
//!
//! In kube 1.31–1.33 there is no `Stats` (its `Count` is [`Storage::count`]); a store
//! pinned to those versions still answers it, from the count.
//!
//! [`Storage::count`]: apistore_storage::Storage::count

use std::sync::Arc;

use apistore_backend::key::{prefix_range_end, prepare_key};
use apistore_storage::{ApiObject, KeysFn, KubeVersion, Result, Stats, StorageError};
use etcd_client::GetOptions as EtcdGetOptions;

use crate::instrument::Operation;
use crate::kv::Kv;
use crate::size_estimator::SizeEstimator;
use crate::store::Etcd3Store;

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// The stored key of the resource prefix as a directory (`/registry/pods/`).
    fn resource_directory(&self) -> Result<String> {
        self.scope.resource_directory()
    }

    /// The size estimator of this store's resource, if estimation is on; at kube 1.34
    /// it is turned on here, on first use, with [`Self::etcd_keys`] (kube 1.34's store
    /// does so when it is made; from 1.35 the watch cache asks for it).
    fn size_estimator(&self) -> Option<Arc<SizeEstimator>> {
        if self.kube_version != KubeVersion::V1_34 && !self.client.estimates_any_sizes() {
            // The hot path of every list page and watch response: nothing to do.
            return None;
        }
        let directory = self.resource_directory().ok()?;
        let mut estimators = self.client.size_estimators();
        if let Some(estimator) = estimators.get(&directory) {
            return Some(Arc::clone(estimator));
        }
        if self.kube_version != KubeVersion::V1_34 {
            return None;
        }
        let keys = self.etcd_keys().ok()?;
        let estimator = SizeEstimator::start(self.path_prefix(), keys);
        estimators.insert(directory, Arc::clone(&estimator));
        self.client.note_size_estimator();
        Some(estimator)
    }

    /// The same store behaving as kube `version`'s where kube versions differ (builder
    /// style): a way to pin the version after the store was made, as tests of both
    /// behaviours need.
    pub fn with_kube_version(mut self, version: KubeVersion) -> Self {
        self.kube_version = version;
        self
    }

    /// The kube version whose storage layer this store follows where versions differ.
    pub fn kube_version(&self) -> KubeVersion {
        self.kube_version
    }

    /// `Stats`: from the size estimator when it is on, else a count-only range over the
    /// resource prefix.
    pub(crate) async fn resource_stats(&self) -> Result<Stats> {
        if let Some(estimator) = self.size_estimator() {
            return estimator.stats().await;
        }
        let directory = self.resource_directory()?;
        let options = EtcdGetOptions::new()
            .with_range(prefix_range_end(directory.as_bytes()))
            .with_count_only();
        let etcd_key = directory.as_str();
        let response = self
            .call(etcd_key, Operation::ListWithCount, |mut kv| {
                let options = options.clone();
                async move { kv.get(etcd_key, Some(options)).await }
            })
            .await?;
        Ok(Stats {
            object_count: response.count(),
            estimated_average_object_size_bytes: 0,
        })
    }

    /// `GetCurrentResourceVersion`: the header revision of a read of the resource
    /// prefix key itself (which holds nothing), so any write anywhere in etcd moves it.
    pub(crate) async fn current_resource_version(&self) -> Result<u64> {
        let key = prepare_key(self.path_prefix(), self.resource_prefix())?;
        let etcd_key = key.as_str();
        let options = EtcdGetOptions::new().with_keys_only().with_limit(1);
        let response = self
            .call(etcd_key, Operation::GetCurrentResourceVersion, |mut kv| {
                let options = options.clone();
                async move { kv.get(etcd_key, Some(options)).await }
            })
            .await?;
        let revision = response.header().map_or(0, |h| h.revision());
        match u64::try_from(revision) {
            Ok(revision) if revision > 0 => Ok(revision),
            _ => Err(StorageError::Internal {
                key,
                message: format!(
                    "the current resource version must be greater than 0, etcd answered {revision}"
                ),
                source: None,
            }),
        }
    }

    /// The keys of the store's resource as etcd holds them, from a keys-only range
    /// (kube's `getKeys`): what a store without a watch cache estimates sizes with
    /// (kube 1.34 does it by default).
    pub fn etcd_keys(&self) -> Result<KeysFn> {
        let directory = self.resource_directory()?;
        let kv = self.kv.clone();
        Ok(Arc::new(move || {
            let (kv, directory) = (kv.clone(), directory.clone());
            Box::pin(async move { keys_under(&kv, &directory).await })
        }))
    }

    /// `EnableResourceSizeEstimation`: fails when it is on already. Stores of one
    /// resource on one client (and its clones) share the estimate.
    pub(crate) fn enable_size_estimation(&self, keys: KeysFn) -> Result<()> {
        let directory = self.resource_directory()?;
        let mut estimators = self.client.size_estimators();
        if estimators.contains_key(&directory) {
            return Err(StorageError::Internal {
                key: directory,
                message: "resource size estimation is already enabled".to_owned(),
                source: None,
            });
        }
        let estimator = SizeEstimator::start(self.path_prefix(), keys);
        estimators.insert(directory, estimator);
        self.client.note_size_estimator();
        Ok(())
    }

    /// Whether [`Self::stats`](apistore_storage::Storage::stats) estimates sizes.
    pub fn estimates_sizes(&self) -> bool {
        self.size_estimator().is_some()
    }

    /// `CompactRevision`: what the client has seen compacted; from kube 1.34 this also
    /// starts (once per client) the watch that sees other servers' compactions.
    pub(crate) fn seen_compact_revision(&self) -> i64 {
        if self.kube_version >= KubeVersion::V1_34 {
            self.client.compactions.ensure_watching(&self.client.inner);
        }
        self.client.compactions.revision()
    }

    /// Values seen in a list page, for the size estimate.
    pub(crate) fn saw_values(&self, kvs: &[etcd_client::KeyValue]) {
        if let Some(estimator) = self.size_estimator() {
            estimator.update_all(
                kvs.iter()
                    .map(|kv| (kv.key(), kv.value().len(), kv.mod_revision())),
            );
        }
    }

    /// Events seen by a watch, for the size estimate.
    pub(crate) fn saw_events(&self, events: &[etcd_client::Event]) {
        let Some(estimator) = self.size_estimator() else {
            return;
        };
        for event in events {
            let Some(kv) = event.kv() else { continue };
            match event.event_type() {
                etcd_client::EventType::Put => {
                    estimator.update(kv.key(), kv.value().len(), kv.mod_revision());
                }
                etcd_client::EventType::Delete => estimator.delete(kv.key(), kv.mod_revision()),
            }
        }
    }
}

/// The keys under `directory`, from a keys-only range (`listOnlyKeys` in kube 1.34+'s
/// metrics, as its size estimator reads them).
async fn keys_under(kv: &Kv, directory: &str) -> Result<Vec<String>> {
    let options = EtcdGetOptions::new()
        .with_range(prefix_range_end(directory.as_bytes()))
        .with_keys_only();
    let response = kv
        .call(directory, Operation::ListOnlyKeys, |mut client| {
            let options = options.clone();
            async move { client.get(directory, Some(options)).await }
        })
        .await?;
    Ok(response
        .kvs()
        .iter()
        .map(|kv| String::from_utf8_lossy(kv.key()).into_owned())
        .collect())
}
