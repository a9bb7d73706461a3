//! Loading configurations and using their transformers: ports of kube's
//! `TestEncryptionProviderConfigCorrect` (without KMS), `TestLegacyConfig`,
//! `TestWildcardStructure`, `TestCBCKeyRotationWith{,out}OverlappingProviders`
//! (`pkg/server/options/encryptionconfig/config_test.go`), and metrics labels.

use std::sync::Arc;

use bytes::Bytes;

use super::*;
use crate::TransformError;
use crate::test_support::RecordingObserver;

const CTX: &[u8] = b"0123456789";
const TEXT: &[u8] = b"abcdefghijklmnopqrstuvwxyz";

const AESGCM: &str = "
      - aesgcm:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
            - name: key2
              secret: dGhpcyBpcyBwYXNzd29yZA==";
const AESCBC: &str = "
      - aescbc:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
            - name: key2
              secret: dGhpcyBpcyBwYXNzd29yZA==";
const SECRETBOX: &str = "
      - secretbox:
          keys:
            - name: key1
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=";
const IDENTITY: &str = "
      - identity: {}";

/// A config for `secrets` (and `namespaces`) with the providers in the given order.
fn config(providers: &[&str]) -> EncryptionConfig {
    let text = format!(
        "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n  - resources:\n      - secrets\n      - namespaces\n    providers:{}\n",
        providers.concat()
    );
    EncryptionConfig::parse(&text).unwrap()
}

/// kube's `TestEncryptionProviderConfigCorrect`: whatever any ordering writes, every
/// ordering reads, stale unless it is the writer's own.
#[test]
fn encryption_provider_config_correct() {
    let configs = [
        (
            "aesGcmFirst",
            config(&[AESGCM, SECRETBOX, AESCBC, IDENTITY]),
        ),
        (
            "aesCbcFirst",
            config(&[AESCBC, IDENTITY, SECRETBOX, AESGCM]),
        ),
        (
            "secretboxFirst",
            config(&[SECRETBOX, AESCBC, IDENTITY, AESGCM]),
        ),
        (
            "identityFirst",
            config(&[IDENTITY, AESGCM, AESCBC, SECRETBOX]),
        ),
    ];
    for (writer, cfg) in &configs {
        let stored = cfg
            .transformer_for("secrets")
            .transform_to_storage(Bytes::from_static(TEXT), CTX)
            .unwrap();
        for (reader, other) in &configs {
            let read = other
                .transformer_for("secrets")
                .transform_from_storage(stored.clone(), CTX)
                .unwrap_or_else(|e| panic!("{writer} read by {reader}: {e}"));
            assert_eq!(read.stale, writer != reader, "{writer} read by {reader}");
            assert_eq!(&read.data[..], TEXT, "{writer} read by {reader}");
        }
    }
}

#[test]
fn stored_values_carry_provider_and_key_prefixes() {
    for (providers, prefix) in [
        (AESGCM, "k8s:enc:aesgcm:v1:key1:"),
        (AESCBC, "k8s:enc:aescbc:v1:key1:"),
        (SECRETBOX, "k8s:enc:secretbox:v1:key1:"),
    ] {
        let cfg = config(&[providers]);
        let t = cfg.transformer_for("namespaces");
        let out = t
            .transform_to_storage(Bytes::from_static(TEXT), CTX)
            .unwrap();
        assert!(out.starts_with(prefix.as_bytes()), "{prefix}: {out:?}");
    }
    let out = config(&[IDENTITY, AESGCM])
        .transformer_for("secrets")
        .transform_to_storage(Bytes::from_static(TEXT), CTX)
        .unwrap();
    assert_eq!(&out[..], TEXT);
}

#[test]
fn gcm_values_are_bound_to_the_etcd_key() {
    let t = config(&[AESGCM]).transformer_for("secrets");
    let out = t
        .transform_to_storage(Bytes::from_static(TEXT), b"/registry/secrets/a")
        .unwrap();
    let err = t
        .transform_from_storage(out, b"/registry/secrets/b")
        .unwrap_err();
    assert_eq!(err.to_string(), "cipher: message authentication failed");
}

#[test]
fn unencrypted_data_reads_through_a_later_identity_as_stale() {
    let t = config(&[AESGCM, IDENTITY]).transformer_for("secrets");
    let read = t
        .transform_from_storage(Bytes::from_static(b"{}"), CTX)
        .unwrap();
    assert!(read.stale);
    assert_eq!(&read.data[..], b"{}");
}

