//! The envelope's events, through the observer, as kube's series in the exposition.

use std::sync::Arc;
use std::time::Duration;

use apistore_storage::kms_observer::{KmsObserver, key_id_hash};
use prometheus::Registry;

use crate::{KEY_ID_SERIES_LIMIT, StorageMetrics, TransformationType, encode_text};

const E: &str = "apiserver_envelope_encryption";

fn registered() -> (Registry, StorageMetrics) {
    let registry = Registry::new();
    let metrics = StorageMetrics::register(&registry).unwrap();
    (registry, metrics)
}

/// The sample lines (no HELP or TYPE) of one family.
fn samples(text: &str, family: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with(['{', ' ']) || rest.starts_with("_"))
        })
        .map(str::to_owned)
        .collect()
}

/// The value of the one sample of `family` whose labels are `labels`.
fn value(text: &str, family: &str, labels: &str) -> Option<f64> {
    let head = format!("{family}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&head))
        .map(|v| v.parse().unwrap())
}

fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn help_and_type_lines_are_kubes() {
    let (registry, metrics) = registered();
    let observer = metrics.envelope();
    observer.key_id_used(TransformationType::ToStorage, "vault", "sha256:ab");
    observer.key_id_from_status("vault", "sha256:ab");
    observer.invalid_key_id_from_status("vault", "empty");
    observer.kms_operation(
        "vault",
        "/v2.KeyManagementService/Status",
        "OK",
        Duration::ZERO,
    );
    observer.dek_source_cache_size("vault", 1, 1000);
    let text = encode_text(&registry);
    let heads: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with('#') && l.contains(E))
        .collect();
    assert_eq!(
        heads,
        [
            "# HELP apiserver_envelope_encryption_dek_cache_fill_percent [ALPHA] Percent of the cache slots currently occupied by cached DEKs.",
            "# TYPE apiserver_envelope_encryption_dek_cache_fill_percent gauge",
            "# HELP apiserver_envelope_encryption_dek_source_cache_size [ALPHA] Number of records in data encryption key (DEK) source cache. On a restart, this value is an approximation of the number of decrypt RPC calls the server will make to the KMS plugin.",
            "# TYPE apiserver_envelope_encryption_dek_source_cache_size gauge",
            "# HELP apiserver_envelope_encryption_invalid_key_id_from_status_total [ALPHA] Number of times an invalid keyID is returned by the Status RPC call split by error.",
            "# TYPE apiserver_envelope_encryption_invalid_key_id_from_status_total counter",
            "# HELP apiserver_envelope_encryption_key_id_hash_last_timestamp_seconds [ALPHA] The last time in seconds when a keyID was used.",
            "# TYPE apiserver_envelope_encryption_key_id_hash_last_timestamp_seconds gauge",
            "# HELP apiserver_envelope_encryption_key_id_hash_status_last_timestamp_seconds [ALPHA] The last time in seconds when a keyID was returned by the Status RPC call.",
            "# TYPE apiserver_envelope_encryption_key_id_hash_status_last_timestamp_seconds gauge",
            "# HELP apiserver_envelope_encryption_key_id_hash_total [ALPHA] Number of times a keyID is used split by transformation type, provider, and apiserver identity.",
            "# TYPE apiserver_envelope_encryption_key_id_hash_total counter",
            "# HELP apiserver_envelope_encryption_kms_operations_latency_seconds [ALPHA] KMS operation duration with gRPC error code status total.",
            "# TYPE apiserver_envelope_encryption_kms_operations_latency_seconds histogram",
        ]
    );
    // A v1 family with nothing to show, as on a kube-apiserver with v2 providers only.
    assert!(!text.contains("dek_cache_inter_arrival_time_seconds"));
    assert_eq!(
        samples(&text, &format!("{E}_dek_cache_fill_percent")),
        [format!("{E}_dek_cache_fill_percent 0")]
    );
}

