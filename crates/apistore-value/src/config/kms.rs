//! The `kms` provider of an encryption configuration (kube's `KMSConfiguration`,
//! defaulted as `pkg/apis/apiserver/v1/defaults.go` and validated as
//! `validateKMSConfiguration` does), and the [`KmsConnector`] that turns a validated
//! provider into a plugin connection when the configuration is loaded.
//!
//! Only `apiVersion: v2` is offered: KMS v1 (also the default when `apiVersion` is
//! left out) is deprecated upstream and refused here with a message saying so.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::error::ConfigError;
use super::validate::{ProviderSpec, ResourceSpec, required};
use crate::kms_v2::{DEFAULT_KMS_TIMEOUT, KmsError, KmsObserver, KmsService};

/// A validated `kms` provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KmsProviderConfig {
    /// The provider name, unique in the configuration; part of the stored prefix
    /// `k8s:enc:kms:v2:<name>:`.
    pub name: String,
    /// The plugin's endpoint, `unix:///path/to/socket` (or `unix://@abstract`).
    pub endpoint: String,
    /// The longest a plugin call may take (default 3 s).
    pub timeout: Duration,
}

impl KmsProviderConfig {
    /// The socket path of the endpoint (what follows `unix://`).
    pub fn socket_path(&self) -> &str {
        self.endpoint
            .strip_prefix("unix://")
            .unwrap_or(&self.endpoint)
    }
}

/// Connects the `kms` providers of a configuration to their plugins.
pub trait KmsConnector {
    /// The plugin for one provider. Called once per provider name while loading; a
    /// plugin that is not up yet should still give a service (the envelope checks
    /// health itself and retries), an error is for a provider that can never work.
    fn connect(&self, provider: &KmsProviderConfig) -> Result<Arc<dyn KmsService>, KmsError>;

    /// Where every provider's envelope reports its key id use, plugin calls and DEK
    /// cache size, from the first health check loading runs on (kube's envelope
    /// metrics are registered before its configuration loads). None by default; see
    /// [`ObservedKmsConnector`].
    fn observer(&self) -> Option<Arc<dyn KmsObserver>> {
        None
    }
}

/// A connector whose envelopes report to `observer` from their priming check on.
pub struct ObservedKmsConnector<'a> {
    /// Connects the providers.
    pub connector: &'a dyn KmsConnector,
    /// Receives what every envelope of the configuration reports.
    pub observer: Arc<dyn KmsObserver>,
}

impl KmsConnector for ObservedKmsConnector<'_> {
    fn connect(&self, provider: &KmsProviderConfig) -> Result<Arc<dyn KmsService>, KmsError> {
        self.connector.connect(provider)
    }

    fn observer(&self) -> Option<Arc<dyn KmsObserver>> {
        Some(Arc::clone(&self.observer))
    }
}

impl<F> KmsConnector for F
where
    F: Fn(&KmsProviderConfig) -> Result<Arc<dyn KmsService>, KmsError>,
{
    fn connect(&self, provider: &KmsProviderConfig) -> Result<Arc<dyn KmsService>, KmsError> {
        self(provider)
    }
}

/// The body of a `kms` provider as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKms {
    #[serde(rename = "apiVersion", default)]
    api_version: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    cachesize: Option<i64>,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
}

