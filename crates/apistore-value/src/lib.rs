//! Value transformers: what happens to an object's bytes between the codec and etcd.
//!
//! Follows `k8s.io/apiserver/pkg/storage/value` at v0.31.1. A [`Transformer`] reads stored
//! bytes back to plain bytes (saying whether they are *stale*, i.e. should be rewritten
//! with the current write key) and turns plain bytes into stored bytes. The etcd key is
//! the authenticated data, so a ciphertext copied under another key does not decrypt.
//!
//! ```
//! use apistore_value::{IdentityTransformer, Transformer};
//! use bytes::Bytes;
//!
//! let t = IdentityTransformer;
//! let stored = t.transform_to_storage(Bytes::from_static(b"{}"), b"/registry/pods/a").unwrap();
//! let read = t.transform_from_storage(stored, b"/registry/pods/a").unwrap();
//! assert_eq!(&read.data[..], b"{}");
//! assert!(!read.stale);
//! ```

mod identity;

use std::fmt;

use bytes::Bytes;

pub use identity::IdentityTransformer;

/// `Result` with [`TransformError`] as its default error.
pub type Result<T, E = TransformError> = std::result::Result<T, E>;

/// Plain bytes read back from storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plaintext {
    /// The codec bytes.
    pub data: Bytes,
    /// Whether the value was written with something other than the current write
    /// transformer and key, and so should be rewritten.
    pub stale: bool,
}

impl Plaintext {
    /// Plain bytes that are not stale.
    pub fn fresh(data: Bytes) -> Self {
        Self { data, stale: false }
    }
}

/// Turns plain bytes into stored bytes and back.
///
/// `authenticated_data` is the prepared etcd key: authenticated ciphers bind the value to it.
pub trait Transformer: Send + Sync + fmt::Debug {
    /// Reads a stored value.
    fn transform_from_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Plaintext>;
    /// Prepares a value for storage.
    fn transform_to_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Bytes>;
}

/// Why a value could not be transformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransformError {
    /// The identity transformer met a value that carries an encryption prefix.
    #[error("identity transformer tried to read encrypted data")]
    EncryptedDataWithoutKey,
    /// No configured transformer recognised the value's prefix.
    #[error("no matching prefix found: the provided value does not match any of the supported transformers")]
    NoMatchingPrefix,
    /// The stored data is too short for the cipher's layout.
    #[error("the stored data was shorter than the required size")]
    TooShort,
    /// Decryption or authentication failed (wrong key, tampered data, wrong etcd key).
    #[error("{0}")]
    Crypto(String),
}
