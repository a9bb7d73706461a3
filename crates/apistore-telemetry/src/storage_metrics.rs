//! [`StorageMetrics`]: the handle stores record through.
//!
//! Follows the recording functions of `pkg/storage/etcd3/metrics/metrics.go`
//! (`RecordEtcdRequest`, `RecordStorageListMetrics`, `UpdateObjectCount`, ...) and
//! `pkg/storage/value/metrics.go` (`RecordTransformation`, ...). Where kube-apiserver
//! keeps the metrics in package globals, here they live in one registered set per
//! registry, shared by every store that registers into it.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apistore_storage::{CachedListObserver, GroupResource, KubeVersion, Stats};
use prometheus::Histogram;

use crate::envelope_metrics::KeyIdSeries;
use crate::families::Families;
use crate::label_cache::LabelCache;
use crate::labels::{Operation, TransformationType};
use crate::resource_metrics::ResourceMetrics;
use crate::transformation::PrefixHandles;

/// kube-apiserver's storage metrics, registered in one Prometheus registry.
///
/// Get one with [`StorageMetrics::register`] or [`StorageMetrics::default_registry`];
/// registering into the same registry again returns the same metrics, so every store
/// of a process can register independently. Cloning is cheap (one `Arc`).
///
/// Methods taking a resource string resolve its series through a cache; a store that
/// records for one resource can skip even that lookup with
/// [`StorageMetrics::for_resource`].
#[derive(Clone)]
pub struct StorageMetrics {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) families: Arc<Families>,
    resources: LabelCache<ResourceMetrics>,
    /// Transformation handles by resource, then by transformer prefix.
    prefixes: LabelCache<LabelCache<PrefixHandles>>,
    lease_object_counts: OnceLock<Histogram>,
    pub(crate) key_id_series: KeyIdSeries,
}

impl std::fmt::Debug for StorageMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageMetrics").finish_non_exhaustive()
    }
}

impl StorageMetrics {
    /// Builds an unregistered set of metrics with kube `version`'s families and labels.
    pub(crate) fn build(version: KubeVersion) -> prometheus::Result<Self> {
        Ok(Self {
            inner: Arc::new(Inner {
                families: Arc::new(Families::new(version)?),
                resources: LabelCache::default(),
                prefixes: LabelCache::default(),
                lease_object_counts: OnceLock::new(),
                key_id_series: KeyIdSeries::default(),
            }),
        })
    }

    /// The kube minor whose families and labels these metrics have.
    pub fn kube_version(&self) -> KubeVersion {
        self.inner.families.version
    }

