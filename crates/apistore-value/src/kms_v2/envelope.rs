//! The KMS v2 envelope transformer (kube's `envelopeTransformer` in
//! `kmsv2/envelope.go`); the plugin probe that keeps its write state (kube's
//! `kmsv2PluginProbe`) is in [`probe`].
//!
//! Writes seal each value with HKDF-SHA256 extended-nonce AES-GCM under a 32-byte seed
//! generated here, encrypted once by the plugin and reused until a health check sees
//! the plugin's key id change; a write state is good for 3 minutes after the last
//! healthy check, so a plugin that stays down stops writes but never reads. Reads
//! decrypt the DEK source through the plugin once and cache the result; a value whose
//! key id or source type differs from the current write state's is stale.

mod probe;

use std::sync::mpsc;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::cache::{DEFAULT_DEK_CACHE_SIZE, DekCache};
use super::encrypted_object::{EncryptedDekSourceType, EncryptedObject, key_id_hash};
use super::observer::{GRPC_CODE_OK, KmsObserver, ObserverSlot, method_name};
use super::service::{DecryptRequest, KmsError, KmsService};
use crate::{
    AesGcmExtendedNonceTransformer, AesGcmTransformer, Plaintext, Result, TransformError,
    TransformationType, Transformer, random,
};

/// The prefix of every KMS v2 value, before the provider name and `:`.
pub const KMS_V2_PREFIX: &str = "k8s:enc:kms:v2:";
/// kube's default plugin call timeout when the configuration gives none.
pub const DEFAULT_KMS_TIMEOUT: Duration = Duration::from_secs(3);
/// How long after a healthy check the plugin is checked again (kube's
/// `kmsv2PluginHealthzPositiveInterval`).
pub const HEALTHZ_POSITIVE_INTERVAL: Duration = Duration::from_secs(60);
/// How long after a failed check the plugin is checked again (kube's
/// `kmsv2PluginHealthzNegativeInterval`).
pub const HEALTHZ_NEGATIVE_INTERVAL: Duration = Duration::from_secs(10);
/// How long a DEK may be written with after the last healthy check (kube's
/// `kmsv2PluginWriteDEKSourceMaxTTL`).
pub const WRITE_DEK_SOURCE_MAX_TTL: Duration = Duration::from_secs(180);

/// The knobs of a [`KmsV2Envelope`].
#[derive(Debug, Clone)]
pub struct KmsV2Options {
    /// The longest a plugin call may take (the provider's `timeout`).
    pub timeout: Duration,
    /// How many decrypted DEK sources are kept.
    pub dek_cache_size: usize,
}

impl Default for KmsV2Options {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_KMS_TIMEOUT,
            dek_cache_size: DEFAULT_DEK_CACHE_SIZE,
        }
    }
}

/// What writes seal with: kube's `envelopekmsv2.State`.
#[derive(Debug)]
struct WriteState {
    transformer: Arc<dyn Transformer>,
    /// The object every write copies, without its data.
    object: EncryptedObject,
    /// The SHA-256 of the key id, as metrics label it.
    key_id_hash: String,
    cache_key: Vec<u8>,
    expires: Instant,
}

#[derive(Debug, Default)]
struct Health {
    last: Option<(Instant, std::result::Result<(), TransformError>)>,
    version: String,
}

/// A KMS v2 provider: a [`Transformer`] for the bytes after `k8s:enc:kms:v2:<name>:`.
///
/// Build it with [`KmsV2Envelope::new`], then [`KmsV2Envelope::check`] once to prime it
/// (a write or read does so itself when it finds no state). Health is checked again
/// on kube's schedule, lazily, by the writes that find the last check due.
#[derive(Debug)]
pub struct KmsV2Envelope {
    name: String,
    /// Where the plugin listens, when known: errors name it, since an operator's
    /// first question about a failing provider is which socket it talks to.
    endpoint: Option<String>,
    service: Arc<dyn KmsService>,
    options: KmsV2Options,
    cache: DekCache,
    state: RwLock<Option<Arc<WriteState>>>,
    health: Mutex<Health>,
    observer: ObserverSlot,
}

