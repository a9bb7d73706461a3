//! Where a KMS v2 envelope keeps its observer. The hook itself, [`KmsObserver`], lives
//! in apistore-storage (`kms_observer`), so the metrics that implement it need not
//! depend on this crate's crypto, nor this crate on a metrics library (as
//! [`TransformObserver`](crate::TransformObserver) is for the transformation metrics).
//!
//! kube-apiserver records these from `pkg/storage/value/encrypt/envelope/metrics/metrics.go`
//! (`RecordKeyID`, `RecordKeyIDFromStatus`, `RecordInvalidKeyIDFromStatus`,
//! `RecordKMSOperationLatency`, `RecordDekSourceCacheSize`) into the
//! `apiserver_envelope_encryption_*` families. A [`KmsObserver`] gets the same events
//! with kube's label values; key ids arrive as their `sha256:<hex>` hash only, since a
//! key id may be sensitive and kube never exposes it either.

use std::sync::{Arc, RwLock};

pub use apistore_storage::kms_observer::{GRPC_CODE_OK, KmsObserver};

/// The gRPC method name kube labels a plugin call with.
pub(crate) fn method_name(operation: &str) -> &'static str {
    match operation {
        "Status" => "/v2.KeyManagementService/Status",
        "Encrypt" => "/v2.KeyManagementService/Encrypt",
        "Decrypt" => "/v2.KeyManagementService/Decrypt",
        _ => "unknown",
    }
}

/// Where an envelope keeps its observer: set once a configuration is wired to its
/// metrics, read on every transformation.
#[derive(Default)]
pub(crate) struct ObserverSlot(RwLock<Option<Arc<dyn KmsObserver>>>);

impl ObserverSlot {
    pub(crate) fn set(&self, observer: Arc<dyn KmsObserver>) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(observer);
    }

    pub(crate) fn get(&self) -> Option<Arc<dyn KmsObserver>> {
        self.0
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Arc::clone)
    }
}

impl std::fmt::Debug for ObserverSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() { "set" } else { "unset" })
    }
}

#[cfg(test)]
mod tests;
