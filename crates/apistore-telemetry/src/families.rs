//! The metric families themselves: names, help strings, label names and buckets exactly
//! as kube-apiserver registers them at each minor from 1.31 to 1.37.
//!
//! Follows `pkg/storage/etcd3/metrics/metrics.go`, `pkg/storage/metrics/metrics.go`
//! (1.37) and `pkg/storage/value/metrics.go` at each k8s.io/apiserver minor; the
//! envelope's families are in [`crate::envelope_families`]. component-base prefixes
//! every help string with the stability level (`[ALPHA] `, `[STABLE] `), and a
//! deprecated metric's with `(Deprecated since 1.N.0) ` after it; both are part of the
//! exposition, so they are part of the help here.
//!
//! What changed after 1.31:
//! - 1.32: `apiserver_storage_transformation_operations_total` adds a `resource` label
//!   (the group-resource the value belongs to) and a new help text.
//! - 1.34: the families naming a resource label it `group` and `resource` (the
//!   request families `operation`, `group`, `resource` instead of `operation`,
//!   `type`); `apiserver_resource_objects` and `apiserver_resource_size_estimate_bytes`
//!   join; `apiserver_storage_objects` keeps its group-resource label and says in its
//!   help that it is deprecated (marked so from 1.35).
//! - 1.36: `etcd_bookmark_total` replaces `etcd_bookmark_counts`, which is deprecated
//!   and, being alpha, hidden at once; `apiserver_storage_events_received_total` is beta.
//! - 1.37: the list families add `storage` (`etcd` or `watchcache`, which now records
//!   its lists here too) and, on the list and fetched counts, `index`;
//!   `apiserver_storage_list_duration_seconds` joins; `apiserver_storage_objects`, a
//!   stable metric deprecated three minors ago, is hidden.
//!
//! Hidden metrics are not registered at all: kube registers them only with
//! `--show-hidden-metrics-for-version`, which apistore does not offer.
//! `apiserver_storage_db_total_size_in_bytes`, deprecated in 1.28, is hidden at every
//! minor here (its successor is `apiserver_storage_size_bytes`).

use apistore_storage::KubeVersion;

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
    Beta,
    Stable,
}

impl Stability {
    fn help(self, text: &str) -> String {
        match self {
            Self::Alpha => format!("[ALPHA] {text}"),
            Self::Beta => format!("[BETA] {text}"),
            Self::Stable => format!("[STABLE] {text}"),
        }
    }

    /// The help of a metric marked deprecated since kube 1.`minor`: component-base
    /// puts the deprecation between the level and the text.
    fn deprecated_help(self, minor: u32, text: &str) -> String {
        self.help(&format!("(Deprecated since 1.{minor}.0) {text}"))
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

const GROUP_RESOURCE: &[&str] = &["group", "resource"];

/// The label names of the families that name a resource, which kube relabelled twice:
/// 1.34 split the group-resource string into `group` and `resource` (and `type` of the
/// request families with it), 1.37 added which storage served a list (`etcd` or
/// `watchcache`) and, where it counts fetched objects, the index it used.
#[derive(Clone, Copy)]
pub(crate) struct LabelNames {
    /// `etcd_request_*`.
    pub(crate) request: &'static [&'static str],
    /// Events, bookmarks, decode errors.
    pub(crate) resource: &'static [&'static str],
    /// `apiserver_storage_list_total` and `..._fetched_objects_total`.
    pub(crate) list_indexed: &'static [&'static str],
    /// `apiserver_storage_list_evaluated_objects_total` and `..._returned_objects_total`.
    pub(crate) list: &'static [&'static str],
}

impl LabelNames {
    pub(crate) fn of(version: KubeVersion) -> Self {
        if version >= KubeVersion::V1_37 {
            Self {
                request: &["operation", "group", "resource"],
                resource: GROUP_RESOURCE,
                list_indexed: &["group", "resource", "storage", "index"],
                list: &["group", "resource", "storage"],
            }
        } else if version >= KubeVersion::V1_34 {
            Self {
                request: &["operation", "group", "resource"],
                resource: GROUP_RESOURCE,
                list_indexed: GROUP_RESOURCE,
                list: GROUP_RESOURCE,
            }
        } else {
            Self {
                request: &["operation", "type"],
                resource: &["resource"],
                list_indexed: &["resource"],
                list: &["resource"],
            }
        }
    }
}

