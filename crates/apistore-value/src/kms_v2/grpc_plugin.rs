//! A KMS v2 plugin served over gRPC on a unix socket (feature `grpc-test-plugin`):
//! any [`KmsService`] (usually [`super::TestKmsPlugin`]) behind
//! `v2.KeyManagementService`, for tests of the gRPC client and for harnesses that
//! need a real plugin process-side. The service is hand-written the way tonic's
//! generated code is (one `tonic::server::Grpc::unary` per method).

use std::convert::Infallible;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::body::Body;
use tonic::codegen::http;
use tonic::server::{NamedService, UnaryService};
use tonic::{Status, transport::Server};
use tonic_prost::ProstCodec;

use super::grpc::{KMS_V2_SERVICE, pb};
use super::service::{DecryptRequest, KmsError, KmsService};

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// A running plugin server; stops and removes its socket when dropped.
#[derive(Debug)]
pub struct KmsPluginServer {
    socket: PathBuf,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl KmsPluginServer {
    /// Serves `plugin` on a new unix socket at `socket` (which must not exist).
    pub fn serve(plugin: Arc<dyn KmsService>, socket: impl AsRef<Path>) -> std::io::Result<Self> {
        let socket = socket.as_ref().to_owned();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kms-plugin")
            .enable_all()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            UnixListener::bind(&socket)?
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let service = KmsGrpcService { plugin };
        runtime.spawn(async move {
            let incoming = UnixListenerStream::new(listener);
            let _ = Server::builder()
                .serve_with_incoming_shutdown(service, incoming, async {
                    let _ = rx.await;
                })
                .await;
        });
        Ok(Self {
            socket,
            shutdown: Some(tx),
            runtime: Some(runtime),
        })
    }

    /// The endpoint to configure: `unix://<socket>`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Stops serving and removes the socket.
    pub fn stop(self) {}
}

impl Drop for KmsPluginServer {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[derive(Clone)]
struct KmsGrpcService {
    plugin: Arc<dyn KmsService>,
}

impl NamedService for KmsGrpcService {
    const NAME: &'static str = KMS_V2_SERVICE;
}

fn to_status(err: KmsError) -> Status {
    match err {
        KmsError::Unavailable { message, .. } => Status::unavailable(message),
        KmsError::Timeout { .. } => Status::deadline_exceeded(err.to_string()),
        KmsError::Failed { message, .. } | KmsError::Rpc { message, .. } => {
            Status::internal(message)
        }
    }
}

/// One method: a blocking plugin call run off the server's threads.
type Handler<Req, Resp> = fn(Arc<dyn KmsService>, Req) -> Result<Resp, Status>;

struct Unary<Req, Resp> {
    plugin: Arc<dyn KmsService>,
    handler: Handler<Req, Resp>,
}

impl<Req, Resp> UnaryService<Req> for Unary<Req, Resp>
where
    Req: Send + 'static,
    Resp: Send + 'static,
{
    type Response = Resp;
    type Future = BoxFuture<Result<tonic::Response<Resp>, Status>>;

    fn call(&mut self, request: tonic::Request<Req>) -> Self::Future {
        let plugin = Arc::clone(&self.plugin);
        let handler = self.handler;
        Box::pin(async move {
            let request = request.into_inner();
            tokio::task::spawn_blocking(move || handler(plugin, request))
                .await
                .map_err(|e| Status::internal(e.to_string()))?
                .map(tonic::Response::new)
        })
    }
}

fn status(plugin: Arc<dyn KmsService>, _: pb::StatusRequest) -> Result<pb::StatusResponse, Status> {
    let s = plugin.status().map_err(to_status)?;
    Ok(pb::StatusResponse {
        version: s.version,
        healthz: s.healthz,
        key_id: s.key_id,
    })
}

fn encrypt(
    plugin: Arc<dyn KmsService>,
    r: pb::EncryptRequest,
) -> Result<pb::EncryptResponse, Status> {
    let e = plugin.encrypt(&r.uid, &r.plaintext).map_err(to_status)?;
    Ok(pb::EncryptResponse {
        ciphertext: e.ciphertext,
        key_id: e.key_id,
        annotations: e.annotations,
    })
}

fn decrypt(
    plugin: Arc<dyn KmsService>,
    r: pb::DecryptRequest,
) -> Result<pb::DecryptResponse, Status> {
    let request = DecryptRequest {
        ciphertext: r.ciphertext,
        key_id: r.key_id,
        annotations: r.annotations,
    };
    let plaintext = plugin.decrypt(&r.uid, &request).map_err(to_status)?;
    Ok(pb::DecryptResponse { plaintext })
}

/// Answers one call with `handler`.
async fn serve_unary<Req, Resp>(
    plugin: Arc<dyn KmsService>,
    handler: Handler<Req, Resp>,
    request: http::Request<Body>,
) -> http::Response<Body>
where
    Req: prost::Message + Default + Send + 'static,
    Resp: prost::Message + Send + 'static,
{
    let mut grpc = tonic::server::Grpc::new(ProstCodec::<Resp, Req>::default());
    grpc.unary(Unary { plugin, handler }, request).await
}

impl tower::Service<http::Request<Body>> for KmsGrpcService {
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let plugin = Arc::clone(&self.plugin);
        match request.uri().path() {
            "/v2.KeyManagementService/Status" => {
                Box::pin(async move { Ok(serve_unary(plugin, status, request).await) })
            }
            "/v2.KeyManagementService/Encrypt" => {
                Box::pin(async move { Ok(serve_unary(plugin, encrypt, request).await) })
            }
            "/v2.KeyManagementService/Decrypt" => {
                Box::pin(async move { Ok(serve_unary(plugin, decrypt, request).await) })
            }
            _ => Box::pin(async { Ok(Status::unimplemented("unknown method").into_http()) }),
        }
    }
}
