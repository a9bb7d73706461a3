//! The envelope against the in-process plugin, after kube's `envelope_test.go`,
//! `cache_test.go` and the KMS v2 probe tests of `encryptionconfig/config_test.go`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::*;
use crate::{
    AesGcmTransformer, PrefixTransformer, PrefixTransformers, TransformError, Transformer,
};

const AAD: &[u8] = b"/registry/secrets/default/s1";

fn envelope(plugin: &Arc<TestKmsPlugin>) -> KmsV2Envelope {
    let service: Arc<dyn KmsService> = Arc::clone(plugin) as Arc<dyn KmsService>;
    let e = KmsV2Envelope::new("kms-test", service, KmsV2Options::default());
    e.check().expect("primed");
    e
}

fn seal(e: &KmsV2Envelope, data: &'static [u8]) -> Bytes {
    e.transform_to_storage(Bytes::from_static(data), AAD)
        .expect("sealed")
}

#[test]
fn round_trip_is_fresh_and_bound_to_the_etcd_key() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    let stored = seal(&e, b"secret");
    let plain = e.transform_from_storage(stored.clone(), AAD).expect("read");
    assert_eq!(&plain.data[..], b"secret");
    assert!(!plain.stale);
    assert!(
        e.transform_from_storage(stored, b"/registry/secrets/default/other")
            .is_err()
    );
}

#[test]
fn stored_bytes_are_kubes_encrypted_object_field_by_field() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    let stored = seal(&e, b"secret");

    // Field 1, encryptedData: tag 0x0a, a length, then info(32) nonce(12) data tag(16).
    assert_eq!(stored[0], 0x0a);
    let data_len = usize::from(stored[1]);
    assert_eq!(data_len, 32 + 12 + b"secret".len() + 16);
    let mut pos = 2 + data_len;
    // Field 2, keyID.
    assert_eq!(stored[pos], 0x12);
    assert_eq!(usize::from(stored[pos + 1]), b"key-1".len());
    assert_eq!(&stored[pos + 2..pos + 7], b"key-1");
    pos += 7;
    // Field 3, encryptedDEKSource: the plugin's GCM sealing of a 32-byte seed.
    assert_eq!(stored[pos], 0x1a);
    let source_len = usize::from(stored[pos + 1]);
    assert_eq!(source_len, 12 + 32 + 16);
    pos += 2 + source_len;
    // Field 4, one annotations entry {1: key, 2: value}.
    let key = b"kms.apistore.test";
    let value = b"local";
    let mut entry = vec![0x22, (2 + key.len() + 2 + value.len()) as u8];
    entry.extend_from_slice(&[0x0a, key.len() as u8]);
    entry.extend_from_slice(key);
    entry.extend_from_slice(&[0x12, value.len() as u8]);
    entry.extend_from_slice(value);
    assert_eq!(&stored[pos..pos + entry.len()], &entry[..]);
    pos += entry.len();
    // Field 5, encryptedDEKSourceType = HKDF_SHA256_XNONCE_AES_GCM_SEED (1).
    assert_eq!(&stored[pos..], &[0x28, 0x01]);

    let object = EncryptedObject::decode(&stored).expect("decodes");
    assert_eq!(object.key_id, "key-1");
    assert_eq!(
        object.encrypted_dek_source_type,
        EncryptedDekSourceType::HkdfSha256XnonceAesGcmSeed
    );
    assert_eq!(object.encode().expect("encodes"), stored.to_vec());
}

#[test]
fn through_the_prefix_list_values_carry_kubes_provider_prefix() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = Arc::new(envelope(&plugin));
    assert_eq!(e.prefix(), "k8s:enc:kms:v2:kms-test:");
    let list = PrefixTransformers::with_default_error(vec![PrefixTransformer::new(
        e.prefix(),
        Arc::clone(&e) as Arc<dyn Transformer>,
    )]);
    let stored = list
        .transform_to_storage(Bytes::from_static(b"x"), AAD)
        .expect("sealed");
    assert!(stored.starts_with(b"k8s:enc:kms:v2:kms-test:\x0a"));
    let plain = list.transform_from_storage(stored, AAD).expect("read");
    assert_eq!(&plain.data[..], b"x");
}

