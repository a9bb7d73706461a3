//! The identity transformer, with kube-apiserver's check that it never hands encrypted
//! bytes to a decoder.

use bytes::Bytes;

use crate::{Plaintext, Result, TransformError, Transformer};

/// The prefix every kube-apiserver encryption provider writes.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// Stores values as they are. Reading a value that starts with `k8s:enc:` is an error:
/// it is encrypted, and this store was not given its key.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityTransformer;

impl Transformer for IdentityTransformer {
    fn transform_from_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Plaintext> {
        if data.starts_with(ENCRYPTED_PREFIX) {
            return Err(TransformError::EncryptedDataWithoutKey);
        }
        Ok(Plaintext::fresh(data))
    }

    fn transform_to_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Bytes> {
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_refuses_encrypted_data() {
        let err = IdentityTransformer
            .transform_from_storage(Bytes::from_static(b"k8s:enc:aesgcm:v1:key1:xxx"), b"/k")
            .unwrap_err();
        assert_eq!(err, TransformError::EncryptedDataWithoutKey);
    }
}
