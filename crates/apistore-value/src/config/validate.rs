//! Validation of a decoded configuration, after kube's
//! `pkg/apis/apiserver/validation/validation_encryption.go` and the masking check of
//! `pkg/server/options/encryptionconfig/config.go`. Every problem is collected, each
//! with its field path; keys are decoded and their ciphers built here, so that what
//! comes out holds ciphers, not secrets.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use base64::alphabet;
use base64::engine::{GeneralPurpose, GeneralPurposeConfig};

use super::error::ConfigError;
use super::provider::{self, ProviderKind};
use super::raw::{RawConfig, RawKey, RawResource};
use crate::Transformer;
use apistore_storage::GroupResource;

/// Go's `base64.StdEncoding`: padded standard alphabet, lenient about trailing bits.
const GO_STD_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
);

/// A validated `resources[]` entry.
#[derive(Debug)]
pub(crate) struct ResourceSpec {
    /// The resources as written, parsed.
    pub(crate) resources: Vec<GroupResource>,
    /// The providers, in order.
    pub(crate) providers: Vec<ProviderSpec>,
}

/// A validated provider.
#[derive(Debug)]
pub(crate) enum ProviderSpec {
    /// A keyed cipher provider and its keys, in order.
    Keyed(ProviderKind, Vec<KeySpec>),
    /// The identity provider.
    Identity,
    /// A `kms` provider (apiVersion v2) and its field path.
    Kms(super::kms::KmsProviderConfig, String),
}

/// A named key, already turned into its cipher.
pub(crate) struct KeySpec {
    pub(crate) name: String,
    pub(crate) transformer: Arc<dyn Transformer>,
}

impl fmt::Debug for KeySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

const API_VERSION: &str = "apiserver.config.k8s.io/v1";
const KIND: &str = "EncryptionConfiguration";
/// kube also registers the type as `v1`/`EncryptionConfig` (a historic docs bug).
const LEGACY_API_VERSION: &str = "v1";
const LEGACY_KIND: &str = "EncryptionConfig";

/// Checks the whole document and returns its entries, or every problem found.
pub(crate) fn validate(raw: RawConfig) -> Result<Vec<ResourceSpec>, ConfigError> {
    check_type(raw.api_version.as_deref(), raw.kind.as_deref())?;
    let entries = raw.resources.unwrap_or_default();
    if entries.is_empty() {
        return Err(required("resources", "at least one resources is required"));
    }
    let mut errors = Vec::new();
    let specs: Vec<ResourceSpec> = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| resource_entry(i, entry, &mut errors))
        .collect();
    super::kms::check_unique_names(&specs, &mut errors);
    if let Some(err) = ConfigError::reduce(errors) {
        return Err(err);
    }
    check_masking(&specs)?;
    Ok(specs)
}

fn check_type(api_version: Option<&str>, kind: Option<&str>) -> Result<(), ConfigError> {
    let api_version = api_version
        .filter(|v| !v.is_empty())
        .ok_or(ConfigError::MissingTypeField("apiVersion"))?;
    let kind = kind
        .filter(|k| !k.is_empty())
        .ok_or(ConfigError::MissingTypeField("Kind"))?;
    match (api_version, kind) {
        (API_VERSION, KIND) | (LEGACY_API_VERSION, LEGACY_KIND) => Ok(()),
        _ => Err(ConfigError::UnknownKind {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        }),
    }
}

pub(super) fn required(field: impl Into<String>, detail: impl Into<String>) -> ConfigError {
    ConfigError::Required {
        field: field.into(),
        detail: detail.into(),
    }
}

fn resource_entry(i: usize, entry: RawResource, errors: &mut Vec<ConfigError>) -> ResourceSpec {
    let r = format!("resources[{i}].resources");
    let p = format!("resources[{i}].providers");
    let names = entry.resources.unwrap_or_default();
    if names.is_empty() {
        errors.push(required(&r, format!("at least one {r} is required")));
    }
    check_overlap(&names, &r, errors);
    check_names(&names, &r, errors);
    let raw_providers = entry.providers.unwrap_or_default();
    if raw_providers.is_empty() {
        errors.push(required(&p, format!("at least one {p} is required")));
    }
    let providers = raw_providers
        .into_iter()
        .enumerate()
        .filter_map(|(j, value)| provider::decode(value, &format!("{p}[{j}]"), errors))
        .collect();
    ResourceSpec {
        resources: names.iter().map(|n| GroupResource::parse(n)).collect(),
        providers,
    }
}

