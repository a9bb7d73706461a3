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

/// How an etcd call failed, decided from gRPC codes and error types, never from the
/// words of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The request never left the client: the connection (TCP, or its TLS handshake)
    /// could not be made. Safe to repeat, writes included.
    NotSent,
    /// etcd refused the request before handling it (`no leader`: the member has lost
    /// its leader). Safe to repeat elsewhere, writes included.
    Refused,
    /// The connection broke, or the peer does not speak etcd's gRPC: the request's fate
    /// is unknown. `foreign` when no I/O error explains it (the peer answered bytes that
    /// are not HTTP/2: a plain-HTTP endpoint on a TLS port, or a server that is not etcd).
    Transport {
        /// The peer spoke something other than etcd's HTTP/2.
        foreign: bool,
    },
    /// The client's own per-request timeout expired.
    TimedOut,
    /// etcd answered with this gRPC status code.
    Server(tonic::Code),
    /// Anything else the client reports (bad arguments, watch plumbing).
    Client,
}

/// etcd's errors as its Go client identifies them (`rpctypes.Error`): a status that came
/// from etcd (not made up by the client from a local failure) with etcd's exact
/// description. This is etcd's wire protocol for typed errors, not free text.
fn is_etcd_error(err: &etcd_client::Error, code: tonic::Code, description: &str) -> bool {
    matches!(err, etcd_client::Error::GRpcStatus(status)
        if status.code() == code
            && std::error::Error::source(status).is_none()
            && status.message() == description)
}

/// `rpctypes.ErrGRPCCompacted`.
const COMPACTED: &str = "etcdserver: mvcc: required revision has been compacted";
/// `rpctypes.ErrGRPCNoLeader`: refused by etcd's interceptor before any handling.
const NO_LEADER: &str = "etcdserver: no leader";

/// Classifies an etcd client error.
pub(crate) fn classify(err: &etcd_client::Error) -> Failure {
    use etcd_client::Error as E;
    match err {
        E::GRpcStatus(status) => {
            let Some(source) = std::error::Error::source(status) else {
                if is_etcd_error(err, tonic::Code::Unavailable, NO_LEADER) {
                    return Failure::Refused;
                }
                return Failure::Server(status.code());
            };
            // A status the client made from a local failure: its cause says which.
            local_failure(source)
        }
        E::TransportError(transport) => match std::error::Error::source(transport) {
            Some(source) => local_failure(source),
            None => Failure::Transport { foreign: false },
        },
        E::IoError(_) => Failure::Transport { foreign: false },
        _ => Failure::Client,
    }
}

