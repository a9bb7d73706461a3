//! A real etcd, written to through the same layers a cluster's apiserver uses (JSON,
//! kube protobuf, AES-GCM encryption), updated, deleted from, compacted and saved as a
//! snapshot; and what etcd answered for every key at every revision before the save.

// Test support: a failed step must fail the test loudly.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use apistore_backend::ObjectLayers;
use apistore_protobuf::{MediaType, StorageCodec};
use apistore_storage::{DynamicObject, JsonCodec};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};
use apistore_value::{
    AesGcmTransformer, IdentityTransformer, PrefixTransformer, PrefixTransformers, Transformer,
};
use etcd_client::{Client, CompactionOptions, GetOptions};
use serde_json::json;

/// The key prefix of the stores.
pub const PREFIX: &str = "/registry";

/// What etcd held under a key at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub value: Vec<u8>,
    pub mod_revision: i64,
    pub create_revision: i64,
    pub version: i64,
}

/// One write, for the watch replay.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub revision: i64,
    pub key: String,
    /// `ADDED`, `MODIFIED` or `DELETED`.
    pub kind: &'static str,
}

/// A saved snapshot and what etcd said before it was saved.
pub struct Fixture {
    pub etcd: EtcdServer,
    pub dir: tempfile::TempDir,
    pub snapshot: PathBuf,
    pub compacted: i64,
    pub current: i64,
    /// Every key written, at every revision from the compaction to the last:
    /// `None` where etcd had nothing.
    pub seen: BTreeMap<(String, i64), Option<Seen>>,
    pub ops: Vec<Op>,
    pub keys: Vec<String>,
}

/// The transformer of secrets: AES-GCM under kube's prefix, identity for old values.
pub fn secrets_transformer() -> Arc<dyn Transformer> {
    let aes = AesGcmTransformer::new(&[7u8; 32]).unwrap();
    Arc::new(PrefixTransformers::with_default_error(vec![
        PrefixTransformer::new("k8s:enc:aesgcm:v1:key1:", Arc::new(aes)),
        PrefixTransformer::new("", Arc::new(IdentityTransformer)),
    ]))
}

/// The layers of configmaps (JSON), pods (protobuf) and secrets (JSON, encrypted).
pub fn layers(resource: &str) -> ObjectLayers<DynamicObject> {
    match resource {
        "pods" => ObjectLayers::new(
            Arc::new(StorageCodec::<DynamicObject>::new(MediaType::Protobuf)),
            Arc::new(IdentityTransformer),
            (),
        ),
        "secrets" => ObjectLayers::new(
            Arc::new(JsonCodec::<DynamicObject>::new()),
            secrets_transformer(),
            (),
        ),
        _ => ObjectLayers::new(
            Arc::new(JsonCodec::<DynamicObject>::new()),
            Arc::new(IdentityTransformer),
            (),
        ),
    }
}

fn object(resource: &str, name: &str, generation: u32) -> DynamicObject {
    let base = |kind| DynamicObject::new("v1", kind, name).within("default");
    let mut object = match resource {
        "pods" => base("Pod").with(
            "spec",
            json!({"containers": [{"name": "c", "image": format!("nginx:1.{generation}")}]}),
        ),
        "secrets" => base("Secret")
            .with("type", json!("Opaque"))
            .with("data", json!({"password": format!("c2VjcmV0{generation}")})),
        _ => base("ConfigMap").with("data", json!({"generation": generation.to_string()})),
    };
    object.metadata.uid = format!("uid-{resource}-{name}");
    object
        .metadata
        .labels
        .insert("generation".to_owned(), generation.to_string());
    object
}

struct Writer {
    client: Client,
    ops: Vec<Op>,
    keys: Vec<String>,
}

impl Writer {
    fn key(resource: &str, name: &str) -> String {
        format!("{PREFIX}/{resource}/default/{name}")
    }