#[test]
fn unknown_prefix_and_unknown_key_errors() {
    let t = config(&[AESGCM]).transformer_for("secrets");
    let err = t
        .transform_from_storage(Bytes::from_static(b"{}"), CTX)
        .unwrap_err();
    assert_eq!(err, TransformError::NoMatchingPrefix);
    assert_eq!(err.to_string(), "no matching prefix found");
    let err = t
        .transform_from_storage(
            Bytes::from_static(b"k8s:enc:aesgcm:v1:key9:xxxxxxxxxxxxxxxx"),
            CTX,
        )
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no matching key was found for the provided AES transformer"
    );
    let t = config(&[SECRETBOX]).transformer_for("secrets");
    let err = t
        .transform_from_storage(Bytes::from_static(b"k8s:enc:secretbox:v1:nope:x"), CTX)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no matching key was found for the provided Secretbox transformer"
    );
    // Encrypted data under identity alone: the identity error is skipped, nothing matches.
    let t = config(&[IDENTITY]).transformer_for("secrets");
    let err = t
        .transform_from_storage(Bytes::from_static(b"k8s:enc:aesgcm:v1:key1:x"), CTX)
        .unwrap_err();
    assert_eq!(err, TransformError::NoMatchingPrefix);
}

#[test]
fn unlisted_resources_use_the_encrypt_check_identity() {
    let cfg = config(&[AESGCM]);
    let t = cfg.transformer_for("configmaps");
    let out = t
        .transform_to_storage(Bytes::from_static(TEXT), CTX)
        .unwrap();
    assert_eq!(&out[..], TEXT);
    let err = t
        .transform_from_storage(Bytes::from_static(b"k8s:enc:aesgcm:v1:key1:x"), CTX)
        .unwrap_err();
    assert_eq!(
        err,
        TransformError::EncryptedDataWithoutKey {
            encryption: "aesgcm:key1".to_owned()
        }
    );
    assert_eq!(cfg.write_provider("configmaps"), None);
    assert_eq!(cfg.write_provider("secrets"), Some(ProviderKind::AesGcm));
}

#[test]
fn read_keys_name_every_provider_and_key_in_the_order_tried() {
    let cfg = config(&[SECRETBOX, AESGCM, IDENTITY]);
    assert_eq!(
        cfg.read_keys("secrets"),
        ["secretbox:key1", "aesgcm:key1", "aesgcm:key2", "identity"]
    );
    assert!(cfg.read_keys("configmaps").is_empty());
}

#[test]
fn legacy_kind_is_accepted() {
    let text = format!(
        "kind: EncryptionConfig\napiVersion: v1\nresources:\n  - resources:\n      - secrets\n    providers:{IDENTITY}{AESGCM}{AESCBC}{SECRETBOX}\n"
    );
    let cfg = EncryptionConfig::parse(&text).unwrap();
    assert_eq!(cfg.write_provider("secrets"), None);
    let names: Vec<String> = cfg.resources().map(ToString::to_string).collect();
    assert_eq!(names, ["secrets"]);
}

/// kube's `TestWildcardStructure`: own rule, then group wildcard, then `*.*`.
#[test]
fn wildcard_structure() {
    let text = r#"{
      "kind": "EncryptionConfiguration", "apiVersion": "apiserver.config.k8s.io/v1",
      "resources": [
        {"resources": ["configmaps", "*.apps"], "providers": [{"aesgcm": {"keys": [{"name": "kms", "secret": "c2VjcmV0IGlzIHNlY3VyZQ=="}]}}]},
        {"resources": ["secrets"], "providers": [{"aesgcm": {"keys": [{"name": "another-kms", "secret": "c2VjcmV0IGlzIHNlY3VyZQ=="}]}}, {"identity": {}}]},
        {"resources": ["*."], "providers": [{"aesgcm": {"keys": [{"name": "fancy", "secret": "c2VjcmV0IGlzIHNlY3VyZQ=="}]}}]},
        {"resources": ["*.*"], "providers": [{"aesgcm": {"keys": [{"name": "yet-another-provider", "secret": "c2VjcmV0IGlzIHNlY3VyZQ=="}]}}]}
      ]
    }"#;
    let cfg = EncryptionConfig::parse(text).unwrap();
    for (resource, key) in [
        ("configmaps", "kms"),
        ("secrets", "another-kms"),
        ("events", "fancy"),
        ("deployments.apps", "kms"),
        ("pods", "fancy"),
        ("pandas", "fancy"),
        ("pandas.bears", "yet-another-provider"),
        ("jobs.apps", "kms"),
    ] {
        let out = cfg
            .transformer_for(resource)
            .transform_to_storage(Bytes::from_static(TEXT), CTX)
            .unwrap();
        let want = format!("k8s:enc:aesgcm:v1:{key}:");
        assert!(out.starts_with(want.as_bytes()), "{resource}: {out:?}");
    }
}

