//! Value transformers: what happens to an object's bytes between the codec and etcd.
//!
//! Follows `k8s.io/apiserver/pkg/storage/value` at v0.31.1 and its `encrypt/*`
//! packages, byte for byte: a value written by kube-apiserver reads here and the other
//! way round. A [`Transformer`] reads stored bytes back to plain bytes (saying whether
//! they are *stale*, i.e. should be rewritten with the current write key) and turns
//! plain bytes into stored bytes. The etcd key is the authenticated data, so an AES-GCM
//! ciphertext copied under another key does not decrypt.
//!
//! # What is here
//! - Ciphers, one per provider: [`AesGcmTransformer`] (`aesgcm`),
//!   [`AesCbcTransformer`] (`aescbc`, read and rotate away from it),
//!   [`SecretboxTransformer`] (`secretbox`), [`IdentityTransformer`] (`identity`, which
//!   refuses encrypted data), and [`AesGcmExtendedNonceTransformer`] (kube's HKDF
//!   variant, used upstream under KMSv2).
//! - [`KmsV2Envelope`] (`kms`, apiVersion v2): kube's KMS v2 envelope over a
//!   [`KmsService`] plugin, in [`kms_v2`].
//! - [`PrefixTransformers`]: kube's `NewPrefixTransformers`, the prefix-selected list
//!   that picks a provider (`k8s:enc:aesgcm:v1:`) and then a key (`key1:`), with stale
//!   detection and the metric labels kube records, reported to a
//!   [`TransformObserver`] (this crate depends on no metrics library).
//! - [`EncryptionConfig`]: the `EncryptionConfiguration` file, validated as
//!   kube-apiserver does, giving a transformer per group-resource.
//!
//! Left to others: Prometheus metrics (the telemetry crate implements
//! [`TransformObserver`]), logging of failures, and rewriting stale values (the etcd3
//! store). Reloading the configuration is not offered.
//!
//! # Example: reading a value kube-apiserver encrypted
//!
//! The stored value below was written by kube-apiserver's AES-GCM transformer (it is
//! the vector of kube's `TestGCMLegacyDataCompatibility`) under the etcd key `bamboo`,
//! behind the provider and key prefixes an `aesgcm` provider with a key `key1` adds.
//!
//! ```
//! use apistore_value::{EncryptionConfig, Transformer};
//! use bytes::Bytes;
//!
//! let config = EncryptionConfig::parse(
//!     r#"
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: EncryptionConfiguration
//! resources:
//!   - resources: [secrets]
//!     providers:
//!       - aesgcm:
//!           keys:
//!             - name: key1
//!               secret: c25vcmxheF9hd2Vzb21lcw==
//!       - identity: {}
//! "#,
//! )?;
//! let secrets = config.transformer_for("secrets");
//!
//! let hex = "9f27c8fcea8a58c467d8e437dbf2d85955f9b4bd912f4ef967d788a0cb07797d\
//!            ac0a3f0a0845605ca85ac8562b4ae1";
//! let mut stored = b"k8s:enc:aesgcm:v1:key1:".to_vec();
//! for i in (0..hex.len()).step_by(2) {
//!     stored.push(u8::from_str_radix(&hex[i..i + 2], 16)?);
//! }
//!
//! let read = secrets.transform_from_storage(Bytes::from(stored.clone()), b"bamboo")?;
//! assert_eq!(&read.data[..], b"pandas are the best");
//! assert!(!read.stale); // written with the current write key
//!
//! // Bound to its etcd key: the same bytes under another key do not decrypt.
//! assert!(secrets.transform_from_storage(Bytes::from(stored), b"/other").is_err());
//!
//! // Writing uses the first provider and key; the result reads back fresh.
//! let out = secrets.transform_to_storage(Bytes::from_static(b"{}"), b"/registry/secrets/a")?;
//! assert!(out.starts_with(b"k8s:enc:aesgcm:v1:key1:"));
//! // Plain data still reads (through identity), stale so that it gets rewritten.
//! let plain = secrets.transform_from_storage(Bytes::from_static(b"{}"), b"/k")?;
//! assert!(plain.stale);
//!
//! // A resource the configuration does not name is stored as it is.
//! let pods = config.transformer_for("pods");
//! let out = pods.transform_to_storage(Bytes::from_static(b"{}"), b"/registry/pods/a")?;
//! assert_eq!(&out[..], b"{}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aes_cbc;
mod aes_gcm;
mod aes_gcm_extended;
pub mod config;
mod error;
mod identity;
pub mod kms_v2;
pub mod observer;
mod prefix;
mod random;
mod secretbox;
#[cfg(test)]
mod test_support;

use std::fmt;

use bytes::Bytes;

pub use aes_cbc::{AES_BLOCK_SIZE, AesCbcTransformer};
pub use aes_gcm::{AesGcmTransformer, GCM_NONCE_SIZE, GCM_TAG_SIZE};
pub use aes_gcm_extended::{AesGcmExtendedNonceTransformer, EXTENDED_NONCE_INFO_SIZE};
pub use config::{ConfigError, EncryptionConfig, GroupResource};
pub use error::TransformError;
pub use identity::{ENCRYPTED_PREFIX, IdentityTransformer, encryption_name};
pub use kms_v2::{KmsService, KmsV2Envelope, KmsV2Options};
pub use observer::{NoopObserver, TransformObserver, TransformationType};
pub use prefix::{PrefixTransformer, PrefixTransformers};
pub use secretbox::{
    SECRETBOX_KEY_SIZE, SECRETBOX_NONCE_SIZE, SECRETBOX_TAG_SIZE, SecretboxTransformer,
};

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

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
