//! The identity transformer, with kube-apiserver's check that it never hands encrypted
//! bytes to a decoder.

use bytes::Bytes;

use crate::{Plaintext, Result, TransformError, Transformer};

/// The prefix every kube-apiserver encryption provider writes.
pub const ENCRYPTED_PREFIX: &[u8] = b"k8s:enc:";

/// The provider and key an encrypted value names in its prefix, as configuration files
/// name them: `k8s:enc:aesgcm:v1:key1:...` is `aesgcm:key1`, `k8s:enc:kms:v2:vault:...`
/// is `kms:vault`; `encrypted` when the prefix is cut short; `None` for a value without
/// the encryption prefix. Read without decrypting anything.
pub fn encryption_name(value: &[u8]) -> Option<String> {
    let rest = value.strip_prefix(ENCRYPTED_PREFIX)?;
    // <provider>:<version>:<key or provider name>:<ciphertext>
    let mut parts = rest.splitn(4, |b| *b == b':');
    Some(
        match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(provider), Some(_version), Some(key), Some(_)) => format!(
                "{}:{}",
                String::from_utf8_lossy(provider),
                String::from_utf8_lossy(key)
            ),
            _ => "encrypted".to_owned(),
        },
    )
}

/// Stores values as they are. Reading a value that starts with `k8s:enc:` is an error:
/// it is encrypted, and this store was not given its key.
#[derive(Debug, Clone, Copy, Default)]
pub struct IdentityTransformer;

impl Transformer for IdentityTransformer {
    fn transform_from_storage(&self, data: Bytes, _authenticated_data: &[u8]) -> Result<Plaintext> {
        if let Some(encryption) = encryption_name(&data) {
            return Err(TransformError::EncryptedDataWithoutKey { encryption });
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
        assert_eq!(
            err,
            TransformError::EncryptedDataWithoutKey {
                encryption: "aesgcm:key1".to_owned()
            }
        );
        // kube's words first, then which provider and key the value needs.
        assert_eq!(
            err.to_string(),
            "identity transformer tried to read encrypted data (the value is encrypted \
             with aesgcm:key1; no encryption configuration entry for its resource has it)"
        );
    }

    #[test]
    fn encryption_names_are_read_from_the_prefix() {
        assert_eq!(
            encryption_name(b"k8s:enc:aesgcm:v1:key1:\x00\x01").as_deref(),
            Some("aesgcm:key1")
        );
        assert_eq!(
            encryption_name(b"k8s:enc:kms:v2:vault:...").as_deref(),
            Some("kms:vault")
        );
        assert_eq!(
            encryption_name(b"k8s:enc:aesgcm").as_deref(),
            Some("encrypted")
        );
        assert_eq!(encryption_name(b"{}"), None);
    }
}