/// Decodes and validates one `kms` provider found at `path` (`...providers[j].kms`).
pub(super) fn decode(
    body: serde_norway::Value,
    path: &str,
    errors: &mut Vec<ConfigError>,
) -> Option<ProviderSpec> {
    let raw: RawKms = match serde_norway::from_value(body) {
        Ok(raw) => raw,
        Err(err) => {
            errors.push(ConfigError::Decode {
                field: Some(path.to_owned()),
                message: err.to_string(),
            });
            return None;
        }
    };
    let before = errors.len();
    let invalid = |field: &str, value: String, detail: String| ConfigError::Invalid {
        field: format!("{path}.{field}"),
        value,
        detail,
    };
    let api_version = raw.api_version.unwrap_or_else(|| "v1".to_owned());
    let name = raw.name.unwrap_or_default();
    if name.is_empty() {
        errors.push(required(
            format!("{path}.name"),
            "name is a mandatory field for a provider",
        ));
    }
    if api_version != "v1" && name.contains(':') {
        errors.push(invalid(
            "name",
            format!("{name:?}"),
            format!("invalid KMS provider name {name}, must not contain ':'"),
        ));
    }
    let timeout = match raw.timeout.as_deref().map(parse_go_duration) {
        None => Some(DEFAULT_KMS_TIMEOUT),
        Some(Ok(Some(d))) if !d.is_zero() => Some(d),
        Some(Ok(_)) => {
            errors.push(invalid(
                "timeout",
                format!("{:?}", raw.timeout.unwrap_or_default()),
                "timeout should be a positive value".to_owned(),
            ));
            None
        }
        Some(Err(message)) => {
            errors.push(ConfigError::Decode {
                field: Some(format!("{path}.timeout")),
                message,
            });
            None
        }
    };
    let endpoint = raw.endpoint.unwrap_or_default();
    if endpoint.is_empty() {
        errors.push(invalid(
            "endpoint",
            "\"\"".to_owned(),
            "endpoint is a mandatory field for a kms".to_owned(),
        ));
    } else {
        let scheme = endpoint.split_once("://").map_or("", |(s, _)| s);
        if scheme != "unix" {
            errors.push(invalid(
                "endpoint",
                format!("{endpoint:?}"),
                format!("unsupported scheme {scheme:?} for KMS provider, only unix is supported"),
            ));
        }
    }
    if api_version != "v1" {
        if let Some(size) = raw.cachesize {
            errors.push(invalid(
                "cachesize",
                size.to_string(),
                "cachesize is not supported in v2".to_owned(),
            ));
        }
    }
    match api_version.as_str() {
        "v2" => {}
        "v1" => errors.push(invalid(
            "apiVersion",
            "\"v1\"".to_owned(),
            "KMS v1 is deprecated upstream and not supported by apistore; use apiVersion: v2 \
             (v1 is also the default when apiVersion is left out)"
                .to_owned(),
        )),
        other => errors.push(invalid(
            "apiVersion",
            format!("{other:?}"),
            format!(
                "unsupported apiVersion {other} for KMS provider, only v1 and v2 are supported"
            ),
        )),
    }
    if errors.len() != before {
        return None;
    }
    Some(ProviderSpec::Kms(
        KmsProviderConfig {
            name,
            endpoint,
            timeout: timeout?,
        },
        path.to_owned(),
    ))
}

/// kube's `validateKMSConfigName` across the file: KMS v2 names are unique, since the
/// name selects the provider of a stored value.
pub(super) fn check_unique_names(specs: &[ResourceSpec], errors: &mut Vec<ConfigError>) {
    let mut seen = HashSet::new();
    for spec in specs {
        for provider in &spec.providers {
            if let ProviderSpec::Kms(config, path) = provider {
                if !seen.insert(config.name.as_str()) {
                    errors.push(ConfigError::Invalid {
                        field: format!("{path}.name"),
                        value: format!("{:?}", config.name),
                        detail: format!(
                            "duplicate KMS provider name {}, names must be unique",
                            config.name
                        ),
                    });
                }
            }
        }
    }
}

