//! Ports of kube's CBC tests (`pkg/storage/value/encrypt/aes/aes_test.go`), plus every
//! malformed-input path (including the IV-only value on which Go panics).

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::test_support::{assert_key_rotation, assert_round_trip};

#[test]
fn cbc_key_rotation() {
    assert_key_rotation(
        Arc::new(AesCbcTransformer::new(b"abcdefghijklmnop").unwrap()),
        Arc::new(AesCbcTransformer::new(b"0123456789abcdef").unwrap()),
        false,
    );
}

#[test]
fn round_trip() {
    for (name, key) in [
        ("CBC 16 byte key", vec![b'a'; 16]),
        ("CBC 24 byte key", vec![b'b'; 24]),
        ("CBC 32 byte key", vec![b'c'; 32]),
    ] {
        assert_round_trip(name, &AesCbcTransformer::new(&key).unwrap());
    }
}

#[test]
fn padding_is_always_added() {
    let t = AesCbcTransformer::new(&[1; 32]).unwrap();
    for (len, stored) in [(0, 32), (1, 32), (15, 32), (16, 48), (17, 48)] {
        let out = t
            .transform_to_storage(Bytes::from(vec![5; len]), b"")
            .unwrap();
        assert_eq!(out.len(), stored, "plaintext of {len}");
    }
}

/// Encrypts raw blocks (no padding added) under `key` with a zero IV, so tests can
/// build ciphertexts whose decrypted padding they choose.
fn raw_cbc(key: &[u8; 16], plain: &[u8]) -> Bytes {
    let iv = [0u8; 16];
    let enc = cbc::Encryptor::<Aes128>::new_from_slices(key, &iv).unwrap();
    let mut buf = plain.to_vec();
    let len = buf.len();
    enc.encrypt_padded_mut::<NoPadding>(&mut buf, len).unwrap();
    let mut out = iv.to_vec();
    out.extend_from_slice(&buf);
    Bytes::from(out)
}

#[test]
fn malformed_input_is_an_error() {
    let key = [3u8; 16];
    let t = AesCbcTransformer::new(&key).unwrap();
    let read = |data: Bytes| t.transform_from_storage(data, b"").unwrap_err();

    for len in 0..16 {
        assert_eq!(read(Bytes::from(vec![0; len])), TransformError::TooShort);
    }
    // An IV and nothing else: Go indexes past the end here; this is an error.
    assert_eq!(
        read(Bytes::from(vec![0; 16])),
        TransformError::InvalidPkcs7Data
    );
    for len in [17, 20, 31, 33, 47] {
        assert_eq!(
            read(Bytes::from(vec![0; len])),
            TransformError::NotBlockAligned
        );
    }

    let mut block = [7u8; 16];
    block[15] = 0;
    assert_eq!(
        read(raw_cbc(&key, &block)),
        TransformError::InvalidPkcs7Data
    );
    block[15] = 17;
    assert_eq!(
        read(raw_cbc(&key, &block)),
        TransformError::InvalidPkcs7Data
    );
    block[15] = 3;
    block[14] = 3;
    block[13] = 9;
    assert_eq!(
        read(raw_cbc(&key, &block)),
        TransformError::InvalidPkcs7Padding
    );
    block[13] = 3;
    let ok = t
        .transform_from_storage(raw_cbc(&key, &block), b"")
        .unwrap();
    assert_eq!(&ok.data[..], &[7u8; 13]);
    let full = t
        .transform_from_storage(raw_cbc(&key, &[16u8; 16]), b"")
        .unwrap();
    assert!(full.data.is_empty());

    assert_eq!(
        TransformError::NotBlockAligned.to_string(),
        "the stored data is not a multiple of the block size"
    );
    assert_eq!(
        TransformError::InvalidPkcs7Data.to_string(),
        "invalid PKCS7 data (empty or not padded)"
    );
    assert_eq!(
        TransformError::InvalidPkcs7Padding.to_string(),
        "invalid padding on input"
    );
}

#[test]
fn rejects_bad_key_sizes() {
    for len in [0, 15, 17, 23, 25, 31, 33] {
        assert!(AesCbcTransformer::new(&vec![0; len]).is_err(), "{len}");
    }
}
