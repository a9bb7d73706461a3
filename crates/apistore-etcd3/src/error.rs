//! Turning etcd client errors into storage errors, and the errors of connecting.

use std::path::PathBuf;
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
    /// A TLS file (CA, client certificate or key) could not be read.
    #[error("cannot read the etcd TLS {what} file {}: {source}", path.display())]
    ReadTlsFile {
        /// Which file: `CA certificate`, `client certificate` or `client key`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why it could not be read.
        #[source]
        source: std::io::Error,
    },
    /// The TLS configuration is unusable: no CA, a certificate without its key, or PEM
    /// that does not parse.
    #[error("unusable etcd TLS configuration: {problem}")]
    TlsConfig {
        /// What is wrong.
        problem: String,
    },
    /// etcd's serving certificate is not trusted: it is not signed by the configured
    /// CA, or does not name the endpoint's host.
    #[error(
        "TLS handshake with etcd at {endpoints} failed: etcd's certificate is not trusted \
         (is the CA certificate the one that signed etcd's, and does it name the host?): {detail}"
    )]
    ServerCertificateRejected {
        /// The endpoints tried.
        endpoints: String,
        /// The TLS library's words.
        detail: String,
    },
    /// etcd requires a client certificate (mutual TLS) and none was given, or it refused
    /// the one given.
    #[error(
        "TLS handshake with etcd at {endpoints} failed: etcd requires a client certificate \
         it trusts (mutual TLS: give a client certificate and key signed by a CA etcd \
         trusts): {detail}"
    )]
    ClientCertificateRejected {
        /// The endpoints tried.
        endpoints: String,
        /// The TLS library's words.
        detail: String,
    },
    /// The TLS handshake failed otherwise (for example an `https://` endpoint that
    /// serves plain HTTP).
    #[error("TLS handshake with etcd at {endpoints} failed (does etcd serve TLS there?): {detail}")]
    Tls {
        /// The endpoints tried.
        endpoints: String,
        /// The TLS library's words.
        detail: String,
    },
    /// etcd refused the user name or password.
    #[error("etcd at {endpoints} refused the user name or password of user {user:?}: {detail}")]
    AuthenticationFailed {
        /// The endpoints tried.
        endpoints: String,
        /// The user name (never the password).
        user: String,
        /// etcd's words.
        detail: String,
    },
}

/// etcd's message when a read asks for a compacted revision.
pub(crate) const COMPACTED: &str = "required revision has been compacted";

/// Maps an etcd client error for an operation on `key` to a storage error.
pub(crate) fn from_etcd(key: &str, err: etcd_client::Error) -> StorageError {
    use etcd_client::Error as E;
    match err {
        E::GRpcStatus(status) => match status.code() {
            // A connection that broke mid-request surfaces as `Unknown: transport error`:
            // etcd was lost, the request's fate is unknown, as with `Unavailable`.
            tonic::Code::Unavailable => StorageError::Unreachable {
                key: key.to_owned(),
                source: Box::new(E::GRpcStatus(status)),
            },
            tonic::Code::Unknown if status.message().contains("transport error") => {
                StorageError::Unreachable {
                    key: key.to_owned(),
                    source: Box::new(E::GRpcStatus(status)),
                }
            }
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
