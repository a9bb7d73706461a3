//! The crate's one error type.

/// What can go wrong while setting up telemetry.
///
/// Recording never fails: once [`StorageMetrics`](crate::StorageMetrics) is registered,
/// every recording method is infallible.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The registry refused a collector, or a metric could not be built.
    #[error("prometheus: {0}")]
    Prometheus(#[from] prometheus::Error),
    /// The registry already holds metrics under kube-apiserver's storage metric names
    /// that this crate did not register, so they cannot be shared.
    #[error(
        "the registry already holds storage metrics (such as etcd_requests_total) that apistore-telemetry did not register"
    )]
    ForeignMetrics,
    /// The registry already holds apistore's storage metrics for another kube minor,
    /// whose families or labels differ.
    #[error(
        "the registry already holds the storage metrics of kube {registered}; cannot register kube {requested}'s too"
    )]
    OtherKubeVersion {
        /// The minor registered there.
        registered: apistore_storage::KubeVersion,
        /// The minor asked for.
        requested: apistore_storage::KubeVersion,
    },
}

/// The crate's result type.
pub type Result<T, E = TelemetryError> = std::result::Result<T, E>;
