//! The hook KMS v2 envelopes report through, so that the metrics that record them
//! (apistore-telemetry) need not depend on the envelopes' crypto (apistore-value), nor
//! the envelopes on a metrics library.
//!
//! kube-apiserver records these from `pkg/storage/value/encrypt/envelope/metrics/metrics.go`
//! (`RecordKeyID`, `RecordKeyIDFromStatus`, `RecordInvalidKeyIDFromStatus`,
//! `RecordKMSOperationLatency`, `RecordDekSourceCacheSize`) into the
//! `apiserver_envelope_encryption_*` families. A [`KmsObserver`] gets the same events
//! with kube's label values; key ids arrive as their `sha256:<hex>` hash only
//! ([`key_id_hash`]), since a key id may be sensitive and kube never exposes it either.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::TransformationType;

/// The `grpc_status_code` of a plugin call that succeeded.
pub const GRPC_CODE_OK: &str = "OK";

/// Receives the events of the KMS v2 envelopes of a configuration. Every method has an
/// empty default, so an observer implements only what it records.
pub trait KmsObserver: Send + Sync {
    /// A value was read or written under a key id (kube's `RecordKeyID`, for
    /// `apiserver_envelope_encryption_key_id_hash_total` and
    /// `..._key_id_hash_last_timestamp_seconds`).
    fn key_id_used(
        &self,
        _transformation_type: TransformationType,
        _provider_name: &str,
        _key_id_hash: &str,
    ) {
    }

    /// A health check's `Status` answered a valid key id (kube's
    /// `RecordKeyIDFromStatus`, for `..._key_id_hash_status_last_timestamp_seconds`).
    fn key_id_from_status(&self, _provider_name: &str, _key_id_hash: &str) {}

    /// A health check's `Status` answered an invalid key id; `error` is kube's code,
    /// `empty` or `too_long` (for `..._invalid_key_id_from_status_total`).
    fn invalid_key_id_from_status(&self, _provider_name: &str, _error: &str) {}

    /// One plugin call (kube's `RecordKMSOperationLatency`, for
    /// `..._kms_operations_latency_seconds`): `method_name` is the gRPC method
    /// (`/v2.KeyManagementService/Encrypt`), `grpc_status_code` Go's name of the
    /// status code (`OK`, `DeadlineExceeded`, `Unavailable`...) or
    /// `STATUS_UNKNOWN_NON_GRPC` (apistore-value's `observer` module) when the
    /// call failed without one.
    fn kms_operation(
        &self,
        _provider_name: &str,
        _method_name: &str,
        _grpc_status_code: &str,
        _elapsed: Duration,
    ) {
    }

    /// The number of decrypted DEK sources the provider's cache holds, and how many it
    /// may hold (kube's `RecordDekSourceCacheSize`, for `..._dek_source_cache_size`;
    /// kube's v2 cache is bounded by age alone, this one also by count, which is what
    /// `..._dek_cache_fill_percent` measures for KMS v1).
    fn dek_source_cache_size(&self, _provider_name: &str, _size: usize, _capacity: usize) {}
}

/// The `sha256:<hex>` hash kube labels a key id (or an API server id) with; the empty
/// id hashes to the empty string.
pub fn key_id_hash(key_id: &str) -> String {
    if key_id.is_empty() {
        return String::new();
    }
    let digest = Sha256::digest(key_id.as_bytes());
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in digest {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
