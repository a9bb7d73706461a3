//! KMS v2 against AES-GCM with a local key: create and get of the 1 KiB bench objects
//! at 16 callers, both arms apistore. Arm A encrypts with a `kms` (apiVersion v2)
//! provider whose plugin is apistore-testing's test plugin, served over gRPC on a unix
//! socket in this process (so every plugin call crosses a real socket and tonic);
//! arm B with the `aesgcm` provider of the AES-GCM section.
//!
//! The goal is at least 0.9× the AES-GCM throughput: the plugin is called only
//! when the DEK changes or a DEK source misses the cache, so the cost per value is the
//! extended-nonce derivation (HKDF-SHA256) and the protobuf envelope. The section's
//! note counts the plugin calls to show it.

use std::path::PathBuf;
use std::sync::Arc;

use apistore_etcd3::Etcd3Store;
use apistore_testing::kms::{KmsPluginServer, TestKmsPlugin};
use apistore_value::EncryptionConfig;
use apistore_value::kms_v2::{GrpcKmsConnector, KmsService};

use crate::bench::{Backend, Bench};
use crate::crud::{Arm, Crud, pool_names, workload_name};
use crate::error::{BenchError, Result};
use crate::object::RESOURCE;
use crate::settings::Settings;
use crate::stats::{Comparison, Section};

/// The operations compared, each at 16 callers.
const OPS: [Crud; 2] = [Crud::Create, Crud::Get];

/// The `--only` name of a KMS workload: `kms create, 16 callers`.
fn selection_name(op: Crud) -> String {
    format!("kms {}", workload_name(op, 16))
}

/// Whether `--only` selects any KMS workload.
pub(crate) fn selected(settings: &Settings) -> bool {
    OPS.iter().any(|&op| settings.selected(&selection_name(op)))
}

/// The encryption configuration of the KMS arm: kube's `kms` v2 provider, then
/// identity, as an operator would write it.
fn kms_config(endpoint: &str) -> String {
    format!(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\nresources:\n  - resources: [{RESOURCE}]\n    providers:\n      - kms:\n          apiVersion: v2\n          name: bench\n          endpoint: {endpoint}\n          timeout: 3s\n      - identity: {{}}\n"
    )
}

/// A socket path of this process's own, removed before use (a crashed run leaves one).
fn socket_path() -> PathBuf {
    let path = std::env::temp_dir().join(format!("apistore-bench-kms-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

impl Bench {
    /// The two workloads, and a note with the plugin calls they made.
    pub(crate) async fn kms_section(&self) -> Result<(Vec<Comparison>, String)> {
        let plugin = Arc::new(TestKmsPlugin::new());
        let server =
            KmsPluginServer::serve(Arc::clone(&plugin) as Arc<dyn KmsService>, socket_path())
                .map_err(|source| BenchError::Io {
                    what: "serve the KMS v2 test plugin".to_owned(),
                    source,
                })?;
        let kms_config =
            EncryptionConfig::parse_with_kms(&kms_config(&server.endpoint()), &GrpcKmsConnector)?;
        let aes_config = EncryptionConfig::parse(&crate::aesgcm_config(crate::object::RESOURCE))?;
        let store = |config: &EncryptionConfig| {
            Backend::Store(Arc::new(
                Etcd3Store::new(self.client.clone(), Self::store_config())
                    .with_transformer(config.transformer_for(RESOURCE)),
            ))
        };
        let (kms, aes) = (store(&kms_config), store(&aes_config));
        let (kms_pool, aes_pool) = ("pool-kms", "pool-kms-aes");
        self.fill(kms_pool, pool_names(self.settings.pool_size), &kms)
            .await?;
        self.fill(aes_pool, pool_names(self.settings.pool_size), &aes)
            .await?;
        let arms = [
            Arm::plain("kms-v2", kms, kms_pool),
            Arm::plain("aes-gcm", aes, aes_pool),
        ];
        let mut comparisons = Vec::new();
        for op in OPS {
            if self.settings.selected(&selection_name(op)) {
                comparisons.push(self.compare_crud(Section::KmsV2, op, 16, &arms).await?);
            }
        }
        let note = format!(
            "kms v2: the test plugin answered {} Status, {} Encrypt and {} Decrypt calls over the section \
             (its DEK was seeded once when the configuration was loaded; the writes and reads of \
             every run reused it)",
            plugin.status_calls(),
            plugin.encrypt_calls(),
            plugin.decrypt_calls()
        );
        drop(server);
        Ok((comparisons, note))
    }
}