/// What a local failure's cause chain says: a connection never made, a timeout, or a
/// broken (or foreign) connection.
fn local_failure(cause: &(dyn std::error::Error + 'static)) -> Failure {
    let mut io = false;
    let mut next = Some(cause);
    while let Some(cause) = next {
        if cause.is::<tonic::ConnectError>() {
            return Failure::NotSent;
        }
        if cause.is::<tonic::TimeoutExpired>() {
            return Failure::TimedOut;
        }
        // h2 keeps a broken connection's io::Error to itself (its error has no
        // source): a member that died mid-answer is a broken connection, not a server
        // that does not speak gRPC.
        io |= cause.is::<std::io::Error>()
            || cause
                .downcast_ref::<h2::Error>()
                .is_some_and(h2::Error::is_io);
        next = cause.source();
    }
    Failure::Transport { foreign: !io }
}

/// Whether a watch stream's failure is worth a new stream: everything but a permanent
/// refusal by etcd (as Go's clientv3, which resumes on Unavailable and Internal).
pub(crate) fn is_transient(err: &etcd_client::Error) -> bool {
    match classify(err) {
        Failure::NotSent | Failure::Refused | Failure::Transport { .. } | Failure::TimedOut => true,
        Failure::Server(code) => matches!(
            code,
            tonic::Code::Unavailable | tonic::Code::Internal | tonic::Code::Unknown
        ),
        Failure::Client => false,
    }
}

/// An etcd client error in few words, without Rust `Debug` output: gRPC's code and
/// message, then each underlying cause once.
pub(crate) fn describe(err: &etcd_client::Error) -> String {
    use etcd_client::Error as E;
    let (mut text, mut source) = match err {
        E::GRpcStatus(status) => {
            let message = status.message();
            let text = if message.is_empty() {
                format!("{:?}", status.code())
            } else {
                message.to_owned()
            };
            (text, std::error::Error::source(status))
        }
        E::TransportError(transport) => (
            "transport error".to_owned(),
            std::error::Error::source(transport),
        ),
        other => (other.to_string(), std::error::Error::source(other)),
    };
    while let Some(cause) = source {
        let message = cause.to_string();
        if !message.is_empty() && !text.contains(&message) {
            text.push_str(": ");
            text.push_str(&message);
        }
        source = cause.source();
    }
    text
}

/// What to tell a person about an endpoint that does not speak etcd's gRPC.
pub(crate) const FOREIGN_HINT: &str = "the endpoint does not speak etcd's gRPC: is it an etcd \
     client URL (not a peer or metrics port, not another server), and does its scheme match \
     etcd's (http:// to a TLS port fails this way; use https:// with a CA)?";

/// A plain error carrying a readable message, for the source of storage errors.
#[derive(Debug)]
pub(crate) struct EtcdFailure(pub(crate) String);

impl std::fmt::Display for EtcdFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EtcdFailure {}

/// Maps an etcd client error for an operation on `key` to a storage error.
pub(crate) fn from_etcd(key: &str, err: etcd_client::Error) -> StorageError {
    from_etcd_at(key, None, err)
}

/// [`from_etcd`], naming the endpoint the request went to when it is known.
pub(crate) fn from_etcd_at(
    key: &str,
    endpoint: Option<&str>,
    err: etcd_client::Error,
) -> StorageError {
    let detail = describe(&err);
    let at = endpoint.map(|e| format!(" at {e}")).unwrap_or_default();
    let unreachable = |text: String| StorageError::Unreachable {
        key: key.to_owned(),
        source: Box::new(EtcdFailure(text)),
    };
    match classify(&err) {
        Failure::NotSent => unreachable(format!("etcd{at} could not be reached: {detail}")),
        Failure::Refused => unreachable(format!("etcd{at} has no leader: {detail}")),
        Failure::Transport { foreign: false } => {
            unreachable(format!("the connection to etcd{at} broke: {detail}"))
        }
        Failure::Transport { foreign: true } => unreachable(format!(
            "etcd{at} did not answer in gRPC ({detail}); {FOREIGN_HINT}"
        )),
        Failure::TimedOut => StorageError::Timeout {
            key: key.to_owned(),
            message: format!("no answer from etcd{at}: {detail}"),
        },
        Failure::Server(tonic::Code::Unavailable) => {
            unreachable(format!("etcd{at} is unavailable: {detail}"))
        }
        Failure::Server(tonic::Code::DeadlineExceeded | tonic::Code::Cancelled) => {
            StorageError::Timeout {
                key: key.to_owned(),
                message: detail,
            }
        }
        Failure::Server(_) | Failure::Client => StorageError::internal(
            key,
            format!("etcd error: {detail}"),
            Box::new(EtcdFailure(detail)),
        ),
    }
}

/// An internal error that has no underlying cause to carry.
pub(crate) fn internal(key: impl Into<String>, message: impl Into<String>) -> StorageError {
    StorageError::Internal {
        key: key.into(),
        message: message.into(),
        source: None,
    }
}

/// A timeout of a request to etcd.
pub(crate) fn timed_out(key: &str, after: Duration) -> StorageError {
    StorageError::Timeout {
        key: key.to_owned(),
        message: format!("no answer from etcd within {after:?}"),
    }
}

/// etcd's description of a read at a revision it has not reached
/// (`rpctypes.ErrGRPCFutureRev`).
const FUTURE_REVISION: &str = "etcdserver: mvcc: required revision is a future revision";

/// Whether an etcd error says the revision asked for is in the future
/// (`rpctypes.ErrGRPCFutureRev`: OutOfRange with etcd's description).
pub(crate) fn is_future_revision(err: &etcd_client::Error) -> bool {
    is_etcd_error(err, tonic::Code::OutOfRange, FUTURE_REVISION)
}

/// Whether an etcd error says the revision asked for was compacted
/// (`rpctypes.ErrGRPCCompacted`: OutOfRange with etcd's description).
pub(crate) fn is_compacted(err: &etcd_client::Error) -> bool {
    is_etcd_error(err, tonic::Code::OutOfRange, COMPACTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: tonic::Code, message: &str) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::new(code, message))
    }

    fn local(cause: Box<dyn std::error::Error + Send + Sync>) -> etcd_client::Error {
        etcd_client::Error::GRpcStatus(tonic::Status::from_error(cause))
    }

    #[test]
    fn failures_are_classified_by_code_and_type() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let cases = [
            (
                local(Box::new(tonic::ConnectError(Box::new(refused)))),
                Failure::NotSent,
            ),
            (
                status(tonic::Code::Unavailable, NO_LEADER),
                Failure::Refused,
            ),
            (
                local(Box::new(std::io::Error::from(
                    std::io::ErrorKind::ConnectionReset,
                ))),
                Failure::Transport { foreign: false },
            ),
            (
                local("frame with invalid size".into()),
                Failure::Transport { foreign: true },
            ),
            (
                status(tonic::Code::Unavailable, "etcdserver: leader changed"),
                Failure::Server(tonic::Code::Unavailable),
            ),
            // A server's words that look like a local failure are still the server's.
            (
                status(tonic::Code::Unknown, "transport error: connect"),
                Failure::Server(tonic::Code::Unknown),
            ),
            (etcd_client::Error::InvalidArgs("x".into()), Failure::Client),
        ];
        for (err, want) in cases {
            assert_eq!(classify(&err), want, "{err}");
        }
    }

    #[test]
    fn a_future_revision_is_etcds_typed_error_only() {
        assert!(is_future_revision(&status(
            tonic::Code::OutOfRange,
            FUTURE_REVISION
        )));
        assert!(!is_future_revision(&status(
            tonic::Code::OutOfRange,
            COMPACTED
        )));
        assert!(!is_future_revision(&status(
            tonic::Code::Unknown,
            FUTURE_REVISION
        )));
    }

    #[test]
    fn compaction_is_etcds_typed_error_only() {
        assert!(is_compacted(&status(tonic::Code::OutOfRange, COMPACTED)));
        assert!(!is_compacted(&status(
            tonic::Code::OutOfRange,
            "etcdserver: mvcc: required revision is a future revision"
        )));
        assert!(!is_compacted(&status(tonic::Code::Unknown, COMPACTED)));
    }

    #[test]
    fn storage_errors_carry_no_debug_output_and_name_the_key_once() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let err = from_etcd_at(
            "/registry/pods/a",
            Some("http://127.0.0.1:2379"),
            local(Box::new(tonic::ConnectError(Box::new(refused)))),
        );
        let text = err.to_string();
        assert_eq!(err.status().code, 503, "{text}");
        assert_eq!(text.matches("/registry/pods/a").count(), 1, "{text}");
        assert!(text.contains("http://127.0.0.1:2379"), "{text}");
        for dump in ["source:", "tonic::", "Status {", "Kind("] {
            assert!(!text.contains(dump), "{text}");
        }
        let foreign = from_etcd_at("/k", None, local("frame with invalid size".into()));
        assert!(foreign.to_string().contains(FOREIGN_HINT), "{foreign}");
        assert_eq!(foreign.status().code, 503);
    }
}
