//! Nothing panics on input: arbitrary stored bytes (bare, or behind every provider and
//! key prefix) and every truncation of a configuration come back as values or errors.

use apistore_value::{
    AesCbcTransformer, AesGcmExtendedNonceTransformer, AesGcmTransformer, EncryptionConfig,
    IdentityTransformer, SecretboxTransformer, Transformer,
};
use bytes::Bytes;
use rand::RngCore;

const CONFIG: &str = r#"
kind: EncryptionConfiguration
apiVersion: apiserver.config.k8s.io/v1
resources:
  - resources: [secrets, "*.apps"]
    providers:
      - identity: {}
      - aesgcm:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
      - aescbc:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
      - secretbox:
          keys:
            - name: key1
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=
"#;

const PREFIXES: &[&str] = &[
    "",
    "k8s:enc:",
    "k8s:enc:aesgcm:v1:",
    "k8s:enc:aesgcm:v1:key1:",
    "k8s:enc:aescbc:v1:key1:",
    "k8s:enc:secretbox:v1:key1:",
    "k8s:enc:secretbox:v1:nope:",
];

#[test]
fn arbitrary_stored_bytes_never_panic() -> Result<(), Box<dyn std::error::Error>> {
    let config = EncryptionConfig::parse(CONFIG)?;
    let transformers: Vec<std::sync::Arc<dyn Transformer>> = vec![
        config.transformer_for("secrets"),
        config.transformer_for("deployments.apps"),
        std::sync::Arc::new(AesGcmTransformer::new(&[1; 16])?),
        std::sync::Arc::new(AesCbcTransformer::new(&[1; 24])?),
        std::sync::Arc::new(SecretboxTransformer::new(&[1; 32])),
        std::sync::Arc::new(AesGcmExtendedNonceTransformer::new(&[1; 32])?),
        std::sync::Arc::new(IdentityTransformer),
    ];
    let mut rng = rand::thread_rng();
    for len in (0..=96).chain([127, 128, 129, 1000]) {
        for prefix in PREFIXES {
            for _ in 0..4 {
                let mut data = prefix.as_bytes().to_vec();
                let mut tail = vec![0u8; len];
                rng.fill_bytes(&mut tail);
                data.extend_from_slice(&tail);
                for t in &transformers {
                    let _ = t.transform_from_storage(Bytes::from(data.clone()), b"/registry/x");
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_truncated_configuration_is_a_value_or_an_error() {
    for end in 0..=CONFIG.len() {
        if CONFIG.is_char_boundary(end) {
            let _ = EncryptionConfig::parse(&CONFIG[..end]);
        }
    }
    assert!(EncryptionConfig::parse(CONFIG).is_ok());
}
