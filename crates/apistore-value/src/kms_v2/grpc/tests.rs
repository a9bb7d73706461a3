//! The gRPC client against the test plugin served on a unix socket in a temp dir.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;

use crate::Transformer;
use crate::kms_v2::{
    GrpcKmsService, KmsError, KmsOperation, KmsPluginServer, KmsService, KmsV2Envelope,
    KmsV2Options, TestKmsPlugin,
};

const AAD: &[u8] = b"/registry/secrets/default/s1";

fn socket_path() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    std::env::temp_dir().join(format!("apistore-kms-{}-{n}.sock", std::process::id()))
}

fn serve() -> (Arc<TestKmsPlugin>, KmsPluginServer) {
    let plugin = Arc::new(TestKmsPlugin::new());
    let server = KmsPluginServer::serve(Arc::clone(&plugin) as Arc<dyn KmsService>, socket_path())
        .expect("serve");
    (plugin, server)
}

#[test]
fn client_speaks_the_plugin_api() {
    let (plugin, server) = serve();
    let client =
        GrpcKmsService::connect(&server.endpoint(), Duration::from_secs(3)).expect("client");
    let status = client.status().expect("status");
    assert_eq!(
        (
            status.version.as_str(),
            status.healthz.as_str(),
            status.key_id.as_str()
        ),
        ("v2", "ok", "key-1")
    );
    let encrypted = client.encrypt("uid-1", b"seed").expect("encrypt");
    assert_eq!(encrypted.key_id, "key-1");
    assert_eq!(
        encrypted
            .annotations
            .get("kms.apistore.test")
            .map(Vec::as_slice),
        Some(&b"local"[..])
    );
    let request = crate::kms_v2::DecryptRequest {
        ciphertext: encrypted.ciphertext,
        key_id: encrypted.key_id,
        annotations: encrypted.annotations,
    };
    assert_eq!(client.decrypt("uid-2", &request).expect("decrypt"), b"seed");
    assert_eq!(plugin.status_calls(), 1);

    plugin.fail(KmsOperation::Decrypt, "kek disabled");
    let err = client.decrypt("uid-3", &request).expect_err("fails");
    assert_eq!(
        err,
        KmsError::Rpc {
            operation: "Decrypt",
            code: "Internal",
            message: "kek disabled".to_owned()
        }
    );
    assert_eq!(
        err.to_string(),
        "KMS plugin call Decrypt failed: rpc error: code = Internal desc = kek disabled"
    );
    assert_eq!(err.grpc_status_code(), "Internal");
}

#[test]
fn envelope_over_grpc_round_trips_and_rotates() {
    let (plugin, server) = serve();
    let client =
        GrpcKmsService::connect(&server.endpoint(), Duration::from_secs(3)).expect("client");
    let e = KmsV2Envelope::new("grpc", Arc::new(client), KmsV2Options::default());
    e.check().expect("healthy");
    let stored = e
        .transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect("write");
    plugin.rotate();
    e.check().expect("rotated");
    let read = e.transform_from_storage(stored, AAD).expect("read");
    assert_eq!(&read.data[..], b"v");
    assert!(read.stale);
}

#[test]
fn missing_socket_is_unavailable_naming_it() {
    let path = socket_path();
    let endpoint = format!("unix://{}", path.display());
    let client = GrpcKmsService::connect(&endpoint, Duration::from_secs(1)).expect("lazy");
    let err = client.status().expect_err("no socket");
    assert!(matches!(err, KmsError::Unavailable { .. }), "{err}");
    assert!(
        err.to_string()
            .contains(&format!("socket {} does not exist", path.display())),
        "{err}"
    );
    assert!(GrpcKmsService::connect("tcp://localhost:1", Duration::from_secs(1)).is_err());
}

#[test]
fn stopped_plugin_is_unavailable_and_a_restarted_one_is_found() {
    let (_plugin, server) = serve();
    let endpoint = server.endpoint();
    let client = GrpcKmsService::connect(&endpoint, Duration::from_secs(1)).expect("client");
    client.status().expect("up");
    server.stop();
    let err = client.status().expect_err("gone");
    assert!(matches!(err, KmsError::Unavailable { .. }), "{err}");
    let path = PathBuf::from(endpoint.trim_start_matches("unix://"));
    let plugin = Arc::new(TestKmsPlugin::new());
    let _again = KmsPluginServer::serve(plugin as Arc<dyn KmsService>, &path).expect("serve again");
    let mut status = client.status();
    for _ in 0..20 {
        if status.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        status = client.status();
    }
    assert_eq!(status.expect("found again").key_id, "key-1");
}

#[test]
fn slow_plugin_times_out_at_the_provider_timeout() {
    let (plugin, server) = serve();
    let client =
        GrpcKmsService::connect(&server.endpoint(), Duration::from_millis(100)).expect("client");
    client.status().expect("up");
    plugin.set_latency(Duration::from_millis(600));
    let err = client.status().expect_err("slow");
    assert!(
        matches!(
            err,
            KmsError::Timeout {
                operation: "Status",
                ..
            }
        ),
        "{err}"
    );
}
