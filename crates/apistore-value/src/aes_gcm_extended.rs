//! AES-GCM with an HKDF-extended nonce: kube's `NewHKDFExtendedNonceGCMTransformer`
//! (`pkg/storage/value/encrypt/aes/aes_extended_nonce.go`).
//!
//! Each write draws 32 random bytes of `info`, derives a one-use AES-256 key as
//! HKDF-Expand(SHA-256, PRK = seed, info, 32) (no Extract step, exactly as kube), and
//! seals with plain random-nonce GCM under it. Stored layout:
//! `info(32) ‖ nonce(12) ‖ ciphertext ‖ tag(16)`. kube uses it under KMSv2 envelopes,
//! which this crate does not offer; it is here so such payloads can be read and for
//! callers that manage their own seed. Unlike kube there is no cache of derived keys:
//! each read derives again (one HMAC), which keeps the transformer stateless.

use std::fmt;

use bytes::Bytes;
use hkdf::Hkdf;
use sha2::Sha256;

use crate::{AesGcmTransformer, Plaintext, Result, TransformError, Transformer, random};

/// The size of the random `info` prefix, of the derived key, and the minimum seed size.
pub const EXTENDED_NONCE_INFO_SIZE: usize = 32;

/// AES-GCM whose key is derived per value from a seed and a random 32-byte info.
#[derive(Clone)]
pub struct AesGcmExtendedNonceTransformer {
    seed: Vec<u8>,
}

impl AesGcmExtendedNonceTransformer {
    /// A transformer for `seed`, which must be at least 32 bytes long.
    pub fn new(seed: &[u8]) -> Result<Self> {
        if seed.len() < EXTENDED_NONCE_INFO_SIZE {
            return Err(TransformError::InvalidKeySize {
                cipher: "hkdf extended nonce seed",
                got: seed.len(),
            });
        }
        Ok(Self {
            seed: seed.to_vec(),
        })
    }

    /// The GCM transformer for the key derived from `info`.
    fn derived(&self, info: &[u8]) -> Result<AesGcmTransformer> {
        let hkdf = Hkdf::<Sha256>::from_prk(&self.seed).map_err(|_| {
            TransformError::Crypto("failed to KDF expand seed with info: invalid seed".to_owned())
        })?;
        let mut key = [0u8; EXTENDED_NONCE_INFO_SIZE];
        hkdf.expand(info, &mut key).map_err(|_| {
            TransformError::Crypto("failed to read a derived key from KDF".to_owned())
        })?;
        AesGcmTransformer::new(&key)
    }
}

impl fmt::Debug for AesGcmExtendedNonceTransformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesGcmExtendedNonceTransformer")
            .field("seed_size", &self.seed.len())
            .finish_non_exhaustive()
    }
}

impl Transformer for AesGcmExtendedNonceTransformer {
    fn transform_from_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Plaintext> {
        if data.len() < EXTENDED_NONCE_INFO_SIZE {
            return Err(TransformError::TooShort);
        }
        let gcm = self.derived(&data[..EXTENDED_NONCE_INFO_SIZE])?;
        gcm.transform_from_storage(data.slice(EXTENDED_NONCE_INFO_SIZE..), authenticated_data)
    }

    fn transform_to_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Bytes> {
        let mut info = [0u8; EXTENDED_NONCE_INFO_SIZE];
        random::fill(&mut info)?;
        let sealed = self
            .derived(&info)?
            .transform_to_storage(data, authenticated_data)?;
        let mut out = Vec::with_capacity(EXTENDED_NONCE_INFO_SIZE + sealed.len());
        out.extend_from_slice(&info);
        out.extend_from_slice(&sealed);
        Ok(Bytes::from(out))
    }
}
