//! The providers an encryption configuration can name, their stored prefixes and key
//! sizes (`pkg/server/options/encryptionconfig/config.go`), and the decoding of one
//! `providers[]` element.

use std::sync::Arc;

use serde_norway::Value;

use super::error::ConfigError;
use super::raw::{RawIdentity, RawKeys};
use super::validate::{self, ProviderSpec};
use crate::{
    AesCbcTransformer, AesGcmTransformer, SecretboxTransformer, TransformError, Transformer,
};

/// The stored prefix of the `aesgcm` provider.
pub const AESGCM_PREFIX: &str = "k8s:enc:aesgcm:v1:";
/// The stored prefix of the `aescbc` provider.
pub const AESCBC_PREFIX: &str = "k8s:enc:aescbc:v1:";
/// The stored prefix of the `secretbox` provider.
pub const SECRETBOX_PREFIX: &str = "k8s:enc:secretbox:v1:";

const AES_KEY_SIZES: &[usize] = &[16, 24, 32];
const SECRETBOX_KEY_SIZES: &[usize] = &[32];

/// Every provider name kube-apiserver knows.
const KNOWN: &[&str] = &["aesgcm", "aescbc", "secretbox", "identity", "kms"];

/// A provider that encrypts with named keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    /// `aesgcm`: AES-GCM, random nonce, the etcd key authenticated.
    AesGcm,
    /// `aescbc`: AES-CBC with PKCS#7 padding (deprecated upstream; unauthenticated).
    AesCbc,
    /// `secretbox`: XSalsa20-Poly1305.
    Secretbox,
    /// `kms` (apiVersion v2): envelope encryption by a KMS plugin, no named keys.
    Kms,
}

impl ProviderKind {
    /// The provider's name in the configuration.
    pub fn name(self) -> &'static str {
        match self {
            Self::AesGcm => "aesgcm",
            Self::AesCbc => "aescbc",
            Self::Secretbox => "secretbox",
            Self::Kms => "kms",
        }
    }

    /// The prefix its stored values start with, before the key name.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::AesGcm => AESGCM_PREFIX,
            Self::AesCbc => AESCBC_PREFIX,
            Self::Secretbox => SECRETBOX_PREFIX,
            // Followed by the provider's name and `:` rather than a key name.
            Self::Kms => crate::kms_v2::KMS_V2_PREFIX,
        }
    }

    /// The key sizes it accepts, in bytes.
    pub fn key_sizes(self) -> &'static [usize] {
        match self {
            Self::AesGcm | Self::AesCbc => AES_KEY_SIZES,
            Self::Secretbox => SECRETBOX_KEY_SIZES,
            Self::Kms => &[],
        }
    }

    /// The error its key list gives when no key name matches.
    pub(crate) fn no_matching_key(self) -> TransformError {
        match self {
            Self::AesGcm | Self::AesCbc => TransformError::NoMatchingKey("AES"),
            Self::Secretbox => TransformError::NoMatchingKey("Secretbox"),
            Self::Kms => TransformError::NoMatchingTransformer,
        }
    }

    /// Builds the cipher for one key.
    pub(crate) fn cipher(self, key: &[u8]) -> Result<Arc<dyn Transformer>, TransformError> {
        Ok(match self {
            Self::AesGcm => Arc::new(AesGcmTransformer::new(key)?),
            Self::AesCbc => Arc::new(AesCbcTransformer::new(key)?),
            Self::Secretbox => Arc::new(SecretboxTransformer::from_slice(key)?),
            Self::Kms => {
                return Err(TransformError::Kms(
                    "the kms provider has no named keys".to_owned(),
                ));
            }
        })
    }

    fn from_name(name: &str) -> Option<Self> {
        match name {
            "aesgcm" => Some(Self::AesGcm),
            "aescbc" => Some(Self::AesCbc),
            "secretbox" => Some(Self::Secretbox),
            _ => None,
        }
    }
}

/// Decodes one `providers[]` element found at `field`; problems go to `errors`.
pub(super) fn decode(
    value: Value,
    field: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<ProviderSpec> {
    let map = match value {
        Value::Mapping(map) => map,
        Value::Null => {
            errors.push(ConfigError::UnknownProvider {
                field: field.to_owned(),
                given: Vec::new(),
            });
            return None;
        }
        _ => {
            errors.push(ConfigError::Decode {
                field: Some(field.to_owned()),
                message: "a provider must be a map with one of aesgcm, aescbc, secretbox, identity"
                    .to_owned(),
            });
            return None;
        }
    };
    // As in Go, `name: null` is an absent provider.
    let named: Vec<(String, Value)> = map
        .into_iter()
        .filter(|(_, body)| !body.is_null())
        .map(|(k, body)| (k.as_str().unwrap_or("<non-string key>").to_owned(), body))
        .collect();
    let names: Vec<String> = named.iter().map(|(n, _)| n.clone()).collect();
    if named.is_empty() || names.iter().any(|n| !KNOWN.contains(&n.as_str())) {
        errors.push(ConfigError::UnknownProvider {
            field: field.to_owned(),
            given: names,
        });
        return None;
    }
    if named.len() > 1 {
        errors.push(ConfigError::MultipleProviders {
            field: field.to_owned(),
            given: names,
        });
        return None;
    }
    let (name, body) = named.into_iter().next()?;
    let path = format!("{field}.{name}");
    let decode_err = |err: serde_norway::Error| ConfigError::Decode {
        field: Some(path.clone()),
        message: err.to_string(),
    };
    if name == "identity" {
        return match serde_norway::from_value::<RawIdentity>(body) {
            Ok(RawIdentity {}) => Some(ProviderSpec::Identity),
            Err(err) => {
                errors.push(decode_err(err));
                None
            }
        };
    }
    if name == "kms" {
        return super::kms::decode(body, &path, errors);
    }
    let Some(kind) = ProviderKind::from_name(&name) else {
        errors.push(ConfigError::UnsupportedProvider {
            field: path,
            provider: name,
        });
        return None;
    };
    match serde_norway::from_value::<RawKeys>(body) {
        Ok(raw) => {
            let keys_path = format!("{path}.keys");
            let keys = validate::keys(kind, raw.keys.unwrap_or_default(), &keys_path, errors);
            Some(ProviderSpec::Keyed(kind, keys))
        }
        Err(err) => {
            errors.push(decode_err(err));
            None
        }
    }
}
