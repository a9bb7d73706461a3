//! The etcd3 side of the conformance suite: a store over the shared test etcd (or an
//! etcd of its own, for the cases that need one) with the reference's
//! `PrefixTransformer`, and raw etcd access around it.

#![allow(dead_code, unreachable_pub)]
// Test support: a failed step must fail the test loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig};
use apistore_storage::KubeVersion;
use apistore_telemetry::StorageMetrics;
use apistore_testing::etcd::{EtcdOptions, EtcdServer, shared_endpoint, unique_prefix};
use apistore_testing::suite::{Backend, Needs, Pod, PodFactory, PrefixTransformer, ReadHook};

/// One test's store, under a prefix of its own in the shared etcd (or in an etcd of
/// its own, for tests that compact or need etcd flags).
pub struct Etcd3Backend {
    pub store: Etcd3Store<Pod>,
    pub transformer: Arc<PrefixTransformer>,
    pub raw: etcd_client::Client,
    pub client: EtcdClient,
    pub endpoint: String,
    pub registry: prometheus::Registry,
    pub metrics: StorageMetrics,
    reads_seen: AtomicU64,
    /// An etcd of this test's own, when it has one; stopped on drop.
    pub server: Option<EtcdServer>,
}

/// The suite's backend constructor: the shared etcd for cases that can share one, an
/// etcd of their own for cases that compact or compare revisions, and one that sends
/// progress notifications every second for the cases that wait for them.
pub async fn backend(test_name: &str, needs: Needs) -> Etcd3Backend {
    match needs {
        Needs::Shared => Etcd3Backend::new(test_name).await,
        Needs::Fresh => Etcd3Backend::dedicated(test_name, EtcdOptions::default()).await,
        Needs::ProgressNotify => {
            let options = EtcdOptions {
                progress_notify_interval: Some(Duration::from_secs(1)),
                ..EtcdOptions::default()
            };
            Etcd3Backend::dedicated(test_name, options).await
        }
    }
}

/// [`backend`] with its store at kube 1.37 (the suites otherwise run it at 1.31): it sees
/// compactions made by other servers, and lists without a limit with one `RangeStream`
/// where etcd has it.
pub async fn backend_1_37(test_name: &str, needs: Needs) -> Etcd3Backend {
    let mut backend = backend(test_name, needs).await;
    backend.store = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    backend
}

impl Etcd3Backend {
    /// A backend on the shared etcd.
    pub async fn new(test_name: &str) -> Self {
        let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
        let endpoint = endpoint.split(',').next().unwrap_or_default().to_owned();
        Self::build(test_name, b"test!", endpoint, None).await
    }

    /// A backend on an etcd of its own (for tests that compact, or need etcd flags).
    pub async fn dedicated(test_name: &str, options: EtcdOptions) -> Self {
        let server = EtcdServer::start(options).unwrap_or_else(|err| panic!("{err}"));
        let endpoint = server.endpoint();
        Self::build(test_name, b"test!", endpoint, Some(server)).await
    }

    async fn build(
        test_name: &str,
        marker: &[u8],
        endpoint: String,
        server: Option<EtcdServer>,
    ) -> Self {
        let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()]))
            .await
            .unwrap_or_else(|err| panic!("connect to test etcd at {endpoint}: {err}"));
        let transformer = Arc::new(PrefixTransformer::new(marker));
        // The suite and these tests are ports of k8s.io/apiserver v0.31.1's: kube 1.31's
        // rules where the versions differ (tests of the later rules set their own).
        let config = StoreConfig {
            resource: ResourceConfig {
                prefix: unique_prefix(test_name),
                kube_version: KubeVersion::V1_31,
                ..ResourceConfig::for_resource("pods")
            },
            ..StoreConfig::default()
        };
        let registry = prometheus::Registry::new();
        let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_31).unwrap();
        let store = Etcd3Store::new(client.clone(), config)
            .with_transformer(transformer.clone())
            .with_metrics(metrics.clone());
        let raw = etcd_client::Client::connect([endpoint.clone()], None)
            .await
            .unwrap_or_else(|err| panic!("raw connect to {endpoint}: {err}"));
        Self {
            store,
            transformer,
            raw,
            client,
            endpoint,
            registry,
            metrics,
            reads_seen: AtomicU64::new(0),
            server,
        }
    }

    /// The etcd key the store uses for a store key (after prefixing).
    pub fn etcd_key(&self, key: &str) -> String {
        self.stored_key(key)
    }

    /// `etcd_requests_total` for the store's resource, summed over `operations`.
    pub fn requests_total(&self, operations: &[&str]) -> u64 {
        let mut total = 0.0;
        for family in self.registry.gather() {
            if family.name() != "etcd_requests_total" {
                continue;
            }
            for metric in family.get_metric() {
                let labels: Vec<(&str, &str)> = metric
                    .get_label()
                    .iter()
                    .map(|l| (l.name(), l.value()))
                    .collect();
                let operation_matches = labels
                    .iter()
                    .any(|(n, v)| *n == "operation" && operations.contains(v));
                let type_matches = labels.iter().any(|(n, v)| *n == "type" && *v == "pods");
                if operation_matches && type_matches {
                    total += metric.get_counter().get_value();
                }
            }
        }
        total as u64
    }
}