#[test]
fn one_dek_seed_serves_many_writes_and_reads_without_the_plugin() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    assert_eq!(plugin.encrypt_calls(), 1);
    let stored: Vec<Bytes> = (0..50).map(|_| seal(&e, b"v")).collect();
    for s in &stored {
        assert!(
            !e.transform_from_storage(s.clone(), AAD)
                .expect("read")
                .stale
        );
    }
    assert_eq!(plugin.encrypt_calls(), 1);
    assert_eq!(plugin.decrypt_calls(), 0, "own DEK needs no decrypt");
}

#[test]
fn dek_cache_calls_the_plugin_once_for_many_reads() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let writer = envelope(&plugin);
    let stored: Vec<Bytes> = (0..20).map(|_| seal(&writer, b"v")).collect();
    // Another API server: same plugin, its own seed and cache.
    let reader = envelope(&plugin);
    for _ in 0..3 {
        for s in &stored {
            let plain = reader.transform_from_storage(s.clone(), AAD).expect("read");
            assert_eq!(&plain.data[..], b"v");
            assert!(!plain.stale, "same key id and source type is not stale");
        }
    }
    assert_eq!(plugin.decrypt_calls(), 1);
    assert_eq!(
        reader.cached_dek_sources(),
        2,
        "its own seed and the writer's"
    );
}

#[test]
fn dek_cache_is_bounded() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let writers: Vec<KmsV2Envelope> = (0..3).map(|_| envelope(&plugin)).collect();
    let stored: Vec<Bytes> = writers.iter().map(|w| seal(w, b"v")).collect();
    let service: Arc<dyn KmsService> = Arc::clone(&plugin) as Arc<dyn KmsService>;
    let reader = KmsV2Envelope::new(
        "kms-test",
        service,
        KmsV2Options {
            dek_cache_size: 2,
            ..KmsV2Options::default()
        },
    );
    reader.check().expect("primed");
    for s in &stored {
        reader.transform_from_storage(s.clone(), AAD).expect("read");
    }
    assert_eq!(reader.cached_dek_sources(), 2);
    // The first writer's source was evicted: reading it again asks the plugin again.
    let before = plugin.decrypt_calls();
    reader
        .transform_from_storage(stored[0].clone(), AAD)
        .expect("read");
    assert_eq!(plugin.decrypt_calls(), before + 1);
}

#[test]
fn key_id_rotation_makes_old_values_stale_and_a_rewrite_moves_them() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    let old = seal(&e, b"v");
    let new_id = plugin.rotate();
    // Until the next health check the old DEK is still the write DEK.
    assert!(
        !e.transform_from_storage(old.clone(), AAD)
            .expect("read")
            .stale
    );
    e.check().expect("healthy");
    assert_eq!(e.current_key_id().as_deref(), Some(new_id.as_str()));
    assert_eq!(plugin.encrypt_calls(), 2);

    let read = e
        .transform_from_storage(old, AAD)
        .expect("old key id still reads");
    assert!(read.stale);
    let rewritten = e.transform_to_storage(read.data, AAD).expect("rewrite");
    assert_eq!(
        EncryptedObject::decode(&rewritten).expect("decodes").key_id,
        new_id
    );
    assert!(
        !e.transform_from_storage(rewritten, AAD)
            .expect("read")
            .stale
    );
}

#[test]
fn a_healthy_check_with_an_unchanged_key_id_keeps_the_dek() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    e.check().expect("healthy");
    e.check().expect("healthy");
    assert_eq!(plugin.encrypt_calls(), 1);
    assert_eq!(plugin.status_calls(), 3);
}

#[test]
fn aes_gcm_key_source_type_reads_and_is_stale() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    // A value as kube before 1.29 wrote it: the DEK itself, encrypted by the plugin.
    let dek = [7u8; 32];
    let response = plugin.encrypt("uid", &dek).expect("encrypt");
    let sealed = AesGcmTransformer::new(&dek)
        .expect("key")
        .transform_to_storage(Bytes::from_static(b"legacy"), AAD)
        .expect("seal");
    let object = EncryptedObject {
        encrypted_data: sealed.to_vec(),
        key_id: response.key_id,
        encrypted_dek_source: response.ciphertext,
        annotations: response.annotations,
        encrypted_dek_source_type: EncryptedDekSourceType::AesGcmKey,
    };
    let stored = object.encode().expect("encode");
    assert!(
        !stored.ends_with(&[0x28, 0x00]),
        "proto3 omits the zero enum"
    );
    let plain = e
        .transform_from_storage(Bytes::from(stored), AAD)
        .expect("read");
    assert_eq!(&plain.data[..], b"legacy");
    assert!(plain.stale, "another source type than the write state's");
}

