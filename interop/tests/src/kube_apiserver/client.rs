//! kube-apiserver's REST API over HTTPS, as the differential tests speak it: JSON in and
//! out, a bearer token, the test's own CA trusted and nothing else, loopback only.
//!
//! One HTTP/1.1 connection per request: the tests make a few hundred requests, and a
//! connection of its own keeps each failure about one request.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore, crypto};

/// An answer that is not a 2xx, or a request that got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError {
    /// The status code (0 when there was no answer).
    pub code: u16,
    /// The body (a `metav1.Status` as text), or why there was no answer.
    pub message: String,
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {}: {}", self.code, self.message)
    }
}

/// A client of one kube-apiserver on 127.0.0.1.
#[derive(Clone)]
pub struct KubeClient {
    address: SocketAddr,
    token: String,
    tls: TlsConnector,
}

impl std::fmt::Debug for KubeClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClient")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl KubeClient {
    /// A client of `https://127.0.0.1:<port>` trusting only `ca_der` and sending `token`.
    ///
    /// # Panics
    /// When the CA certificate is not one rustls accepts.
    pub fn new(port: u16, ca_der: Vec<u8>, token: &str) -> Self {
        let mut roots = RootCertStore::empty();
        roots
            .add(CertificateDer::from(ca_der))
            .unwrap_or_else(|err| panic!("the test CA: {err}"));
        let config =
            ClientConfig::builder_with_provider(Arc::new(crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap_or_else(|err| panic!("rustls protocol versions: {err}"))
                .with_root_certificates(roots)
                .with_no_client_auth();
        Self {
            address: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port),
            token: token.to_owned(),
            tls: TlsConnector::from(Arc::new(config)),
        }
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// One request; `body` is sent as JSON. The answer's body as JSON (`Value::Null`
    /// when it is empty, a string when it is not JSON, as `/readyz` answers).
    ///
    /// # Errors
    /// A non-2xx answer (its code and body), or no answer (code 0).
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, HttpError> {
        let no_answer = |what: &str, err: &dyn std::fmt::Display| HttpError {
            code: 0,
            message: format!("{method} {path}: {what}: {err}"),
        };
        let tcp = TcpStream::connect(self.address)
            .await
            .map_err(|err| no_answer("connect", &err))?;
        let server_name = ServerName::IpAddress(self.address.ip().into());
        let tls = self
            .tls
            .connect(server_name, tcp)
            .await
            .map_err(|err| no_answer("TLS handshake", &err))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|err| no_answer("HTTP handshake", &err))?;
        tokio::spawn(connection);
        let payload = body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", self.address.to_string())
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/json")
            .header("content-type", "application/json")
            .body(Full::new(payload))
            .map_err(|err| no_answer("build the request", &err))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|err| no_answer("send", &err))?;
        let code = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|err| no_answer("read the body", &err))?
            .to_bytes();
        let text = String::from_utf8_lossy(&bytes).into_owned();
        if !(200..300).contains(&code) {
            return Err(HttpError {
                code,
                message: format!("{method} {path}: {text}"),
            });
        }
        if text.is_empty() {
            return Ok(Value::Null);
        }
        Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// GET `path`.
    ///
    /// # Panics
    /// On anything but a 2xx.
    pub async fn get(&self, path: &str) -> Value {
        self.request("GET", path, None)
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }

    /// POST `object` to the collection at `path`; the created object.
    ///
    /// # Panics
    /// On anything but a 2xx.
    pub async fn create(&self, path: &str, object: &Value) -> Value {
        self.request("POST", path, Some(object))
            .await
            .unwrap_or_else(|err| panic!("{err}"))
    }
}