impl Backend for Etcd3Backend {
    type Store = Etcd3Store<Pod>;

    fn store(&self) -> &Self::Store {
        &self.store
    }

    fn stored_key(&self, key: &str) -> String {
        self.store
            .prepare_key(key)
            .unwrap_or_else(|err| panic!("{err}"))
    }

    async fn raw_get(&self, stored_key: &str) -> Option<Vec<u8>> {
        let mut kv = self.raw.kv_client();
        let response = kv.get(stored_key, None).await.unwrap();
        response.kvs().first().map(|kv| kv.value().to_vec())
    }

    async fn raw_put(&self, stored_key: &str, value: Vec<u8>) {
        let mut kv = self.raw.kv_client();
        kv.put(stored_key, value, None).await.unwrap();
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
        // A RangeStream (kube 1.37 on etcd 3.7+) is one read, however many chunks.
        let now = self.requests_total(&["get", "list", "listStream"]);
        now - self.reads_seen.swap(now, Ordering::SeqCst)
    }

    async fn compact(&self, resource_version: &str) {
        use etcd_client::{Compare, CompareOp, Txn, TxnOp};
        let rev: i64 = resource_version.parse().unwrap();
        let mut kv = self.raw.kv_client();
        let txn = Txn::new()
            .when([Compare::version("compact_rev_key", CompareOp::Equal, 0)])
            .and_then([TxnOp::put("compact_rev_key", rev.to_string(), None)])
            .or_else([TxnOp::get("compact_rev_key", None)]);
        let response = kv.txn(txn).await.unwrap();
        if response.succeeded() && rev != 0 {
            kv.compact(rev, None).await.unwrap();
        }
    }

    /// The transformer's read hook creates `next()` through a second handle on the
    /// store. A read is synchronous and runs inside the store's list, so the create
    /// blocks this worker thread (`block_in_place`) until etcd has answered; the tests
    /// run on the multi-threaded runtime, which allows it.
    fn create_on_read(&self, next: Option<PodFactory>) -> bool {
        use apistore_storage::Storage;
        let hook = next.map(|next| {
            let store = self.store.clone();
            let hook: ReadHook = Arc::new(move || {
                let Some(pod) = next() else {
                    return Ok(());
                };
                let key = pod.key();
                tokio::task::block_in_place(|| {
                    tokio::runtime::Handle::current().block_on(store.create(&key, pod, 0))
                })
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

    /// The reference's `failingTransformer`: every read fails.
    fn set_transformer_failing(&self, failing: bool) -> bool {
        self.transformer.set_failing(failing);
        true
    }

    fn active_watches(&self) -> Option<usize> {
        Some(self.store.active_watches())
    }
}

/// The text of etcd's `/metrics` on the member at `endpoint` (an `http://` client URL):
/// a plain HTTP/1.0 GET on its client port.
pub fn etcd_metrics(endpoint: &str) -> String {
    let address = endpoint.strip_prefix("http://").unwrap();
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    std::io::Write::write_all(
        &mut stream,
        format!("GET /metrics HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut body = String::new();
    std::io::Read::read_to_string(&mut stream, &mut body).unwrap();
    body
}
