//! The KMS v2 plugin API (`k8s.io/kms` `apis/v2/api.proto`, service
//! `v2.KeyManagementService`, and kube's `pkg/service` interface) as a Rust trait, so
//! the envelope is written and tested without sockets. A gRPC client over `unix://`
//! is one implementation; [`super::TestKmsPlugin`] is another.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The plugin's answer to `Status`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusResponse {
    /// The KMS API version the plugin speaks: `v2` (or `v2beta1`).
    pub version: String,
    /// `ok` when healthy; anything else is an unhealthy plugin.
    pub healthz: String,
    /// The key id the plugin currently encrypts with.
    pub key_id: String,
}

/// The plugin's answer to `Encrypt`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EncryptResponse {
    /// The encrypted DEK source.
    pub ciphertext: Vec<u8>,
    /// The key id that encrypted it.
    pub key_id: String,
    /// Metadata the plugin wants back on `Decrypt`.
    pub annotations: BTreeMap<String, Vec<u8>>,
}

/// What `Decrypt` is asked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecryptRequest {
    /// The encrypted DEK source, as stored.
    pub ciphertext: Vec<u8>,
    /// The key id stored with it.
    pub key_id: String,
    /// The annotations stored with it.
    pub annotations: BTreeMap<String, Vec<u8>>,
}

/// Why a plugin call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KmsError {
    /// The plugin could not be reached (its socket is missing or refuses connections).
    #[error("KMS plugin at {endpoint} is unavailable: {message}")]
    Unavailable {
        /// The endpoint, `unix:///path`.
        endpoint: String,
        /// What went wrong.
        message: String,
    },
    /// The plugin did not answer within the provider's timeout.
    #[error("KMS plugin call {operation} timed out after {after:?}")]
    Timeout {
        /// `Status`, `Encrypt` or `Decrypt`.
        operation: &'static str,
        /// The timeout.
        after: Duration,
    },
    /// The plugin answered with an error that carries no gRPC status (an in-process
    /// plugin, or a call that never reached the wire).
    #[error("KMS plugin call {operation} failed: {message}")]
    Failed {
        /// `Status`, `Encrypt` or `Decrypt`.
        operation: &'static str,
        /// The plugin's message.
        message: String,
    },
    /// The plugin answered with a gRPC error status.
    #[error("KMS plugin call {operation} failed: rpc error: code = {code} desc = {message}")]
    Rpc {
        /// `Status`, `Encrypt` or `Decrypt`.
        operation: &'static str,
        /// Go's name of the status code (`Internal`, `PermissionDenied`...).
        code: &'static str,
        /// The status message.
        message: String,
    },
}

impl KmsError {
    /// The `grpc_status_code` label kube gives a failed call: the status code's Go
    /// name, or `unknown-non-grpc` for a failure without one.
    pub fn grpc_status_code(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => "Unavailable",
            Self::Timeout { .. } => "DeadlineExceeded",
            Self::Rpc { code, .. } => code,
            Self::Failed { .. } => crate::observer::STATUS_UNKNOWN_NON_GRPC,
        }
    }
}

/// A KMS v2 plugin: kube's `kmsservice.Service`.
///
/// Calls block; the envelope calls the plugin only to check its health, when the
/// DEK rotates and when a DEK source misses the cache, and enforces the provider's
/// timeout around each call itself.
pub trait KmsService: Send + Sync + fmt::Debug {
    /// The plugin's health, API version and current key id.
    fn status(&self) -> Result<StatusResponse, KmsError>;
    /// Encrypts a DEK source; `uid` identifies the request in the plugin's logs.
    fn encrypt(&self, uid: &str, plaintext: &[u8]) -> Result<EncryptResponse, KmsError>;
    /// Decrypts a DEK source.
    fn decrypt(&self, uid: &str, request: &DecryptRequest) -> Result<Vec<u8>, KmsError>;
}
