//! The watch cache's metrics under kube-apiserver's names, labels and buckets
//! (`pkg/storage/cacher/metrics/metrics.go`), as the kube version the metrics are
//! registered for has them: events received and dispatched, window capacity and its
//! changes, the cache's resourceVersion, initializations, watchers terminated for being
//! slow, init events sent, the lists served from the cache, the time reads wait for the
//! cache, consistent reads from the cache, and (kube 1.34+) the consistency checks of
//! the cache against the backend.
//!
//! What changed between the versions (read at k8s.io/apiserver v0.31.1, v0.34.0,
//! v0.36.0 and v0.37.0-beta.0):
//!
//! - kube 1.31–1.33 label every family with `resource` (the group-resource string,
//!   `deployments.apps`), and the list families with `resource_prefix` (and `index`);
//! - kube 1.34 labels all of them with `group` and `resource` (`apps`, `deployments`),
//!   the list families too (with `index` where they had it);
//! - kube 1.36 truncates `apiserver_watch_cache_resource_version` to its 15 least
//!   significant digits (so a float64 holds it exactly) and says so in its help;
//! - kube 1.37 adds `apiserver_watch_cache_initialization_errors_total`,
//!   `apiserver_watch_cache_initialization_duration_seconds` and
//!   `apiserver_watch_events_dispatch_duration_seconds`, and deprecates the
//!   `apiserver_cache_list_*` families: alpha metrics, so component-base hides them in
//!   the minor that deprecates them, and a 1.37 apiserver does not expose them (the
//!   shared `apiserver_storage_list_*{storage="watchcache"}` replace them).
//!
//! Every family is alpha at every version, so every help starts with component-base's
//! `[ALPHA] `.
//!
//! [`CacherMetrics::register_for`] puts them into a registry the application owns (no
//! global registry is touched); one registration serves every cacher of the process,
//! each recording under its own resource (`resource_metrics.rs`).

use std::sync::Arc;

use apistore_storage::{CachedListObserver, KubeVersion};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts, Registry};

pub(crate) use crate::resource_metrics::ResourceMetrics;

/// `apiserver_watch_cache_read_wait_seconds`'s buckets (kube's).
const READ_WAIT_BUCKETS: [f64; 13] = [
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0,
];

/// `apiserver_watch_events_dispatch_duration_seconds`' buckets (kube 1.37's).
const DISPATCH_DURATION_BUCKETS: [f64; 13] = [
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// `apiserver_watch_cache_initialization_duration_seconds`'s buckets (kube 1.37's).
const INITIALIZATION_DURATION_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0, 600.0,
];

/// How a family names the resource it is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Labels {
    /// kube 1.31–1.33: `resource` is the group-resource string; the list families use
    /// `resource_prefix`.
    Resource,
    /// kube 1.34+: `group` and `resource`.
    GroupResource,
}

impl Labels {
    /// The labels naming the resource on most families.
    pub(crate) fn resource(self) -> &'static [&'static str] {
        match self {
            Self::Resource => &["resource"],
            Self::GroupResource => &["group", "resource"],
        }
    }

    /// The labels naming the resource on the list families.
    pub(crate) fn list(self) -> &'static [&'static str] {
        match self {
            Self::Resource => &["resource_prefix"],
            Self::GroupResource => &["group", "resource"],
        }
    }

    /// The resource's labels with `extra` after them.
    fn with(names: &[&'static str], extra: &[&'static str]) -> Vec<&'static str> {
        names.iter().chain(extra).copied().collect()
    }
}

/// The cacher metrics, registered once and shared by every cacher (cheap to clone).
#[derive(Debug, Clone)]
pub struct CacherMetrics {
    pub(crate) labels: Labels,
    /// Whether `apiserver_watch_cache_resource_version` is truncated (kube 1.36+).
    pub(crate) truncate_resource_version: bool,
    pub(crate) events_received: IntCounterVec,
    pub(crate) events_dispatched: IntCounterVec,
    pub(crate) capacity: IntGaugeVec,
    pub(crate) capacity_increase: IntCounterVec,
    pub(crate) capacity_decrease: IntCounterVec,
    pub(crate) resource_version: IntGaugeVec,
    pub(crate) initializations: IntCounterVec,
    /// kube 1.37+.
    pub(crate) initialization_errors: Option<IntCounterVec>,
    /// kube 1.37+.
    pub(crate) initialization_duration: Option<HistogramVec>,
    /// kube 1.37+: how long a watch event took to reach its consumer, by stage.
    pub(crate) dispatch_duration: Option<HistogramVec>,
    /// Whether the `apiserver_cache_list_*` families are exposed (hidden at 1.37).
    pub(crate) cache_lists_exposed: bool,
    pub(crate) terminated_watchers: IntCounterVec,
    pub(crate) init_events: IntCounterVec,
    pub(crate) list_total: IntCounterVec,
    pub(crate) list_fetched: IntCounterVec,
    pub(crate) list_returned: IntCounterVec,
    pub(crate) read_wait: HistogramVec,
    pub(crate) consistent_reads: IntCounterVec,
    pub(crate) consistency_checks: IntCounterVec,
    /// Where the lists go besides the cache's own families: kube 1.37's cacher
    /// records them into the storage metrics' (`apiserver_storage_list_*` with
    /// `storage="watchcache"`), when given.
    pub(crate) list_observer: Option<Arc<dyn CachedListObserver>>,
}