/// Go's `time.ParseDuration`: `300ms`, `1.5h`, `2h45m`, `-1s`; `Ok(None)` for a
/// negative duration.
fn parse_go_duration(text: &str) -> Result<Option<Duration>, String> {
    let bad = || format!("time: invalid duration {text:?}");
    let (negative, mut rest) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Ok(Some(Duration::ZERO));
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("time: missing unit in duration {text:?}"))?;
        let number: f64 = rest[..number_end].parse().map_err(|_| bad())?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            unit => return Err(format!("time: unknown unit {unit:?} in duration {text:?}")),
        };
        total += number * seconds;
        rest = &rest[unit_end..];
    }
    if negative && total > 0.0 {
        return Ok(None);
    }
    Duration::try_from_secs_f64(total)
        .map(Some)
        .map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kms_v2::{EncryptedObject, TestKmsPlugin};
    use crate::{EncryptionConfig, Transformer};
    use bytes::Bytes;
    use std::sync::Mutex;

    const AAD: &[u8] = b"/registry/secrets/default/s1";

    fn config(providers: &str) -> String {
        format!(
            "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n{providers}"
        )
    }

    const KMS_FIRST: &str = "      - kms:\n          apiVersion: v2\n          name: vault\n          endpoint: unix:///tmp/kms.sock\n          timeout: 250ms\n      - aesgcm:\n          keys:\n            - name: key1\n              secret: c2VjcmV0IGlzIHNlY3VyZQ==\n      - identity: {}\n";

    fn connector(
        plugin: &Arc<TestKmsPlugin>,
        seen: &Arc<Mutex<Vec<KmsProviderConfig>>>,
    ) -> impl Fn(&KmsProviderConfig) -> Result<Arc<dyn KmsService>, KmsError> {
        let plugin = Arc::clone(plugin);
        let seen = Arc::clone(seen);
        move |c: &KmsProviderConfig| {
            seen.lock().expect("lock").push(c.clone());
            Ok(Arc::clone(&plugin) as Arc<dyn KmsService>)
        }
    }

    #[test]
    fn kms_v2_provider_writes_and_reads_beside_the_others() {
        let plugin = Arc::new(TestKmsPlugin::new());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let c = EncryptionConfig::parse_with_kms(&config(KMS_FIRST), &connector(&plugin, &seen))
            .expect("valid");
        let given = seen.lock().expect("lock").clone();
        assert_eq!(
            given,
            vec![KmsProviderConfig {
                name: "vault".to_owned(),
                endpoint: "unix:///tmp/kms.sock".to_owned(),
                timeout: Duration::from_millis(250),
            }]
        );
        assert_eq!(given[0].socket_path(), "/tmp/kms.sock");
        assert_eq!(
            c.write_provider("secrets"),
            Some(crate::config::ProviderKind::Kms)
        );
        assert_eq!(c.kms_providers().count(), 1);
        assert_eq!(plugin.encrypt_calls(), 1, "primed while loading");

        let secrets = c.transformer_for("secrets");
        let stored = secrets
            .transform_to_storage(Bytes::from_static(b"{}"), AAD)
            .expect("write");
        let body = stored
            .strip_prefix(b"k8s:enc:kms:v2:vault:")
            .expect("kms v2 prefix");
        assert_eq!(
            EncryptedObject::decode(body).expect("object").key_id,
            "key-1"
        );
        assert!(
            !secrets
                .transform_from_storage(stored, AAD)
                .expect("read")
                .stale
        );

        // A value the aesgcm provider wrote still reads, stale so it moves to kms.
        let aes = crate::AesGcmTransformer::new(b"secret is secure").expect("key");
        let mut old = b"k8s:enc:aesgcm:v1:key1:".to_vec();
        old.extend_from_slice(
            &aes.transform_to_storage(Bytes::from_static(b"old"), AAD)
                .expect("seal"),
        );
        let read = secrets
            .transform_from_storage(Bytes::from(old), AAD)
            .expect("read");
        assert_eq!(&read.data[..], b"old");
        assert!(read.stale);
    }

    #[test]
    fn kms_without_a_connector_is_refused_clearly() {
        let e = EncryptionConfig::parse(&config(KMS_FIRST)).expect_err("needs a connector");
        assert!(matches!(e, ConfigError::KmsWithoutConnector { .. }), "{e}");
        assert!(e.to_string().starts_with(
            "resources[0].providers[0].kms: the kms provider \"vault\" needs a KMS plugin connection"
        ), "{e}");
    }

    #[test]
    fn connector_failure_names_the_provider() {
        let refuse = |_: &KmsProviderConfig| -> Result<Arc<dyn KmsService>, KmsError> {
            Err(KmsError::Unavailable {
                endpoint: "unix:///tmp/kms.sock".to_owned(),
                message: "no such file".to_owned(),
            })
        };
        let e = EncryptionConfig::parse_with_kms(&config(KMS_FIRST), &refuse).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "resources[0].providers[0].kms: could not configure KMSv2 plugin \"vault\", error: KMS plugin at unix:///tmp/kms.sock is unavailable: no such file"
        );
    }

    #[test]
    fn kms_fields_are_validated_as_kube_does() {
        let plugin = Arc::new(TestKmsPlugin::new());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let conn = connector(&plugin, &seen);
        let cases: &[(&str, &str)] = &[
            (
                "{apiVersion: v2, endpoint: 'unix:///k'}",
                "resources[0].providers[0].kms.name: Required value: name is a mandatory field for a provider",
            ),
            (
                "{apiVersion: v2, name: 'a:b', endpoint: 'unix:///k'}",
                "invalid KMS provider name a:b, must not contain ':'",
            ),
            (
                "{apiVersion: v2, name: a, endpoint: 'tcp://k:80'}",
                "kms.endpoint: Invalid value: \"tcp://k:80\": unsupported scheme \"tcp\" for KMS provider, only unix is supported",
            ),
            (
                "{apiVersion: v2, name: a}",
                "kms.endpoint: Invalid value: \"\": endpoint is a mandatory field for a kms",
            ),
            (
                "{apiVersion: v2, name: a, endpoint: 'unix:///k', timeout: 0s}",
                "kms.timeout: Invalid value: \"0s\": timeout should be a positive value",
            ),
            (
                "{apiVersion: v2, name: a, endpoint: 'unix:///k', cachesize: 10}",
                "kms.cachesize: Invalid value: 10: cachesize is not supported in v2",
            ),
            (
                "{apiVersion: v3, name: a, endpoint: 'unix:///k'}",
                "unsupported apiVersion v3 for KMS provider, only v1 and v2 are supported",
            ),
            (
                "{apiVersion: v1, name: a, endpoint: 'unix:///k', cachesize: 10}",
                "KMS v1 is deprecated upstream and not supported by apistore",
            ),
            (
                "{apiVersion: v2, name: a, endpoint: 'unix:///k', secret: x}",
                "unknown field `secret`",
            ),
        ];
        for (body, want) in cases {
            let text = config(&format!("      - kms: {body}\n"));
            let e = EncryptionConfig::parse_with_kms(&text, &conn).expect_err(body);
            assert!(e.to_string().contains(want), "{body}: {e}");
        }
        let twice = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [secrets]\n    providers:\n      - kms: {apiVersion: v2, name: a, endpoint: 'unix:///k'}\n  - resources: [configmaps]\n    providers:\n      - kms: {apiVersion: v2, name: a, endpoint: 'unix:///j'}\n";
        let e = EncryptionConfig::parse_with_kms(twice, &conn).expect_err("duplicate");
        assert_eq!(
            e.to_string(),
            "resources[1].providers[0].kms.name: Invalid value: \"a\": duplicate KMS provider name a, names must be unique"
        );
        assert!(
            seen.lock().expect("lock").is_empty(),
            "nothing connected for invalid files"
        );
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("3s"), Ok(Some(Duration::from_secs(3))));
        assert_eq!(
            parse_go_duration("1m30s"),
            Ok(Some(Duration::from_secs(90)))
        );
        assert_eq!(
            parse_go_duration("250ms"),
            Ok(Some(Duration::from_millis(250)))
        );
        assert_eq!(parse_go_duration("0"), Ok(Some(Duration::ZERO)));
        assert_eq!(parse_go_duration("-1s"), Ok(None));
        assert!(parse_go_duration("3").is_err());
        assert!(parse_go_duration("3x").is_err());
        assert!(parse_go_duration("").is_err());
    }
}
