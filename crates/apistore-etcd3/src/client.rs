//! The connection to etcd. No etcd-client type leaks out of this crate: callers give
//! endpoints and options, and get an [`EtcdClient`] to build stores from.
//!
//! As kube-apiserver's client setup (`etcd3.newETCD3Client`): TLS when a CA, a client
//! certificate or a key is configured, plaintext otherwise; etcd user and password when
//! etcd has authentication on. Secrets (the password, the client key) never reach a
//! log, an error or `Debug` output.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use crate::compact_revision::CompactionTracker;
use crate::endpoints::{Members, ProbeSettings};
use crate::error::{ConnectError, describe};
use crate::list::stream::RangeStreamSupport;
use crate::size_estimator::SizeEstimator;

/// [`ClientConfig::unresponsive_after`] by default.
pub const DEFAULT_UNRESPONSIVE_AFTER: Duration = Duration::from_millis(500);
/// [`ClientConfig::probe_timeout`] by default.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// How to reach etcd.
#[derive(Clone)]
pub struct ClientConfig {
    /// Endpoints, e.g. `http://127.0.0.1:2379`, or `https://…` with [`Self::tls`].
    pub endpoints: Vec<String>,
    /// How long to wait for a connection (kube-apiserver: 20 s).
    pub dial_timeout: Duration,
    /// Keep-alive interval and timeout on the connection (kube-apiserver: 30 s and 10 s):
    /// an HTTP/2 ping every interval, idle or not, and a connection whose ping goes
    /// unanswered for the timeout is closed, so a dead TCP peer is found without traffic.
    pub keep_alive: Option<(Duration, Duration)>,
    /// A request outstanding this long on one member gets that member probed (a
    /// maintenance status request); 500 ms by default. See [`Self::probe_timeout`].
    pub unresponsive_after: Duration,
    /// How long the probe of a member may take before the member counts as not
    /// answering (*suspect*): requests then go to the other members until a probe
    /// answers again. 500 ms by default. kube-apiserver's client has no equivalent.
    pub probe_timeout: Duration,
    /// etcd user name and password, when etcd has authentication on.
    pub credentials: Option<(String, String)>,
    /// TLS to etcd (endpoints must then be `https://` or have no scheme); `None` for
    /// plaintext.
    pub tls: Option<TlsConfig>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            endpoints: vec!["http://127.0.0.1:2379".to_owned()],
            dial_timeout: Duration::from_secs(20),
            keep_alive: Some((Duration::from_secs(30), Duration::from_secs(10))),
            unresponsive_after: DEFAULT_UNRESPONSIVE_AFTER,
            probe_timeout: DEFAULT_PROBE_TIMEOUT,
            credentials: None,
            tls: None,
        }
    }
}

impl ClientConfig {
    /// etcd-client's options for this config's connection: the dial timeout (which
    /// also bounds each request, as in kube-apiserver) and the keep-alive. Credentials
    /// and TLS are [`EtcdClient::connect`]'s, which checks them against the endpoints.
    pub fn connect_options(&self) -> ConnectOptions {
        let options = ConnectOptions::new()
            .with_connect_timeout(self.dial_timeout)
            .with_timeout(self.dial_timeout);
        match self.keep_alive {
            Some((interval, timeout)) => options.with_keep_alive(interval, timeout),
            None => options,
        }
    }

    /// A config for the given endpoints, with kube-apiserver's defaults otherwise.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The password never reaches a log.
        f.debug_struct("ClientConfig")
            .field("endpoints", &self.endpoints)
            .field("dial_timeout", &self.dial_timeout)
            .field("keep_alive", &self.keep_alive)
            .field("unresponsive_after", &self.unresponsive_after)
            .field("probe_timeout", &self.probe_timeout)
            .field(
                "credentials",
                &self
                    .credentials
                    .as_ref()
                    .map(|(user, _)| (user, "<redacted>")),
            )
            .field("tls", &self.tls)
            .finish()
    }
}

