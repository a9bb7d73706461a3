//! The plugin probe that keeps an envelope's write state (kube's `kmsv2PluginProbe`
//! in `pkg/server/options/encryptionconfig/config.go`): the health check, on kube's
//! schedule, and a new DEK seed whenever the plugin's key id changes.

use std::sync::Arc;
use std::time::Instant;

use super::{
    HEALTHZ_NEGATIVE_INTERVAL, HEALTHZ_POSITIVE_INTERVAL, Health, KmsV2Envelope,
    WRITE_DEK_SOURCE_MAX_TTL, WriteState, new_uid,
};
use crate::kms_v2::encrypted_object::{
    EncryptedDekSourceType, EncryptedObject, key_id_hash, validate_key_id,
};
use crate::kms_v2::service::StatusResponse;
use crate::{
    AesGcmExtendedNonceTransformer, EXTENDED_NONCE_INFO_SIZE, Result, Transformer, random,
};

impl KmsV2Envelope {
    /// kube's health check: `Status`, then the checks of
    /// `isKMSv2ProviderHealthyAndMaybeRotateDEK` (healthz `ok`, version `v2`, a valid
    /// key id) and a new DEK seed when the key id changed. A healthy check extends
    /// the write state's life by [`WRITE_DEK_SOURCE_MAX_TTL`]; a failed one leaves
    /// the state as it was, usable for writes until it expires.
    pub fn check(&self) -> Result<()> {
        let mut health = self.health.lock().unwrap_or_else(|e| e.into_inner());
        let result = self.check_locked(&mut health);
        health.last = Some((Instant::now(), result.clone()));
        result
    }

    fn check_locked(&self, health: &mut Health) -> Result<()> {
        let status = self
            .call("Status", |s| s.status())
            .map_err(|e| {
                self.error(format!(
                    "failed to perform status section of the healthz check for KMS Provider {}, error: {e}",
                    self.name
                ))
            })?;
        let mut errors = self.status_errors(&status, health);
        let observer = self.observer();
        if let Err(e) = validate_key_id(&status.key_id) {
            if let Some(observer) = &observer {
                // kube's ErrCodeKeyID values.
                let code = if status.key_id.is_empty() {
                    "empty"
                } else {
                    "too_long"
                };
                observer.invalid_key_id_from_status(&self.name, code);
            }
            errors.push(format!(
                "got invalid KMSv2 KeyID hash {:?}: {e}",
                key_id_hash(&status.key_id)
            ));
        } else {
            if let Some(observer) = &observer {
                observer.key_id_from_status(&self.name, &key_id_hash(&status.key_id));
            }
            if let Err(e) = self.rotate_on_key_id_change(&status.key_id) {
                errors.push(e);
            }
        }
        if errors.is_empty() {
            return Ok(());
        }
        let joined = if errors.len() == 1 {
            errors.remove(0)
        } else {
            format!("[{}]", errors.join(", "))
        };
        Err(self.error(format!(
            "kmsv2 Provider {} is not healthy, error: {joined}",
            self.name
        )))
    }

    fn status_errors(&self, status: &StatusResponse, health: &mut Health) -> Vec<String> {
        let mut errors = Vec::new();
        if status.healthz != "ok" {
            errors.push(format!("got unexpected healthz status: {}", status.healthz));
        }
        if status.version != "v2" && status.version != "v2beta1" {
            errors.push(format!(
                "expected KMSv2 API version v2, got {}",
                status.version
            ));
        } else {
            if health.version.is_empty() {
                health.version.clone_from(&status.version);
            }
            if health.version != status.version {
                errors.push(format!(
                    "KMSv2 API version should not change after the initial status response version {}, got {}",
                    health.version, status.version
                ));
            }
        }
        errors
    }

    /// kube's `rotateDEKOnKeyIDChange`.
    fn rotate_on_key_id_change(&self, status_key_id: &str) -> std::result::Result<(), String> {
        let expires = Instant::now() + WRITE_DEK_SOURCE_MAX_TTL;
        let current = self.current_state();
        if let Some(state) = &current {
            if state.object.key_id == status_key_id {
                let renewed = WriteState {
                    transformer: Arc::clone(&state.transformer),
                    object: state.object.clone(),
                    key_id_hash: state.key_id_hash.clone(),
                    cache_key: state.cache_key.clone(),
                    expires,
                };
                self.store_state(renewed);
                return Ok(());
            }
        }
        let uid = new_uid();
        let generated = self.generate(&uid);
        match generated {
            Ok((transformer, object)) if object.key_id == status_key_id => {
                let cache_key = object.cache_key();
                self.cache_set(&cache_key, Arc::clone(&transformer));
                self.store_state(WriteState {
                    transformer,
                    key_id_hash: key_id_hash(&object.key_id),
                    object,
                    cache_key,
                    expires,
                });
                Ok(())
            }
            other => {
                let (err, encrypt_key_id) = match other {
                    Ok((_, object)) => (String::from("<nil>"), object.key_id),
                    Err(e) => (e.to_string(), String::new()),
                };
                Err(format!(
                    "failed to rotate DEK uid={uid:?}, useSeed=true, errGen={err}, statusKeyIDHash={:?}, encryptKeyIDHash={:?}, stateKeyIDHash={:?}",
                    key_id_hash(status_key_id),
                    key_id_hash(&encrypt_key_id),
                    key_id_hash(current.as_ref().map_or("", |s| s.object.key_id.as_str())),
                ))
            }
        }
    }

    /// kube's `GenerateTransformer` with a seed: a new seed, encrypted by the plugin.
    fn generate(&self, uid: &str) -> Result<(Arc<dyn Transformer>, EncryptedObject)> {
        let mut seed = vec![0u8; EXTENDED_NONCE_INFO_SIZE];
        random::fill(&mut seed)?;
        let transformer: Arc<dyn Transformer> =
            Arc::new(AesGcmExtendedNonceTransformer::new(&seed)?);
        let owned_uid = uid.to_owned();
        let response = self
            .call("Encrypt", move |s| s.encrypt(&owned_uid, &seed))
            .map_err(|e| self.error(format!("failed to encrypt DEK, error: {e}")))?;
        let mut object = EncryptedObject {
            encrypted_data: vec![0],
            key_id: response.key_id,
            encrypted_dek_source: response.ciphertext,
            annotations: response.annotations,
            encrypted_dek_source_type: EncryptedDekSourceType::HkdfSha256XnonceAesGcmSeed,
        };
        object.validate()?;
        object.encrypted_data.clear();
        Ok((transformer, object))
    }

    pub(super) fn check_if_due(&self) {
        let Ok(mut health) = self.health.try_lock() else {
            return;
        };
        let due = match &health.last {
            None => true,
            Some((at, Ok(()))) => at.elapsed() >= HEALTHZ_POSITIVE_INTERVAL,
            Some((at, Err(_))) => at.elapsed() >= HEALTHZ_NEGATIVE_INTERVAL,
        };
        if due {
            let result = self.check_locked(&mut health);
            health.last = Some((Instant::now(), result));
        }
    }
}
