//! The `kms` provider at `apiVersion: v2`: kube's KMS v2 envelope encryption
//! (`k8s.io/apiserver/pkg/storage/value/encrypt/envelope/kmsv2` at v0.31.1), byte for
//! byte.
//!
//! A stored value is `k8s:enc:kms:v2:<provider name>:` followed by the protobuf
//! [`EncryptedObject`]: the value sealed under a DEK, the plugin's key id, the DEK
//! source as the plugin encrypted it, the plugin's annotations and the source type.
//! [`KmsV2Envelope`] is the transformer; [`KmsService`] is the plugin it talks to
//! (a trait, so the envelope is tested without sockets); [`TestKmsPlugin`] (feature
//! `test-plugin`) is an in-process plugin for tests.
//!
//! With the `grpc` feature, [`GrpcKmsService`] reaches a real plugin on its `unix://`
//! socket and [`GrpcKmsConnector`] connects an encryption configuration's providers.
//!
//! The envelope reports key id use, plugin calls and its DEK cache's size to a
//! [`KmsObserver`] (kube's envelope metrics); turning them into Prometheus samples is
//! left to others, as is reloading.

mod cache;
mod encrypted_object;
mod envelope;
#[cfg(feature = "grpc")]
mod grpc;
#[cfg(feature = "grpc-test-plugin")]
mod grpc_plugin;
mod observer;
mod service;
#[cfg(any(test, feature = "test-plugin"))]
mod test_plugin;

#[cfg(test)]
mod tests;

pub use cache::DEFAULT_DEK_CACHE_SIZE;
pub use encrypted_object::{
    ANNOTATIONS_MAX_SIZE, ENCRYPTED_DEK_SOURCE_MAX_SIZE, EncryptedDekSourceType, EncryptedObject,
    KEY_ID_MAX_SIZE, key_id_hash, validate_key_id,
};
pub use envelope::{
    DEFAULT_KMS_TIMEOUT, HEALTHZ_NEGATIVE_INTERVAL, HEALTHZ_POSITIVE_INTERVAL, KMS_V2_PREFIX,
    KmsV2Envelope, KmsV2Options, WRITE_DEK_SOURCE_MAX_TTL,
};
#[cfg(feature = "grpc")]
pub use grpc::{GrpcKmsConnector, GrpcKmsService, KMS_V2_SERVICE};
#[cfg(feature = "grpc-test-plugin")]
pub use grpc_plugin::KmsPluginServer;
pub use observer::{GRPC_CODE_OK, KmsObserver};
pub use service::{DecryptRequest, EncryptResponse, KmsError, KmsService, StatusResponse};
#[cfg(any(test, feature = "test-plugin"))]
pub use test_plugin::{KmsOperation, TestKmsPlugin};
