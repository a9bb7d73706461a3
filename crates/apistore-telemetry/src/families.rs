//! The metric families themselves: names, help strings, label names and buckets exactly
//! as kube-apiserver v1.31 registers them.
//!
//! Follows `pkg/storage/etcd3/metrics/metrics.go` and `pkg/storage/value/metrics.go`;
//! the envelope's families are in [`crate::envelope_families`].
//! component-base prefixes every help string with the stability level (`[ALPHA] `,
//! `[STABLE] `); the prefix is part of the exposition, so it is part of the help here.
//!
//! `apiserver_resource_objects` and `apiserver_resource_size_estimate_bytes` are kube
//! 1.34's (k8s.io/apiserver v0.34+, the same names, help and labels through v0.37):
//! registered with the rest, they have series only once a store following kube 1.34
//! or later sets them ([`StorageMetrics::set_resource_stats`](crate::StorageMetrics::set_resource_stats)),
//! so a 1.31 exposition is unchanged.
//!
//! One metric of `metrics.go` is left out on purpose:
//! `apiserver_storage_db_total_size_in_bytes` was deprecated in 1.28, and component-base
//! hides a metric deprecated before the current minor version, so a 1.31 apiserver does
//! not expose it (its successor is `apiserver_storage_size_bytes`).

use crate::envelope_families::EnvelopeFamilies;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec, Opts,
};

/// component-base's stability levels, which prefix the help text.
#[derive(Clone, Copy)]
enum Stability {
    Alpha,
    Stable,
}

impl Stability {
    fn help(self, text: &str) -> String {
        match self {
            Self::Alpha => format!("[ALPHA] {text}"),
            Self::Stable => format!("[STABLE] {text}"),
        }
    }
}

/// Bucket bounds of `etcd_request_duration_seconds`, in seconds.
pub(crate) const REQUEST_DURATION_BUCKETS: [f64; 23] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0,
    10.0, 15.0, 20.0, 30.0, 45.0, 60.0,
];

/// Bucket bounds of `etcd_lease_object_counts`.
pub(crate) const LEASE_OBJECT_COUNT_BUCKETS: [f64; 7] =
    [10.0, 50.0, 100.0, 500.0, 1000.0, 2500.0, 5000.0];

/// Every storage metric, unregistered.
pub(crate) struct Families {
    pub(crate) request_duration: HistogramVec,
    pub(crate) requests: IntCounterVec,
    pub(crate) request_errors: IntCounterVec,
    pub(crate) objects: IntGaugeVec,
    /// kube 1.34+: the object count by group and resource (`Stats`).
    pub(crate) resource_objects: IntGaugeVec,
    /// kube 1.34+: the estimated total size of a resource's objects (`Stats`).
    pub(crate) resource_size_estimate: IntGaugeVec,
    pub(crate) size_bytes: IntGaugeVec,
    pub(crate) events_received: IntCounterVec,
    pub(crate) bookmarks: IntGaugeVec,
    /// A vector with no labels, as in the reference: the series appears on the first
    /// observation, not at registration.
    pub(crate) lease_object_counts: HistogramVec,
    pub(crate) list_total: IntCounterVec,
    pub(crate) list_fetched: IntCounterVec,
    pub(crate) list_evaluated: IntCounterVec,
    pub(crate) list_returned: IntCounterVec,
    pub(crate) decode_errors: IntCounterVec,
    pub(crate) transformation_duration: HistogramVec,
    pub(crate) transformation_operations: IntCounterVec,
    pub(crate) envelope_cache_misses: IntCounter,
    pub(crate) data_key_generation_duration: Histogram,
    pub(crate) data_key_generation_failures: IntCounter,
    /// apistore's own (kube-apiserver has none): watches resumed on a new etcd watch
    /// stream after the shared one failed.
    pub(crate) watch_resumptions: IntCounterVec,
    /// The KMS envelope's `apiserver_envelope_encryption_*` families, registered with
    /// the rest as kube registers them.
    pub(crate) envelope: EnvelopeFamilies,
}

fn counter_vec(
    name: &str,
    level: Stability,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, level.help(help)), labels)
}

fn gauge_vec(
    name: &str,
    level: Stability,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(name, level.help(help)), labels)
}

fn histogram_vec(
    name: &str,
    level: Stability,
    help: &str,
    buckets: Vec<f64>,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    HistogramVec::new(
        HistogramOpts::new(name, level.help(help)).buckets(buckets),
        labels,
    )
}

