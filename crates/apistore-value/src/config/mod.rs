//! The `EncryptionConfiguration` file (`apiserver.config.k8s.io/v1`), as kube-apiserver's
//! `--encryption-provider-config` reads it (`pkg/server/options/encryptionconfig/config.go`,
//! `pkg/apis/apiserver/validation/validation_encryption.go`).
//!
//! ```yaml
//! apiVersion: apiserver.config.k8s.io/v1
//! kind: EncryptionConfiguration
//! resources:
//!   - resources: [secrets, "*.apps"]
//!     providers:
//!       - aesgcm:
//!           keys:
//!             - name: key1
//!               secret: c2VjcmV0IGlzIHNlY3VyZQ==
//!       - identity: {}
//! ```
//!
//! YAML or JSON. Providers: `aesgcm`, `aescbc`, `secretbox`, `identity`, and `kms` at
//! `apiVersion: v2` (loaded with [`EncryptionConfig::parse_with_kms`] or
//! [`EncryptionConfig::from_file_with_kms`], given a [`KmsConnector`] that reaches
//! the plugins; KMS v1 is refused). Secrets are standard base64 of 16, 24 or 32 bytes (AES) or
//! 32 bytes (secretbox). Resources are `resource` or `resource.group`, with wildcards
//! `*.` (core group), `*.group` and `*.*`; a resource's own rule wins over its group's,
//! which wins over `*.*`, and a resource not covered at all is stored as it is (with the
//! identity check that refuses encrypted data). Unlike kube-apiserver, two keys of one
//! provider may not share a name. The file is read once: there is no reloading.

mod build;
mod error;
mod kms;
mod provider;
mod raw;
mod validate;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod validation_tests;

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;

pub use apistore_storage::GroupResource;
pub use error::ConfigError;
pub use kms::{KmsConnector, KmsProviderConfig, ObservedKmsConnector};
pub use provider::{AESCBC_PREFIX, AESGCM_PREFIX, ProviderKind, SECRETBOX_PREFIX};

use crate::kms_v2::{KmsObserver, KmsV2Envelope, KmsV2Options};
use crate::{NoopObserver, TransformObserver, Transformer};
use validate::{ProviderSpec, ResourceSpec};

/// A loaded, validated encryption configuration: a transformer per resource.
///
/// Holds ciphers, not secrets, and its `Debug` shows resources, providers and key
/// names only.
pub struct EncryptionConfig {
    specs: Vec<ResourceSpec>,
    kms: HashMap<String, Arc<KmsV2Envelope>>,
    /// Where the transformers made from now on report their transformations.
    observer: Arc<dyn TransformObserver>,
}