/// TLS to etcd, as kube-apiserver's `--etcd-cafile`, `--etcd-certfile` and
/// `--etcd-keyfile`: the CA that signed etcd's serving certificate and, for mutual
/// TLS, the client's certificate and key. All PEM.
///
/// The system's trust roots are not used: a CA is required. Its `Debug` output shows
/// sizes, never the key.
#[derive(Clone, Default)]
pub struct TlsConfig {
    /// PEM certificates of the CAs etcd's serving certificate must chain to.
    pub ca_pem: Option<Vec<u8>>,
    /// The client certificate chain, PEM, for mutual TLS (with [`Self::client_key_pem`]).
    pub client_cert_pem: Option<Vec<u8>>,
    /// The client certificate's private key, PEM. Secret.
    pub client_key_pem: Option<Vec<u8>>,
    /// The name etcd's certificate must carry; by default each endpoint's host (an IP
    /// address is checked against the certificate's IP addresses).
    pub server_name: Option<String>,
}

impl TlsConfig {
    /// TLS that trusts the CA certificates in `ca_pem`.
    pub fn with_ca_pem(ca_pem: impl Into<Vec<u8>>) -> Self {
        Self {
            ca_pem: Some(ca_pem.into()),
            ..Self::default()
        }
    }

    /// Adds a client certificate and key for mutual TLS.
    #[must_use]
    pub fn client_identity(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.client_cert_pem = Some(cert_pem.into());
        self.client_key_pem = Some(key_pem.into());
        self
    }

    /// Reads the CA certificate, client certificate and client key files (as the
    /// command's `--cacert`, `--cert` and `--key`). `None` when none is given: then
    /// the connection is plaintext, as kube-apiserver's.
    ///
    /// A certificate without its key, or a key without its certificate, is an error;
    /// so is a file that cannot be read (the error names it, never its content).
    pub fn from_files(
        ca_file: Option<&Path>,
        cert_file: Option<&Path>,
        key_file: Option<&Path>,
    ) -> Result<Option<Self>, ConnectError> {
        if ca_file.is_none() && cert_file.is_none() && key_file.is_none() {
            return Ok(None);
        }
        let read = |what: &'static str, path: &Path| {
            std::fs::read(path).map_err(|source| ConnectError::ReadTlsFile {
                what,
                path: path.to_path_buf(),
                source,
            })
        };
        let ca_pem = ca_file.map(|p| read("CA certificate", p)).transpose()?;
        let (client_cert_pem, client_key_pem) = match (cert_file, key_file) {
            (Some(cert), Some(key)) => (
                Some(read("client certificate", cert)?),
                Some(read("client key", key)?),
            ),
            (None, None) => (None, None),
            (Some(_), None) => return Err(tls_problem("a client certificate needs its key")),
            (None, Some(_)) => return Err(tls_problem("a client key needs its certificate")),
        };
        Ok(Some(Self {
            ca_pem,
            client_cert_pem,
            client_key_pem,
            server_name: None,
        }))
    }

    /// etcd-client's TLS options, after checking what can be checked without etcd.
    fn to_options(&self, dial_timeout: Duration) -> Result<TlsOptions, ConnectError> {
        let ca = self.ca_pem.as_deref().ok_or_else(|| {
            tls_problem("no CA certificate: etcd's certificate cannot be verified (system trust roots are not used)")
        })?;
        if !contains(ca, b"-----BEGIN CERTIFICATE-----") {
            return Err(tls_problem("the CA file holds no PEM certificate"));
        }
        let mut options = TlsOptions::new()
            .ca_certificate(Certificate::from_pem(ca))
            .timeout(dial_timeout);
        match (&self.client_cert_pem, &self.client_key_pem) {
            (Some(cert), Some(key)) => {
                if !contains(cert, b"-----BEGIN CERTIFICATE-----") {
                    return Err(tls_problem(
                        "the client certificate file holds no PEM certificate",
                    ));
                }
                if !contains(key, b"PRIVATE KEY-----") {
                    return Err(tls_problem("the client key file holds no PEM private key"));
                }
                options = options.identity(Identity::from_pem(cert, key));
            }
            (None, None) => {}
            (Some(_), None) => return Err(tls_problem("a client certificate needs its key")),
            (None, Some(_)) => return Err(tls_problem("a client key needs its certificate")),
        }
        if let Some(name) = &self.server_name {
            options = options.domain_name(name.clone());
        }
        Ok(options)
    }
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Certificates are public but long; the key is secret.
        let size = |pem: &Option<Vec<u8>>| pem.as_ref().map(|p| format!("<{} bytes>", p.len()));
        f.debug_struct("TlsConfig")
            .field("ca_pem", &size(&self.ca_pem))
            .field("client_cert_pem", &size(&self.client_cert_pem))
            .field(
                "client_key_pem",
                &self.client_key_pem.as_ref().map(|_| "<redacted>"),
            )
            .field("server_name", &self.server_name)
            .finish()
    }
}