/// kube's `validateResourceOverlap`: duplicates, and wildcards beside what they cover.
fn check_overlap(names: &[String], field: &str, errors: &mut Vec<ConfigError>) {
    if names.len() < 2 {
        return;
    }
    let parsed: Vec<GroupResource> = names.iter().map(|n| GroupResource::parse(n)).collect();
    let any = GroupResource::any();
    let (mut overlap, mut duplicate) = (false, false);
    for (i, r1) in parsed.iter().enumerate() {
        for (j, r2) in parsed.iter().enumerate() {
            if i == j {
                continue;
            }
            if r1 == r2 && !duplicate {
                duplicate = true;
                continue;
            }
            if overlap {
                continue;
            }
            if *r1 == any || (r1.group == r2.group && (r1.is_wildcard() || r2.is_wildcard())) {
                overlap = true;
            }
        }
    }
    let invalid = |detail: &str| ConfigError::Invalid {
        field: field.to_owned(),
        value: format!("{names:?}"),
        detail: detail.to_owned(),
    };
    if duplicate {
        errors.push(invalid(
            "the same resource cannot be specified multiple times",
        ));
    }
    if overlap {
        errors.push(invalid(
            "using overlapping resources such as 'secrets' and '*.' in the same resource list is not allowed as they will be masked",
        ));
    }
}

/// kube's `validateResourceNames`.
fn check_names(names: &[String], field: &str, errors: &mut Vec<ConfigError>) {
    for (j, name) in names.iter().enumerate() {
        let gr = GroupResource::parse(name);
        let detail = if name.chars().any(char::is_uppercase) {
            "resource name should not contain capital letters"
        } else if name == "*" {
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources"
        } else if matches!(
            name.as_str(),
            "apiserveripinfo" | "serviceipallocations" | "servicenodeportallocations"
        ) {
            "resources which do not have REST API/s cannot be encrypted"
        } else if gr.group == "events.k8s.io" {
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file"
        } else if gr.group == "extensions" {
            "'extensions' group has been removed and cannot be used for encryption"
        } else if gr.group == "*" && gr.resource != "*" {
            "encrypting the same resource across groups is not supported"
        } else {
            continue;
        };
        errors.push(ConfigError::Invalid {
            field: format!("{field}[{j}]"),
            value: format!("{name:?}"),
            detail: detail.to_owned(),
        });
    }
}

/// Decodes and checks one provider's keys, building a cipher for each.
pub(super) fn keys(
    kind: ProviderKind,
    raw: Vec<RawKey>,
    field: &str,
    errors: &mut Vec<ConfigError>,
) -> Vec<KeySpec> {
    if raw.is_empty() {
        errors.push(required(field, "at least one keys is required"));
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (k, key) in raw.into_iter().enumerate() {
        let kp = format!("{field}[{k}]");
        let name = key.name.unwrap_or_default();
        if name.is_empty() {
            errors.push(required(
                format!("{kp}.name"),
                "name is a mandatory field for a key",
            ));
        } else if !seen.insert(name.clone()) {
            errors.push(ConfigError::DuplicateKeyName {
                field: format!("{kp}.name"),
                key: name.clone(),
            });
        }
        let secret = key.secret.map(|s| s.0).unwrap_or_default();
        if secret.is_empty() {
            errors.push(required(
                format!("{kp}.secret"),
                "secret is a mandatory field for a key",
            ));
            continue;
        }
        // Go's decoder skips line breaks; so does this.
        let compact: String = secret
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n'))
            .collect();
        let Ok(bytes) = GO_STD_BASE64.decode(compact.as_bytes()) else {
            errors.push(ConfigError::SecretNotBase64 {
                field: format!("{kp}.secret"),
                key: name,
            });
            continue;
        };
        if !kind.key_sizes().contains(&bytes.len()) {
            errors.push(ConfigError::KeySize {
                field: format!("{kp}.secret"),
                key: name,
                got: bytes.len(),
                expected: kind.key_sizes(),
            });
            continue;
        }
        match kind.cipher(&bytes) {
            Ok(transformer) => out.push(KeySpec { name, transformer }),
            Err(err) => errors.push(ConfigError::Cipher {
                field: format!("{kp}.secret"),
                key: name,
                message: err.to_string(),
            }),
        }
    }
    out
}

/// kube refuses a resource listed after a wildcard rule that covers it, since the
/// later rule could never apply.
fn check_masking(specs: &[ResourceSpec]) -> Result<(), ConfigError> {
    let mut seen: HashSet<&GroupResource> = HashSet::new();
    let any = GroupResource::any();
    for spec in specs {
        for gr in &spec.resources {
            let group_rule = gr.any_in_group();
            for rule in [&group_rule, &any] {
                if seen.contains(rule) {
                    return Err(ConfigError::Masked {
                        resource: gr.to_string(),
                        rule: rule.to_string(),
                    });
                }
            }
            seen.insert(gr);
        }
    }
    Ok(())
}
