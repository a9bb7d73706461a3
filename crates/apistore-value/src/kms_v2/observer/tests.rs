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
fn the_priming_check_before_the_observer_is_handed_over_when_it_comes() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let service: Arc<dyn KmsService> = Arc::clone(&plugin) as Arc<dyn KmsService>;
    let options = KmsV2Options {
        timeout: Duration::from_secs(3),
        dek_cache_size: 10,
    };
    let e = KmsV2Envelope::new("vault", service, options);
    // As a configuration does while loading, before anyone can attach metrics.
    e.check().expect("healthy");

    let recorder = Arc::new(Recorder::default());
    e.set_observer(Arc::clone(&recorder) as Arc<dyn KmsObserver>);
    let key1 = key_id_hash("key-1");
    assert_eq!(
        recorder.take(),
        [
            "call vault /v2.KeyManagementService/Status OK".to_owned(),
            format!("status vault {key1}"),
            "call vault /v2.KeyManagementService/Encrypt OK".to_owned(),
            "cache vault 1/10".to_owned(),
            "cache vault 1/10".to_owned(),
        ]
    );

    // Handed over once: a second observer gets only what comes after it.
    let second = Arc::new(Recorder::default());
    e.set_observer(Arc::clone(&second) as Arc<dyn KmsObserver>);
    assert_eq!(second.take(), ["cache vault 1/10"]);
    e.transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect("write");
    assert_eq!(second.take(), [format!("key_id to_storage vault {key1}")]);
    assert!(recorder.take().is_empty());
}

#[test]
fn without_an_observer_only_the_first_events_are_kept() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let service: Arc<dyn KmsService> = Arc::clone(&plugin) as Arc<dyn KmsService>;
    let e = KmsV2Envelope::new("vault", service, KmsV2Options::default());
    let stored = e
        .transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect("write");
    for _ in 0..100 {
        e.transform_from_storage(stored.clone(), AAD).expect("read");
    }
    let recorder = Arc::new(Recorder::default());
    e.set_observer(Arc::clone(&recorder) as Arc<dyn KmsObserver>);
    // 32 kept, then the current cache size.
    assert_eq!(recorder.take().len(), 33);
}
