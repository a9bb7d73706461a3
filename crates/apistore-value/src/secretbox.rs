//! NaCl secretbox (XSalsa20-Poly1305): kube's `NewSecretboxTransformer`
//! (`pkg/storage/value/encrypt/secretbox/secretbox.go`), the `secretbox` provider's cipher.
//!
//! Stored layout: `nonce(24) ‖ tag(16) ‖ ciphertext`, i.e. the nonce followed by Go's
//! `secretbox.Seal` output, which puts the Poly1305 tag *before* the ciphertext (the
//! NaCl layout). The RustCrypto AEAD API appends its tag, so the tag is placed by hand
//! here with the detached calls. The etcd key is not authenticated.

use std::fmt;

use bytes::Bytes;
use crypto_secretbox::aead::{AeadInPlace, KeyInit};
use crypto_secretbox::{Nonce, Tag, XSalsa20Poly1305};

use crate::{Plaintext, Result, TransformError, Transformer, random};

/// The secretbox key size.
pub const SECRETBOX_KEY_SIZE: usize = 32;
/// The secretbox nonce size.
pub const SECRETBOX_NONCE_SIZE: usize = 24;
/// The Poly1305 tag size (NaCl's `secretbox.Overhead`).
pub const SECRETBOX_TAG_SIZE: usize = 16;

/// kube's (misleading) message for a secretbox open failure.
const OPEN_FAILED: &str = "output array was not large enough for encryption";

/// Encrypts with XSalsa20-Poly1305 under a 32-byte key and a fresh random nonce per
/// value. Never reports stale.
#[derive(Clone)]
pub struct SecretboxTransformer {
    cipher: XSalsa20Poly1305,
}

impl SecretboxTransformer {
    /// A transformer for a 32-byte key.
    pub fn new(key: &[u8; SECRETBOX_KEY_SIZE]) -> Self {
        Self {
            cipher: XSalsa20Poly1305::new(key.into()),
        }
    }

    /// A transformer for `key`, which must be exactly 32 bytes long.
    pub fn from_slice(key: &[u8]) -> Result<Self> {
        let key: &[u8; SECRETBOX_KEY_SIZE] =
            key.try_into().map_err(|_| TransformError::InvalidKeySize {
                cipher: "secretbox",
                got: key.len(),
            })?;
        Ok(Self::new(key))
    }
}

impl fmt::Debug for SecretboxTransformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretboxTransformer")
            .finish_non_exhaustive()
    }
}

impl Transformer for SecretboxTransformer {
    fn transform_from_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Plaintext> {
        let Some((nonce, rest)) = data.split_first_chunk::<SECRETBOX_NONCE_SIZE>() else {
            return Err(TransformError::TooShort);
        };
        let Some((tag, ciphertext)) = rest.split_first_chunk::<SECRETBOX_TAG_SIZE>() else {
            return Err(TransformError::TooShort);
        };
        let mut buf = ciphertext.to_vec();
        self.cipher
            .decrypt_in_place_detached(
                Nonce::from_slice(nonce),
                b"",
                &mut buf,
                Tag::from_slice(tag),
            )
            .map_err(|_| TransformError::Crypto(OPEN_FAILED.to_owned()))?;
        Ok(Plaintext::fresh(Bytes::from(buf)))
    }

    fn transform_to_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Bytes> {
        let mut nonce = [0u8; SECRETBOX_NONCE_SIZE];
        random::fill(&mut nonce)?;
        let mut out = Vec::with_capacity(SECRETBOX_NONCE_SIZE + SECRETBOX_TAG_SIZE + data.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&[0u8; SECRETBOX_TAG_SIZE]);
        out.extend_from_slice(&data);
        let body = SECRETBOX_NONCE_SIZE + SECRETBOX_TAG_SIZE;
        let tag = self
            .cipher
            .encrypt_in_place_detached(Nonce::from_slice(&nonce), b"", &mut out[body..])
            .map_err(|_| TransformError::Crypto("secretbox: plaintext too large".to_owned()))?;
        out[SECRETBOX_NONCE_SIZE..body].copy_from_slice(&tag);
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests;
