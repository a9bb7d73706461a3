//! The configuration document as written (`apiserver.config.k8s.io/v1`
//! `EncryptionConfiguration`, `pkg/apis/apiserver/v1/types_encryption.go`), decoded
//! strictly: unknown fields are errors, as in kube-apiserver. Missing lists decode as
//! empty so that validation, not the decoder, reports them with their field paths.
//! Providers stay untyped here so that each can be decoded and reported at its path.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

/// The whole document.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(rename = "apiVersion", default)]
    pub(crate) api_version: Option<String>,
    #[serde(default)]
    pub(crate) kind: Option<String>,
    #[serde(default)]
    pub(crate) resources: Option<Vec<RawResource>>,
}

/// One `resources[]` entry: which resources, and the providers for them, in order.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResource {
    #[serde(default)]
    pub(crate) resources: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) providers: Option<Vec<serde_norway::Value>>,
}

/// The body of an `aesgcm`, `aescbc` or `secretbox` provider.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKeys {
    #[serde(default)]
    pub(crate) keys: Option<Vec<RawKey>>,
}

/// The body of an `identity` provider: `{}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawIdentity {}

/// One named key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawKey {
    #[serde(default)]
    pub(crate) name: Option<String>,
    #[serde(default)]
    pub(crate) secret: Option<SecretText>,
}

/// A key's base64 text. Its `Debug` and any decode error leave the value out.
pub(crate) struct SecretText(pub(crate) String);

impl fmt::Debug for SecretText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[REDACTED]")
    }
}

impl<'de> Deserialize<'de> for SecretText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(SecretVisitor)
    }
}

/// Accepts a string; refuses anything else without echoing it.
struct SecretVisitor;

impl SecretVisitor {
    fn refuse<E: de::Error>(what: &str) -> E {
        E::custom(format_args!(
            "secret must be a base64 string, got {what} (value redacted)"
        ))
    }
}

impl<'de> Visitor<'de> for SecretVisitor {
    type Value = SecretText;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a base64 string")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<SecretText, E> {
        Ok(SecretText(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<SecretText, E> {
        Ok(SecretText(v))
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<SecretText, E> {
        Err(Self::refuse("a boolean"))
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<SecretText, E> {
        Err(Self::refuse("a number"))
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<SecretText, E> {
        Err(Self::refuse("a number"))
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<SecretText, E> {
        Err(Self::refuse("a number"))
    }

    fn visit_bytes<E: de::Error>(self, _: &[u8]) -> Result<SecretText, E> {
        Err(Self::refuse("bytes"))
    }

    fn visit_unit<E: de::Error>(self) -> Result<SecretText, E> {
        Ok(SecretText(String::new()))
    }

    fn visit_none<E: de::Error>(self) -> Result<SecretText, E> {
        Ok(SecretText(String::new()))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<SecretText, A::Error> {
        Err(Self::refuse("a list"))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<SecretText, A::Error> {
        Err(Self::refuse("a map"))
    }
}
