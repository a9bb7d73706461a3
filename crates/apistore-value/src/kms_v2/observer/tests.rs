//! What the envelope reports to its observer, with kube's label values.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use crate::kms_v2::{
    KmsObserver, KmsOperation, KmsService, KmsV2Envelope, KmsV2Options, TestKmsPlugin, key_id_hash,
};
use crate::{TransformationType, Transformer};

const AAD: &[u8] = b"/registry/secrets/default/s1";

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

impl Recorder {
    fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().expect("lock"))
    }

    fn push(&self, event: String) {
        self.0.lock().expect("lock").push(event);
    }
}

impl KmsObserver for Recorder {
    fn key_id_used(&self, kind: TransformationType, provider: &str, key_id_hash: &str) {
        self.push(format!("key_id {} {provider} {key_id_hash}", kind.as_str()));
    }

    fn key_id_from_status(&self, provider: &str, key_id_hash: &str) {
        self.push(format!("status {provider} {key_id_hash}"));
    }

    fn invalid_key_id_from_status(&self, provider: &str, error: &str) {
        self.push(format!("invalid {provider} {error}"));
    }

    fn kms_operation(&self, provider: &str, method: &str, code: &str, elapsed: Duration) {
        assert!(elapsed < Duration::from_secs(5));
        self.push(format!("call {provider} {method} {code}"));
    }

    fn dek_source_cache_size(&self, provider: &str, size: usize, capacity: usize) {
        self.push(format!("cache {provider} {size}/{capacity}"));
    }
}

fn observed(plugin: &Arc<TestKmsPlugin>, timeout: Duration) -> (KmsV2Envelope, Arc<Recorder>) {
    let service: Arc<dyn KmsService> = Arc::clone(plugin) as Arc<dyn KmsService>;
    let options = KmsV2Options {
        timeout,
        dek_cache_size: 10,
    };
    let e = KmsV2Envelope::new("vault", service, options);
    let recorder = Arc::new(Recorder::default());
    e.set_observer(Arc::clone(&recorder) as Arc<dyn KmsObserver>);
    (e, recorder)
}

#[test]
fn checks_writes_reads_and_rotations_are_reported_with_kubes_labels() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let (e, recorder) = observed(&plugin, Duration::from_secs(3));
    let key1 = key_id_hash("key-1");
    assert_eq!(recorder.take(), ["cache vault 0/10"]);

    e.check().expect("healthy");
    assert_eq!(
        recorder.take(),
        [
            "call vault /v2.KeyManagementService/Status OK".to_owned(),
            format!("status vault {key1}"),
            "call vault /v2.KeyManagementService/Encrypt OK".to_owned(),
            "cache vault 1/10".to_owned(),
        ]
    );

    let stored = e
        .transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect("write");
    e.transform_from_storage(stored.clone(), AAD).expect("read");
    assert_eq!(
        recorder.take(),
        [
            format!("key_id to_storage vault {key1}"),
            format!("key_id from_storage vault {key1}"),
        ]
    );

    // After a rotation the old value is read through the cache (the old DEK was this
    // envelope's own), still labelled with its own key id.
    plugin.rotate();
    e.check().expect("healthy");
    recorder.take();
    e.transform_from_storage(stored, AAD).expect("read");
    assert_eq!(
        recorder.take(),
        [format!("key_id from_storage vault {key1}")]
    );
}

#[test]
fn failed_calls_and_invalid_key_ids_are_reported() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let (e, recorder) = observed(&plugin, Duration::from_millis(100));
    recorder.take();

    plugin.set_status_key_id(Some(String::new()));
    assert!(e.check().is_err());
    assert_eq!(
        recorder.take(),
        [
            "call vault /v2.KeyManagementService/Status OK",
            "invalid vault empty",
        ]
    );
    plugin.set_status_key_id(Some("k".repeat(1025)));
    assert!(e.check().is_err());
    assert_eq!(recorder.take()[1], "invalid vault too_long");
    plugin.set_status_key_id(None);

    // An in-process plugin's failure carries no gRPC code; a timeout is kube's
    // DeadlineExceeded.
    plugin.fail(KmsOperation::Status, "down");
    assert!(e.check().is_err());
    assert_eq!(
        recorder.take(),
        ["call vault /v2.KeyManagementService/Status unknown-non-grpc"]
    );
    plugin.clear_failures();
    plugin.set_latency(Duration::from_millis(300));
    assert!(e.check().is_err());
    assert_eq!(
        recorder.take(),
        ["call vault /v2.KeyManagementService/Status DeadlineExceeded"]
    );
}

#[test]
fn loading_with_an_observed_connector_reports_the_priming_check() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let connect = {
        let plugin = Arc::clone(&plugin);
        move |_: &crate::config::KmsProviderConfig| -> Result<Arc<dyn KmsService>, crate::kms_v2::KmsError> {
            Ok(Arc::clone(&plugin) as Arc<dyn KmsService>)
        }
    };
    let recorder = Arc::new(Recorder::default());
    let connector = crate::config::ObservedKmsConnector {
        connector: &connect,
        observer: Arc::clone(&recorder) as Arc<dyn KmsObserver>,
    };
    let text = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: unix:///tmp/kms.sock\n";
    let config = crate::EncryptionConfig::parse_with_kms(text, &connector).expect("loads");
    let key1 = key_id_hash("key-1");
    // The check loading runs, as kube's metrics record it at start-up.
    assert_eq!(
        recorder.take(),
        [
            "cache vault 0/1000".to_owned(),
            "call vault /v2.KeyManagementService/Status OK".to_owned(),
            format!("status vault {key1}"),
            "call vault /v2.KeyManagementService/Encrypt OK".to_owned(),
            "cache vault 1/1000".to_owned(),
        ]
    );
    config
        .transformer_for("secrets")
        .transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect("write");
    assert_eq!(recorder.take(), [format!("key_id to_storage vault {key1}")]);
}
