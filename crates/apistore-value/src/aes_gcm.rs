//! AES-GCM with a random 96-bit nonce: kube's `NewGCMTransformer`
//! (`pkg/storage/value/encrypt/aes/aes.go`), the `aesgcm` provider's cipher.
//!
//! Stored layout: `nonce(12) ‖ ciphertext ‖ tag(16)`. The authenticated data (the etcd
//! key) is bound into the tag, so a value copied under another key does not decrypt.

use std::fmt;

use aes::Aes192;
use aes_gcm::aead::consts::U12;
use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes128Gcm, Aes256Gcm, AesGcm, Nonce};
use bytes::Bytes;

use crate::{Plaintext, Result, TransformError, Transformer, random};

/// The GCM nonce size. Every value kube-apiserver ever wrote depends on it.
pub const GCM_NONCE_SIZE: usize = 12;
/// The GCM tag size.
pub const GCM_TAG_SIZE: usize = 16;

/// Go's message for a GCM open failure.
const AUTH_FAILED: &str = "cipher: message authentication failed";

type Aes192Gcm = AesGcm<Aes192, U12>;

/// AES-128, -192 or -256 in GCM mode.
#[derive(Clone)]
enum Cipher {
    Aes128(Box<Aes128Gcm>),
    Aes192(Box<Aes192Gcm>),
    Aes256(Box<Aes256Gcm>),
}

/// Encrypts with AES-GCM under a 16, 24 or 32-byte key and a fresh random nonce per
/// value; authenticates the etcd key. Never reports stale.
#[derive(Clone)]
pub struct AesGcmTransformer {
    cipher: Cipher,
}

impl AesGcmTransformer {
    /// A transformer for `key`, which must be 16, 24 or 32 bytes long.
    pub fn new(key: &[u8]) -> Result<Self> {
        let invalid = |_| TransformError::InvalidKeySize {
            cipher: "crypto/aes",
            got: key.len(),
        };
        let cipher = match key.len() {
            16 => Cipher::Aes128(Box::new(Aes128Gcm::new_from_slice(key).map_err(invalid)?)),
            24 => Cipher::Aes192(Box::new(Aes192Gcm::new_from_slice(key).map_err(invalid)?)),
            32 => Cipher::Aes256(Box::new(Aes256Gcm::new_from_slice(key).map_err(invalid)?)),
            got => {
                return Err(TransformError::InvalidKeySize {
                    cipher: "crypto/aes",
                    got,
                });
            }
        };
        Ok(Self { cipher })
    }

    /// The key size in bytes.
    pub fn key_size(&self) -> usize {
        match self.cipher {
            Cipher::Aes128(_) => 16,
            Cipher::Aes192(_) => 24,
            Cipher::Aes256(_) => 32,
        }
    }

    /// The nonce size this transformer writes and expects: always [`GCM_NONCE_SIZE`].
    pub fn nonce_size(&self) -> usize {
        GCM_NONCE_SIZE
    }

    fn seal(&self, nonce: &[u8; GCM_NONCE_SIZE], payload: Payload<'_, '_>) -> Result<Vec<u8>> {
        let nonce = Nonce::from_slice(nonce);
        let sealed = match &self.cipher {
            Cipher::Aes128(c) => c.encrypt(nonce, payload),
            Cipher::Aes192(c) => c.encrypt(nonce, payload),
            Cipher::Aes256(c) => c.encrypt(nonce, payload),
        };
        sealed.map_err(|_| TransformError::Crypto("cipher: plaintext too large".to_owned()))
    }

    fn open(&self, nonce: &[u8; GCM_NONCE_SIZE], payload: Payload<'_, '_>) -> Result<Vec<u8>> {
        let nonce = Nonce::from_slice(nonce);
        let opened = match &self.cipher {
            Cipher::Aes128(c) => c.decrypt(nonce, payload),
            Cipher::Aes192(c) => c.decrypt(nonce, payload),
            Cipher::Aes256(c) => c.decrypt(nonce, payload),
        };
        opened.map_err(|_| TransformError::Crypto(AUTH_FAILED.to_owned()))
    }
}

impl fmt::Debug for AesGcmTransformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesGcmTransformer")
            .field("key_size", &self.key_size())
            .finish_non_exhaustive()
    }
}

impl Transformer for AesGcmTransformer {
    fn transform_from_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Plaintext> {
        let Some((nonce, sealed)) = data.split_first_chunk::<GCM_NONCE_SIZE>() else {
            return Err(TransformError::TooShort);
        };
        let plain = self.open(
            nonce,
            Payload {
                msg: sealed,
                aad: authenticated_data,
            },
        )?;
        Ok(Plaintext::fresh(Bytes::from(plain)))
    }

    fn transform_to_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Bytes> {
        let mut nonce = [0u8; GCM_NONCE_SIZE];
        random::fill(&mut nonce)?;
        let sealed = self.seal(
            &nonce,
            Payload {
                msg: &data,
                aad: authenticated_data,
            },
        )?;
        let mut out = Vec::with_capacity(GCM_NONCE_SIZE + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests;
