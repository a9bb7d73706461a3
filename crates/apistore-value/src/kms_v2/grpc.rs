//! The gRPC client of a KMS v2 plugin (feature `grpc`): `v2.KeyManagementService`
//! from `k8s.io/kms` `apis/v2/api.proto`, over the `unix://` socket of the provider's
//! `endpoint`, following kube's `kmsv2/grpc_service.go`.
//!
//! The messages are hand-written prost types (six small messages do not justify a
//! code generation step), and each method is one `tonic::client::Grpc::unary` call.
//! The client owns a small tokio runtime, so that it serves the blocking
//! [`KmsService`] from any thread, inside another runtime or not. It dials lazily, as
//! kube's `grpc.Dial` does: a plugin that starts after the API server is found on the
//! next call.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::{Channel, Endpoint, Uri};

use super::service::{DecryptRequest, EncryptResponse, KmsError, KmsService, StatusResponse};
use crate::config::{KmsConnector, KmsProviderConfig};

/// The gRPC service name of the plugin API.
pub const KMS_V2_SERVICE: &str = "v2.KeyManagementService";

pub(crate) mod pb {
    //! The plugin API's messages, field for field as in `apis/v2/api.proto`.
    use std::collections::BTreeMap;

    /// `StatusRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct StatusRequest {}

    /// `StatusResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct StatusResponse {
        #[prost(string, tag = "1")]
        pub(crate) version: String,
        #[prost(string, tag = "2")]
        pub(crate) healthz: String,
        #[prost(string, tag = "3")]
        pub(crate) key_id: String,
    }

    /// `DecryptRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct DecryptRequest {
        #[prost(bytes = "vec", tag = "1")]
        pub(crate) ciphertext: Vec<u8>,
        #[prost(string, tag = "2")]
        pub(crate) uid: String,
        #[prost(string, tag = "3")]
        pub(crate) key_id: String,
        #[prost(btree_map = "string, bytes", tag = "4")]
        pub(crate) annotations: BTreeMap<String, Vec<u8>>,
    }

    /// `DecryptResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct DecryptResponse {
        #[prost(bytes = "vec", tag = "1")]
        pub(crate) plaintext: Vec<u8>,
    }

    /// `EncryptRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct EncryptRequest {
        #[prost(bytes = "vec", tag = "1")]
        pub(crate) plaintext: Vec<u8>,
        #[prost(string, tag = "2")]
        pub(crate) uid: String,
    }

    /// `EncryptResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct EncryptResponse {
        #[prost(bytes = "vec", tag = "1")]
        pub(crate) ciphertext: Vec<u8>,
        #[prost(string, tag = "2")]
        pub(crate) key_id: String,
        #[prost(btree_map = "string, bytes", tag = "3")]
        pub(crate) annotations: BTreeMap<String, Vec<u8>>,
    }
}

/// A KMS v2 plugin reached over gRPC on a unix socket.
pub struct GrpcKmsService {
    endpoint: String,
    socket: PathBuf,
    timeout: Duration,
    channel: Channel,
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
}

