//! The watch cache's metrics under kube-apiserver's names and labels
//! (`pkg/storage/cacher/metrics/metrics.go`): events received and dispatched, window
//! capacity and its changes, the cache's resourceVersion, initializations, watchers
//! terminated for being slow, init events sent, the lists served from the cache, and
//! (kube 1.34+) the consistency checks of the cache against the backend.
//!
//! [`CacherMetrics::register`] puts them into a registry the application owns (no
//! global registry is touched); one registration serves every cacher of the process,
//! each recording under its own resource.

use prometheus::{IntCounterVec, IntGaugeVec, Opts, Registry};

/// The cacher metrics, registered once and shared by every cacher (cheap to clone).
#[derive(Debug, Clone)]
pub struct CacherMetrics {
    events_received: IntCounterVec,
    events_dispatched: IntCounterVec,
    capacity: IntGaugeVec,
    capacity_increase: IntCounterVec,
    capacity_decrease: IntCounterVec,
    resource_version: IntGaugeVec,
    initializations: IntCounterVec,
    terminated_watchers: IntCounterVec,
    init_events: IntCounterVec,
    list_total: IntCounterVec,
    list_fetched: IntCounterVec,
    list_returned: IntCounterVec,
    consistency_checks: IntCounterVec,
}

fn counter(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntCounterVec> {
    IntCounterVec::new(Opts::new(name, help), labels)
}

fn gauge(name: &str, help: &str, labels: &[&str]) -> prometheus::Result<IntGaugeVec> {
    IntGaugeVec::new(Opts::new(name, help), labels)
}

impl CacherMetrics {
    /// Metrics that record but are not exposed anywhere (a cacher without a registry).
    pub fn unregistered() -> Self {
        // Building collectors from constant, valid names and labels cannot fail.
        #[allow(clippy::expect_used)]
        Self::build().expect("the cacher metrics' names and labels are valid")
    }

    /// Builds the metrics and registers them into `registry`.
    ///
    /// # Errors
    ///
    /// The registry's error when metrics of these names are already registered there
    /// (register once per process and share the result).
    pub fn register(registry: &Registry) -> prometheus::Result<Self> {
        let metrics = Self::build()?;
        registry.register(Box::new(metrics.events_received.clone()))?;
        registry.register(Box::new(metrics.events_dispatched.clone()))?;
        registry.register(Box::new(metrics.capacity.clone()))?;
        registry.register(Box::new(metrics.capacity_increase.clone()))?;
        registry.register(Box::new(metrics.capacity_decrease.clone()))?;
        registry.register(Box::new(metrics.resource_version.clone()))?;
        registry.register(Box::new(metrics.initializations.clone()))?;
        registry.register(Box::new(metrics.terminated_watchers.clone()))?;
        registry.register(Box::new(metrics.init_events.clone()))?;
        registry.register(Box::new(metrics.list_total.clone()))?;
        registry.register(Box::new(metrics.list_fetched.clone()))?;
        registry.register(Box::new(metrics.list_returned.clone()))?;
        registry.register(Box::new(metrics.consistency_checks.clone()))?;
        Ok(metrics)
    }

    fn build() -> prometheus::Result<Self> {
        let resource = &["resource"];
        Ok(Self {
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
                "Current resource version of watch cache broken by resource type.",
                resource,
            )?,
            initializations: counter(
                "apiserver_watch_cache_initializations_total",
                "Counter of watch cache initializations broken by resource type.",
                resource,
            )?,
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
                &["resource_prefix", "index"],
            )?,
            list_fetched: counter(
                "apiserver_cache_list_fetched_objects_total",
                "Number of objects read from watch cache in the course of serving a LIST request",
                &["resource_prefix", "index"],
            )?,
            list_returned: counter(
                "apiserver_cache_list_returned_objects_total",
                "Number of objects returned for a LIST request from watch cache",
                &["resource_prefix"],
            )?,
            // kube 1.34+ labels it with group and resource; like the other series here
            // it carries the group-resource string as `resource`.
            consistency_checks: counter(
                "apiserver_storage_consistency_checks_total",
                "Counter for status of consistency checks between etcd and watch cache",
                &["resource", "status"],
            )?,
        })
    }

    /// The series of one resource, resolved once.
    pub(crate) fn for_resource(&self, resource: &str, resource_prefix: &str) -> ResourceMetrics {
        let r = &[resource];
        ResourceMetrics {
            events_received: self.events_received.with_label_values(r),
            events_dispatched: self.events_dispatched.with_label_values(r),
            capacity: self.capacity.with_label_values(r),
            capacity_increase: self.capacity_increase.with_label_values(r),
            capacity_decrease: self.capacity_decrease.with_label_values(r),
            resource_version: self.resource_version.with_label_values(r),
            initializations: self.initializations.with_label_values(r),
            terminated_watchers: self.terminated_watchers.with_label_values(r),
            init_events: self.init_events.with_label_values(r),
            list_total: self.list_total.with_label_values(&[resource_prefix, ""]),
            list_fetched: self.list_fetched.with_label_values(&[resource_prefix, ""]),
            indexed_lists: IndexedLists {
                resource_prefix: resource_prefix.to_owned(),
                total: self.list_total.clone(),
                fetched: self.list_fetched.clone(),
            },
            list_returned: self.list_returned.with_label_values(&[resource_prefix]),
            consistency_checks: ConsistencyChecks {
                success: self
                    .consistency_checks
                    .with_label_values(&[resource, "success"]),
                failure: self
                    .consistency_checks
                    .with_label_values(&[resource, "failure"]),
                error: self
                    .consistency_checks
                    .with_label_values(&[resource, "error"]),
            },
        }
    }
}

