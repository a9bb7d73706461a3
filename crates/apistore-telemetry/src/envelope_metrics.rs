//! [`EnvelopeMetrics`]: kube's envelope metrics, fed by the KMS v2 envelopes of an
//! encryption configuration through apistore-value's [`KmsObserver`].
//!
//! Follows the recording functions of
//! `pkg/storage/value/encrypt/envelope/metrics/metrics.go` (`RecordKeyID`,
//! `RecordKeyIDFromStatus`, `RecordInvalidKeyIDFromStatus`,
//! `RecordKMSOperationLatency`, `RecordDekSourceCacheSize`), including their bound on
//! key id series: the last 100 label sets of each kind are kept, and the series of
//! an older one are deleted, so key rotations do not grow the exposition forever.
//! kube keeps that bound per process; here it is per registration, like the metrics.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apistore_storage::kms_observer::{KmsObserver, key_id_hash};

use crate::labels::TransformationType;
use crate::storage_metrics::{Inner, StorageMetrics};

/// How many key id label sets kube keeps per kind before deleting the oldest's
/// series (its `cacheSize`).
pub const KEY_ID_SERIES_LIMIT: usize = 100;

/// The envelope metrics of one registration. Get one with
/// [`StorageMetrics::envelope`]; load a configuration through an
/// `ObservedKmsConnector` with it as the observer (the health check loading runs is
/// recorded too), or attach it afterwards with
/// `EncryptionConfig::with_kms_observer(Arc::new(metrics))`. Cloning is cheap.
///
/// `apiserver_id_hash` labels the key id series with the SHA-256 of the API server's
/// identity, as kube labels them with its `apiserver-<uuid>` lease identity. apistore
/// is not an API server and has no such identity, so the label is empty unless one is
/// given with [`EnvelopeMetrics::with_apiserver_id`] (kube writes an empty label for an
/// empty identity too).
#[derive(Clone)]
pub struct EnvelopeMetrics {
    inner: Arc<Inner>,
    apiserver_id_hash: Arc<str>,
}

impl std::fmt::Debug for EnvelopeMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnvelopeMetrics")
            .field("apiserver_id_hash", &self.apiserver_id_hash)
            .finish_non_exhaustive()
    }
}

/// The key id label sets in use, most recently recorded last (kube's two LRU caches).
#[derive(Default)]
pub(crate) struct KeyIdSeries {
    used: Mutex<RecentLabels<[String; 4]>>,
    status: Mutex<RecentLabels<[String; 3]>>,
}

/// A bounded set of label sets in order of last use.
struct RecentLabels<K> {
    recent: VecDeque<K>,
}

impl<K> Default for RecentLabels<K> {
    fn default() -> Self {
        Self {
            recent: VecDeque::new(),
        }
    }
}

impl<const N: usize> RecentLabels<[String; N]> {
    /// Marks `labels` as just used; the label set that falls out, if any.
    fn touch(&mut self, labels: [&str; N]) -> Option<[String; N]> {
        let same = |l: &[String; N]| l.iter().zip(labels).all(|(a, b)| a == b);
        // The common case, without allocating: the same key id as last time.
        if self.recent.back().is_some_and(same) {
            return None;
        }
        if let Some(at) = self.recent.iter().position(same) {
            self.recent.remove(at);
        }
        self.recent.push_back(labels.map(str::to_owned));
        if self.recent.len() > KEY_ID_SERIES_LIMIT {
            self.recent.pop_front()
        } else {
            None
        }
    }
}

fn now_seconds() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn as_refs<const N: usize>(labels: &[String; N]) -> [&str; N] {
    labels.each_ref().map(String::as_str)
}

impl StorageMetrics {
    /// The envelope metrics (`apiserver_envelope_encryption_*`) of this registration.
    pub fn envelope(&self) -> EnvelopeMetrics {
        EnvelopeMetrics {
            inner: Arc::clone(&self.inner),
            apiserver_id_hash: Arc::from(""),
        }
    }
}

impl EnvelopeMetrics {
    /// Labels the key id series with the hash of an API server identity, as kube
    /// labels them with its own (`apiserver_id_hash`).
    #[must_use]
    pub fn with_apiserver_id(mut self, apiserver_id: &str) -> Self {
        self.apiserver_id_hash = Arc::from(key_id_hash(apiserver_id));
        self
    }

