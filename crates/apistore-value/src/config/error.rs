//! [`ConfigError`]: why an `EncryptionConfiguration` was refused.
//!
//! Field paths are kube's (`resources[0].providers[1].aesgcm.keys[2].secret`), so each
//! error names the resource entry, the provider and the key it is about; key errors
//! also give the key's name. Secrets never appear: where kube prints a value for a
//! secret it prints `"REDACTED"`, and so does this.

use std::path::PathBuf;
use std::sync::Arc;

/// Why an encryption configuration could not be loaded.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("error reading encryption provider configuration file {path:?}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// The file is empty.
    #[error("encryption provider configuration file {path:?} is empty")]
    EmptyFile {
        /// The file.
        path: PathBuf,
    },
    /// An error in a configuration read from a file.
    #[error("error while parsing encryption provider configuration file {path:?}: {source}")]
    InFile {
        /// The file.
        path: PathBuf,
        /// What was wrong with its content.
        #[source]
        source: Box<Self>,
    },
    /// The text is not YAML or JSON of the expected shape (unknown field, wrong type,
    /// syntax error). `field` is where, when known.
    #[error("error decoding encryption provider configuration{}: {message}", at(.field))]
    Decode {
        /// The field path, when the error is inside a provider.
        field: Option<String>,
        /// The decoder's message.
        message: String,
    },
    /// `apiVersion` or `kind` is missing.
    #[error("Object '{0}' is missing in the encryption provider configuration")]
    MissingTypeField(&'static str),
    /// `apiVersion`/`kind` is not `apiserver.config.k8s.io/v1`/`EncryptionConfiguration`
    /// (nor the legacy `v1`/`EncryptionConfig`).
    #[error("no kind {kind:?} is registered for version {api_version:?}")]
    UnknownKind {
        /// The `apiVersion` given.
        api_version: String,
        /// The `kind` given.
        kind: String,
    },
    /// A required field is missing or empty.
    #[error("{field}: Required value: {detail}")]
    Required {
        /// The field path.
        field: String,
        /// What is required.
        detail: String,
    },
    /// A field has a value kube-apiserver refuses (resource names, overlapping rules).
    #[error("{field}: Invalid value: {value}: {detail}")]
    Invalid {
        /// The field path.
        field: String,
        /// The value given, quoted.
        value: String,
        /// Why it is refused.
        detail: String,
    },
    /// A provider element names none of the known providers.
    #[error(
        "{field}: Invalid value: {given:?}: provider does not contain any of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"
    )]
    UnknownProvider {
        /// The provider's field path (`resources[i].providers[j]`).
        field: String,
        /// The names given in the element.
        given: Vec<String>,
    },
    /// A provider element names more than one provider.
    #[error(
        "{field}: Invalid value: {given:?}: more than one provider specified in a single element, should split into different list elements"
    )]
    MultipleProviders {
        /// The provider's field path.
        field: String,
        /// The providers named.
        given: Vec<String>,
    },
    /// A provider kube-apiserver knows but apistore does not implement.
    #[error(
        "{field}: the {provider} provider is not supported by apistore; use aesgcm, aescbc, secretbox or identity"
    )]
    UnsupportedProvider {
        /// The provider's field path.
        field: String,
        /// The provider (`kms`).
        provider: String,
    },
    /// The configuration has `kms` providers but was loaded without a
    /// [`KmsConnector`](super::KmsConnector) to reach their plugins.
    #[error(
        "{field}: the kms provider {name:?} needs a KMS plugin connection; load the configuration with EncryptionConfig::parse_with_kms or from_file_with_kms"
    )]
    KmsWithoutConnector {
        /// The provider's field path.
        field: String,
        /// The provider's name.
        name: String,
    },
    /// A `kms` provider's plugin could not be set up.
    #[error("{field}: could not configure KMSv2 plugin {name:?}, error: {message}")]
    KmsConnect {
        /// The provider's field path.
        field: String,
        /// The provider's name.
        name: String,
        /// Why.
        message: String,
    },
    /// A key's secret is not standard base64.
    #[error("{field}: Invalid value: \"REDACTED\": secrets must be base64 encoded (key {key:?})")]
    SecretNotBase64 {
        /// The secret's field path.
        field: String,
        /// The key's name.
        key: String,
    },
    /// A key's secret decodes to a size the provider's cipher cannot use.
    #[error(
        "{field}: Invalid value: \"REDACTED\": secret is not of the expected length, got {got}, expected one of {} (key {key:?})",
        sizes(.expected)
    )]
    KeySize {
        /// The secret's field path.
        field: String,
        /// The key's name.
        key: String,
        /// The decoded size.
        got: usize,
        /// The sizes the provider accepts.
        expected: &'static [usize],
    },
    /// Two keys of one provider share a name, so their stored prefixes would collide.
    /// (kube-apiserver accepts this and tries both; apistore refuses it.)
    #[error("{field}: Duplicate value: {key:?}: key names must be unique within a provider")]
    DuplicateKeyName {
        /// The later key's name field path.
        field: String,
        /// The repeated name.
        key: String,
    },
    /// A resource is listed after a wildcard rule that already covers it.
    #[error("resource {resource:?} is masked by earlier rule {rule:?}")]
    Masked {
        /// The resource as written.
        resource: String,
        /// The earlier wildcard rule.
        rule: String,
    },
    /// A cipher refused a key that validation accepted (not expected to happen).
    #[error("{field}: error while creating transformer for named key {key}: {message}")]
    Cipher {
        /// The key's field path.
        field: String,
        /// The key's name.
        key: String,
        /// The cipher's message.
        message: String,
    },
    /// Several of the above, shown as kube shows an aggregate: `[a, b]`.
    #[error("[{}]", join(.0))]
    Multiple(Vec<Self>),
}

impl ConfigError {
    /// One error as it is, several as [`ConfigError::Multiple`], none as `None`.
    pub(crate) fn reduce(mut errors: Vec<Self>) -> Option<Self> {
        match errors.len() {
            0 => None,
            1 => errors.pop(),
            _ => Some(Self::Multiple(errors)),
        }
    }
}

fn at(field: &Option<String>) -> String {
    field
        .as_ref()
        .map(|f| format!(" at {f}"))
        .unwrap_or_default()
}

fn sizes(expected: &[usize]) -> String {
    let list: Vec<String> = expected.iter().map(ToString::to_string).collect();
    format!("[{}]", list.join(" "))
}

fn join(errors: &[ConfigError]) -> String {
    let list: Vec<String> = errors.iter().map(ToString::to_string).collect();
    list.join(", ")
}
