//! The bench's own etcd, the two connections (the store's and the baseline's), and the
//! untimed housekeeping between runs: filling namespaces, clearing them, compacting.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, StoreConfig};
use apistore_storage::Storage;
use apistore_testing::etcd::EtcdServer;
use etcd_client::{CompactionOptions, DeleteOptions as EtcdDeleteOptions, GetOptions};

use crate::cpu::CpuMeter;
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};
use crate::object::{BenchObject, NAME_LEN, RESOURCE, etcd_key, etcd_namespace_prefix, store_key};
use crate::raw::Raw;
use crate::settings::Settings;

/// Callers used for untimed filling.
const FILL_CALLERS: usize = 16;

/// How long a physical compaction may take. etcd answers one only when the history is
/// gone from its database; after the kube section's write-throughput rows (millions of
/// revisions) that took longer than the 20 s of the measured connections on this
/// 2-core machine, and the run reported the section failed after its rows were done.
const COMPACTION_TIMEOUT: Duration = Duration::from_secs(600);

/// One side of a comparison's way to reach etcd.
#[derive(Clone)]
pub(crate) enum Backend {
    /// The apistore etcd3 store.
    Store(Arc<Etcd3Store<BenchObject>>),
    /// The raw etcd-client baseline.
    Raw(Arc<Raw>),
}

/// Everything the workloads share.
pub(crate) struct Bench {
    /// The run's sizes.
    pub(crate) settings: Settings,
    /// CPU time of this process and of etcd.
    pub(crate) cpu: CpuMeter,
    /// The store's connection (stores for the encryption and telemetry arms share it).
    pub(crate) client: EtcdClient,
    /// The plain store: JSON, identity, no metrics.
    pub(crate) store: Arc<Etcd3Store<BenchObject>>,
    /// The baseline's connection.
    pub(crate) raw: Arc<Raw>,
    /// The server's endpoint, for a connection of a thread's own.
    pub(crate) endpoint: String,
    /// A connection for compactions alone, whose calls may take [`COMPACTION_TIMEOUT`].
    compactor: Raw,
    namespaces: AtomicU64,
    compacted: AtomicI64,
    /// Whether the server takes a ranged delete (etcd does; kine refuses DeleteRange).
    range_deletes: bool,
}

impl Bench {
    /// Connects both sides to the running etcd.
    pub(crate) async fn connect(etcd: &EtcdServer, settings: Settings) -> Result<Self> {
        let pid = etcd
            .pid()
            .ok_or_else(|| BenchError::Invalid("etcd is not running".to_owned()))?;
        Self::connect_to(&etcd.endpoint(), pid, true, settings).await
    }

    /// Connects both sides to the server at `endpoint` whose process is `pid` (etcd, or
    /// kine: `range_deletes` false, so runs are left in place rather than cleared).
    pub(crate) async fn connect_to(
        endpoint: &str,
        pid: u32,
        range_deletes: bool,
        settings: Settings,
    ) -> Result<Self> {
        let client = EtcdClient::connect(&ClientConfig::new([endpoint.to_owned()])).await?;
        let store = Arc::new(Etcd3Store::new(client.clone(), Self::store_config()));
        let raw = Arc::new(Raw::connect(endpoint).await?);
        let compactor = Raw::connect_with_timeout(endpoint, COMPACTION_TIMEOUT).await?;
        Ok(Self {
            settings,
            cpu: CpuMeter::new(pid),
            client,
            store,
            raw,
            endpoint: endpoint.to_owned(),
            compactor,
            namespaces: AtomicU64::new(0),
            compacted: AtomicI64::new(0),
            range_deletes,
        })
    }

    /// The configuration of every store in the bench.
    pub(crate) fn store_config() -> StoreConfig {
        StoreConfig::for_resource(RESOURCE)
    }

    /// A namespace no earlier run used.
    pub(crate) fn fresh_namespace(&self, tag: &str) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        format!("{tag}-{n}")
    }

    /// The object template of a namespace.
    pub(crate) fn template(namespace: &str) -> Arc<BenchObject> {
        Arc::new(BenchObject::template(namespace, NAME_LEN))
    }

    /// Creates the named objects in `namespace` through `via`, 16 at a time (untimed).
    pub(crate) async fn fill(
        &self,
        namespace: &str,
        names: Vec<String>,
        via: &Backend,
    ) -> Result<()> {
        let total = names.len() as u64;
        let names = Arc::new(names);
        let template = Self::template(namespace);
        let namespace: Arc<str> = namespace.into();
        let via = via.clone();
        let op = driver::op(move |caller, seq| {
            let index = seq * FILL_CALLERS as u64 + caller as u64;
            let name = usize::try_from(index)
                .ok()
                .and_then(|i| names.get(i).cloned());
            let template = Arc::clone(&template);
            let namespace = Arc::clone(&namespace);
            let via = via.clone();
            async move {
                let Some(name) = name else { return Ok(()) };
                let object = template.named(name.clone());
                match via {
                    Backend::Store(store) => {
                        store
                            .create(&store_key(&namespace, &name), object, 0)
                            .await?;
                    }
                    Backend::Raw(raw) => {
                        raw.create(&etcd_key(&namespace, &name), object).await?;
                    }
                }
                Ok(())
            }
        });
        let per_caller = total.div_ceil(FILL_CALLERS as u64);
        driver::drive(&self.cpu, FILL_CALLERS, Plan::Count(per_caller), &op, None).await?;
        Ok(())
    }

    /// Deletes every object in `namespace` (untimed); on a server without ranged
    /// deletes (kine) leaves them: every run writes to a fresh namespace, so what an
    /// earlier run left is never read again.
    pub(crate) async fn clear(&self, namespace: &str) -> Result<()> {
        if !self.range_deletes {
            return Ok(());
        }
        let mut kv = self.raw.client().kv_client();
        kv.delete(
            etcd_namespace_prefix(namespace),
            Some(EtcdDeleteOptions::new().with_prefix()),
        )
        .await?;
        Ok(())
    }

    /// etcd's current revision.
    pub(crate) async fn current_revision(&self) -> Result<i64> {
        let mut kv = self.raw.client().kv_client();
        let response = kv
            .get("/", Some(GetOptions::new().with_count_only()))
            .await
            .map_err(|source| BenchError::EtcdCall {
                what: "reading the current revision",
                source,
            })?;
        Ok(response
            .header()
            .map_or(0, etcd_client::ResponseHeader::revision))
    }

    /// Compacts etcd's history up to now and waits until it is done, so that a workload
    /// does not pay for the history of the ones before it.
    pub(crate) async fn compact(&self) -> Result<()> {
        let revision = self.current_revision().await?;
        // etcd refuses to compact twice at the same revision.
        if self.compacted.swap(revision, Ordering::Relaxed) == revision {
            return Ok(());
        }
        let mut kv = self.compactor.client().kv_client();
        kv.compact(revision, Some(CompactionOptions::new().with_physical()))
            .await
            .map_err(|source| BenchError::EtcdCall {
                what: "compacting (physical)",
                source,
            })?;
        Ok(())
    }
}