fn tls_problem(problem: &str) -> ConnectError {
    ConnectError::TlsConfig {
        problem: problem.to_owned(),
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A connection to an etcd cluster, cheap to clone and shared by every store built on it.
#[derive(Clone)]
pub struct EtcdClient {
    /// Balanced over every endpoint: for the requests that do not pick a member
    /// (health, compaction, polls).
    pub(crate) inner: Client,
    /// One connection per member, for the store's requests and watch streams.
    pub(crate) members: Arc<Members>,
    endpoints: Vec<String>,
    /// The compactions seen through this client, shared by its clones and stores.
    pub(crate) compactions: Arc<CompactionTracker>,
    /// The size estimates of its stores, by resource directory (`/registry/pods/`).
    size_estimators: Arc<Mutex<HashMap<String, Arc<SizeEstimator>>>>,
    /// Whether `size_estimators` ever held one: lists and watches skip the look-up
    /// while it does not (the common case), so they do not pay for estimation.
    any_size_estimator: Arc<AtomicBool>,
    /// Whether etcd answers `RangeStream` (3.7+), as its answers so far say.
    pub(crate) range_stream: Arc<RangeStreamSupport>,
}

impl fmt::Debug for EtcdClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EtcdClient")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdClient {
    /// Connects to etcd. Fails within the dial timeout when no endpoint answers.
    ///
    /// With credentials, the user is authenticated here, so a wrong password is an
    /// error now. With TLS, one Status request is made here, so an untrusted etcd
    /// certificate or a refused client certificate is an error now, saying which,
    /// rather than on the first request of a store. A plaintext connection without
    /// credentials is made lazily, on first use.
    pub async fn connect(config: &ClientConfig) -> Result<Self, ConnectError> {
        if config.endpoints.is_empty() {
            return Err(ConnectError::NoEndpoints);
        }
        let endpoints = config.endpoints.join(",");
        let mut options = config.connect_options();
        if let Some((user, password)) = &config.credentials {
            options = options.with_user(user.clone(), password.clone());
        }
        match &config.tls {
            Some(tls) => {
                if let Some(plain) = config.endpoints.iter().find(|e| has_scheme(e, "http://")) {
                    return Err(tls_problem(&format!(
                        "TLS is configured but endpoint {plain} is not https://"
                    )));
                }
                options = options.with_tls(tls.to_options(config.dial_timeout)?);
            }
            None => {
                if let Some(secure) = config.endpoints.iter().find(|e| has_scheme(e, "https://")) {
                    return Err(tls_problem(&format!(
                        "endpoint {secure} is https:// but no CA certificate is configured"
                    )));
                }
            }
        }
        let check_now = config.tls.is_some();
        let connect = async {
            let client = Client::connect(config.endpoints.clone(), Some(options.clone())).await?;
            if check_now {
                client.clone().status().await?;
            }
            // One more connection per member when there are several, so that each
            // request knows where it went; a single endpoint shares the balanced one.
            let members = if config.endpoints.len() == 1 {
                vec![(config.endpoints[0].clone(), client.clone())]
            } else {
                // A member that has lost its leader says so at once (`no leader`, before
                // handling the request, so even a write can go elsewhere) and ends its
                // watch streams, as kube-apiserver's watches ask with `WithRequireLeader`.
                let member_options = options.clone().with_require_leader(true);
                let mut members = Vec::with_capacity(config.endpoints.len());
                for endpoint in &config.endpoints {
                    let member =
                        Client::connect([endpoint.as_str()], Some(member_options.clone())).await?;
                    members.push((endpoint.clone(), member));
                }
                members
            };
            Ok::<_, etcd_client::Error>((client, members))
        };
        let settings = ProbeSettings {
            unresponsive_after: config.unresponsive_after,
            probe_timeout: config.probe_timeout,
        };
        // Boxed: etcd-client's connect futures are large, and a caller's own future
        // (a test's, run on a 2 MiB thread in debug builds) would carry them inline.
        let connecting = Box::pin(connect);
        let (inner, members) = match tokio::time::timeout(config.dial_timeout, connecting).await {
            Ok(Ok(client)) => client,
            Ok(Err(source)) => {
                let user = config.credentials.as_ref().map(|(user, _)| user.as_str());
                let err = connect_error(endpoints, user, config.tls.is_some(), source);
                // Boxed: connecting's future is large already, and this path is rare.
                return Err(Box::pin(unless_plain_http(err, &config.endpoints)).await);
            }
            Err(_) => {
                return Err(ConnectError::DialTimeout {
                    endpoints,
                    timeout: config.dial_timeout,
                });
            }
        };
        Ok(Self {
            inner,
            members: Arc::new(Members::new(members, settings)),
            endpoints: config.endpoints.clone(),
            compactions: Arc::default(),
            size_estimators: Arc::default(),
            any_size_estimator: Arc::default(),
            range_stream: Arc::default(),
        })
    }

    /// The size estimates of the stores on this client, by resource directory.
    /// Whether any store on this client ever turned size estimation on.
    pub(crate) fn estimates_any_sizes(&self) -> bool {
        self.any_size_estimator.load(Ordering::Acquire)
    }

    /// Notes that a store on this client turned size estimation on.
    pub(crate) fn note_size_estimator(&self) {
        self.any_size_estimator.store(true, Ordering::Release);
    }

    pub(crate) fn size_estimators(&self) -> MutexGuard<'_, HashMap<String, Arc<SizeEstimator>>> {
        self.size_estimators
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The endpoints this client was given.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// Whether lists read with etcd's `RangeStream` now, where they would (stores at
    /// kube 1.37 or later, recursive lists without a limit or continue token): true
    /// until etcd answers one with `Unimplemented` (etcd before 3.7, kine, etcd's gRPC
    /// proxy), then false for ten minutes, during which lists read with paged `Range`
    /// requests without asking again; then the stream is tried again, so an upgraded
    /// etcd is used.
    pub fn range_stream_available(&self) -> bool {
        self.range_stream.supported()
    }
}

/// Whether the endpoint starts with `scheme` (any case). Endpoints without a scheme
/// are `https://` with TLS and `http://` without, as etcd-client reads them.
fn has_scheme(endpoint: &str, scheme: &str) -> bool {
    endpoint
        .get(..scheme.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(scheme))
}

/// Says which part of connecting failed: etcd's certificate, the client certificate,
/// the TLS handshake otherwise, the credentials, or the connection.
fn connect_error(
    endpoints: String,
    user: Option<&str>,
    tls: bool,
    source: etcd_client::Error,
) -> ConnectError {
    if let (Some(user), etcd_client::Error::GRpcStatus(status)) = (user, &source) {
        if status.code() == tonic::Code::InvalidArgument
            && status.message().contains("authentication failed")
        {
            return ConnectError::AuthenticationFailed {
                endpoints,
                user: user.to_owned(),
                detail: status.message().to_owned(),
            };
        }
    }
    let detail = describe(&source);
    let lower = detail.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| lower.contains(n));
    if has(&[
        "invalid peer certificate",
        "unknownissuer",
        "notvalidforname",
    ]) {
        return ConnectError::ServerCertificateRejected { endpoints, detail };
    }
    if has(&[
        "alert: certificaterequired",
        "alert: badcertificate",
        "alert: unknownca",
        "alert: certificateunknown",
        "alert: unsupportedcertificate",
        "alert: accessdenied",
    ]) {
        return ConnectError::ClientCertificateRejected { endpoints, detail };
    }
    if tls && has(&["broken pipe", "connection closed", "connection reset"]) {
        // In TLS 1.3 the client's side of the handshake ends before etcd checks the
        // client certificate; etcd's alert then races with it closing the connection,
        // and often only the closed connection is seen.
        return ConnectError::ClientCertificateRejected {
            endpoints,
            detail: format!(
                "etcd closed the connection right after the TLS handshake, as it does when \
                 it refuses the client certificate ({detail})"
            ),
        };
    }
    if has(&["tls", "handshake", "certificate"]) {
        return ConnectError::Tls { endpoints, detail };
    }
    ConnectError::Connect {
        endpoints,
        source: Box::new(crate::error::EtcdFailure(detail)),
    }
}