    /// Records one value read or written under a key id (its `sha256:` hash):
    /// `apiserver_envelope_encryption_key_id_hash_total` and
    /// `..._key_id_hash_last_timestamp_seconds`.
    pub fn record_key_id(
        &self,
        transformation_type: TransformationType,
        provider_name: &str,
        key_id_hash: &str,
    ) {
        let families = &self.inner.families.envelope;
        let labels = [
            transformation_type.as_str(),
            provider_name,
            key_id_hash,
            &self.apiserver_id_hash,
        ];
        // Held while recording, so that an evicted label set is not recreated by a
        // concurrent record between its eviction and its deletion.
        let mut recent = self
            .inner
            .key_id_series
            .used
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        families.key_id_hash_total.with_label_values(&labels).inc();
        families
            .key_id_hash_last_timestamp
            .with_label_values(&labels)
            .set(now_seconds());
        if let Some(evicted) = recent.touch(labels) {
            let values = as_refs(&evicted);
            // A series already gone is no error worth reporting.
            let _ = families.key_id_hash_total.remove_label_values(&values);
            let _ = families
                .key_id_hash_last_timestamp
                .remove_label_values(&values);
        }
    }

    /// Records a key id (its hash) a health check's `Status` answered:
    /// `..._key_id_hash_status_last_timestamp_seconds`.
    pub fn record_key_id_from_status(&self, provider_name: &str, key_id_hash: &str) {
        let families = &self.inner.families.envelope;
        let labels = [provider_name, key_id_hash, &self.apiserver_id_hash];
        let mut recent = self
            .inner
            .key_id_series
            .status
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        families
            .key_id_hash_status_last_timestamp
            .with_label_values(&labels)
            .set(now_seconds());
        if let Some(evicted) = recent.touch(labels) {
            let _ = families
                .key_id_hash_status_last_timestamp
                .remove_label_values(&as_refs(&evicted));
        }
    }

    /// Counts an invalid key id from `Status` (`error` is kube's code, `empty` or
    /// `too_long`): `..._invalid_key_id_from_status_total`.
    pub fn record_invalid_key_id_from_status(&self, provider_name: &str, error: &str) {
        self.inner
            .families
            .envelope
            .invalid_key_id_from_status
            .with_label_values(&[provider_name, error])
            .inc();
    }

    /// Observes one plugin call: `..._kms_operations_latency_seconds` (`method_name`
    /// the gRPC method, `grpc_status_code` Go's name of the code, `OK` on success).
    pub fn record_kms_operation(
        &self,
        provider_name: &str,
        method_name: &str,
        grpc_status_code: &str,
        elapsed: Duration,
    ) {
        self.inner
            .families
            .envelope
            .kms_operations_latency
            .with_label_values(&[provider_name, method_name, grpc_status_code])
            .observe(elapsed.as_secs_f64());
    }

    /// Sets how many decrypted DEK sources a provider caches:
    /// `..._dek_source_cache_size`.
    pub fn record_dek_source_cache_size(&self, provider_name: &str, size: usize) {
        self.inner
            .families
            .envelope
            .dek_source_cache_size
            .with_label_values(&[provider_name])
            // Cache sizes are small integers, exactly representable.
            .set(size as f64);
    }
}

/// The events of a configuration's KMS v2 envelopes, recorded as kube records them.
impl KmsObserver for EnvelopeMetrics {
    fn key_id_used(
        &self,
        transformation_type: TransformationType,
        provider_name: &str,
        key_id_hash: &str,
    ) {
        self.record_key_id(transformation_type, provider_name, key_id_hash);
    }

    fn key_id_from_status(&self, provider_name: &str, key_id_hash: &str) {
        self.record_key_id_from_status(provider_name, key_id_hash);
    }

    fn invalid_key_id_from_status(&self, provider_name: &str, error: &str) {
        self.record_invalid_key_id_from_status(provider_name, error);
    }

    fn kms_operation(
        &self,
        provider_name: &str,
        method_name: &str,
        grpc_status_code: &str,
        elapsed: Duration,
    ) {
        self.record_kms_operation(provider_name, method_name, grpc_status_code, elapsed);
    }

    /// kube's v2 cache has no capacity and kube sets `dek_cache_fill_percent` for KMS
    /// v1 only, so the capacity is not recorded.
    fn dek_source_cache_size(&self, provider_name: &str, size: usize, _capacity: usize) {
        self.record_dek_source_cache_size(provider_name, size);
    }
}

#[cfg(test)]
mod tests;
