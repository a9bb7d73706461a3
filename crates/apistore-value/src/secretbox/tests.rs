//! Ports of kube's secretbox tests (`pkg/storage/value/encrypt/secretbox/secretbox_test.go`)
//! and checks of the NaCl layout (tag before ciphertext).

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::test_support::{assert_key_rotation, assert_round_trip};

const KEY1: [u8; 32] = [1; 32];
const KEY2: [u8; 32] = [2; 32];

#[test]
fn secretbox_key_rotation() {
    assert_key_rotation(
        Arc::new(SecretboxTransformer::new(&KEY1)),
        Arc::new(SecretboxTransformer::new(&KEY2)),
        false,
    );
}

#[test]
fn round_trip() {
    assert_round_trip("Secretbox 32 byte key", &SecretboxTransformer::new(&KEY1));
}

#[test]
fn layout_is_nonce_then_tag_then_ciphertext() {
    let t = SecretboxTransformer::new(&KEY1);
    let out = t
        .transform_to_storage(Bytes::from_static(b"hello"), b"")
        .unwrap();
    assert_eq!(out.len(), SECRETBOX_NONCE_SIZE + SECRETBOX_TAG_SIZE + 5);
    // Rebuild with the combined (tag-last) AEAD call and compare: the tag moved.
    let cipher = XSalsa20Poly1305::new((&KEY1).into());
    let nonce = Nonce::from_slice(&out[..SECRETBOX_NONCE_SIZE]);
    let mut buf = b"hello".to_vec();
    let tag = cipher
        .encrypt_in_place_detached(nonce, b"", &mut buf)
        .unwrap();
    assert_eq!(&out[24..40], &tag[..]);
    assert_eq!(&out[40..], &buf[..]);
}

#[test]
fn malformed_input_is_an_error() {
    let t = SecretboxTransformer::new(&KEY1);
    for len in 0..SECRETBOX_NONCE_SIZE + SECRETBOX_TAG_SIZE {
        assert_eq!(
            t.transform_from_storage(Bytes::from(vec![0; len]), b"")
                .unwrap_err(),
            TransformError::TooShort
        );
    }
    let good = t
        .transform_to_storage(Bytes::from_static(b"x"), b"")
        .unwrap();
    for i in 0..good.len() {
        let mut bad = good.to_vec();
        bad[i] ^= 0x80;
        let err = t.transform_from_storage(Bytes::from(bad), b"").unwrap_err();
        assert_eq!(
            err.to_string(),
            "output array was not large enough for encryption"
        );
    }
    assert!(
        SecretboxTransformer::new(&KEY2)
            .transform_from_storage(good, b"")
            .is_err()
    );
    assert!(SecretboxTransformer::from_slice(&[0; 31]).is_err());
    assert!(SecretboxTransformer::from_slice(&[0; 33]).is_err());
}