/// `apiserver_storage_objects`' help from 1.34, which points at its successor.
fn deprecated_object_count_help() -> String {
    format!("[DEPRECATED, consider using apiserver_resource_objects instead] {OBJECT_COUNT_HELP}")
}

/// Every storage metric of one kube minor, unregistered.
///
/// A family kube's component-base hides at that minor (deprecated long enough) or that
/// the minor does not have yet is `None`: never registered, and recording into it does
/// nothing, as recording into a hidden kube metric does.
pub(crate) struct Families {
    pub(crate) version: KubeVersion,
    pub(crate) request_duration: HistogramVec,
    pub(crate) requests: IntCounterVec,
    pub(crate) request_errors: IntCounterVec,
    /// Deprecated in 1.34, hidden from 1.37.
    pub(crate) objects: Option<IntGaugeVec>,
    /// kube 1.34+: the object count by group and resource (`Stats`).
    pub(crate) resource_objects: Option<IntGaugeVec>,
    /// kube 1.34+: the estimated total size of a resource's objects (`Stats`).
    pub(crate) resource_size_estimate: Option<IntGaugeVec>,
    pub(crate) size_bytes: IntGaugeVec,
    pub(crate) events_received: IntCounterVec,
    /// Deprecated and hidden from 1.36 (alpha metrics hide at once).
    pub(crate) bookmark_counts: Option<IntGaugeVec>,
    /// kube 1.36+: the same count as a counter.
    pub(crate) bookmark_total: Option<IntCounterVec>,
    /// A vector with no labels, as in the reference: the series appears on the first
    /// observation, not at registration.
    pub(crate) lease_object_counts: HistogramVec,
    pub(crate) list_total: IntCounterVec,
    pub(crate) list_fetched: IntCounterVec,
    pub(crate) list_evaluated: IntCounterVec,
    pub(crate) list_returned: IntCounterVec,
    /// kube 1.37+: `GetList`'s latency, by whether it streamed.
    pub(crate) list_duration: Option<HistogramVec>,
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

fn counter_vec(name: &str, help: String, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

fn gauge_vec(name: &str, help: String, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(name, help), labels)
}

fn histogram_vec(
    name: &str,
    help: String,
    buckets: Vec<f64>,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
}

/// `Some(make())` from kube 1.`since` on.
fn from_minor<T>(
    version: KubeVersion,
    since: KubeVersion,
    make: impl FnOnce() -> prometheus::Result<T>,
) -> prometheus::Result<Option<T>> {
    if version >= since {
        make().map(Some)
    } else {
        Ok(None)
    }
}

const OBJECT_COUNT_HELP: &str = "Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1.";
const BOOKMARK_HELP: &str = "Number of etcd bookmarks (progress notify events) split by kind.";

impl Families {
    pub(crate) fn new(version: KubeVersion) -> prometheus::Result<Self> {
        use KubeVersion::{V1_34, V1_35, V1_36, V1_37};
        use Stability::{Alpha, Beta, Stable};
        let labels = LabelNames::of(version);
        let resource = labels.resource;
        Ok(Self {
            version,
            request_duration: histogram_vec(
                "etcd_request_duration_seconds",
                Alpha.help("Etcd request latency in seconds for each operation and object type."),
                REQUEST_DURATION_BUCKETS.to_vec(),
                labels.request,
            )?,
            requests: counter_vec(
                "etcd_requests_total",
                Alpha.help("Etcd request counts for each operation and object type."),
                labels.request,
            )?,
            request_errors: counter_vec(
                "etcd_request_errors_total",
                Alpha.help("Etcd failed request counts for each operation and object type."),
                labels.request,
            )?,
            // Stable, so shown three minors after its deprecation in 1.34 and hidden in
            // the third (component-base's `shouldHide`); always labelled by the
            // group-resource string.
            objects: match version {
                v if v >= V1_37 => None,
                v if v >= V1_35 => Some(gauge_vec(
                    "apiserver_storage_objects",
                    Stable.deprecated_help(34, &deprecated_object_count_help()),
                    &["resource"],
                )?),
                V1_34 => Some(gauge_vec(
                    "apiserver_storage_objects",
                    Stable.help(&deprecated_object_count_help()),
                    &["resource"],
                )?),
                _ => Some(gauge_vec(
                    "apiserver_storage_objects",
                    Stable.help(OBJECT_COUNT_HELP),
                    &["resource"],
                )?),
            },
            resource_objects: from_minor(version, V1_34, || {
                gauge_vec(
                    "apiserver_resource_objects",
                    Alpha.help(OBJECT_COUNT_HELP),
                    GROUP_RESOURCE,
                )
            })?,
            resource_size_estimate: from_minor(version, V1_34, || {
                gauge_vec(
                    "apiserver_resource_size_estimate_bytes",
                    Alpha.help("Estimated size of stored objects in database. Estimate is based on sum of last observed sizes of serialized objects. In case of a fetching error, the value will be -1."),
                    GROUP_RESOURCE,
                )
            })?,
            size_bytes: gauge_vec(
                "apiserver_storage_size_bytes",
                Stable.help("Size of the storage database file physically allocated in bytes."),
                &["storage_cluster_id"],
            )?,
            events_received: counter_vec(
                "apiserver_storage_events_received_total",
                if version >= V1_36 { Beta } else { Alpha }
                    .help("Number of etcd events received split by kind."),
                resource,
            )?,
            bookmark_counts: if version >= V1_36 {
                None
            } else {
                Some(gauge_vec(
                    "etcd_bookmark_counts",
                    Alpha.help(BOOKMARK_HELP),
                    resource,
                )?)
            },
            bookmark_total: from_minor(version, V1_36, || {
                counter_vec("etcd_bookmark_total", Alpha.help(BOOKMARK_HELP), resource)
            })?,
            lease_object_counts: histogram_vec(
                "etcd_lease_object_counts",
                Alpha.help("Number of objects attached to a single etcd lease."),
                LEASE_OBJECT_COUNT_BUCKETS.to_vec(),
                &[],
            )?,
            list_total: counter_vec(
                "apiserver_storage_list_total",
                Alpha.help("Number of LIST requests served from storage"),
                labels.list_indexed,
            )?,
            list_fetched: counter_vec(
                "apiserver_storage_list_fetched_objects_total",
                Alpha.help(
                    "Number of objects read from storage in the course of serving a LIST request",
                ),
                labels.list_indexed,
            )?,
            list_evaluated: counter_vec(
                "apiserver_storage_list_evaluated_objects_total",
                Alpha.help(
                    "Number of objects tested in the course of serving a LIST request from storage",
                ),
                labels.list,
            )?,
            list_returned: counter_vec(
                "apiserver_storage_list_returned_objects_total",
                Alpha.help("Number of objects returned for a LIST request from storage"),
                labels.list,
            )?,
            list_duration: from_minor(version, V1_37, || {
                histogram_vec(
                    "apiserver_storage_list_duration_seconds",
                    Alpha.help("Latency of the storage layer GetList call in seconds, including object decode, split by whether etcd RangeStream was used."),
                    REQUEST_DURATION_BUCKETS.to_vec(),
                    &["streamed", "group", "resource"],
                )
            })?,
            decode_errors: counter_vec(
                "apiserver_storage_decode_errors_total",
                Alpha.help("Number of stored object decode errors split by object type"),
                resource,
            )?,
            transformation_duration: histogram_vec(
                "apiserver_storage_transformation_duration_seconds",
                Alpha.help("Latencies in seconds of value transformation operations."),
                prometheus::exponential_buckets(5e-6, 2.0, 25)?,
                &["transformation_type", "transformer_prefix"],
            )?,
            // kube 1.32 labelled each transformation with the resource of the request
            // and rewrote the help to say so.
            transformation_operations: if version >= KubeVersion::V1_32 {
                counter_vec(
                    "apiserver_storage_transformation_operations_total",
                    Alpha.help("Total number of transformations. Successful transformation will have a status 'OK' and a varied status string when the transformation fails. The status, resource, and transformation_type fields can be used for alerting purposes. For example, you can monitor for encryption/decryption failures using the transformation_type (e.g., from_storage for decryption and to_storage for encryption). Additionally, these fields can be used to ensure that the correct transformers are applied to each resource."),
                    &["resource", "transformation_type", "transformer_prefix", "status"],
                )?
            } else {
                counter_vec(
                    "apiserver_storage_transformation_operations_total",
                    Alpha.help("Total number of transformations. Successful transformation will have a status 'OK' and a varied status string when the transformation fails. This status and transformation_type fields may be used for alerting on encryption/decryption failure using transformation_type from_storage for decryption and to_storage for encryption"),
                    &["transformation_type", "transformer_prefix", "status"],
                )?
            },
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
            // apistore's own family keeps one label at every minor.
            watch_resumptions: counter_vec(
                "apistore_watch_resumptions_total",
                Alpha.help("Number of watches resumed on a new etcd watch stream, from the revision after the last event delivered, after the shared stream failed, split by resource."),
                &["resource"],
            )?,
            envelope: EnvelopeFamilies::new()?,
        })
    }