/// A connection closed during TLS reads the same whether etcd refused the client
/// certificate or the endpoint does not speak TLS at all; which one it was is asked of
/// the endpoint itself: one that answers a plain HTTP request with an HTTP response
/// serves no TLS there, and the error says so instead of blaming the certificate.
async fn unless_plain_http(err: ConnectError, endpoints: &[String]) -> ConnectError {
    let ConnectError::ClientCertificateRejected {
        endpoints: named,
        detail,
    } = err
    else {
        return err;
    };
    for endpoint in endpoints {
        if let Some(address) = host_port(endpoint) {
            if answers_plain_http(address).await {
                return ConnectError::Tls {
                    endpoints: named,
                    detail: format!(
                        "{endpoint} answers plain HTTP, not TLS: use http:// or serve TLS there ({detail})"
                    ),
                };
            }
        }
    }
    ConnectError::ClientCertificateRejected {
        endpoints: named,
        detail,
    }
}

/// `host:port` of an endpoint URL (`https://127.0.0.1:2379/` → `127.0.0.1:2379`).
fn host_port(endpoint: &str) -> Option<&str> {
    let rest = endpoint
        .split_once("://")
        .map_or(endpoint, |(_, rest)| rest);
    let address = rest.split('/').next()?;
    (!address.is_empty()).then_some(address)
}

