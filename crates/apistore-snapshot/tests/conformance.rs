//! The read cases of `apistore-testing`'s conformance suite, with every read served
//! from a snapshot: the suite's writes go to a real etcd through the etcd3 store, and
//! each read first saves a snapshot of that etcd (when it has changed since the last
//! one) and answers from a [`SnapshotStore`] over it, with the same prefix and test
//! transformer. The watch cases are left out: they write while a watch runs, and a
//! snapshot's watch is a replay of the file that ends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig};
use apistore_snapshot::{Snapshot, SnapshotStore, SnapshotStoreConfig};
use apistore_storage::{
    DeleteOptions, GetOptions, JsonCodec, KubeVersion, ListOptions, ObjectList, ResponseMeta,
    Result, Storage, Update, UpdateOptions, Versioner, WatchStream,
};
use apistore_testing::etcd::{EtcdOptions, EtcdServer, unique_prefix};
use apistore_testing::suite::{Backend, Needs, Pod, PrefixTransformer};

/// The last snapshot store and the etcd revision it was saved at.
type Saved = (i64, SnapshotStore<Pod>);

/// Writes to etcd, reads from a snapshot of it.
#[derive(Clone)]
struct SnapshotReads {
    live: Etcd3Store<Pod>,
    raw: etcd_client::Client,
    prefix: String,
    transformer: Arc<PrefixTransformer>,
    dir: Arc<tempfile::TempDir>,
    /// The snapshot store and the etcd revision it was saved at; `None` when a
    /// compaction made it stale.
    current: Arc<Mutex<Option<Saved>>>,
    saves: Arc<AtomicU64>,
    /// Reads of every snapshot store, and how many the suite has been told of.
    reads: Arc<AtomicU64>,
    reads_seen: Arc<AtomicU64>,
    /// Whether the test turned size estimation on (each snapshot store is new).
    size_estimation: Arc<AtomicBool>,
}

impl SnapshotReads {
    /// A snapshot store of etcd as it is now: the last one, if etcd has not moved.
    async fn reader(&self) -> SnapshotStore<Pod> {
        let mut raw = self.raw.clone();
        let revision = raw
            .get("compact_rev_key", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
        if let Some((at, store)) = self.current.lock().unwrap().as_ref() {
            if *at == revision {
                return store.clone();
            }
        }
        let mut bytes = Vec::new();
        let mut stream = raw.snapshot().await.unwrap();
        while let Some(message) = stream.message().await.unwrap() {
            bytes.extend_from_slice(message.blob());
        }
        let n = self.saves.fetch_add(1, Ordering::SeqCst);
        let path = self.dir.path().join(format!("snapshot-{n}.db"));
        std::fs::write(&path, &bytes).unwrap();
        let snapshot = Arc::new(Snapshot::open(&path).unwrap());
        let store = SnapshotStore::with_parts(
            snapshot,
            SnapshotStoreConfig {
                prefix: self.prefix.clone(),
            },
            Arc::new(JsonCodec::<Pod>::new()),
            self.transformer.clone(),
        )
        .with_read_counter(Arc::clone(&self.reads));
        *self.current.lock().unwrap() = Some((revision, store.clone()));
        store
    }
}

impl Storage for SnapshotReads {
    type Object = Pod;

    fn versioner(&self) -> &dyn Versioner {
        self.live.versioner()
    }

    async fn create(&self, key: &str, object: Pod, ttl: u64) -> Result<Pod> {
        self.live.create(key, object, ttl).await
    }

    async fn get(&self, key: &str, options: &GetOptions) -> Result<Pod> {
        self.reader().await.get(key, options).await
    }

    async fn delete(&self, key: &str, options: DeleteOptions<Pod>) -> Result<Pod> {
        self.live.delete(key, options).await
    }

    async fn guaranteed_update<F>(
        &self,
        key: &str,
        options: UpdateOptions<Pod>,
        try_update: F,
    ) -> Result<Pod>
    where
        F: FnMut(Pod, &ResponseMeta) -> Result<Update<Pod>> + Send,
    {
        self.live.guaranteed_update(key, options, try_update).await
    }

    async fn list(&self, key: &str, options: &ListOptions) -> Result<ObjectList<Pod>> {
        self.reader().await.list(key, options).await
    }

    async fn watch(&self, key: &str, options: &ListOptions) -> Result<WatchStream<Pod>> {
        self.reader().await.watch(key, options).await
    }

    async fn count(&self, key: &str) -> Result<i64> {
        self.reader().await.count(key).await
    }

    async fn readiness_check(&self) -> Result<()> {
        Ok(())
    }

    async fn request_watch_progress(&self) -> Result<()> {
        Ok(())
    }

    async fn get_current_resource_version(&self) -> Result<u64> {
        self.reader().await.get_current_resource_version().await
    }

    async fn stats(&self) -> Result<apistore_storage::Stats> {
        let reader = self.reader().await.with_resource_prefix("/pods");
        if self.size_estimation.load(Ordering::SeqCst) {
            // A read after a write is a new store over a new file: it estimates when
            // the test asked for it. (Without a write in between, the reader is the
            // last one, on already.)
            let _ = reader
                .enable_resource_size_estimation(Arc::new(|| Box::pin(async { Ok(Vec::new()) })));
        }
        reader.stats().await
    }

