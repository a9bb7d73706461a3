//! An in-process KMS v2 plugin for tests: a local AES-GCM key per key id, key id
//! rotation on demand, and injectable failures, health and latency. Old key ids stay
//! decryptable after a rotation, as a real KMS keeps old key versions.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;

use super::service::{DecryptRequest, EncryptResponse, KmsError, KmsService, StatusResponse};
use crate::{AesGcmTransformer, Transformer, random};

/// A plugin call a failure can be injected into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KmsOperation {
    /// `Status`.
    Status,
    /// `Encrypt`.
    Encrypt,
    /// `Decrypt`.
    Decrypt,
}

#[derive(Debug)]
struct State {
    keys: BTreeMap<String, AesGcmTransformer>,
    current: String,
    generation: usize,
    healthz: String,
    version: String,
    status_key_id: Option<String>,
    latency: Duration,
    failures: Vec<(KmsOperation, String)>,
}

/// The test plugin. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct TestKmsPlugin {
    state: Mutex<State>,
    status_calls: AtomicUsize,
    encrypt_calls: AtomicUsize,
    decrypt_calls: AtomicUsize,
}

impl Default for TestKmsPlugin {
    fn default() -> Self {
        Self::new()
    }
}

fn new_key() -> AesGcmTransformer {
    let mut key = [0u8; 32];
    // The OS random source does not fail in tests; a zero key is still a key.
    let _ = random::fill(&mut key);
    match AesGcmTransformer::new(&key) {
        Ok(t) => t,
        Err(_) => unreachable!("a 32-byte key is a valid AES key"),
    }
}

impl TestKmsPlugin {
    /// A healthy `v2` plugin with one key, `key-1`.
    pub fn new() -> Self {
        let mut keys = BTreeMap::new();
        keys.insert("key-1".to_owned(), new_key());
        Self {
            state: Mutex::new(State {
                keys,
                current: "key-1".to_owned(),
                generation: 1,
                healthz: "ok".to_owned(),
                version: "v2".to_owned(),
                status_key_id: None,
                latency: Duration::ZERO,
                failures: Vec::new(),
            }),
            status_calls: AtomicUsize::new(0),
            encrypt_calls: AtomicUsize::new(0),
            decrypt_calls: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Moves to a new key (`key-2`, `key-3`, ...) and returns its id.
    pub fn rotate(&self) -> String {
        let mut s = self.lock();
        s.generation += 1;
        let id = format!("key-{}", s.generation);
        s.keys.insert(id.clone(), new_key());
        s.current.clone_from(&id);
        id
    }

    /// The current key id.
    pub fn key_id(&self) -> String {
        self.lock().current.clone()
    }

    /// What `Status` answers as `healthz` (`ok` is healthy).
    pub fn set_healthz(&self, healthz: &str) {
        self.lock().healthz = healthz.to_owned();
    }

    /// What `Status` answers as `version`.
    pub fn set_version(&self, version: &str) {
        self.lock().version = version.to_owned();
    }

    /// Makes `Status` answer this key id instead of the current one (`None` undoes it).
    pub fn set_status_key_id(&self, key_id: Option<String>) {
        self.lock().status_key_id = key_id;
    }

    /// Delays every call by `latency`.
    pub fn set_latency(&self, latency: Duration) {
        self.lock().latency = latency;
    }

    /// Makes every call of `operation` fail with `message`.
    pub fn fail(&self, operation: KmsOperation, message: &str) {
        self.lock().failures.push((operation, message.to_owned()));
    }

    /// Removes every injected failure.
    pub fn clear_failures(&self) {
        self.lock().failures.clear();
    }

    /// How many times `Status` was called.
    pub fn status_calls(&self) -> usize {
        self.status_calls.load(Ordering::SeqCst)
    }

    /// How many times `Encrypt` was called.
    pub fn encrypt_calls(&self) -> usize {
        self.encrypt_calls.load(Ordering::SeqCst)
    }

    /// How many times `Decrypt` was called.
    pub fn decrypt_calls(&self) -> usize {
        self.decrypt_calls.load(Ordering::SeqCst)
    }

    /// Sleeps the latency and answers an injected failure, if any.
    fn enter(&self, operation: KmsOperation, name: &'static str) -> Result<(), KmsError> {
        let (latency, failure) = {
            let s = self.lock();
            let failure = s
                .failures
                .iter()
                .find(|(op, _)| *op == operation)
                .map(|(_, m)| m.clone());
            (s.latency, failure)
        };
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        match failure {
            Some(message) => Err(KmsError::Failed {
                operation: name,
                message,
            }),
            None => Ok(()),
        }
    }
}

impl KmsService for TestKmsPlugin {
    fn status(&self) -> Result<StatusResponse, KmsError> {
        self.status_calls.fetch_add(1, Ordering::SeqCst);
        self.enter(KmsOperation::Status, "Status")?;
        let s = self.lock();
        Ok(StatusResponse {
            version: s.version.clone(),
            healthz: s.healthz.clone(),
            key_id: s.status_key_id.clone().unwrap_or_else(|| s.current.clone()),
        })
    }

    fn encrypt(&self, _uid: &str, plaintext: &[u8]) -> Result<EncryptResponse, KmsError> {
        self.encrypt_calls.fetch_add(1, Ordering::SeqCst);
        self.enter(KmsOperation::Encrypt, "Encrypt")?;
        let s = self.lock();
        let failed = |e: crate::TransformError| KmsError::Failed {
            operation: "Encrypt",
            message: e.to_string(),
        };
        let key = s.keys.get(&s.current).ok_or_else(|| KmsError::Failed {
            operation: "Encrypt",
            message: "no current key".to_owned(),
        })?;
        let ciphertext = key
            .transform_to_storage(Bytes::copy_from_slice(plaintext), s.current.as_bytes())
            .map_err(failed)?;
        let mut annotations = BTreeMap::new();
        annotations.insert("kms.apistore.test".to_owned(), b"local".to_vec());
        Ok(EncryptResponse {
            ciphertext: ciphertext.to_vec(),
            key_id: s.current.clone(),
            annotations,
        })
    }

    fn decrypt(&self, _uid: &str, request: &DecryptRequest) -> Result<Vec<u8>, KmsError> {
        self.decrypt_calls.fetch_add(1, Ordering::SeqCst);
        self.enter(KmsOperation::Decrypt, "Decrypt")?;
        let s = self.lock();
        let key = s
            .keys
            .get(&request.key_id)
            .ok_or_else(|| KmsError::Failed {
                operation: "Decrypt",
                message: format!("unknown key id {:?}", request.key_id),
            })?;
        let plain = key
            .transform_from_storage(
                Bytes::copy_from_slice(&request.ciphertext),
                request.key_id.as_bytes(),
            )
            .map_err(|e| KmsError::Failed {
                operation: "Decrypt",
                message: e.to_string(),
            })?;
        Ok(plain.data.to_vec())
    }
}