    /// The families this minor exposes, in registration order, as collectors.
    fn collectors(&self) -> Vec<&dyn Collector> {
        fn some<C: Collector>(family: &Option<C>) -> Option<&dyn Collector> {
            family.as_ref().map(|c| c as &dyn Collector)
        }
        [
            Some(&self.request_duration as &dyn Collector),
            Some(&self.requests),
            Some(&self.request_errors),
            some(&self.objects),
            some(&self.resource_objects),
            some(&self.resource_size_estimate),
            Some(&self.size_bytes),
            Some(&self.events_received),
            some(&self.bookmark_counts),
            some(&self.bookmark_total),
            Some(&self.lease_object_counts),
            Some(&self.list_total),
            Some(&self.list_fetched),
            Some(&self.list_evaluated),
            Some(&self.list_returned),
            some(&self.list_duration),
            Some(&self.decode_errors),
            Some(&self.transformation_duration),
            Some(&self.transformation_operations),
            Some(&self.envelope_cache_misses),
            Some(&self.data_key_generation_duration),
            Some(&self.data_key_generation_failures),
            Some(&self.watch_resumptions),
        ]
        .into_iter()
        .flatten()
        .collect()
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

    fn names(version: KubeVersion) -> Vec<String> {
        let families = Families::new(version).unwrap();
        families.descs().iter().map(|d| d.fq_name.clone()).collect()
    }

    #[test]
    fn every_family_has_one_descriptor_with_a_stability_prefix() {
        for &version in KubeVersion::ALL {
            let families = Families::new(version).unwrap();
            for desc in families.descs() {
                assert!(
                    ["[ALPHA] ", "[BETA] ", "[STABLE] "]
                        .iter()
                        .any(|level| desc.help.starts_with(level)),
                    "{version}: {}",
                    desc.fq_name
                );
            }
        }
    }

    #[test]
    fn families_come_and_go_with_the_minor_as_in_kube() {
        let has = |version, name: &str| names(version).iter().any(|n| n == name);
        assert_eq!(names(KubeVersion::V1_31).len(), 21 - 2 + 8);
        for (name, first, hidden_from) in [
            ("apiserver_resource_objects", KubeVersion::V1_34, None),
            (
                "apiserver_resource_size_estimate_bytes",
                KubeVersion::V1_34,
                None,
            ),
            ("etcd_bookmark_total", KubeVersion::V1_36, None),
            (
                "apiserver_storage_list_duration_seconds",
                KubeVersion::V1_37,
                None,
            ),
            (
                "etcd_bookmark_counts",
                KubeVersion::V1_31,
                Some(KubeVersion::V1_36),
            ),
            (
                "apiserver_storage_objects",
                KubeVersion::V1_31,
                Some(KubeVersion::V1_37),
            ),
        ] {
            for &version in KubeVersion::ALL {
                let expected = version >= first && hidden_from.is_none_or(|h| version < h);
                assert_eq!(has(version, name), expected, "{name} at {version}");
            }
        }
    }

    #[test]
    fn deprecated_object_counts_say_so_from_1_34_and_are_marked_from_1_35() {
        let help = |version| {
            Families::new(version).unwrap().objects.unwrap().desc()[0]
                .help
                .clone()
        };
        assert_eq!(
            help(KubeVersion::V1_33),
            "[STABLE] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1."
        );
        assert_eq!(
            help(KubeVersion::V1_34),
            "[STABLE] [DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1."
        );
        assert_eq!(
            help(KubeVersion::V1_36),
            "[STABLE] (Deprecated since 1.34.0) [DEPRECATED, consider using apiserver_resource_objects instead] Number of stored objects at the time of last check split by kind. In case of a fetching error, the value will be -1."
        );
    }
}