/// component-base's help of an alpha metric (every cacher family is one).
fn alpha(help: &str) -> String {
    format!("[ALPHA] {help}")
}

fn counter(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, alpha(help)), labels)
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(name, alpha(help)), labels)
}

fn histogram(
    name: &str,
    help: &str,
    buckets: &[f64],
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    HistogramVec::new(
        HistogramOpts::new(name, alpha(help)).buckets(buckets.to_vec()),
        labels,
    )
}

impl CacherMetrics {
    /// Metrics of the newest kube that record but are not exposed anywhere (a cacher
    /// without a registry).
    pub fn unregistered() -> Self {
        Self::unregistered_for(KubeVersion::LATEST)
    }

    /// Metrics of kube `version` that record but are not exposed anywhere.
    pub fn unregistered_for(version: KubeVersion) -> Self {
        // Building collectors from constant, valid names and labels cannot fail.
        #[allow(clippy::expect_used)]
        Self::build(version).expect("the cacher metrics' names and labels are valid")
    }

    /// Builds the metrics as the newest kube has them and registers them into
    /// `registry` (see [`Self::register_for`]).
    ///
    /// # Errors
    ///
    /// The registry's error when metrics of these names are already registered there
    /// (register once per process and share the result).
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        Self::register_for(registry, KubeVersion::LATEST)
    }

    /// Builds the metrics as kube `version` has them (names, labels, help; see the
    /// module docs) and registers them into `registry`.
    ///
    /// # Errors
    ///
    /// The registry's error when metrics of these names are already registered there
    /// (register once per process and share the result).
    pub fn register_for(registry: &Registry, version: KubeVersion) -> prometheus::Result<Self> {
        let metrics = Self::build(version)?;
        let mut collectors: Vec<Box<dyn prometheus::core::Collector>> = vec![
            Box::new(metrics.events_received.clone()),
            Box::new(metrics.events_dispatched.clone()),
            Box::new(metrics.capacity.clone()),
            Box::new(metrics.capacity_increase.clone()),
            Box::new(metrics.capacity_decrease.clone()),
            Box::new(metrics.resource_version.clone()),
            Box::new(metrics.initializations.clone()),
            Box::new(metrics.terminated_watchers.clone()),
            Box::new(metrics.init_events.clone()),
            Box::new(metrics.read_wait.clone()),
            Box::new(metrics.consistent_reads.clone()),
            Box::new(metrics.consistency_checks.clone()),
        ];
        if let Some(errors) = &metrics.initialization_errors {
            collectors.push(Box::new(errors.clone()));
        }
        if let Some(duration) = &metrics.initialization_duration {
            collectors.push(Box::new(duration.clone()));
        }
        if let Some(duration) = &metrics.dispatch_duration {
            collectors.push(Box::new(duration.clone()));
        }
        // Recorded either way (nothing reads them when hidden), as kube records into
        // its hidden metrics.
        if metrics.cache_lists_exposed {
            collectors.push(Box::new(metrics.list_total.clone()));
            collectors.push(Box::new(metrics.list_fetched.clone()));
            collectors.push(Box::new(metrics.list_returned.clone()));
        }
        for collector in collectors {
            registry.register(collector)?;
        }
        Ok(metrics)
    }

    fn build(version: KubeVersion) -> prometheus::Result<Self> {
        let labels = if version >= KubeVersion::V1_34 {
            Labels::GroupResource
        } else {
            Labels::Resource
        };
        let since_1_37 = version >= KubeVersion::V1_37;
        let resource = labels.resource();
        let list = labels.list();
        let truncate_resource_version = version >= KubeVersion::V1_36;
        let resource_version_help = if truncate_resource_version {
            "Current resource version of watch cache broken by resource type. This is truncated to the 15 least significant digits."
        } else {
            "Current resource version of watch cache broken by resource type."
        };
        Ok(Self {
            labels,
            truncate_resource_version,
            events_received: counter(
                "apiserver_watch_cache_events_received_total",
                "Counter of events received in watch cache broken by resource type.",
                resource,
            )?,
            events_dispatched: counter(
                "apiserver_watch_cache_events_dispatched_total",
                "Counter of events dispatched in watch cache broken by resource type.",
                resource,
            )?,
            capacity: gauge(
                "watch_cache_capacity",
                "Total capacity of watch cache broken by resource type.",
                resource,
            )?,
            capacity_increase: counter(
                "watch_cache_capacity_increase_total",
                "Total number of watch cache capacity increase events broken by resource type.",
                resource,
            )?,
            capacity_decrease: counter(
                "watch_cache_capacity_decrease_total",
                "Total number of watch cache capacity decrease events broken by resource type.",
                resource,
            )?,
            resource_version: gauge(
                "apiserver_watch_cache_resource_version",
                resource_version_help,
                resource,
            )?,
            initializations: counter(
                "apiserver_watch_cache_initializations_total",
                "Counter of watch cache initializations broken by resource type.",
                resource,
            )?,
            initialization_errors: since_1_37
                .then(|| {
                    counter(
                        "apiserver_watch_cache_initialization_errors_total",
                        "Counter of watch cache initialization errors broken by resource type.",
                        resource,
                    )
                })
                .transpose()?,
            initialization_duration: since_1_37
                .then(|| {
                    histogram(
                        "apiserver_watch_cache_initialization_duration_seconds",
                        "Histogram of watch cache initialization duration in seconds, broken by resource type.",
                        &INITIALIZATION_DURATION_BUCKETS,
                        resource,
                    )
                })
                .transpose()?,
            dispatch_duration: since_1_37
                .then(|| {
                    histogram(
                        "apiserver_watch_events_dispatch_duration_seconds",
                        "Histogram of watch event dispatch latency broken by resource type and pipeline stage. The 'total' stage is the end-to-end latency of a delivered event.",
                        &DISPATCH_DURATION_BUCKETS,
                        &Labels::with(resource, &["stage"]),
                    )
                })
                .transpose()?,
            cache_lists_exposed: !since_1_37,
            terminated_watchers: counter(
                "apiserver_terminated_watchers_total",
                "Counter of watchers closed due to unresponsiveness broken by resource type.",
                resource,
            )?,
            init_events: counter(
                "apiserver_init_events_total",
                "Counter of init events processed in watch cache broken by resource type.",
                resource,
            )?,
            list_total: counter(
                "apiserver_cache_list_total",
                "Number of LIST requests served from watch cache",
                &Labels::with(list, &["index"]),
            )?,
            list_fetched: counter(
                "apiserver_cache_list_fetched_objects_total",
                "Number of objects read from watch cache in the course of serving a LIST request",
                &Labels::with(list, &["index"]),
            )?,
            list_returned: counter(
                "apiserver_cache_list_returned_objects_total",
                "Number of objects returned for a LIST request from watch cache",
                list,
            )?,
            read_wait: histogram(
                "apiserver_watch_cache_read_wait_seconds",
                "Histogram of time spent waiting for a watch cache to become fresh.",
                &READ_WAIT_BUCKETS,
                resource,
            )?,
            consistent_reads: counter(
                "apiserver_watch_cache_consistent_read_total",
                "Counter for consistent reads from cache.",
                &Labels::with(resource, &["success", "fallback"]),
            )?,
            consistency_checks: counter(
                "apiserver_storage_consistency_checks_total",
                "Counter for status of consistency checks between etcd and watch cache",
                &Labels::with(resource, &["status"]),
            )?,
            list_observer: None,
        })
    }

    /// Reports every list the caches serve to `observer` too. kube 1.37's cacher
    /// counts them in the storage metrics' list families: give it apistore-telemetry's
    /// `StorageMetrics` (the ones the cached stores record into), which records them
    /// under `storage="watchcache"` and the index from kube 1.37 on, and nothing
    /// before.
    pub fn with_list_observer(mut self, observer: Arc<dyn CachedListObserver>) -> Self {
        self.list_observer = Some(observer);
        self
    }

    /// The series of one resource, resolved once.
    pub(crate) fn for_resource(&self, resource: &str, resource_prefix: &str) -> ResourceMetrics {
        ResourceMetrics::new(self, resource, resource_prefix)
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
