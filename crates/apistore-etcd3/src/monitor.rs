//! The periodic storage figures of kube-apiserver: the object count per resource
//! (`apiserver_storage_objects`) and the database size per storage cluster
//! (`apiserver_storage_size_bytes`).
//!
//! kube-apiserver polls the count of each resource from its registry (every
//! `--etcd-count-metric-poll-period`, 1 minute by default, -1 when the count fails) and
//! reads the database size from a member's status (the deprecated per-endpoint gauge
//! every `--etcd-db-metric-poll-interval`, 30 s by default; the stable
//! `apiserver_storage_size_bytes` on each scrape, left out when the status fails).
//! Here both are pollers on the tokio runtime at an interval the caller sets, with the
//! reference's jitter (each wait is the interval plus up to half of it again, so that
//! many API servers do not poll in step), and the first poll at once.
//!
//! A poller stops when its [`PollHandle`] is dropped; the count poller also stops when
//! every clone of its store is gone.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Weak};
use std::time::Duration;

use apistore_storage::{ApiObject, KubeVersion};
use apistore_telemetry::StorageMetrics;
use tokio::task::JoinHandle;

use crate::client::EtcdClient;
use crate::store::Etcd3Store;

/// How long one status request of the size poller may take, as the reference's
/// collector allows per scrape.
pub const STORAGE_SIZE_TIMEOUT: Duration = Duration::from_secs(1);

/// kube-apiserver's default object count poll period (`--etcd-count-metric-poll-period`).
pub const DEFAULT_OBJECT_COUNT_POLL_INTERVAL: Duration = Duration::from_secs(60);

/// kube-apiserver's default database size poll interval (`--etcd-db-metric-poll-interval`).
pub const DEFAULT_STORAGE_SIZE_POLL_INTERVAL: Duration = Duration::from_secs(30);

/// Why a poller could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PollError {
    /// Pollers are tokio tasks; they can only be started from within a runtime.
    #[error("cannot start the {what} poller outside a tokio runtime")]
    NoRuntime {
        /// Which poller.
        what: &'static str,
    },
    /// The store records no metrics, so a count would have nowhere to go.
    #[error("cannot poll the object count of {resource:?}: the store has no metrics")]
    NoMetrics {
        /// The store's group-resource.
        resource: String,
    },
    /// The store has no usable resource prefix to count under (its `StoreConfig`'s
    /// `resource_prefix`, `/pods` for `StoreConfig::for_resource("pods")`).
    #[error("cannot poll the object count of {resource:?}: {source}")]
    BadResourcePrefix {
        /// The store's group-resource.
        resource: String,
        /// Why the prefix is not a key.
        #[source]
        source: apistore_storage::StorageError,
    },
    /// A zero interval would poll etcd in a busy loop.
    #[error("the {what} poll interval must be more than zero")]
    ZeroInterval {
        /// Which poller.
        what: &'static str,
    },
}

/// A running poller; dropping it stops the poller.
#[derive(Debug)]
#[must_use = "the poller stops when its handle is dropped"]
pub struct PollHandle {
    task: JoinHandle<()>,
}

impl PollHandle {
    /// Whether the poller has stopped (its store was dropped, or it was stopped).
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }

    /// Stops the poller now; the same as dropping the handle.
    pub fn stop(self) {}
}