    fn enable_resource_size_estimation(&self, _keys: apistore_storage::KeysFn) -> Result<()> {
        if self.size_estimation.swap(true, Ordering::SeqCst) {
            return Err(apistore_storage::StorageError::Internal {
                key: "/pods".to_owned(),
                message: "resource size estimation is already enabled".to_owned(),
                source: None,
            });
        }
        Ok(())
    }

    fn compact_revision(&self) -> i64 {
        self.current
            .lock()
            .unwrap()
            .as_ref()
            .map_or(0, |(_, store)| store.compact_revision())
    }
}

struct SnapshotBackend {
    store: SnapshotReads,
    _etcd: EtcdServer,
}

async fn backend(test_name: &str, _needs: Needs) -> SnapshotBackend {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap();
    let endpoint = etcd.endpoint();
    let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()]))
        .await
        .unwrap();
    let transformer = Arc::new(PrefixTransformer::new(b"test!"));
    let prefix = unique_prefix(test_name);
    let config = StoreConfig {
        resource: ResourceConfig {
            prefix: prefix.clone(),
            kube_version: KubeVersion::V1_31,
            ..ResourceConfig::for_resource("pods")
        },
        ..StoreConfig::default()
    };
    let live = Etcd3Store::new(client, config).with_transformer(transformer.clone());
    let raw = etcd_client::Client::connect([endpoint], None)
        .await
        .unwrap();
    SnapshotBackend {
        store: SnapshotReads {
            live,
            raw,
            prefix,
            transformer,
            dir: Arc::new(tempfile::tempdir().unwrap()),
            current: Arc::new(Mutex::new(None)),
            saves: Arc::new(AtomicU64::new(0)),
            reads: Arc::new(AtomicU64::new(0)),
            reads_seen: Arc::new(AtomicU64::new(0)),
            size_estimation: Arc::new(AtomicBool::new(false)),
        },
        _etcd: etcd,
    }
}

impl Backend for SnapshotBackend {
    type Store = SnapshotReads;

    fn store(&self) -> &Self::Store {
        &self.store
    }

    fn stored_key(&self, key: &str) -> String {
        self.store.live.prepare_key(key).unwrap()
    }

    async fn raw_get(&self, stored_key: &str) -> Option<Vec<u8>> {
        let mut kv = self.store.raw.kv_client();
        let response = kv.get(stored_key, None).await.unwrap();
        response.kvs().first().map(|kv| kv.value().to_vec())
    }

    async fn raw_put(&self, stored_key: &str, value: Vec<u8>) {
        let mut kv = self.store.raw.kv_client();
        kv.put(stored_key, value, None).await.unwrap();
    }

    fn transformer_prefix(&self) -> &[u8] {
        &self.store.transformer.prefix
    }

    fn set_transformer_stale(&self, stale: bool) {
        self.store.transformer.stale.store(stale, Ordering::SeqCst);
    }

    fn take_transformer_reads(&self) -> u64 {
        self.store.transformer.take_reads()
    }

    fn take_storage_reads(&self) -> u64 {
        let now = self.store.reads.load(Ordering::SeqCst);
        now - self.store.reads_seen.swap(now, Ordering::SeqCst)
    }

    async fn compact(&self, resource_version: &str) {
        use etcd_client::{CompactionOptions, Compare, CompareOp, Txn, TxnOp};
        let rev: i64 = resource_version.parse().unwrap();
        let mut kv = self.store.raw.kv_client();
        let txn = Txn::new()
            .when([Compare::version("compact_rev_key", CompareOp::Equal, 0)])
            .and_then([TxnOp::put("compact_rev_key", rev.to_string(), None)])
            .or_else([TxnOp::get("compact_rev_key", None)]);
        let response = kv.txn(txn).await.unwrap();
        if response.succeeded() && rev != 0 {
            let options = CompactionOptions::new().with_physical();
            kv.compact(rev, Some(options)).await.unwrap();
        }
        // The compaction moved no revision: the next read saves a new snapshot.
        *self.store.current.lock().unwrap() = None;
    }

    fn set_transformer_failing(&self, failing: bool) -> bool {
        self.store.transformer.set_failing(failing);
        true
    }
}

apistore_testing::conformance_cases!(backend;
    run_test_get => run_test_get [Fresh],
    run_test_count => run_test_count [Fresh],
    run_test_invalid_keys => run_test_invalid_keys [Fresh],
    list_table_over_multi_level_data => run_test_list [Fresh],
    consistent_list_answers_the_current_revision => run_test_consistent_list [Fresh],
    non_recursive_list_reads_one_key_at_any_revision => run_test_get_list_non_recursive [Fresh],
    recursive_list_of_an_object_key_lists_nothing => run_test_get_list_recursive_prefix [Fresh],
    compacted_continue_token_is_gone_with_an_inconsistent_one => run_test_list_inconsistent_continuation [Fresh],
    one_undecryptable_item_fails_the_whole_list => run_test_transformation_failure_list [Fresh],
    continue_tokens_are_kube_apiservers => run_test_continue_tokens_are_kube_apiservers [Fresh],
    rare_object_is_found_in_ten_doubling_reads => run_test_list_pagination_rare_object [Fresh],
    continued_pages_keep_the_first_page_revision_and_read_once => run_test_list_continuation [Fresh],
    filtered_pages_fetch_more_but_decode_only_what_they_need => run_test_list_continuation_with_filter [Fresh],
    run_test_undecodable_value => run_test_undecodable_value [Fresh],
    run_test_transformation_failure => run_test_transformation_failure [Fresh],
    run_test_create => run_test_create [Fresh],
);
apistore_testing::interface_conformance!(backend);