#[test]
fn a_resource_in_two_entries_gets_both_provider_lists() {
    let text = format!(
        "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n  - resources: [secrets]\n    providers:{AESGCM}\n  - resources: [secrets]\n    providers:{SECRETBOX}\n"
    );
    let cfg = EncryptionConfig::parse(&text).unwrap();
    let sb = config(&[SECRETBOX]).transformer_for("secrets");
    let stored = sb
        .transform_to_storage(Bytes::from_static(TEXT), CTX)
        .unwrap();
    let read = cfg
        .transformer_for("secrets")
        .transform_from_storage(stored, CTX)
        .unwrap();
    assert!(read.stale);
    assert_eq!(cfg.write_provider("secrets"), Some(ProviderKind::AesGcm));
}

const CBC_PROVIDERS: &str = r#"{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{"resources":["ignored"],"providers":[{"aescbc":{"keys":[{"name":"1","secret":"Owq7A4JrJpSjrvH8kXkvl4JmOLzvZ6j9BcGRkR8OPQ4="}]}},{"aescbc":{"keys":[{"name":"2","secret":"+qcnfOFX3aRXM9PuY7lQXDWYIQ3GWUdBc3nYBo91SCA="}]}}]}]}"#;
const CBC_PROVIDERS_REVERSED: &str = r#"{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{"resources":["ignored"],"providers":[{"aescbc":{"keys":[{"name":"2","secret":"+qcnfOFX3aRXM9PuY7lQXDWYIQ3GWUdBc3nYBo91SCA="}]}},{"aescbc":{"keys":[{"name":"1","secret":"Owq7A4JrJpSjrvH8kXkvl4JmOLzvZ6j9BcGRkR8OPQ4="}]}}]}]}"#;
const CBC_KEYS: &str = r#"{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{"resources":["ignored"],"providers":[{"aescbc":{"keys":[{"name":"A","secret":"Owq7A4JrJpSjrvH8kXkvl4JmOLzvZ6j9BcGRkR8OPQ4="},{"name":"B","secret":"+qcnfOFX3aRXM9PuY7lQXDWYIQ3GWUdBc3nYBo91SCA="}]}}]}]}"#;
const CBC_KEYS_REVERSED: &str = r#"{"kind":"EncryptionConfiguration","apiVersion":"apiserver.config.k8s.io/v1","resources":[{"resources":["ignored"],"providers":[{"aescbc":{"keys":[{"name":"B","secret":"+qcnfOFX3aRXM9PuY7lQXDWYIQ3GWUdBc3nYBo91SCA="},{"name":"A","secret":"Owq7A4JrJpSjrvH8kXkvl4JmOLzvZ6j9BcGRkR8OPQ4="}]}}]}]}"#;

/// kube's `testCBCKeyRotationWithProviders`.
fn cbc_key_rotation(first: &str, first_prefix: &str, second: &str, second_prefix: &str) {
    let ctx: &[u8] = b"authenticated_data";
    let p = EncryptionConfig::parse(first)
        .unwrap()
        .transformer_for("ignored");
    let out = p
        .transform_to_storage(Bytes::from_static(b"firstvalue"), ctx)
        .unwrap();
    assert!(
        out.starts_with(first_prefix.as_bytes()),
        "unexpected prefix: {out:?}"
    );
    let from = p.transform_from_storage(out.clone(), ctx).unwrap();
    assert!(!from.stale);
    assert_eq!(&from.data[..], b"firstvalue");
    assert!(
        p.transform_from_storage(out.clone(), b"incorrect_context")
            .is_ok()
    );

    let p = EncryptionConfig::parse(second)
        .unwrap()
        .transformer_for("ignored");
    let from = p.transform_from_storage(out, ctx).unwrap();
    assert!(from.stale);
    assert_eq!(&from.data[..], b"firstvalue");
    let out = p
        .transform_to_storage(Bytes::from_static(b"firstvalue"), ctx)
        .unwrap();
    assert!(
        out.starts_with(second_prefix.as_bytes()),
        "unexpected prefix: {out:?}"
    );
    let from = p.transform_from_storage(out, ctx).unwrap();
    assert!(!from.stale);
    assert_eq!(&from.data[..], b"firstvalue");
}