impl Drop for PollHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn spawn(
    what: &'static str,
    interval: Duration,
    task: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<PollHandle, PollError> {
    if interval.is_zero() {
        return Err(PollError::ZeroInterval { what });
    }
    let runtime =
        tokio::runtime::Handle::try_current().map_err(|_| PollError::NoRuntime { what })?;
    Ok(PollHandle {
        task: runtime.spawn(task),
    })
}

/// `interval` plus a random part of up to half of it, as the reference's
/// `wait.JitterUntil(..., 0.5, ...)`.
fn jittered(interval: Duration) -> Duration {
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0);
    // A fraction in [0, 1) from 53 random bits.
    let fraction = (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64;
    interval + interval.mul_f64(0.5 * fraction)
}

impl<T> Etcd3Store<T>
where
    T: ApiObject + Clone + Default + Send + Sync + 'static,
{
    /// Polls the number of objects under this store's resource prefix every `interval`
    /// (plus jitter; the first poll at once) into `apiserver_storage_objects{resource}`,
    /// -1 when the count fails, as kube-apiserver's registry does. Each poll is one
    /// count request, recorded as `listWithCount` like any other.
    ///
    /// A store following kube 1.34 or later polls its `Stats` instead (the count, or
    /// the size estimate when that is on) and sets kube 1.34's
    /// `apiserver_resource_objects{group,resource}` and
    /// `apiserver_resource_size_estimate_bytes{group,resource}` too.
    ///
    /// The poller stops when the handle is dropped, and at its next tick once every
    /// clone of this store (and every watch made from it) has been dropped.
    pub fn poll_object_count(&self, interval: Duration) -> Result<PollHandle, PollError> {
        let what = "object count";
        let Some(metrics) = self.metrics().cloned() else {
            return Err(PollError::NoMetrics {
                resource: self.group_resource().to_owned(),
            });
        };
        // Refused now rather than reported as -1 on every poll.
        if let Err(source) = self.prepare_key(self.resource_prefix()) {
            return Err(PollError::BadResourcePrefix {
                resource: self.group_resource().to_owned(),
                source,
            });
        }
        // The poller counts through a store of its own connection handle, and watches
        // the caller's one only weakly, so that it does not keep the store alive.
        let store_alive: Weak<EtcdClient> = Arc::downgrade(&self.client);
        let mut poller = self.clone();
        poller.client = Arc::new(EtcdClient::clone(&self.client));
        spawn(what, interval, async move {
            let resource_prefix = poller.resource_prefix().to_owned();
            loop {
                if store_alive.strong_count() == 0 {
                    return;
                }
                if poller.kube_version >= KubeVersion::V1_34 {
                    // kube 1.34+: `Stats`, into the new families as well.
                    let stats = match poller.resource_stats().await {
                        Ok(stats) => Some(stats),
                        Err(err) => {
                            tracing::debug!(
                                resource = %poller.group_resource(),
                                error = %err,
                                "failed to update the storage stats"
                            );
                            None
                        }
                    };
                    metrics.set_resource_stats(poller.group_resource(), stats);
                    tokio::time::sleep(jittered(interval)).await;
                    continue;
                }
                let count = match poller.count_objects(&resource_prefix).await {
                    Ok(count) => count,
                    Err(err) => {
                        tracing::debug!(
                            resource = %poller.group_resource(),
                            error = %err,
                            "failed to update the storage object count"
                        );
                        -1
                    }
                };
                metrics.set_object_count(poller.group_resource(), count);
                tokio::time::sleep(jittered(interval)).await;
            }
        })
    }
}

impl EtcdClient {
    /// Polls etcd's database size every `interval` (plus jitter; the first poll at
    /// once) into `apiserver_storage_size_bytes{storage_cluster_id}`. kube-apiserver
    /// names its storage clusters `etcd-0`, `etcd-1`, ... in the order of its storage
    /// backends; pass the same id to keep dashboards working.
    ///
    /// Each poll asks one member for its status (the client picks which, as the
    /// reference picks one at random), waiting at most [`STORAGE_SIZE_TIMEOUT`]; when
    /// that fails the series is removed until a poll succeeds, as the reference leaves
    /// it out of a scrape. The poller stops when the handle is dropped.
    pub fn poll_storage_size(
        &self,
        metrics: StorageMetrics,
        storage_cluster_id: impl Into<String>,
        interval: Duration,
    ) -> Result<PollHandle, PollError> {
        let cluster = storage_cluster_id.into();
        let mut maintenance = self.inner.maintenance_client();
        spawn("storage size", interval, async move {
            loop {
                match tokio::time::timeout(STORAGE_SIZE_TIMEOUT, maintenance.status()).await {
                    Ok(Ok(status)) => metrics.set_storage_size(&cluster, status.db_size()),
                    failed => {
                        let error = match failed {
                            Ok(Err(err)) => err.to_string(),
                            _ => format!("no answer within {STORAGE_SIZE_TIMEOUT:?}"),
                        };
                        tracing::debug!(
                            storage_cluster_id = %cluster,
                            %error,
                            "failed to get the storage size"
                        );
                        metrics.clear_storage_size(&cluster);
                    }
                }
                tokio::time::sleep(jittered(interval)).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_adds_up_to_half_the_interval() {
        let interval = Duration::from_secs(30);
        let waits: Vec<Duration> = (0..200).map(|_| jittered(interval)).collect();
        assert!(
            waits
                .iter()
                .all(|w| *w >= interval && *w < interval + interval / 2)
        );
        // Not the same wait every time.
        assert!(waits.iter().any(|w| *w != waits[0]));
    }
}