/// Whether `address` answers `GET /health` over plain HTTP/1.0 with an HTTP status line
/// within three seconds (etcd's plain listener does; a TLS one answers with an alert or
/// closes).
async fn answers_plain_http(address: &str) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let probe = async {
        let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
        stream
            .write_all(b"GET /health HTTP/1.0\r\n\r\n")
            .await
            .ok()?;
        let mut start = [0_u8; 5];
        stream.read_exact(&mut start).await.ok()?;
        Some(&start == b"HTTP/")
    };
    matches!(
        tokio::time::timeout(std::time::Duration::from_secs(3), probe).await,
        Ok(Some(true))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_port_is_taken_from_the_endpoint_url() {
        assert_eq!(host_port("https://127.0.0.1:2379"), Some("127.0.0.1:2379"));
        assert_eq!(host_port("http://127.0.0.1:2379/"), Some("127.0.0.1:2379"));
        assert_eq!(host_port("127.0.0.1:2379"), Some("127.0.0.1:2379"));
        assert_eq!(host_port("https://"), None);
    }

    #[test]
    fn debug_output_redacts_the_password_and_the_key() {
        let config = ClientConfig {
            credentials: Some(("root".into(), "hunter2-password".into())),
            tls: Some(
                TlsConfig::with_ca_pem("-----BEGIN CERTIFICATE-----\nca\n")
                    .client_identity("cert", "-----BEGIN PRIVATE KEY-----\nsecret-key-bytes\n"),
            ),
            ..ClientConfig::new(["https://127.0.0.1:2379"])
        };
        let debug = format!("{config:?} {config:#?}");
        assert!(!debug.contains("hunter2"), "{debug}");
        assert!(!debug.contains("secret-key-bytes"), "{debug}");
        assert!(debug.contains("root"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn tls_files_come_in_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("cert.pem");
        std::fs::write(&cert, "x").unwrap();
        assert!(TlsConfig::from_files(None, None, None).unwrap().is_none());
        let err = TlsConfig::from_files(None, Some(&cert), None).unwrap_err();
        assert!(matches!(err, ConnectError::TlsConfig { .. }), "{err}");
        let err = TlsConfig::from_files(None, None, Some(&cert)).unwrap_err();
        assert!(matches!(err, ConnectError::TlsConfig { .. }), "{err}");
        let missing = dir.path().join("missing.pem");
        let err = TlsConfig::from_files(Some(&missing), None, None).unwrap_err();
        assert!(
            err.to_string().contains("CA certificate") && err.to_string().contains("missing.pem"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn tls_and_endpoints_must_agree() {
        let tls = TlsConfig::with_ca_pem("-----BEGIN CERTIFICATE-----\n");
        let err = EtcdClient::connect(&ClientConfig {
            tls: Some(tls),
            ..ClientConfig::new(["http://127.0.0.1:1"])
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("not https://"), "{err}");
        let err = EtcdClient::connect(&ClientConfig::new(["https://127.0.0.1:1"]))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no CA certificate"), "{err}");
        let err = EtcdClient::connect(&ClientConfig {
            tls: Some(TlsConfig::default()),
            ..ClientConfig::new(["https://127.0.0.1:1"])
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("no CA certificate"), "{err}");
        let err = EtcdClient::connect(&ClientConfig {
            tls: Some(TlsConfig::with_ca_pem("not pem")),
            ..ClientConfig::new(["https://127.0.0.1:1"])
        })
        .await
        .unwrap_err();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
    }
}