impl KmsV2Envelope {
    /// An envelope for the provider `name` over `service`, not yet primed.
    pub fn new(
        name: impl Into<String>,
        service: Arc<dyn KmsService>,
        options: KmsV2Options,
    ) -> Self {
        Self {
            name: name.into(),
            endpoint: None,
            cache: DekCache::new(options.dek_cache_size),
            service,
            options,
            state: RwLock::new(None),
            health: Mutex::new(Health::default()),
            observer: ObserverSlot::default(),
        }
    }

    /// Names the plugin's endpoint (`unix:///path`) in this envelope's errors.
    #[must_use]
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> Self {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The plugin's endpoint, when given with [`KmsV2Envelope::with_endpoint`].
    pub fn endpoint(&self) -> Option<&str> {
        self.endpoint.as_deref()
    }

    /// Reports this envelope's key id use, plugin calls and cache size to
    /// `observer` from now on (and the cache size at once). Takes `&self`: envelopes
    /// are shared by every transformer of a configuration.
    pub fn set_observer(&self, observer: Arc<dyn KmsObserver>) {
        observer.dek_source_cache_size(&self.name, self.cache.len(), self.cache.capacity());
        self.observer.set(observer);
    }

    fn observer(&self) -> Option<Arc<dyn KmsObserver>> {
        self.observer.get()
    }

    /// Caches a decrypted DEK source and reports the cache's new size.
    fn cache_set(&self, cache_key: &[u8], transformer: Arc<dyn Transformer>) {
        self.cache.set(cache_key, transformer);
        if let Some(observer) = self.observer() {
            observer.dek_source_cache_size(&self.name, self.cache.len(), self.cache.capacity());
        }
    }

    /// The provider name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The stored prefix of this provider's values: `k8s:enc:kms:v2:<name>:`.
    pub fn prefix(&self) -> String {
        format!("{KMS_V2_PREFIX}{}:", self.name)
    }

    /// The key id writes currently use, once primed.
    pub fn current_key_id(&self) -> Option<String> {
        self.current_state().map(|s| s.object.key_id.clone())
    }

    /// The outcome of the last health check, `None` before the first. Loading a
    /// configuration runs one, so a one-shot tool can say that a plugin is unhealthy
    /// even while writes still go through (as in kube, a failed check stops writes
    /// only once the DEK's write window has passed).
    pub fn last_check(&self) -> Option<Result<()>> {
        let health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        health.last.as_ref().map(|(_, result)| result.clone())
    }

    /// How many decrypted DEK sources are cached.
    pub fn cached_dek_sources(&self) -> usize {
        self.cache.len()
    }

    fn store_state(&self, state: WriteState) {
        *self.state.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(state));
    }

