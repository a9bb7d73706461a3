//! Refused configurations: each error names where it is (resource entry, provider,
//! key) and never shows a secret. Follows kube's `validation_encryption.go` and
//! `TestWildcardMasking` (`config_test.go`).

use super::*;

const HEAD: &str = "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v1\n";

fn err(text: &str) -> ConfigError {
    match EncryptionConfig::parse(text) {
        Ok(cfg) => panic!("accepted: {cfg:?}"),
        Err(err) => err,
    }
}

/// One resource entry for `secrets` with the given providers (YAML list items).
fn providers(items: &str) -> String {
    format!("{HEAD}resources:\n  - resources: [secrets]\n    providers:\n{items}")
}

fn key(name: &str, secret: &str) -> String {
    format!("            - name: {name}\n              secret: {secret}\n")
}

fn aes(provider: &str, keys: &[String]) -> String {
    format!("      - {provider}:\n          keys:\n{}", keys.concat())
}

const K16: &str = "c2VjcmV0IGlzIHNlY3VyZQ==";
const K32: &str = "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=";

fn assert_no_secret(err: &ConfigError, secret: &str) {
    let text = format!("{err} {err:?}");
    assert!(!text.contains(secret), "secret leaked: {text}");
}

#[test]
fn wrong_key_sizes_name_entry_provider_and_key() {
    // 7 bytes for AES, 16 for secretbox.
    let seven = "c2hvcnRpZQ==";
    let e = err(&providers(&aes(
        "aesgcm",
        &[key("key1", K16), key("short", seven)],
    )));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[0].aesgcm.keys[1].secret: Invalid value: \"REDACTED\": secret is not of the expected length, got 7, expected one of [16 24 32] (key \"short\")"
    );
    assert_no_secret(&e, seven);
    let e = err(&providers(&aes("secretbox", &[key("sb", K16)])));
    assert!(
        matches!(&e, ConfigError::KeySize { got: 16, key, .. } if key == "sb"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("providers[0].secretbox.keys[0].secret"),
        "{e}"
    );
    assert!(e.to_string().contains("expected one of [32]"), "{e}");
    assert_no_secret(&e, K16);
    let e = err(&providers(&aes(
        "aescbc",
        &[
            key("k", K32),
            key("big", "YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY3OA=="),
        ],
    )));
    assert!(e.to_string().contains("aescbc.keys[1].secret"), "{e}");
    assert!(e.to_string().contains("got 34"), "{e}");
}

#[test]
fn bad_base64_is_refused_without_echo() {
    let e = err(&providers(&aes("aesgcm", &[key("key1", "not*base64!")])));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: \"REDACTED\": secrets must be base64 encoded (key \"key1\")"
    );
    assert_no_secret(&e, "not*base64");
    // Unpadded base64 is refused, as by Go's StdEncoding.
    let e = err(&providers(&aes(
        "aesgcm",
        &[key("key1", "c2VjcmV0IGlzIHNlY3VyZQ")],
    )));
    assert!(matches!(e, ConfigError::SecretNotBase64 { .. }), "{e}");
    // A non-string secret is refused without echoing it.
    let e = err(&providers(&aes("aesgcm", &[key("key1", "123456789")])));
    assert_no_secret(&e, "123456789");
}

#[test]
fn duplicate_key_names_within_a_provider() {
    let e = err(&providers(&aes(
        "aesgcm",
        &[key("key1", K16), key("key1", K32)],
    )));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[0].aesgcm.keys[1].name: Duplicate value: \"key1\": key names must be unique within a provider"
    );
    // The same name in two providers is fine.
    let text = providers(
        &[
            aes("aesgcm", &[key("key1", K16)]),
            aes("aescbc", &[key("key1", K16)]),
        ]
        .concat(),
    );
    EncryptionConfig::parse(&text).unwrap();
}