impl EncryptionConfig {
    /// Reads and parses the configuration file at `path`.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ConfigError> {
        Self::read_file(path.as_ref(), None)
    }

    /// Reads the configuration file at `path`, reaching its `kms` providers' plugins
    /// through `connector`.
    pub fn from_file_with_kms(
        path: impl AsRef<Path>,
        connector: &dyn KmsConnector,
    ) -> Result<Self, ConfigError> {
        Self::read_file(path.as_ref(), Some(connector))
    }

    fn read_file(path: &Path, connector: Option<&dyn KmsConnector>) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source: Arc::new(source),
        })?;
        if text.is_empty() {
            return Err(ConfigError::EmptyFile {
                path: path.to_owned(),
            });
        }
        Self::load(&text, connector).map_err(|source| ConfigError::InFile {
            path: path.to_owned(),
            source: Box::new(source),
        })
    }

    /// Parses and validates a configuration given as YAML or JSON text.
    ///
    /// A configuration with `kms` providers needs [`EncryptionConfig::parse_with_kms`].
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        Self::load(text, None)
    }

    /// Parses and validates a configuration, reaching its `kms` providers' plugins
    /// through `connector`. Each provider's envelope is primed (a first health check
    /// and DEK seed); a plugin that is down does not fail loading, as in kube: the
    /// envelope retries when it is next used.
    pub fn parse_with_kms(text: &str, connector: &dyn KmsConnector) -> Result<Self, ConfigError> {
        Self::load(text, Some(connector))
    }

    fn load(text: &str, connector: Option<&dyn KmsConnector>) -> Result<Self, ConfigError> {
        let raw: raw::RawConfig =
            serde_norway::from_str(text).map_err(|err| ConfigError::Decode {
                field: None,
                message: err.to_string(),
            })?;
        let specs = validate::validate(raw)?;
        let kms = connect_kms(&specs, connector)?;
        Ok(Self {
            specs,
            kms,
            observer: Self::noop(),
        })
    }

    /// Makes the transformers handed out from now on report their transformations to
    /// `observer`, with kube's `transformer_prefix` labels at both provider and key
    /// level and the resource they were made for.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn TransformObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Reports every `kms` provider's key id use, plugin calls and DEK cache size to
    /// `observer` from now on (kube's `apiserver_envelope_encryption_*` metrics). The
    /// envelopes are shared, so this holds for every transformer of the configuration.
    /// The health check loading ran is not reported: to have it too, load with an
    /// [`ObservedKmsConnector`].
    #[must_use]
    pub fn with_kms_observer(self, observer: Arc<dyn KmsObserver>) -> Self {
        for envelope in self.kms.values() {
            envelope.set_observer(Arc::clone(&observer));
        }
        self
    }

    /// The transformer for a group-resource written as in the configuration:
    /// `secrets`, `deployments.apps`. Identity when the configuration does not cover it.
    pub fn transformer_for(&self, group_resource: &str) -> Arc<dyn Transformer> {
        self.transformer_for_resource(&GroupResource::parse(group_resource))
    }

    /// The transformer for a parsed group-resource, made for it: its transformations
    /// are observed under its name, also when a wildcard rule covers it.
    pub fn transformer_for_resource(&self, group_resource: &GroupResource) -> Arc<dyn Transformer> {
        build::transformer_for(&self.specs, group_resource, &self.observer, &self.kms)
    }

    /// The resources and wildcard rules the configuration names, in file order.
    pub fn resources(&self) -> impl Iterator<Item = &GroupResource> {
        self.specs.iter().flat_map(|s| s.resources.iter())
    }

    /// The write provider of a group-resource: the first provider that applies to it,
    /// `None` for identity (including resources the configuration does not cover).
    pub fn write_provider(&self, group_resource: &str) -> Option<ProviderKind> {
        match self.spec_for(group_resource)?.providers.first()? {
            ProviderSpec::Keyed(kind, _) => Some(*kind),
            ProviderSpec::Identity => None,
            ProviderSpec::Kms(..) => Some(ProviderKind::Kms),
        }
    }

    /// What a group-resource's values can be read with, in the order they are tried,
    /// named as a stored value's prefix names them: `aesgcm:key1` (provider and key
    /// name, for `k8s:enc:aesgcm:v1:key1:`), `kms:<name>` (for `k8s:enc:kms:v2:<name>:`),
    /// `identity`. Empty when the configuration does not cover the resource. For
    /// saying which key a value needs that the file does not have.
    pub fn read_keys(&self, group_resource: &str) -> Vec<String> {
        let Some(spec) = self.spec_for(group_resource) else {
            return Vec::new();
        };
        spec.providers
            .iter()
            .flat_map(|provider| match provider {
                ProviderSpec::Keyed(kind, keys) => keys
                    .iter()
                    .map(|key| format!("{}:{}", kind.name(), key.name))
                    .collect(),
                ProviderSpec::Identity => vec!["identity".to_owned()],
                ProviderSpec::Kms(config, _) => vec![format!("kms:{}", config.name)],
            })
            .collect()
    }

    /// The entry of the file that applies to a group-resource: its own rule, else its
    /// group's wildcard, else `*.*` (kube's precedence).
    fn spec_for(&self, group_resource: &str) -> Option<&ResourceSpec> {
        let rule = build::rule_for(&self.specs, &GroupResource::parse(group_resource))?;
        self.specs.iter().find(|s| s.resources.contains(&rule))
    }

    /// The `kms` providers' envelopes, for health checks
    /// ([`KmsV2Envelope::check`]) on the caller's schedule.
    pub fn kms_providers(&self) -> impl Iterator<Item = &Arc<KmsV2Envelope>> {
        self.kms.values()
    }

    fn noop() -> Arc<dyn TransformObserver> {
        Arc::new(NoopObserver)
    }
}

impl fmt::Debug for EncryptionConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptionConfig")
            .field("resources", &self.specs)
            .finish()
    }
}

/// One envelope per `kms` provider name, connected and primed.
fn connect_kms(
    specs: &[ResourceSpec],
    connector: Option<&dyn KmsConnector>,
) -> Result<HashMap<String, Arc<KmsV2Envelope>>, ConfigError> {
    let mut out = HashMap::new();
    for provider in specs.iter().flat_map(|s| s.providers.iter()) {
        let ProviderSpec::Kms(config, path) = provider else {
            continue;
        };
        let Some(connector) = connector else {
            return Err(ConfigError::KmsWithoutConnector {
                field: path.clone(),
                name: config.name.clone(),
            });
        };
        let service = connector
            .connect(config)
            .map_err(|err| ConfigError::KmsConnect {
                field: path.clone(),
                name: config.name.clone(),
                message: err.to_string(),
            })?;
        let options = KmsV2Options {
            timeout: config.timeout,
            ..KmsV2Options::default()
        };
        let envelope = KmsV2Envelope::new(config.name.clone(), service, options)
            .with_endpoint(config.endpoint.clone());
        if let Some(observer) = connector.observer() {
            envelope.set_observer(observer);
        }
        // kube primes in the background and keeps retrying; a failure here is
        // retried by the envelope's next read or write.
        let _primed = envelope.check();
        out.insert(config.name.clone(), Arc::new(envelope));
    }
    Ok(out)
}