#[test]
fn cbc_key_rotation_with_overlapping_providers() {
    cbc_key_rotation(
        CBC_PROVIDERS,
        "k8s:enc:aescbc:v1:1:",
        CBC_PROVIDERS_REVERSED,
        "k8s:enc:aescbc:v1:2:",
    );
}

#[test]
fn cbc_key_rotation_without_overlapping_providers() {
    cbc_key_rotation(
        CBC_KEYS,
        "k8s:enc:aescbc:v1:A:",
        CBC_KEYS_REVERSED,
        "k8s:enc:aescbc:v1:B:",
    );
}

#[test]
fn observer_sees_provider_and_key_labels() {
    let obs = Arc::new(RecordingObserver::default());
    let cfg = config(&[AESGCM, IDENTITY]).with_observer(obs.clone());
    let t = cfg.transformer_for("secrets");
    let stored = t
        .transform_to_storage(Bytes::from_static(TEXT), CTX)
        .unwrap();
    t.transform_from_storage(stored, CTX).unwrap();
    t.transform_from_storage(Bytes::from_static(b"{}"), CTX)
        .unwrap();
    let ok = |kind, prefix: &str| (kind, prefix.to_owned(), "OK".to_owned(), true);
    assert_eq!(
        obs.take(),
        vec![
            ok("to_storage", "key1:"),
            ok("to_storage", "k8s:enc:aesgcm:v1:"),
            ok("from_storage", "key1:"),
            ok("from_storage", "k8s:enc:aesgcm:v1:"),
            ok("from_storage", "identity"),
        ]
    );
    // Unlisted resources are plain identity: nothing recorded.
    cfg.transformer_for("pods")
        .transform_from_storage(Bytes::from_static(b"{}"), CTX)
        .unwrap();
    assert!(obs.take().is_empty());
}

#[test]
fn observer_hears_the_resource_a_transformer_was_made_for_even_through_a_wildcard() {
    let text = format!(
        "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\nresources:\n  - resources:\n      - secrets\n      - '*.apps'\n    providers:{AESGCM}\n"
    );
    let obs = Arc::new(RecordingObserver::default());
    let cfg = EncryptionConfig::parse(&text)
        .unwrap()
        .with_observer(obs.clone());
    for resource in ["secrets", "deployments.apps", "statefulsets.apps"] {
        cfg.transformer_for(resource)
            .transform_to_storage(Bytes::from_static(TEXT), CTX)
            .unwrap();
        // The provider's list and its keys' list both say whose value it was.
        assert_eq!(obs.take_resources(), [resource, resource], "{resource}");
    }
}

#[test]
fn from_file_reads_yaml_and_json() {
    let dir = std::env::temp_dir().join(format!("apistore-value-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("config.json");
    std::fs::write(&json, CBC_KEYS).unwrap();
    let cfg = EncryptionConfig::from_file(&json).unwrap();
    assert_eq!(cfg.write_provider("ignored"), Some(ProviderKind::AesCbc));

    let empty = dir.join("empty.yaml");
    std::fs::write(&empty, "").unwrap();
    let err = EncryptionConfig::from_file(&empty).unwrap_err();
    assert!(matches!(err, ConfigError::EmptyFile { .. }), "{err}");
    assert!(err.to_string().ends_with("is empty"), "{err}");

    let missing = dir.join("missing.yaml");
    let err = EncryptionConfig::from_file(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err}");
    assert!(
        err.to_string()
            .starts_with("error reading encryption provider configuration file")
    );

    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\n",
    )
    .unwrap();
    let err = EncryptionConfig::from_file(&bad).unwrap_err();
    assert!(err.to_string().contains("bad.yaml"), "{err}");
    assert!(
        err.to_string().contains("resources: Required value"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn debug_output_has_no_secrets() {
    let cfg = config(&[AESGCM, AESCBC, SECRETBOX, IDENTITY]);
    let text = format!("{cfg:?} {:?}", cfg.transformer_for("secrets"));
    for secret in [
        "c2VjcmV0IGlzIHNlY3VyZQ",
        "secret is secure",
        "YWJjZGVm",
        "abcdefghij",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains("key1"), "{text}");
}