#[test]
fn empty_and_missing_keys() {
    let e = err(&providers("      - aesgcm:\n          keys: []\n"));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[0].aesgcm.keys: Required value: at least one keys is required"
    );
    // kube's invalid-aes-gcm.yaml: `keys:` with nothing after it.
    let e = err(&providers("      - aesgcm:\n          keys:\n"));
    assert!(matches!(e, ConfigError::Required { .. }), "{e}");
    let e = err(&providers("      - secretbox: {}\n"));
    assert!(
        e.to_string()
            .starts_with("resources[0].providers[0].secretbox.keys: Required"),
        "{e}"
    );
    let e = err(&providers(&aes(
        "aesgcm",
        &["            - name: key1\n".to_owned()],
    )));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[0].aesgcm.keys[0].secret: Required value: secret is a mandatory field for a key"
    );
    let e = err(&providers(&aes(
        "aesgcm",
        &[format!("            - secret: {K16}\n")],
    )));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[0].aesgcm.keys[0].name: Required value: name is a mandatory field for a key"
    );
}

#[test]
fn unknown_multiple_and_unsupported_providers() {
    let e = err(&providers("      - rot13: {}\n"));
    assert!(
        matches!(&e, ConfigError::UnknownProvider { field, given } if field == "resources[0].providers[0]" && given == &["rot13"]),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("provider does not contain any of the expected providers"),
        "{e}"
    );
    let e = err(&providers(
        "      - identity: {}\n        aesgcm: {keys: []}\n",
    ));
    assert!(matches!(e, ConfigError::MultipleProviders { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("more than one provider specified in a single element"),
        "{e}"
    );
    let e = err(&providers(
        "      - identity: {}\n      - kms:\n          name: testprovider\n          endpoint: unix:///tmp/testprovider.sock\n",
    ));
    assert_eq!(
        e.to_string(),
        "resources[0].providers[1].kms.apiVersion: Invalid value: \"v1\": KMS v1 is deprecated upstream and not supported by apistore; use apiVersion: v2 (v1 is also the default when apiVersion is left out)"
    );
    let e = err(&providers("      - {}\n"));
    assert!(matches!(e, ConfigError::UnknownProvider { .. }), "{e}");
    let e = err(&providers("      - identity\n"));
    assert!(matches!(e, ConfigError::Decode { .. }), "{e}");
}

#[test]
fn unknown_fields_are_refused_where_they_are() {
    let e = err(&providers(&aes(
        "aesgcm",
        &[format!(
            "            - name: k\n              secret: {K16}\n              pandas: are the best\n"
        )],
    )));
    let text = e.to_string();
    assert!(text.contains("resources[0].providers[0].aesgcm"), "{text}");
    assert!(text.contains("unknown field `pandas`"), "{text}");
    let e = err(&format!("{HEAD}resources: []\nextra: 1\n"));
    assert!(e.to_string().contains("unknown field `extra`"), "{e}");
    let e = err(&providers("      - identity: {mode: off}\n"));
    assert!(e.to_string().contains("providers[0].identity"), "{e}");
}

#[test]
fn type_meta_is_checked() {
    let body = "resources:\n  - resources: [secrets]\n    providers:\n      - identity: {}\n";
    let e = err(&format!(
        "kind: EncryptionConfigurations\napiVersion: apiserver.config.k8s.io/v1\n{body}"
    ));
    assert_eq!(
        e.to_string(),
        "no kind \"EncryptionConfigurations\" is registered for version \"apiserver.config.k8s.io/v1\""
    );
    let e = err(&format!(
        "kind: EncryptionConfiguration\napiVersion: apiserver.config.k8s.io/v2\n{body}"
    ));
    assert!(matches!(e, ConfigError::UnknownKind { .. }), "{e}");
    let e = err(&format!("kind: EncryptionConfiguration\n{body}"));
    assert!(
        matches!(e, ConfigError::MissingTypeField("apiVersion")),
        "{e}"
    );
    let e = err(&format!("apiVersion: apiserver.config.k8s.io/v1\n{body}"));
    assert!(matches!(e, ConfigError::MissingTypeField("Kind")), "{e}");
    let e = err("[not, a, map]");
    assert!(matches!(e, ConfigError::Decode { .. }), "{e}");
    let e = err("{");
    assert!(matches!(e, ConfigError::Decode { .. }), "{e}");
}

#[test]
fn missing_resources_and_providers() {
    let e = err(HEAD);
    assert_eq!(
        e.to_string(),
        "resources: Required value: at least one resources is required"
    );
    let e = err(&format!(
        "{HEAD}resources:\n  - providers:\n      - identity: {{}}\n  - resources: [secrets]\n"
    ));
    assert_eq!(
        e.to_string(),
        "[resources[0].resources: Required value: at least one resources[0].resources is required, resources[1].providers: Required value: at least one resources[1].providers is required]"
    );
    assert!(matches!(&e, ConfigError::Multiple(list) if list.len() == 2));
}

#[test]
fn resource_names_are_checked() {
    for (name, detail) in [
        (
            "Secrets",
            "resource name should not contain capital letters",
        ),
        (
            "*",
            "use '*.' to encrypt all the resources from core API group or *.* to encrypt all resources",
        ),
        (
            "serviceipallocations",
            "resources which do not have REST API/s cannot be encrypted",
        ),
        (
            "events.events.k8s.io",
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use 'events' instead in the config file",
        ),
        (
            "deployments.extensions",
            "'extensions' group has been removed and cannot be used for encryption",
        ),
        (
            "deployments.*",
            "encrypting the same resource across groups is not supported",
        ),
    ] {
        let e = err(&format!(
            "{HEAD}resources:\n  - resources: ['{name}']\n    providers:\n      - identity: {{}}\n"
        ));
        assert_eq!(
            e.to_string(),
            format!("resources[0].resources[0]: Invalid value: \"{name}\": {detail}"),
        );
    }
}

#[test]
fn overlapping_and_duplicate_resources_in_one_list() {
    let list = |names: &str| {
        format!(
            "{HEAD}resources:\n  - resources: [{names}]\n    providers:\n      - identity: {{}}\n"
        )
    };
    let e = err(&list("secrets, secrets"));
    assert_eq!(
        e.to_string(),
        "resources[0].resources: Invalid value: [\"secrets\", \"secrets\"]: the same resource cannot be specified multiple times"
    );
    for names in [
        "secrets, '*.'",
        "'*.*', secrets",
        "'*.apps', deployments.apps",
    ] {
        let e = err(&list(names));
        assert!(
            e.to_string().contains("using overlapping resources"),
            "{names}: {e}"
        );
    }
    EncryptionConfig::parse(&list("secrets, deployments.apps, '*.batch'")).unwrap();
}

/// kube's `TestWildcardMasking`, across entries (within one list the overlap check
/// refuses first).
#[test]
fn wildcard_masking() {
    let entries = |lists: &[&str]| {
        let mut text = format!("{HEAD}resources:\n");
        for l in lists {
            text.push_str(&format!(
                "  - resources: [{l}]\n    providers:\n      - identity: {{}}\n"
            ));
        }
        text
    };
    for (lists, want) in [
        (
            &["configmaps", "'*.'", "secrets"][..],
            "resource \"secrets\" is masked by earlier rule \"*.\"",
        ),
        (
            &["'*.'", "'*.'"][..],
            "resource \"*.\" is masked by earlier rule \"*.\"",
        ),
        (
            &["'*.foo'", "'*.foo'"][..],
            "resource \"*.foo\" is masked by earlier rule \"*.foo\"",
        ),
        (
            &["'*.*'", "'*.*'"][..],
            "resource \"*.*\" is masked by earlier rule \"*.*\"",
        ),
        (
            &["'*.*'", "secrets"][..],
            "resource \"secrets\" is masked by earlier rule \"*.*\"",
        ),
        (
            &["'*.*'", "'*.'"][..],
            "resource \"*.\" is masked by earlier rule \"*.*\"",
        ),
    ] {
        assert_eq!(err(&entries(lists)).to_string(), want, "{lists:?}");
    }
    EncryptionConfig::parse(&entries(&["configmaps, secrets", "'*.*'"])).unwrap();
    EncryptionConfig::parse(&entries(&["secrets", "'*.'", "'*.*'"])).unwrap();
}

#[test]
fn every_problem_is_reported() {
    let text = providers(
        &[
            aes("aesgcm", &[key("a", "c2hvcnRpZQ=="), key("a", K16)]),
            "      - nope: {}\n".to_owned(),
        ]
        .concat(),
    );
    match err(&text) {
        ConfigError::Multiple(list) => assert_eq!(list.len(), 3, "{list:?}"),
        other => panic!("{other}"),
    }
}