impl Families {
    pub(crate) fn new() -> prometheus::Result<Self> {
        use Stability::{Alpha, Stable};
        let resource = &["resource"];
        // kube 1.34's families label group and resource apart.
        let group_resource = &["group", "resource"];
        let operation_type = &["operation", "type"];
        Ok(Self {
            request_duration: histogram_vec(
                "etcd_request_duration_seconds",
                Alpha,
                "Etcd request latency in seconds for each operation and object type.",
                REQUEST_DURATION_BUCKETS.to_vec(),
                operation_type,
            )?,
            requests: counter_vec(
                "etcd_requests_total",
                Alpha,
                "Etcd request counts for each operation and object type.",
                operation_type,
            )?,
            request_errors: counter_vec(
                "etcd_request_errors_total",
                Alpha,
                "Etcd failed request counts for each operation and object type.",
                operation_type,
            )?,
            objects: gauge_vec(
                "apiserver_storage_objects",
                Stable,
                "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                resource,
            )?,
            resource_objects: gauge_vec(
                "apiserver_resource_objects",
                Alpha,
                "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.",
                group_resource,
            )?,
            resource_size_estimate: gauge_vec(
                "apiserver_resource_size_estimate_bytes",
                Alpha,
                "Estimated size of stored objects in database. Estimate is based on sum of last observed sizes of serialized objects. In case of a fetching error, the value will be -1.",
                group_resource,
            )?,
            size_bytes: gauge_vec(
                "apiserver_storage_size_bytes",
                Stable,
                "Size of the storage database file physically allocated in bytes.",
                &["storage_cluster_id"],
            )?,
            events_received: counter_vec(
                "apiserver_storage_events_received_total",
                Alpha,
                "Number of etcd events received split by kind.",
                resource,
            )?,
            bookmarks: gauge_vec(
                "etcd_bookmark_counts",
                Alpha,
                "Number of etcd bookmarks (progress notify events) split by kind.",
                resource,
            )?,
            lease_object_counts: histogram_vec(
                "etcd_lease_object_counts",
                Alpha,
                "Number of objects attached to a single etcd lease.",
                LEASE_OBJECT_COUNT_BUCKETS.to_vec(),
                &[],
            )?,
            list_total: counter_vec(
                "apiserver_storage_list_total",
                Alpha,
                "Number of LIST requests served from storage",
                resource,
            )?,
            list_fetched: counter_vec(
                "apiserver_storage_list_fetched_objects_total",
                Alpha,
                "Number of objects read from storage in the course of serving a LIST request",
                resource,
            )?,
            list_evaluated: counter_vec(
                "apiserver_storage_list_evaluated_objects_total",
                Alpha,
                "Number of objects tested in the course of serving a LIST request from storage",
                resource,
            )?,
            list_returned: counter_vec(
                "apiserver_storage_list_returned_objects_total",
                Alpha,
                "Number of objects returned for a LIST request from storage",
                resource,
            )?,
            decode_errors: counter_vec(
                "apiserver_storage_decode_errors_total",
                Alpha,
                "Number of stored object decode errors split by object type",
                resource,
            )?,
            transformation_duration: histogram_vec(
                "apiserver_storage_transformation_duration_seconds",
                Alpha,
                "Latencies in seconds of value transformation operations.",
                prometheus::exponential_buckets(5e-6, 2.0, 25)?,
                &["transformation_type", "transformer_prefix"],
            )?,
            transformation_operations: counter_vec(
                "apiserver_storage_transformation_operations_total",
                Alpha,
                "Total number of transformations. Successful transformation will have a status 'OK' and a varied status string when the transformation fails. This status and transformation_type fields may be used for alerting on encryption/decryption failure using transformation_type from_storage for decryption and to_storage for encryption",
                &["transformation_type", "transformer_prefix", "status"],
            )?,
            envelope_cache_misses: IntCounter::with_opts(Opts::new(
                "apiserver_storage_envelope_transformation_cache_misses_total",
                Alpha.help("Total number of cache misses while accessing key decryption key(KEK)."),
            ))?,
            data_key_generation_duration: Histogram::with_opts(
                HistogramOpts::new(
                    "apiserver_storage_data_key_generation_duration_seconds",
                    Alpha.help(
                        "Latencies in seconds of data encryption key(DEK) generation operations.",
                    ),
                )
                .buckets(prometheus::exponential_buckets(5e-6, 2.0, 14)?),
            )?,
            data_key_generation_failures: IntCounter::with_opts(Opts::new(
                "apiserver_storage_data_key_generation_failures_total",
                Alpha
                    .help("Total number of failed data encryption key(DEK) generation operations."),
            ))?,
            watch_resumptions: counter_vec(
                "apistore_watch_resumptions_total",
                Alpha,
                "Number of watches resumed on a new etcd watch stream, from the revision after the last event delivered, after the shared stream failed, split by resource.",
                resource,
            )?,
            envelope: EnvelopeFamilies::new()?,
        })
    }

    /// The families in registration order, as collectors.
    fn collectors(&self) -> [&dyn Collector; 21] {
        [
            &self.request_duration,
            &self.requests,
            &self.request_errors,
            &self.objects,
            &self.resource_objects,
            &self.resource_size_estimate,
            &self.size_bytes,
            &self.events_received,
            &self.bookmarks,
            &self.lease_object_counts,
            &self.list_total,
            &self.list_fetched,
            &self.list_evaluated,
            &self.list_returned,
            &self.decode_errors,
            &self.transformation_duration,
            &self.transformation_operations,
            &self.envelope_cache_misses,
            &self.data_key_generation_duration,
            &self.data_key_generation_failures,
            &self.watch_resumptions,
        ]
    }

    pub(crate) fn descs(&self) -> Vec<&Desc> {
        self.collectors()
            .into_iter()
            .chain(self.envelope.collectors())
            .flat_map(|c| c.desc())
            .collect()
    }

    pub(crate) fn collect(&self) -> Vec<MetricFamily> {
        self.collectors()
            .into_iter()
            .chain(self.envelope.collectors())
            .flat_map(|c| c.collect())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transformation_buckets_are_five_microseconds_doubling_25_times() {
        let buckets = prometheus::exponential_buckets(5e-6, 2.0, 25).unwrap();
        assert_eq!(buckets.len(), 25);
        assert_eq!(buckets[0], 5e-6);
        assert!((buckets[24] - 83.886_08).abs() < 1e-9);
    }

    #[test]
    fn every_family_has_one_descriptor_with_a_stability_prefix() {
        let families = Families::new().unwrap();
        let descs = families.descs();
        assert_eq!(descs.len(), 21 + 8);
        for desc in descs {
            assert!(
                desc.help.starts_with("[ALPHA] ") || desc.help.starts_with("[STABLE] "),
                "{}",
                desc.fq_name
            );
        }
    }
}