    async fn put(&mut self, resource: &str, name: &str, generation: u32) -> i64 {
        let key = Self::key(resource, name);
        let layers = layers(resource);
        let mut obj = object(resource, name, generation);
        let data = layers.encode(&key, &mut obj).unwrap();
        let stored = layers.transform_to_storage(&key, data).unwrap();
        let existed = !self
            .client
            .get(key.as_str(), None)
            .await
            .unwrap()
            .kvs()
            .is_empty();
        let response = self
            .client
            .put(key.as_str(), stored.to_vec(), None)
            .await
            .unwrap();
        let revision = response.header().unwrap().revision();
        let kind = if existed { "MODIFIED" } else { "ADDED" };
        if !self.keys.contains(&key) {
            self.keys.push(key.clone());
        }
        self.ops.push(Op {
            revision,
            key,
            kind,
        });
        revision
    }

    async fn delete(&mut self, resource: &str, name: &str) -> i64 {
        let key = Self::key(resource, name);
        let response = self.client.delete(key.as_str(), None).await.unwrap();
        assert_eq!(response.deleted(), 1, "{key}");
        let revision = response.header().unwrap().revision();
        self.ops.push(Op {
            revision,
            key,
            kind: "DELETED",
        });
        revision
    }
}

/// Starts etcd, writes, compacts, writes more, records etcd's answers and saves a
/// snapshot through etcd's maintenance API (with the sha256 etcd appends).
pub async fn fixture() -> Fixture {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    let client = Client::connect([etcd.endpoint()], None).await.unwrap();
    let mut w = Writer {
        client,
        ops: Vec::new(),
        keys: Vec::new(),
    };
    for name in ["cm1", "cm2", "cm3", "cm4", "cm5"] {
        w.put("configmaps", name, 1).await;
    }
    for name in ["p1", "p2", "p3"] {
        w.put("pods", name, 1).await;
    }
    for name in ["s1", "s2"] {
        w.put("secrets", name, 1).await;
    }
    w.put("configmaps", "cm1", 2).await;
    w.delete("configmaps", "cm4").await;
    w.put("pods", "p1", 2).await;
    w.delete("pods", "p3").await;
    w.put("configmaps", "cm1", 3).await;
    w.put("secrets", "s1", 2).await;
    w.put("configmaps", "cm2", 2).await;
    let compacted = w.put("configmaps", "cm5", 2).await;
    w.client
        .compact(compacted, Some(CompactionOptions::new().with_physical()))
        .await
        .unwrap();
    w.put("configmaps", "cm1", 4).await;
    w.delete("configmaps", "cm2").await;
    w.put("configmaps", "cm6", 1).await;
    w.put("pods", "p2", 2).await;
    w.delete("secrets", "s2").await;
    w.put("secrets", "s3", 1).await;
    w.put("configmaps", "cm2", 3).await; // recreated after its deletion
    let current = w.put("configmaps", "cm3", 2).await;

    let mut seen = BTreeMap::new();
    for key in &w.keys {
        for rev in compacted..=current {
            let options = GetOptions::new().with_revision(rev);
            let response = w.client.get(key.as_str(), Some(options)).await.unwrap();
            let value = response.kvs().first().map(|kv| Seen {
                value: kv.value().to_vec(),
                mod_revision: kv.mod_revision(),
                create_revision: kv.create_revision(),
                version: kv.version(),
            });
            seen.insert((key.clone(), rev), value);
        }
    }

    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("snapshot.db");
    let mut bytes = Vec::new();
    let mut stream = w.client.snapshot().await.unwrap();
    while let Some(message) = stream.message().await.unwrap() {
        bytes.extend_from_slice(message.blob());
    }
    std::fs::write(&snapshot, &bytes).unwrap();
    Fixture {
        etcd,
        dir,
        snapshot,
        compacted,
        current,
        seen,
        ops: w.ops,
        keys: w.keys,
    }
}