#[test]
fn unhealthy_plugin_fails_the_check_naming_the_provider_but_writes_coast() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    plugin.set_healthz("degraded");
    let err = e.check().expect_err("unhealthy");
    assert_eq!(
        err.to_string(),
        "kmsv2 Provider kms-test is not healthy, error: got unexpected healthz status: degraded"
    );
    // The write state stays valid until it expires.
    let stored = seal(&e, b"v");
    assert_eq!(
        &e.transform_from_storage(stored, AAD).expect("read").data[..],
        b"v"
    );
}

#[test]
fn unprimed_envelope_with_an_unhealthy_plugin_refuses_writes() {
    let plugin = Arc::new(TestKmsPlugin::new());
    plugin.fail(KmsOperation::Status, "connection refused");
    let service: Arc<dyn KmsService> = Arc::clone(&plugin) as Arc<dyn KmsService>;
    let e = KmsV2Envelope::new("kms-test", service, KmsV2Options::default());
    let err = e
        .transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect_err("no DEK");
    let msg = err.to_string();
    assert!(msg.contains("KMS provider kms-test is not ready"), "{msg}");
    assert!(msg.contains("connection refused"), "{msg}");
    // Once the plugin recovers, the next write primes it.
    plugin.clear_failures();
    seal(&e, b"v");
}

#[test]
fn errors_name_the_plugin_endpoint_once_and_the_last_check_is_kept() {
    let plugin = Arc::new(TestKmsPlugin::new());
    plugin.fail(KmsOperation::Status, "connection refused");
    let service: Arc<dyn KmsService> = Arc::clone(&plugin) as Arc<dyn KmsService>;
    let e = KmsV2Envelope::new("kms-test", service, KmsV2Options::default())
        .with_endpoint("unix:///run/kms/plugin.sock");
    assert_eq!(e.endpoint(), Some("unix:///run/kms/plugin.sock"));
    assert_eq!(e.last_check(), None);
    let msg = e
        .transform_to_storage(Bytes::from_static(b"v"), AAD)
        .expect_err("no DEK")
        .to_string();
    assert_eq!(
        msg.matches("unix:///run/kms/plugin.sock").count(),
        1,
        "{msg}"
    );
    assert!(
        msg.ends_with("(KMS plugin at unix:///run/kms/plugin.sock)"),
        "{msg}"
    );
    let last = e.last_check().expect("checked").expect_err("unhealthy");
    assert!(last.to_string().contains("connection refused"), "{last}");
    plugin.clear_failures();
    e.check().expect("healthy again");
    assert_eq!(e.last_check(), Some(Ok(())));
}

#[test]
fn empty_or_oversized_key_id_from_status_is_unhealthy() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    plugin.set_status_key_id(Some(String::new()));
    let msg = e.check().expect_err("empty").to_string();
    assert!(
        msg.ends_with("got invalid KMSv2 KeyID hash \"\": keyID is empty"),
        "{msg}"
    );
    plugin.set_status_key_id(Some("k".repeat(KEY_ID_MAX_SIZE + 1)));
    let msg = e.check().expect_err("too long").to_string();
    assert!(
        msg.contains("keyID is 1025 bytes, which exceeds the max size of 1024"),
        "{msg}"
    );
    plugin.set_status_key_id(None);
    plugin.set_version("v1");
    let msg = e.check().expect_err("v1").to_string();
    assert!(
        msg.contains("expected KMSv2 API version v2, got v1"),
        "{msg}"
    );
}

