//! AES-CBC with PKCS#7 padding: kube's deprecated `NewCBCTransformer`
//! (`pkg/storage/value/encrypt/aes/aes.go`), the `aescbc` provider's cipher.
//!
//! Stored layout: `IV(16) ‖ AES-CBC(plaintext ‖ PKCS#7 padding)`. Padding is always
//! added, a whole block when the plaintext is already block-aligned. Nothing is
//! authenticated: the etcd key is ignored, and tampering shows only as bad padding or
//! garbage. Kept so that data written by the `aescbc` provider can be read and rotated.
//! Every malformed input is an error; where Go indexes past an empty body (a value of
//! exactly one IV) this returns [`TransformError::InvalidPkcs7Data`].

use std::fmt;

use aes::{Aes128, Aes192, Aes256};
use bytes::Bytes;
use cbc::cipher::block_padding::{NoPadding, Pkcs7};
use cbc::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};

use crate::{Plaintext, Result, TransformError, Transformer, random};

/// The AES block size, which is also the IV size.
pub const AES_BLOCK_SIZE: usize = 16;

/// Encrypts with AES-CBC under a 16, 24 or 32-byte key and a fresh random IV per value.
/// Never reports stale.
#[derive(Clone)]
pub struct AesCbcTransformer {
    key: Vec<u8>,
}

impl AesCbcTransformer {
    /// A transformer for `key`, which must be 16, 24 or 32 bytes long.
    pub fn new(key: &[u8]) -> Result<Self> {
        match key.len() {
            16 | 24 | 32 => Ok(Self { key: key.to_vec() }),
            got => Err(TransformError::InvalidKeySize {
                cipher: "crypto/aes",
                got,
            }),
        }
    }

    /// The key size in bytes.
    pub fn key_size(&self) -> usize {
        self.key.len()
    }
}

impl fmt::Debug for AesCbcTransformer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AesCbcTransformer")
            .field("key_size", &self.key_size())
            .finish_non_exhaustive()
    }
}

fn key_error(got: usize) -> TransformError {
    TransformError::InvalidKeySize {
        cipher: "crypto/aes",
        got,
    }
}

/// Decrypts whole blocks in place, without looking at padding.
fn decrypt_blocks<C>(key: &[u8], iv: &[u8], buf: &mut [u8]) -> Result<()>
where
    cbc::Decryptor<C>: KeyIvInit + BlockDecryptMut,
    C: cbc::cipher::BlockCipher + cbc::cipher::BlockDecryptMut,
{
    let dec = cbc::Decryptor::<C>::new_from_slices(key, iv).map_err(|_| key_error(key.len()))?;
    dec.decrypt_padded_mut::<NoPadding>(buf)
        .map(|_| ())
        .map_err(|_| TransformError::NotBlockAligned)
}

/// Pads with PKCS#7 and encrypts.
fn encrypt_padded<C>(key: &[u8], iv: &[u8], data: &[u8]) -> Result<Vec<u8>>
where
    cbc::Encryptor<C>: KeyIvInit + BlockEncryptMut,
    C: cbc::cipher::BlockCipher + cbc::cipher::BlockEncryptMut,
{
    let enc = cbc::Encryptor::<C>::new_from_slices(key, iv).map_err(|_| key_error(key.len()))?;
    Ok(enc.encrypt_padded_vec_mut::<Pkcs7>(data))
}

/// Strips PKCS#7 padding with kube's checks and messages.
fn unpad(plain: &[u8]) -> Result<&[u8]> {
    let Some(&last) = plain.last() else {
        return Err(TransformError::InvalidPkcs7Data);
    };
    let pad = usize::from(last);
    if pad == 0 || pad > plain.len() {
        return Err(TransformError::InvalidPkcs7Data);
    }
    let (body, padding) = plain.split_at(plain.len() - pad);
    if padding.iter().any(|&b| b != last) {
        return Err(TransformError::InvalidPkcs7Padding);
    }
    Ok(body)
}

impl Transformer for AesCbcTransformer {
    fn transform_from_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Plaintext> {
        let Some((iv, body)) = data.split_first_chunk::<AES_BLOCK_SIZE>() else {
            return Err(TransformError::TooShort);
        };
        if body.len() % AES_BLOCK_SIZE != 0 {
            return Err(TransformError::NotBlockAligned);
        }
        let mut buf = body.to_vec();
        match self.key.len() {
            16 => decrypt_blocks::<Aes128>(&self.key, iv, &mut buf)?,
            24 => decrypt_blocks::<Aes192>(&self.key, iv, &mut buf)?,
            32 => decrypt_blocks::<Aes256>(&self.key, iv, &mut buf)?,
            got => return Err(key_error(got)),
        }
        let plain_len = unpad(&buf)?.len();
        buf.truncate(plain_len);
        Ok(Plaintext::fresh(Bytes::from(buf)))
    }

    fn transform_to_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Bytes> {
        let mut iv = [0u8; AES_BLOCK_SIZE];
        random::fill(&mut iv)?;
        let sealed = match self.key.len() {
            16 => encrypt_padded::<Aes128>(&self.key, &iv, &data)?,
            24 => encrypt_padded::<Aes192>(&self.key, &iv, &data)?,
            32 => encrypt_padded::<Aes256>(&self.key, &iv, &data)?,
            got => return Err(key_error(got)),
        };
        let mut out = Vec::with_capacity(AES_BLOCK_SIZE + sealed.len());
        out.extend_from_slice(&iv);
        out.extend_from_slice(&sealed);
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests;
