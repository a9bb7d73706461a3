//! The in-memory side of the conformance suite: a store over a key space of its own
//! with the reference's `PrefixTransformer`, and raw access around it.

// Test support: a failed step must fail the test loudly.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apistore_memory::{KvConfig, MemoryKv, MemoryStore, MemoryStoreConfig};
use apistore_testing::suite::{Backend, Needs, Pod, PodFactory, PrefixTransformer, ReadHook};

/// The key the first compaction writes, outside every store's prefix (as kube's
/// compactor's `compact_rev_key`).
const COMPACT_REV_KEY: &str = "compact_rev_key";

/// One test's store. Every case gets a key space of its own (they cost nothing), so
/// `Needs::Shared` and `Needs::Fresh` are the same here; `Needs::ProgressNotify` sets
/// progress notifications every second, as the etcd runner's etcd flag does.
pub struct MemoryBackend {
    pub store: MemoryStore<Pod>,
    pub kv: MemoryKv,
    pub transformer: Arc<PrefixTransformer>,
    reads_seen: AtomicU64,
}

/// The suite's backend constructor.
pub async fn backend(test_name: &str, needs: Needs) -> MemoryBackend {
    let mut config = KvConfig::default();
    if needs == Needs::ProgressNotify {
        config.progress_notify_interval = Duration::from_secs(1);
    }
    MemoryBackend::new(test_name, config)
}

impl MemoryBackend {
    pub fn new(test_name: &str, config: KvConfig) -> Self {
        let kv = MemoryKv::new(config);
        let transformer = Arc::new(PrefixTransformer::new(b"test!"));
        let store_config = MemoryStoreConfig {
            prefix: format!("/{test_name}"),
            ..MemoryStoreConfig::for_resource("pods")
        };
        let store =
            MemoryStore::new(kv.clone(), store_config).with_transformer(transformer.clone());
        Self {
            store,
            kv,
            transformer,
            reads_seen: AtomicU64::new(0),
        }
    }
}

impl Backend for MemoryBackend {
    type Store = MemoryStore<Pod>;

    fn store(&self) -> &Self::Store {
        &self.store
    }

    fn stored_key(&self, key: &str) -> String {
        self.store
            .prepare_key(key)
            .unwrap_or_else(|err| panic!("{err}"))
    }

    async fn raw_get(&self, stored_key: &str) -> Option<Vec<u8>> {
        self.kv.raw_get(stored_key).map(|value| value.to_vec())
    }

    async fn raw_put(&self, stored_key: &str, value: Vec<u8>) {
        self.kv.raw_put(stored_key, value);
    }

    fn transformer_prefix(&self) -> &[u8] {
        &self.transformer.prefix
    }

    fn set_transformer_stale(&self, stale: bool) {
        self.transformer.stale.store(stale, Ordering::SeqCst);
    }

    fn take_transformer_reads(&self) -> u64 {
        self.transformer.take_reads()
    }

    fn take_storage_reads(&self) -> u64 {
        let now = self.store.reads();
        now - self.reads_seen.swap(now, Ordering::SeqCst)
    }

    async fn compact(&self, resource_version: &str) {
        let rev: i64 = resource_version.parse().unwrap();
        if self.kv.raw_get(COMPACT_REV_KEY).is_none() {
            self.kv.raw_put(COMPACT_REV_KEY, rev.to_string());
            if rev != 0 {
                self.kv.compact(rev).unwrap();
            }
        }
    }

    /// The transformer's read hook creates `next()` through a second handle on the
    /// store. The in-memory store decodes outside its lock, so the create can run right
    /// inside the read; its future never waits, so it is driven to completion here.
    fn create_on_read(&self, next: Option<PodFactory>) -> bool {
        use apistore_storage::Storage;
        let hook = next.map(|next| {
            let store = self.store.clone();
            let hook: ReadHook = Arc::new(move || {
                let Some(pod) = next() else {
                    return Ok(());
                };
                let key = pod.key();
                futures::executor::block_on(store.create(&key, pod, 0))
                    .map(drop)
                    .map_err(|err| format!("creating {key} during a read: {err}"))
            });
            hook
        });
        self.transformer.set_read_hook(hook);
        true
    }

    fn watch_list_store(&self) -> Option<Self::Store> {
        Some(self.store.clone().with_watch_list(true))
    }

    fn store_with_unsafe_malformed_object_deletion(&self, enabled: bool) -> Option<Self::Store> {
        Some(
            self.store
                .clone()
                .with_unsafe_malformed_object_deletion(enabled),
        )
    }

    fn set_transformer_failing(&self, failing: bool) -> bool {
        self.transformer.set_failing(failing);
        true
    }

    fn active_watches(&self) -> Option<usize> {
        Some(self.store.active_watches())
    }
}