/// One resource's series.
#[derive(Debug, Clone)]
pub(crate) struct ResourceMetrics {
    pub(crate) events_received: prometheus::IntCounter,
    pub(crate) events_dispatched: prometheus::IntCounter,
    pub(crate) capacity: prometheus::IntGauge,
    pub(crate) capacity_increase: prometheus::IntCounter,
    pub(crate) capacity_decrease: prometheus::IntCounter,
    pub(crate) resource_version: prometheus::IntGauge,
    pub(crate) initializations: prometheus::IntCounter,
    pub(crate) terminated_watchers: prometheus::IntCounter,
    pub(crate) init_events: prometheus::IntCounter,
    list_total: prometheus::IntCounter,
    list_fetched: prometheus::IntCounter,
    list_returned: prometheus::IntCounter,
    indexed_lists: IndexedLists,
    pub(crate) consistency_checks: ConsistencyChecks,
}

/// `apiserver_storage_consistency_checks_total` of one resource, by status.
#[derive(Debug, Clone)]
pub(crate) struct ConsistencyChecks {
    /// The cache and the backend agreed.
    pub(crate) success: prometheus::IntCounter,
    /// They did not.
    pub(crate) failure: prometheus::IntCounter,
    /// The check could not be made (cache not ready, backend unreachable, ...).
    pub(crate) error: prometheus::IntCounter,
}

/// The list series of lists served from an index, labelled with its name.
#[derive(Debug, Clone)]
struct IndexedLists {
    resource_prefix: String,
    total: IntCounterVec,
    fetched: IntCounterVec,
}

impl ResourceMetrics {
    /// kube's `RecordListCacheMetrics`: `index` is the name of the index the list read
    /// from (`f:spec.nodeName`, `l:app`), "" for none.
    pub(crate) fn record_list(&self, fetched: usize, returned: usize, index: &str) {
        if index.is_empty() {
            self.list_total.inc();
            self.list_fetched.inc_by(fetched as u64);
        } else {
            let labels = [self.indexed_lists.resource_prefix.as_str(), index];
            self.indexed_lists.total.with_label_values(&labels).inc();
            self.indexed_lists
                .fetched
                .with_label_values(&labels)
                .inc_by(fetched as u64);
        }
        self.list_returned.inc_by(returned as u64);
    }

    /// kube's `RecordsWatchCacheCapacityChange`.
    pub(crate) fn record_capacity_change(&self, old: usize, new: usize) {
        self.capacity.set(new as i64);
        if new > old {
            self.capacity_increase.inc();
        } else {
            self.capacity_decrease.inc();
        }
    }

    /// Saturating: a revision beyond `i64` does not fit a gauge anyway.
    pub(crate) fn record_resource_version(&self, resource_version: u64) {
        self.resource_version
            .set(i64::try_from(resource_version).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_register_under_kube_names() {
        let registry = Registry::new();
        let metrics = CacherMetrics::register(&registry).unwrap();
        let pods = metrics.for_resource("pods", "/pods");
        pods.events_dispatched.inc();
        pods.record_list(10, 4, "");
        pods.record_capacity_change(100, 200);
        pods.consistency_checks.success.inc();
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|family| family.name().to_owned())
            .collect();
        for name in [
            "apiserver_watch_cache_events_dispatched_total",
            "watch_cache_capacity",
            "apiserver_cache_list_total",
            "apiserver_cache_list_fetched_objects_total",
            "apiserver_cache_list_returned_objects_total",
            "apiserver_storage_consistency_checks_total",
        ] {
            assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
        }
        assert_eq!(pods.capacity.get(), 200);
        assert!(CacherMetrics::register(&registry).is_err());
    }
}