#[test]
fn observer_events_become_kubes_series_with_kubes_labels() {
    let (registry, metrics) = registered();
    let observer: Arc<dyn KmsObserver> = Arc::new(metrics.envelope());
    let key1 = key_id_hash("key-1");
    let key2 = key_id_hash("key-2");
    let before = now();
    observer.key_id_used(TransformationType::ToStorage, "vault", &key1);
    observer.key_id_used(TransformationType::ToStorage, "vault", &key1);
    observer.key_id_used(TransformationType::FromStorage, "vault", &key2);
    observer.key_id_from_status("vault", &key1);
    observer.invalid_key_id_from_status("vault", "too_long");
    observer.invalid_key_id_from_status("vault", "too_long");
    observer.dek_source_cache_size("vault", 3, 1000);
    observer.dek_source_cache_size("other", 0, 1000);
    let text = encode_text(&registry);

    assert_eq!(
        samples(&text, &format!("{E}_key_id_hash_total")),
        [
            format!(
                r#"{E}_key_id_hash_total{{apiserver_id_hash="",key_id_hash="{key2}",provider_name="vault",transformation_type="from_storage"}} 1"#
            ),
            format!(
                r#"{E}_key_id_hash_total{{apiserver_id_hash="",key_id_hash="{key1}",provider_name="vault",transformation_type="to_storage"}} 2"#
            ),
        ]
    );
    let stamp = value(
        &text,
        &format!("{E}_key_id_hash_last_timestamp_seconds"),
        &format!(
            r#"apiserver_id_hash="",key_id_hash="{key1}",provider_name="vault",transformation_type="to_storage""#
        ),
    )
    .unwrap();
    assert!(stamp >= before.floor() && stamp <= now() + 1.0, "{stamp}");
    let status = value(
        &text,
        &format!("{E}_key_id_hash_status_last_timestamp_seconds"),
        &format!(r#"apiserver_id_hash="",key_id_hash="{key1}",provider_name="vault""#),
    )
    .unwrap();
    assert!(
        status >= before.floor() && status <= now() + 1.0,
        "{status}"
    );
    assert_eq!(
        samples(&text, &format!("{E}_invalid_key_id_from_status_total")),
        [format!(
            r#"{E}_invalid_key_id_from_status_total{{error="too_long",provider_name="vault"}} 2"#
        )]
    );
    assert_eq!(
        samples(&text, &format!("{E}_dek_source_cache_size")),
        [
            format!(r#"{E}_dek_source_cache_size{{provider_name="other"}} 0"#),
            format!(r#"{E}_dek_source_cache_size{{provider_name="vault"}} 3"#),
        ]
    );
    // kube sets the fill percent for KMS v1 only.
    assert_eq!(
        samples(&text, &format!("{E}_dek_cache_fill_percent")),
        [format!("{E}_dek_cache_fill_percent 0")]
    );
}

#[test]
fn plugin_call_latency_has_kubes_buckets_from_a_tenth_of_a_millisecond() {
    let (registry, metrics) = registered();
    let observer = metrics.envelope();
    let encrypt = "/v2.KeyManagementService/Encrypt";
    observer.kms_operation("vault", encrypt, "OK", Duration::from_millis(3));
    observer.kms_operation(
        "vault",
        encrypt,
        "DeadlineExceeded",
        Duration::from_secs(60),
    );
    let text = encode_text(&registry);
    let family = format!("{E}_kms_operations_latency_seconds");
    let bounds = [
        "0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032", "0.0064", "0.0128", "0.0256",
        "0.0512", "0.1024", "0.2048", "0.4096", "0.8192", "1.6384", "3.2768", "6.5536", "13.1072",
        "26.2144", "52.4288",
    ];
    let ok = format!(r#"grpc_status_code="OK",method_name="{encrypt}",provider_name="vault""#);
    let mut expected: Vec<String> = bounds
        .iter()
        .enumerate()
        .map(|(i, le)| format!("{family}_bucket{{{ok},le=\"{le}\"}} {}", u8::from(i >= 5)))
        .collect();
    expected.push(format!("{family}_bucket{{{ok},le=\"+Inf\"}} 1"));
    expected.push(format!("{family}_sum{{{ok}}} 0.003"));
    expected.push(format!("{family}_count{{{ok}}} 1"));
    let lines = samples(&text, &family);
    let ok_lines: Vec<String> = lines
        .iter()
        .filter(|l| l.contains("\"OK\""))
        .cloned()
        .collect();
    assert_eq!(ok_lines, expected);
    let slow = format!(
        r#"{family}_bucket{{grpc_status_code="DeadlineExceeded",method_name="{encrypt}",provider_name="vault",le="+Inf"}} 1"#
    );
    assert!(lines.contains(&slow), "{lines:#?}");
    let slow_last = format!(
        r#"{family}_bucket{{grpc_status_code="DeadlineExceeded",method_name="{encrypt}",provider_name="vault",le="52.4288"}} 0"#
    );
    assert!(lines.contains(&slow_last), "{lines:#?}");
}

#[test]
fn key_id_series_beyond_kubes_limit_drop_the_least_recently_used() {
    let (registry, metrics) = registered();
    let observer = metrics.envelope();
    let family = format!("{E}_key_id_hash_total");
    let hashes: Vec<String> = (0..=KEY_ID_SERIES_LIMIT)
        .map(|i| key_id_hash(&format!("key-{i}")))
        .collect();
    for hash in &hashes[..KEY_ID_SERIES_LIMIT] {
        observer.key_id_used(TransformationType::FromStorage, "vault", hash);
        observer.key_id_from_status("vault", hash);
    }
    // key-0 used again: key-1 is now the least recently used.
    observer.key_id_used(TransformationType::FromStorage, "vault", &hashes[0]);
    observer.key_id_from_status("vault", &hashes[0]);
    let text = encode_text(&registry);
    assert_eq!(samples(&text, &family).len(), KEY_ID_SERIES_LIMIT);

    observer.key_id_used(
        TransformationType::FromStorage,
        "vault",
        &hashes[KEY_ID_SERIES_LIMIT],
    );
    observer.key_id_from_status("vault", &hashes[KEY_ID_SERIES_LIMIT]);
    let text = encode_text(&registry);
    for gone in [
        family.clone(),
        format!("{E}_key_id_hash_last_timestamp_seconds"),
        format!("{E}_key_id_hash_status_last_timestamp_seconds"),
    ] {
        let lines = samples(&text, &gone);
        assert_eq!(lines.len(), KEY_ID_SERIES_LIMIT, "{gone}");
        assert!(!lines.iter().any(|l| l.contains(&hashes[1])), "{gone}");
        assert!(lines.iter().any(|l| l.contains(&hashes[0])), "{gone}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains(&hashes[KEY_ID_SERIES_LIMIT])),
            "{gone}"
        );
    }
    let zero = format!(
        r#"{family}{{apiserver_id_hash="",key_id_hash="{}",provider_name="vault",transformation_type="from_storage"}} 2"#,
        hashes[0]
    );
    assert!(text.contains(&zero));
}

#[test]
fn an_apiserver_identity_labels_the_key_id_series_with_its_hash() {
    let (registry, metrics) = registered();
    let observer = metrics.envelope().with_apiserver_id("apiserver-4f2c");
    observer.key_id_used(TransformationType::ToStorage, "vault", "sha256:ab");
    observer.key_id_from_status("vault", "sha256:ab");
    let text = encode_text(&registry);
    let id = key_id_hash("apiserver-4f2c");
    assert!(id.starts_with("sha256:") && id.len() == 7 + 64);
    assert!(text.contains(&format!(
        r#"{E}_key_id_hash_total{{apiserver_id_hash="{id}",key_id_hash="sha256:ab",provider_name="vault",transformation_type="to_storage"}} 1"#
    )));
    assert!(text.contains(&format!(
        r#"{E}_key_id_hash_status_last_timestamp_seconds{{apiserver_id_hash="{id}",key_id_hash="sha256:ab",provider_name="vault"}} "#
    )));
}

#[test]
fn every_registration_of_a_registry_shares_the_key_id_bound() {
    let (registry, metrics) = registered();
    let again = StorageMetrics::register(&registry).unwrap();
    metrics
        .envelope()
        .key_id_used(TransformationType::ToStorage, "vault", "sha256:ab");
    again
        .envelope()
        .key_id_used(TransformationType::ToStorage, "vault", "sha256:ab");
    let text = encode_text(&registry);
    assert_eq!(
        samples(&text, &format!("{E}_key_id_hash_total")),
        [format!(
            r#"{E}_key_id_hash_total{{apiserver_id_hash="",key_id_hash="sha256:ab",provider_name="vault",transformation_type="to_storage"}} 2"#
        )]
    );
}
