//! Turning etcd client errors into storage errors, and the errors of connecting.

use std::time::Duration;

use apistore_storage::{BoxError, StorageError};

/// Why a connection to etcd could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// No endpoint was given.
    #[error("no etcd endpoints were given")]
    NoEndpoints,
    /// The endpoints did not answer in time.
    #[error("could not connect to etcd at {endpoints} within {timeout:?}")]
    DialTimeout {
        /// The endpoints tried.
        endpoints: String,
        /// The dial timeout.
        timeout: Duration,
    },
    /// The client refused the configuration or the connection failed.
    #[error("could not connect to etcd at {endpoints}: {source}")]
    Connect {
        /// The endpoints tried.
        endpoints: String,
        /// The client's error.
        #[source]
        source: BoxError,
    },
}

/// etcd's message when a read asks for a compacted revision.
pub(crate) const COMPACTED: &str = "required revision has been compacted";

/// Maps an etcd client error for an operation on `key` to a storage error.
pub(crate) fn from_etcd(key: &str, err: etcd_client::Error) -> StorageError {
    use etcd_client::Error as E;
    match err {
        E::GRpcStatus(status) => match status.code() {
            tonic::Code::Unavailable => StorageError::Unreachable {
                key: key.to_owned(),
                source: Box::new(E::GRpcStatus(status)),
            },
            tonic::Code::DeadlineExceeded | tonic::Code::Cancelled => StorageError::Timeout {
                key: key.to_owned(),
                message: status.message().to_owned(),
            },
            _ => StorageError::Internal {
                key: key.to_owned(),
                message: format!("etcd error: {}", status.message()),
                source: Some(Box::new(E::GRpcStatus(status))),
            },
        },
        E::TransportError(_) | E::IoError(_) => StorageError::Unreachable {
            key: key.to_owned(),
            source: Box::new(err),
        },
        other => StorageError::Internal {
            key: key.to_owned(),
            message: format!("etcd error: {other}"),
            source: Some(Box::new(other)),
        },
    }
}

/// A timeout of a request to etcd.
pub(crate) fn timed_out(key: &str, after: Duration) -> StorageError {
    StorageError::Timeout {
        key: key.to_owned(),
        message: format!("no answer from etcd within {after:?}"),
    }
}

/// Whether an etcd error says the revision asked for was compacted.
pub(crate) fn is_compacted(err: &etcd_client::Error) -> bool {
    err.to_string().contains(COMPACTED)
}