#[test]
fn decrypt_failure_names_the_key_id_and_provider() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let writer = envelope(&plugin);
    let stored = seal(&writer, b"v");
    let reader = envelope(&plugin);
    plugin.fail(KmsOperation::Decrypt, "kek disabled");
    let msg = reader
        .transform_from_storage(stored, AAD)
        .expect_err("decrypt fails")
        .to_string();
    assert!(msg.contains(&key_id_hash("key-1")), "{msg}");
    assert!(msg.contains("KMS provider kms-test"), "{msg}");
    assert!(msg.contains("kek disabled"), "{msg}");
}

#[test]
fn slow_plugin_times_out() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let writer = envelope(&plugin);
    let stored = seal(&writer, b"v");
    let service: Arc<dyn KmsService> = Arc::clone(&plugin) as Arc<dyn KmsService>;
    let reader = KmsV2Envelope::new(
        "kms-test",
        service,
        KmsV2Options {
            timeout: Duration::from_millis(50),
            ..KmsV2Options::default()
        },
    );
    reader.check().expect("primed");
    plugin.set_latency(Duration::from_millis(500));
    let msg = reader
        .transform_from_storage(stored.clone(), AAD)
        .expect_err("times out")
        .to_string();
    assert!(
        msg.contains("KMS plugin call Decrypt timed out after 50ms"),
        "{msg}"
    );
    assert!(msg.contains(&key_id_hash("key-1")), "{msg}");
    let msg = reader.check().expect_err("status times out").to_string();
    assert!(msg.contains("Status timed out"), "{msg}");
    plugin.set_latency(Duration::ZERO);
    assert!(reader.transform_from_storage(stored, AAD).is_ok());
}

#[test]
fn encrypt_returning_another_key_id_than_status_does_not_rotate() {
    let plugin = Arc::new(TestKmsPlugin::new());
    let e = envelope(&plugin);
    plugin.set_status_key_id(Some("key-9".to_owned()));
    let msg = e.check().expect_err("mismatch").to_string();
    assert!(msg.contains("failed to rotate DEK"), "{msg}");
    assert_eq!(e.current_key_id().as_deref(), Some("key-1"));
}

#[test]
fn decode_refuses_foreign_and_invalid_objects() {
    let cases: &[(&[u8], &str)] = &[
        (b"", "encrypted data is empty"),
        (b"\x0a\x05ab", "unexpected EOF"),
        (
            b"\x0a\x01x",
            "failed to validate encrypted DEK source: encrypted DEK source is empty",
        ),
        (
            b"\x0a\x01x\x1a\x01d",
            "failed to validate key id: keyID is empty",
        ),
        (
            b"\x0a\x01x\x12\x01k\x1a\x01d\x28\x07",
            "unknown encryptedDEKSourceType: 7",
        ),
        (
            b"\x0a\x01x\x12\x01k\x1a\x01d\x22\x05\x0a\x03b_d",
            "failed to validate annotations",
        ),
        (b"\x0f", "proto: illegal wireType 7"),
    ];
    for (data, want) in cases {
        let err = EncryptedObject::decode(data).expect_err("invalid");
        assert!(matches!(err, TransformError::Kms(_)));
        assert!(err.to_string().contains(want), "{data:?}: {err}");
    }
    // Unknown fields are skipped, as Go's decoder does.
    let ok = EncryptedObject::decode(b"\x0a\x01x\x12\x01k\x1a\x01d\x30\x05").expect("decodes");
    assert_eq!(ok.key_id, "k");
}

#[test]
fn cache_key_is_kubes_generate_cache_key() {
    let mut annotations = BTreeMap::new();
    annotations.insert("b.example.com".to_owned(), b"2".to_vec());
    annotations.insert("a.example.com".to_owned(), b"1".to_vec());
    let o = EncryptedObject {
        encrypted_data: vec![1],
        key_id: "k".to_owned(),
        encrypted_dek_source: vec![9, 9],
        annotations,
        encrypted_dek_source_type: EncryptedDekSourceType::HkdfSha256XnonceAesGcmSeed,
    };
    let mut want = vec![0, 0, 0, 1, 0, 2, 9, 9, 0, 1, b'k', 0, 0, 0, 2];
    want.extend_from_slice(b"\x00\x0da.example.com\x00\x011");
    want.extend_from_slice(b"\x00\x0db.example.com\x00\x012");
    assert_eq!(o.cache_key(), want);
}
