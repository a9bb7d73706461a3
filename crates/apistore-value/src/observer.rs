//! A hook for transformation metrics, so this crate need not depend on a metrics library.
//!
//! kube-apiserver records `apiserver_storage_transformation_operations_total`
//! (transformation_type, transformer_prefix, status; from 1.32 also the resource) and
//! `apiserver_storage_transformation_duration_seconds` (transformation_type,
//! transformer_prefix; successes only) from `pkg/storage/value/metrics.go`. The
//! [`PrefixTransformers`](crate::PrefixTransformers) list calls a [`TransformObserver`]
//! with exactly the label values kube records; another crate turns the calls into
//! Prometheus samples.

use std::time::Duration;

/// The `status` label of a successful transformation.
pub const STATUS_OK: &str = "OK";
/// The `status` label of a failed transformation whose error carries no gRPC status
/// (every error of this crate: only KMS providers produce gRPC codes).
pub const STATUS_UNKNOWN_NON_GRPC: &str = "unknown-non-grpc";
/// The `transformer_prefix` label of a read served by the empty-prefix (identity) entry.
pub const PREFIX_LABEL_IDENTITY: &str = "identity";
/// The `transformer_prefix` label of a read that no entry's prefix matched.
pub const PREFIX_LABEL_UNKNOWN: &str = "unknown";

pub use apistore_storage::TransformationType;

/// Receives one call per transformation a prefix list records.
///
/// `elapsed` is `Some` only when `status` is [`STATUS_OK`]: kube observes the duration
/// histogram on success only and counts every operation.
pub trait TransformObserver: Send + Sync {
    /// Records one transformation.
    fn observe(
        &self,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    );

    /// Records one transformation of a value of `resource` (a group-resource string,
    /// empty when not known): kube 1.32+ labels transformations with it. By default
    /// the resource is dropped and [`Self::observe`] called.
    fn observe_resource(
        &self,
        resource: &str,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        let _ = resource;
        self.observe(transformation_type, transformer_prefix, status, elapsed);
    }
}

/// An observer that records nothing: the default of a prefix list.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoopObserver;

impl TransformObserver for NoopObserver {
    fn observe(&self, _: TransformationType, _: &str, _: &str, _: Option<Duration>) {}
}