impl std::fmt::Debug for GrpcKmsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcKmsService")
            .field("endpoint", &self.endpoint)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl GrpcKmsService {
    /// A client for the plugin at `endpoint` (`unix:///path/to/socket`), each call
    /// limited to `timeout`. Does not dial yet.
    pub fn connect(endpoint: &str, timeout: Duration) -> Result<Self, KmsError> {
        let unavailable = |message: String| KmsError::Unavailable {
            endpoint: endpoint.to_owned(),
            message,
        };
        let socket = endpoint
            .strip_prefix("unix://")
            .filter(|p| !p.is_empty())
            .ok_or_else(|| {
                unavailable("the endpoint must be unix:// followed by a socket path".to_owned())
            })?;
        let socket = PathBuf::from(socket);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kms-grpc")
            .enable_all()
            .build()
            .map_err(|e| unavailable(format!("could not start the client runtime: {e}")))?;
        let handle = runtime.handle().clone();
        // The URI is not used for unix sockets but must parse; kube uses the same.
        let path = socket.clone();
        let channel = {
            let _entered = runtime.enter();
            Endpoint::from_static("http://localhost")
                .timeout(timeout)
                .connect_with_connector_lazy(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move { UnixStream::connect(path).await.map(TokioIo::new) }
                }))
        };
        Ok(Self {
            endpoint: endpoint.to_owned(),
            socket,
            timeout,
            channel,
            runtime: Some(runtime),
            handle,
        })
    }

    /// The socket path the client dials.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// Runs one call on the client's runtime and waits for it, up to the timeout.
    fn run<T: Send + 'static>(
        &self,
        operation: &'static str,
        call: impl Future<Output = Result<T, tonic::Status>> + Send + 'static,
    ) -> Result<T, KmsError> {
        if !self.socket.exists() {
            return Err(KmsError::Unavailable {
                endpoint: self.endpoint.clone(),
                message: format!("socket {} does not exist", self.socket.display()),
            });
        }
        let (tx, rx) = mpsc::sync_channel(1);
        let timeout = self.timeout;
        self.handle.spawn(async move {
            let result = tokio::time::timeout(timeout, call).await;
            let _ = tx.send(result);
        });
        match rx.recv() {
            Ok(Ok(Ok(value))) => Ok(value),
            Ok(Ok(Err(status))) => Err(self.status_error(operation, &status)),
            Ok(Err(_elapsed)) => Err(KmsError::Timeout {
                operation,
                after: timeout,
            }),
            Err(_) => Err(KmsError::Failed {
                operation,
                message: "the client runtime stopped".to_owned(),
            }),
        }
    }

    fn status_error(&self, operation: &'static str, status: &tonic::Status) -> KmsError {
        match status.code() {
            tonic::Code::Unavailable => KmsError::Unavailable {
                endpoint: self.endpoint.clone(),
                message: status_message(status),
            },
            tonic::Code::DeadlineExceeded => KmsError::Timeout {
                operation,
                after: self.timeout,
            },
            // The channel's own timeout ends a call as Cancelled with TimeoutExpired.
            tonic::Code::Cancelled if is_timeout(status) => KmsError::Timeout {
                operation,
                after: self.timeout,
            },
            code => KmsError::Rpc {
                operation,
                code: go_code_name(code),
                message: status.message().to_owned(),
            },
        }
    }

    fn unary<Req, Resp>(
        &self,
        operation: &'static str,
        method: &'static str,
        request: Req,
    ) -> Result<Resp, KmsError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let channel = self.channel.clone();
        let timeout = self.timeout;
        self.run(operation, async move {
            let mut grpc = tonic::client::Grpc::new(channel);
            grpc.ready()
                .await
                .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
            let mut request = tonic::Request::new(request);
            request.set_timeout(timeout);
            let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
            let response = grpc
                .unary(request, PathAndQuery::from_static(method), codec)
                .await?;
            Ok(response.into_inner())
        })
    }
}

/// Go's name of a gRPC status code (`codes.Code.String()`), which kube's metrics and
/// messages use: `Canceled` with one `l`, unlike tonic's `Cancelled`.
fn go_code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

/// Whether a status came from tonic's request timeout.
fn is_timeout(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        if err.is::<tonic::TimeoutExpired>() {
            return true;
        }
        source = err.source();
    }
    status.message() == "Timeout expired"
}

/// A transport error's message with its causes, which say what the socket did.
fn status_message(status: &tonic::Status) -> String {
    let mut message = status.message().to_owned();
    let mut source = std::error::Error::source(status);
    while let Some(err) = source {
        message.push_str(": ");
        message.push_str(&err.to_string());
        source = err.source();
    }
    message
}

impl Drop for GrpcKmsService {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which tokio refuses inside another runtime.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl KmsService for GrpcKmsService {
    fn status(&self) -> Result<StatusResponse, KmsError> {
        let r: pb::StatusResponse = self.unary(
            "Status",
            "/v2.KeyManagementService/Status",
            pb::StatusRequest {},
        )?;
        Ok(StatusResponse {
            version: r.version,
            healthz: r.healthz,
            key_id: r.key_id,
        })
    }

    fn encrypt(&self, uid: &str, plaintext: &[u8]) -> Result<EncryptResponse, KmsError> {
        let r: pb::EncryptResponse = self.unary(
            "Encrypt",
            "/v2.KeyManagementService/Encrypt",
            pb::EncryptRequest {
                plaintext: plaintext.to_vec(),
                uid: uid.to_owned(),
            },
        )?;
        Ok(EncryptResponse {
            ciphertext: r.ciphertext,
            key_id: r.key_id,
            annotations: r.annotations,
        })
    }

    fn decrypt(&self, uid: &str, request: &DecryptRequest) -> Result<Vec<u8>, KmsError> {
        let r: pb::DecryptResponse = self.unary(
            "Decrypt",
            "/v2.KeyManagementService/Decrypt",
            pb::DecryptRequest {
                ciphertext: request.ciphertext.clone(),
                uid: uid.to_owned(),
                key_id: request.key_id.clone(),
                annotations: request.annotations.clone(),
            },
        )?;
        Ok(r.plaintext)
    }
}

/// Connects each `kms` provider of a configuration to its plugin over gRPC.
#[derive(Debug, Clone, Copy, Default)]
pub struct GrpcKmsConnector;

impl KmsConnector for GrpcKmsConnector {
    fn connect(
        &self,
        provider: &KmsProviderConfig,
    ) -> Result<std::sync::Arc<dyn KmsService>, KmsError> {
        let service = GrpcKmsService::connect(&provider.endpoint, provider.timeout)?;
        Ok(std::sync::Arc::new(service))
    }
}

#[cfg(test)]
#[cfg(feature = "grpc-test-plugin")]
mod tests;
