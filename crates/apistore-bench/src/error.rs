//! What can stop a bench run.

use apistore_storage::StorageError;

/// An error that ends the bench run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BenchError {
    /// The etcd fixture could not start etcd.
    #[error("etcd: {0}")]
    Fixture(#[from] apistore_testing::etcd::FixtureError),
    /// The store could not connect.
    #[error("connect: {0}")]
    Connect(#[from] apistore_etcd3::ConnectError),
    /// A store operation failed.
    #[error("store: {0}")]
    Storage(#[from] StorageError),
    /// A raw etcd-client call failed.
    #[error("etcd-client: {0}")]
    Etcd(#[from] etcd_client::Error),
    /// One of the bench's own raw etcd-client calls (filling, clearing, compacting)
    /// failed.
    #[error("etcd-client, {what}: {source}")]
    EtcdCall {
        /// Which call.
        what: &'static str,
        /// etcd-client's error.
        #[source]
        source: etcd_client::Error,
    },
    /// The protobuf transcoder refused a value.
    #[error("protobuf: {0}")]
    Protobuf(#[from] apistore_protobuf::ProtobufError),
    /// A codec refused a value.
    #[error("codec: {0}")]
    Codec(#[from] apistore_storage::CodecError),
    /// JSON encoding or decoding failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// Metrics could not be registered.
    #[error("metrics: {0}")]
    Telemetry(#[from] apistore_telemetry::TelemetryError),
    /// The encryption configuration was refused.
    #[error("encryption config: {0}")]
    Encryption(#[from] apistore_value::ConfigError),
    /// A file could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A caller task panicked or was cancelled.
    #[error("caller task: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// Something the bench checks did not hold.
    #[error("{0}")]
    Invalid(String),
}

/// `Result` with [`BenchError`].
pub(crate) type Result<T, E = BenchError> = std::result::Result<T, E>;
