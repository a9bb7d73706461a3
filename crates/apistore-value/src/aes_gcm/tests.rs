//! Ports of kube's GCM tests (`pkg/storage/value/encrypt/aes/aes_test.go`) for the
//! random-nonce and extended-nonce transformers, plus malformed-input checks.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::AesGcmExtendedNonceTransformer;
use crate::test_support::{assert_key_rotation, assert_round_trip, hex};

#[test]
fn gcm_data_stable() {
    let t = AesGcmTransformer::new(b"0123456789abcdef").unwrap();
    assert_eq!(t.nonce_size(), 12);
    let out = t
        .transform_to_storage(Bytes::from_static(b"abc"), b"k")
        .unwrap();
    assert_eq!(out.len(), GCM_NONCE_SIZE + 3 + GCM_TAG_SIZE);
}

/// The vector recorded from kube's `NewGCMTransformer`.
#[test]
fn gcm_legacy_data_compatibility() {
    let t = AesGcmTransformer::new(b"snorlax_awesomes").unwrap();
    let stored = hex(
        "9f27c8fcea8a58c467d8e437dbf2d85955f9b4bd912f4ef967d788a0cb07797dac0a3f0a0845605ca85ac8562b4ae1",
    );
    let plain = t
        .transform_from_storage(Bytes::from(stored), b"bamboo")
        .unwrap();
    assert_eq!(&plain.data[..], b"pandas are the best");
    assert!(!plain.stale);
}

/// The vector recorded from kube's extended-nonce (HKDF) transformer.
#[test]
fn extended_nonce_gcm_legacy_data_compatibility() {
    let seed = hex("5d40323a820ff95561675e3b95e81867c5fdd561d35a88a2d08b08aa9d4fcf5c");
    let t = AesGcmExtendedNonceTransformer::new(&seed).unwrap();
    let stored = hex(concat!(
        "2442759e33945fbad709db577a0f037fd8a709fc76979b8942209debcecb9d57",
        "efe3d6ff6a1ef6ee9a5003b9833b3043cec1e47b35175b151107a8d2416b0e29",
        "6bbf66b5d102fcefdf9a78f293d271"
    ));
    let plain = t
        .transform_from_storage(Bytes::from(stored), b"bamboo")
        .unwrap();
    assert_eq!(&plain.data[..], b"pandas are the best");
}

#[test]
fn gcm_key_rotation() {
    let key1: &[u8] = b"abcdefghijklmnopabcdefghijklmnop";
    let key2: &[u8] = b"0123456789abcdef0123456789abcdef";
    assert_key_rotation(
        Arc::new(AesGcmTransformer::new(key1).unwrap()),
        Arc::new(AesGcmTransformer::new(key2).unwrap()),
        true,
    );
    assert_key_rotation(
        Arc::new(AesGcmExtendedNonceTransformer::new(key1).unwrap()),
        Arc::new(AesGcmExtendedNonceTransformer::new(key2).unwrap()),
        true,
    );
}

#[test]
fn round_trip() {
    for (name, key) in [
        ("GCM 16 byte key", vec![b'a'; 16]),
        ("GCM 24 byte key", vec![b'b'; 24]),
        ("GCM 32 byte key", vec![b'c'; 32]),
    ] {
        assert_round_trip(name, &AesGcmTransformer::new(&key).unwrap());
    }
    let seeded = AesGcmExtendedNonceTransformer::new(&[b'c'; 32]).unwrap();
    assert_round_trip("GCM 32 byte seed", &seeded);
}

/// kube's `TestGCMNonce`: the random nonce (and the extended info) are not zero.
#[test]
fn gcm_nonce_is_random() {
    let t = AesGcmTransformer::new(&[7; 32]).unwrap();
    let ext = AesGcmExtendedNonceTransformer::new(&[7; 32]).unwrap();
    for _ in 0..100 {
        let out = t.transform_to_storage(Bytes::new(), b"k").unwrap();
        assert_ne!(out[..4], [0; 4]);
        let out = ext.transform_to_storage(Bytes::new(), b"k").unwrap();
        assert_ne!(out[..32], [0; 32]);
        assert_ne!(out[32..36], [0; 4]);
    }
}

#[test]
fn gcm_rejects_bad_keys_and_seeds() {
    for len in [0, 8, 15, 17, 31, 33, 64] {
        assert_eq!(
            AesGcmTransformer::new(&vec![1; len]).unwrap_err(),
            TransformError::InvalidKeySize {
                cipher: "crypto/aes",
                got: len
            }
        );
    }
    assert!(AesGcmExtendedNonceTransformer::new(&[1; 31]).is_err());
    assert!(AesGcmExtendedNonceTransformer::new(&[1; 64]).is_ok());
}

#[test]
fn gcm_malformed_input_is_an_error() {
    let t = AesGcmTransformer::new(&[9; 16]).unwrap();
    for len in 0..GCM_NONCE_SIZE {
        assert_eq!(
            t.transform_from_storage(Bytes::from(vec![0; len]), b"k")
                .unwrap_err(),
            TransformError::TooShort
        );
    }
    for len in GCM_NONCE_SIZE..GCM_NONCE_SIZE + GCM_TAG_SIZE + 2 {
        let err = t
            .transform_from_storage(Bytes::from(vec![0; len]), b"k")
            .unwrap_err();
        assert_eq!(err.to_string(), "cipher: message authentication failed");
    }
    let good = t
        .transform_to_storage(Bytes::from_static(b"secret"), b"k")
        .unwrap();
    for i in 0..good.len() {
        let mut bad = good.to_vec();
        bad[i] ^= 1;
        assert!(
            t.transform_from_storage(Bytes::from(bad), b"k").is_err(),
            "flip at {i}"
        );
    }
    let other = AesGcmTransformer::new(&[8; 16]).unwrap();
    assert!(other.transform_from_storage(good, b"k").is_err());

    let ext = AesGcmExtendedNonceTransformer::new(&[9; 32]).unwrap();
    for len in [0, 31] {
        assert_eq!(
            ext.transform_from_storage(Bytes::from(vec![0; len]), b"k")
                .unwrap_err(),
            TransformError::TooShort
        );
    }
    assert_eq!(
        ext.transform_from_storage(Bytes::from(vec![0; 40]), b"k")
            .unwrap_err(),
        TransformError::TooShort
    );
    assert!(
        ext.transform_from_storage(Bytes::from(vec![0; 60]), b"k")
            .is_err()
    );
}

#[test]
fn debug_shows_no_key() {
    let t = AesGcmTransformer::new(b"snorlax_awesomes").unwrap();
    let text = format!("{t:?}");
    assert!(!text.contains("snorlax"), "{text}");
    assert!(text.contains("key_size: 16"), "{text}");
}