    fn current_state(&self) -> Option<Arc<WriteState>> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(Arc::clone)
    }

    /// The state, priming the envelope first if it has none; runs a due health check
    /// when `refresh` is set and no other caller is running one.
    fn state_for(&self, refresh: bool) -> Result<Arc<WriteState>> {
        if let Some(state) = self.current_state() {
            if refresh {
                self.check_if_due();
            }
            return Ok(self.current_state().unwrap_or(state));
        }
        let result = self.check();
        self.current_state().ok_or_else(|| {
            let why = match result {
                Err(e) => e.to_string(),
                Ok(()) => "no state after a healthy check".to_owned(),
            };
            self.error(format!(
                "KMS provider {} is not ready (no DEK from its plugin yet): {why}",
                self.name
            ))
        })
    }

    /// Calls the plugin on a worker thread, giving up after the provider's timeout.
    fn call<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&dyn KmsService) -> std::result::Result<T, KmsError> + Send + 'static,
    ) -> std::result::Result<T, KmsError> {
        let started = Instant::now();
        let result = self.call_with_timeout(operation, f);
        if let Some(observer) = self.observer() {
            let code = result
                .as_ref()
                .map_or_else(KmsError::grpc_status_code, |_| GRPC_CODE_OK);
            observer.kms_operation(&self.name, method_name(operation), code, started.elapsed());
        }
        result
    }

    fn call_with_timeout<T: Send + 'static>(
        &self,
        operation: &'static str,
        f: impl FnOnce(&dyn KmsService) -> std::result::Result<T, KmsError> + Send + 'static,
    ) -> std::result::Result<T, KmsError> {
        let service = Arc::clone(&self.service);
        let (tx, rx) = mpsc::sync_channel(1);
        let spawned = std::thread::Builder::new()
            .name(format!("kms-{operation}"))
            .spawn(move || {
                let _ = tx.send(f(service.as_ref()));
            });
        if let Err(e) = spawned {
            return Err(KmsError::Failed {
                operation,
                message: format!("could not start the call: {e}"),
            });
        }
        match rx.recv_timeout(self.options.timeout) {
            Ok(result) => result,
            Err(mpsc::RecvTimeoutError::Timeout) => Err(KmsError::Timeout {
                operation,
                after: self.options.timeout,
            }),
            Err(mpsc::RecvTimeoutError::Disconnected) => Err(KmsError::Failed {
                operation,
                message: "the call ended without an answer".to_owned(),
            }),
        }
    }

    fn error(&self, message: String) -> TransformError {
        match &self.endpoint {
            // An error that wraps another of this envelope already names it.
            Some(endpoint) if !message.contains(endpoint.as_str()) => {
                TransformError::Kms(format!("{message} (KMS plugin at {endpoint})"))
            }
            _ => TransformError::Kms(message),
        }
    }

    /// The transformer of a stored object's DEK source: the write state's, the
    /// cache's, or the plugin's answer (then cached).
    fn read_transformer(
        &self,
        object: &EncryptedObject,
        state: &WriteState,
    ) -> Result<Arc<dyn Transformer>> {
        let cache_key = object.cache_key();
        if cache_key == state.cache_key {
            return Ok(Arc::clone(&state.transformer));
        }
        if let Some(t) = self.cache.get(&cache_key) {
            return Ok(t);
        }
        let request = DecryptRequest {
            ciphertext: object.encrypted_dek_source.clone(),
            key_id: object.key_id.clone(),
            annotations: object.annotations.clone(),
        };
        let uid = new_uid();
        let key = self
            .call("Decrypt", move |s| s.decrypt(&uid, &request))
            .map_err(|e| {
                self.error(format!(
                    "failed to decrypt DEK with keyID hash {:?} of KMS provider {}, error: {e}",
                    key_id_hash(&object.key_id),
                    self.name
                ))
            })?;
        let transformer: Arc<dyn Transformer> = match object.encrypted_dek_source_type {
            EncryptedDekSourceType::HkdfSha256XnonceAesGcmSeed => {
                Arc::new(AesGcmExtendedNonceTransformer::new(&key)?)
            }
            EncryptedDekSourceType::AesGcmKey => Arc::new(AesGcmTransformer::new(&key)?),
        };
        self.cache_set(&cache_key, Arc::clone(&transformer));
        Ok(transformer)
    }
}

impl Transformer for KmsV2Envelope {
    fn transform_from_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Plaintext> {
        let object = EncryptedObject::decode(&data)?;
        let state = self.state_for(false)?;
        let transformer = self.read_transformer(&object, &state)?;
        if let Some(observer) = self.observer() {
            let hash = if object.key_id == state.object.key_id {
                state.key_id_hash.clone()
            } else {
                key_id_hash(&object.key_id)
            };
            observer.key_id_used(TransformationType::FromStorage, &self.name, &hash);
        }
        let plain = transformer
            .transform_from_storage(Bytes::from(object.encrypted_data), authenticated_data)?;
        let stale = plain.stale
            || object.key_id != state.object.key_id
            || object.encrypted_dek_source_type != state.object.encrypted_dek_source_type;
        Ok(Plaintext {
            data: plain.data,
            stale,
        })
    }

    fn transform_to_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Bytes> {
        let state = self.state_for(true)?;
        let now = Instant::now();
        if now > state.expires {
            return Err(self.error(format!(
                "encryptedDEKSource with keyID hash {:?} of KMS provider {} expired {}s ago",
                key_id_hash(&state.object.key_id),
                self.name,
                now.duration_since(state.expires).as_secs()
            )));
        }
        if let Some(observer) = self.observer() {
            observer.key_id_used(
                TransformationType::ToStorage,
                &self.name,
                &state.key_id_hash,
            );
        }
        let sealed = state
            .transformer
            .transform_to_storage(data, authenticated_data)?;
        let mut object = state.object.clone();
        object.encrypted_data = sealed.to_vec();
        Ok(Bytes::from(object.encode()?))
    }
}

/// A random (version 4) UUID for a plugin request, as kube sends.
fn new_uid() -> String {
    let mut b = [0u8; 16];
    if random::fill(&mut b).is_err() {
        return "00000000-0000-4000-8000-000000000000".to_owned();
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}