    /// Whether `self` and `other` are the same registered metrics.
    pub fn same_as(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The handles for one resource label, resolved once; record through them on hot
    /// paths. Series still appear only when first recorded.
    pub fn for_resource(&self, resource: &str) -> ResourceMetrics {
        self.with_resource(resource, ResourceMetrics::clone)
    }

    fn with_resource<R>(&self, resource: &str, f: impl FnOnce(&ResourceMetrics) -> R) -> R {
        let families = &self.inner.families;
        self.inner.resources.with(
            resource,
            |label| ResourceMetrics::new(Arc::clone(families), label),
            f,
        )
    }

    /// Records one etcd request under `operation` and `type_` (the GroupResource
    /// string; for Count kube-apiserver before 1.34 passes the key prefix instead). See
    /// [`ResourceMetrics::record_etcd_request`].
    pub fn record_etcd_request(
        &self,
        operation: Operation,
        type_: &str,
        ok: bool,
        elapsed: Duration,
    ) {
        self.with_resource(type_, |r| r.record_etcd_request(operation, ok, elapsed));
    }

    /// Counts one decode failure for `resource`.
    pub fn record_decode_error(&self, resource: &str) {
        self.with_resource(resource, ResourceMetrics::record_decode_error);
    }

    /// Records one LIST served from storage for `resource`. See
    /// [`ResourceMetrics::record_list`].
    pub fn record_list(&self, resource: &str, fetched: usize, evaluated: usize, returned: usize) {
        self.with_resource(resource, |r| r.record_list(fetched, evaluated, returned));
    }

    /// Counts one etcd watch event for `resource`.
    pub fn record_events_received(&self, resource: &str) {
        self.with_resource(resource, ResourceMetrics::record_events_received);
    }

    /// Counts one watch of `resource` resumed on a new etcd watch stream
    /// (`apistore_watch_resumptions_total`; apistore's own, kube-apiserver has none).
    pub fn record_watch_resumption(&self, resource: &str) {
        self.inner
            .families
            .watch_resumptions
            .with_label_values(&[resource])
            .inc();
    }

    /// Counts one etcd progress notification (bookmark) for `resource`.
    pub fn record_bookmark(&self, resource: &str) {
        self.with_resource(resource, ResourceMetrics::record_bookmark);
    }

    /// Sets the object count of `resource` (-1 when it could not be fetched); nothing
    /// from kube 1.37, which hides `apiserver_storage_objects`.
    pub fn set_object_count(&self, resource: &str, count: i64) {
        self.with_resource(resource, |r| r.set_object_count(count));
    }

    /// Sets what kube 1.34+ sets from a store's `Stats` (its `UpdateStoreStats`, with
    /// `SizeBasedListCostEstimate` on, as by default): `apiserver_storage_objects{resource}`
    /// and `apiserver_resource_objects{group,resource}` to the count, and
    /// `apiserver_resource_size_estimate_bytes{group,resource}` to the estimated total
    /// size (average times count; -1 when there are objects but no estimate). `None`
    /// (the stats could not be fetched) sets all three to -1. `group_resource` is
    /// kube's `resource.group` (`deployments.apps`, `pods`).
    pub fn set_resource_stats(&self, group_resource: &str, stats: Option<Stats>) {
        let parsed = GroupResource::parse(group_resource);
        let labels = [parsed.group.as_str(), parsed.resource.as_str()];
        let families = &self.inner.families;
        let (count, size) = match stats {
            None => (-1, -1),
            Some(stats)
                if stats.object_count > 0 && stats.estimated_average_object_size_bytes == 0 =>
            {
                (stats.object_count, -1)
            }
            Some(stats) => (
                stats.object_count,
                stats
                    .estimated_average_object_size_bytes
                    .saturating_mul(stats.object_count),
            ),
        };
        self.set_object_count(group_resource, count);
        // Kube before 1.34 has neither family (and no `Stats` to set them from).
        if let Some(objects) = &families.resource_objects {
            objects.with_label_values(&labels).set(count);
        }
        if let Some(estimate) = &families.resource_size_estimate {
            estimate.with_label_values(&labels).set(size);
        }
    }

    /// Observes how many objects are attached to one etcd lease
    /// (`etcd_lease_object_counts`).
    pub fn observe_lease_object_count(&self, count: i64) {
        let families = &self.inner.families;
        self.inner
            .lease_object_counts
            .get_or_init(|| families.lease_object_counts.with_label_values::<&str>(&[]))
            // Counts are small integers, exactly representable.
            .observe(count as f64);
    }

    /// Sets `apiserver_storage_size_bytes` for one storage cluster (kube-apiserver
    /// names them `etcd-0`, `etcd-1`, ... in the order of its storage backends).
    pub fn set_storage_size(&self, storage_cluster_id: &str, bytes: i64) {
        self.inner
            .families
            .size_bytes
            .with_label_values(&[storage_cluster_id])
            .set(bytes);
    }

    /// Drops the `apiserver_storage_size_bytes` series of a storage cluster, as
    /// kube-apiserver's collector omits a cluster whose status it could not fetch.
    pub fn clear_storage_size(&self, storage_cluster_id: &str) {
        // Removing a series that was never set is not an error worth reporting.
        let _ = self
            .inner
            .families
            .size_bytes
            .remove_label_values(&[storage_cluster_id]);
    }

    /// Records one value transformation of a value whose resource is not known (kube
    /// labels it with the empty resource from 1.32, as for a transformation outside any
    /// request); see [`Self::record_resource_transformation`].
    pub fn record_transformation(
        &self,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        self.record_resource_transformation(
            "",
            transformation_type,
            transformer_prefix,
            status,
            elapsed,
        );
    }

    /// Records one value transformation of a value of `resource` (a group-resource
    /// string: `secrets`, `deployments.apps`): counts
    /// `apiserver_storage_transformation_operations_total` with `status`
    /// ([`STATUS_OK`](crate::STATUS_OK), a gRPC code name, or
    /// [`STATUS_UNKNOWN_NON_GRPC`](crate::STATUS_UNKNOWN_NON_GRPC)), labelled with the
    /// resource from kube 1.32, and observes
    /// `apiserver_storage_transformation_duration_seconds` when `elapsed` is given
    /// (kube-apiserver observes successes only).
    pub fn record_resource_transformation(
        &self,
        resource: &str,
        transformation_type: TransformationType,
        transformer_prefix: &str,
        status: &str,
        elapsed: Option<Duration>,
    ) {
        let families = &self.inner.families;
        self.inner.prefixes.with(
            resource,
            |_| LabelCache::default(),
            |by_prefix| {
                by_prefix.with(
                    transformer_prefix,
                    |_| PrefixHandles::default(),
                    |h| {
                        h.record(
                            families,
                            (resource, transformation_type, transformer_prefix),
                            status,
                            elapsed,
                        );
                    },
                );
            },
        );
    }

    /// Counts one key-encryption-key cache miss of an envelope (KMS) transformer.
    pub fn record_envelope_cache_miss(&self) {
        self.inner.families.envelope_cache_misses.inc();
    }

    /// Records one data-encryption-key generation: its latency when it succeeded, a
    /// failure count when it did not.
    pub fn record_data_key_generation(&self, ok: bool, elapsed: Duration) {
        let families = &self.inner.families;
        if ok {
            families
                .data_key_generation_duration
                .observe(elapsed.as_secs_f64());
        } else {
            families.data_key_generation_failures.inc();
        }
    }
}

/// kube 1.37's cacher counts its lists in the storage list families: a watch cache
/// given these metrics as its observer records there (nothing before 1.37).
impl CachedListObserver for StorageMetrics {
    fn cached_list(&self, group_resource: &str, index: &str, fetched: usize, returned: usize) {
        self.with_resource(group_resource, |r| {
            r.record_cache_list(index, fetched, returned);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `name`'s series with `labels`, if there is one.
    fn gauge(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> Option<i64> {
        let family = registry.gather().into_iter().find(|f| f.name() == name)?;
        family
            .get_metric()
            .iter()
            .find(|m| {
                labels.iter().all(|(n, v)| {
                    m.get_label()
                        .iter()
                        .any(|l| l.name() == *n && l.value() == *v)
                })
            })
            .map(|m| m.get_gauge().get_value() as i64)
    }

    #[test]
    fn resource_stats_set_kube_1_34s_gauges_as_its_update_store_stats() {
        let registry = prometheus::Registry::new();
        let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_36).unwrap();
        let deployments = [("group", "apps"), ("resource", "deployments")];
        let pods = [("group", ""), ("resource", "pods")];
        assert_eq!(gauge(&registry, "apiserver_resource_objects", &pods), None);

        metrics.set_resource_stats(
            "deployments.apps",
            Some(Stats {
                object_count: 3,
                estimated_average_object_size_bytes: 100,
            }),
        );
        assert_eq!(
            gauge(&registry, "apiserver_resource_objects", &deployments),
            Some(3)
        );
        assert_eq!(
            gauge(
                &registry,
                "apiserver_resource_size_estimate_bytes",
                &deployments
            ),
            Some(300)
        );
        assert_eq!(
            gauge(
                &registry,
                "apiserver_storage_objects",
                &[("resource", "deployments.apps")]
            ),
            Some(3)
        );

        // Objects but no estimate: the size is unknown.
        metrics.set_resource_stats(
            "pods",
            Some(Stats {
                object_count: 2,
                estimated_average_object_size_bytes: 0,
            }),
        );
        assert_eq!(
            gauge(&registry, "apiserver_resource_objects", &pods),
            Some(2)
        );
        assert_eq!(
            gauge(&registry, "apiserver_resource_size_estimate_bytes", &pods),
            Some(-1)
        );

        // Nothing stored: nothing to estimate, a size of 0.
        metrics.set_resource_stats("pods", Some(Stats::default()));
        assert_eq!(
            gauge(&registry, "apiserver_resource_size_estimate_bytes", &pods),
            Some(0)
        );

        // A failed fetch is -1 everywhere.
        metrics.set_resource_stats("pods", None);
        assert_eq!(
            gauge(&registry, "apiserver_resource_objects", &pods),
            Some(-1)
        );
        assert_eq!(
            gauge(&registry, "apiserver_resource_size_estimate_bytes", &pods),
            Some(-1)
        );
        assert_eq!(
            gauge(
                &registry,
                "apiserver_storage_objects",
                &[("resource", "pods")]
            ),
            Some(-1)
        );
    }
}
