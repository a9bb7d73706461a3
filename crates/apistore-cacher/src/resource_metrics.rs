//! One cacher's series of the [`CacherMetrics`] families, resolved once for its
//! resource with the labels of the kube version they were registered for, and what
//! records them (kube's `RecordListCacheMetrics`, `RecordResourceVersion`,
//! `RecordsWatchCacheCapacityChange`, the `ConsistentReadTotal` and
//! `WatchCacheReadWait` observations).

use std::sync::Arc;
use std::time::Duration;

use apistore_storage::CachedListObserver;
use tokio::time::Instant;

use prometheus::{Histogram, IntCounter, IntCounterVec, IntGauge};

use crate::metrics::{CacherMetrics, Labels};

/// kube 1.36+ keeps the 15 least significant digits of the resourceVersion gauge.
const RESOURCE_VERSION_MODULUS: u64 = 1_000_000_000_000_000;

/// One resource's series.
#[derive(Debug, Clone)]
pub(crate) struct ResourceMetrics {
    pub(crate) events_received: IntCounter,
    pub(crate) events_dispatched: IntCounter,
    pub(crate) capacity: IntGauge,
    pub(crate) capacity_increase: IntCounter,
    pub(crate) capacity_decrease: IntCounter,
    pub(crate) resource_version: IntGauge,
    pub(crate) initializations: IntCounter,
    /// kube 1.37+.
    pub(crate) initialization_errors: Option<IntCounter>,
    /// kube 1.37+.
    pub(crate) initialization_duration: Option<Histogram>,
    /// kube 1.37+: the `total` and `cache_to_watcher` stages of the dispatch latency.
    dispatch: Option<DispatchStages>,
    pub(crate) terminated_watchers: IntCounter,
    pub(crate) init_events: IntCounter,
    pub(crate) read_wait: Histogram,
    truncate_resource_version: bool,
    list_total: IntCounter,
    list_fetched: IntCounter,
    list_returned: IntCounter,
    indexed_lists: IndexedLists,
    consistent_reads: ConsistentReads,
    pub(crate) consistency_checks: ConsistencyChecks,
    /// Where the lists go besides the cache's own families, with the resource.
    list_observer: Option<(Arc<dyn CachedListObserver>, Box<str>)>,
}

/// kube 1.37's `apiserver_watch_events_dispatch_duration_seconds` of one resource. Its
/// `storage_to_cache` stage (from the backend's decode to the cache) needs a time the
/// backend stamps on the event, which apistore's `WatchEvent` does not carry: that
/// stage is not observed, and `total` starts when the cache received the event.
#[derive(Debug, Clone)]
struct DispatchStages {
    total: Histogram,
    cache_to_watcher: Histogram,
}

/// `apiserver_storage_consistency_checks_total` of one resource, by status.
#[derive(Debug, Clone)]
pub(crate) struct ConsistencyChecks {
    /// The cache and the backend agreed.
    pub(crate) success: IntCounter,
    /// They did not.
    pub(crate) failure: IntCounter,
    /// The check could not be made (cache not ready, backend unreachable, ...).
    pub(crate) error: IntCounter,
}

/// `apiserver_watch_cache_consistent_read_total` of one resource: the series are made
/// when first recorded, as kube's are.
#[derive(Debug, Clone)]
struct ConsistentReads {
    labels: Vec<String>,
    family: IntCounterVec,
}

/// The list series of lists served from an index, labelled with its name.
#[derive(Debug, Clone)]
struct IndexedLists {
    labels: Vec<String>,
    total: IntCounterVec,
    fetched: IntCounterVec,
}

/// The label values naming `group_resource` under `labels`' names.
fn label_values(labels: &[&str], group_resource: &str) -> Vec<String> {
    // kube's `GroupResource.String()` is `<resource>.<group>`; resources hold no dot.
    let (resource, group) = group_resource
        .split_once('.')
        .unwrap_or((group_resource, ""));
    labels
        .iter()
        .map(|label| match *label {
            "group" => group.to_owned(),
            "resource" if labels.len() > 1 => resource.to_owned(),
            _ => group_resource.to_owned(),
        })
        .collect()
}

fn refs(values: &[String]) -> Vec<&str> {
    values.iter().map(String::as_str).collect()
}

impl ResourceMetrics {
    pub(crate) fn new(metrics: &CacherMetrics, resource: &str, resource_prefix: &str) -> Self {
        let names = metrics.labels.resource();
        let values = label_values(names, resource);
        let r = refs(&values);
        let r = r.as_slice();
        let list_values = match metrics.labels {
            Labels::Resource => vec![resource_prefix.to_owned()],
            Labels::GroupResource => values.clone(),
        };
        // The list series of lists read from no index.
        let mut unindexed = refs(&list_values);
        unindexed.push("");
        let status = |status: &str| {
            let mut labels = r.to_vec();
            labels.push(status);
            metrics.consistency_checks.with_label_values(&labels)
        };
        Self {
            events_received: metrics.events_received.with_label_values(r),
            events_dispatched: metrics.events_dispatched.with_label_values(r),
            capacity: metrics.capacity.with_label_values(r),
            capacity_increase: metrics.capacity_increase.with_label_values(r),
            capacity_decrease: metrics.capacity_decrease.with_label_values(r),
            resource_version: metrics.resource_version.with_label_values(r),
            initializations: metrics.initializations.with_label_values(r),
            initialization_errors: metrics
                .initialization_errors
                .as_ref()
                .map(|family| family.with_label_values(r)),
            dispatch: metrics.dispatch_duration.as_ref().map(|family| {
                let stage = |stage: &str| {
                    let mut labels = r.to_vec();
                    labels.push(stage);
                    family.with_label_values(&labels)
                };
                DispatchStages {
                    total: stage("total"),
                    cache_to_watcher: stage("cache_to_watcher"),
                }
            }),
            initialization_duration: metrics
                .initialization_duration
                .as_ref()
                .map(|family| family.with_label_values(r)),
            terminated_watchers: metrics.terminated_watchers.with_label_values(r),
            init_events: metrics.init_events.with_label_values(r),
            read_wait: metrics.read_wait.with_label_values(r),
            truncate_resource_version: metrics.truncate_resource_version,
            list_total: metrics.list_total.with_label_values(&unindexed),
            list_fetched: metrics.list_fetched.with_label_values(&unindexed),
            list_returned: metrics.list_returned.with_label_values(&refs(&list_values)),
            indexed_lists: IndexedLists {
                labels: list_values,
                total: metrics.list_total.clone(),
                fetched: metrics.list_fetched.clone(),
            },
            consistent_reads: ConsistentReads {
                labels: values.clone(),
                family: metrics.consistent_reads.clone(),
            },
            consistency_checks: ConsistencyChecks {
                success: status("success"),
                failure: status("failure"),
                error: status("error"),
            },
            list_observer: metrics
                .list_observer
                .as_ref()
                .map(|observer| (Arc::clone(observer), resource.into())),
        }
    }

    /// kube's `RecordListCacheMetrics`: `index` is the name of the index the list read
    /// from (`f:spec.nodeName`, `l:app`), "" for none.
    pub(crate) fn record_list(&self, fetched: usize, returned: usize, index: &str) {
        if index.is_empty() {
            self.list_total.inc();
            self.list_fetched.inc_by(fetched as u64);
        } else {
            let mut labels = refs(&self.indexed_lists.labels);
            labels.push(index);
            self.indexed_lists.total.with_label_values(&labels).inc();
            self.indexed_lists
                .fetched
                .with_label_values(&labels)
                .inc_by(fetched as u64);
        }
        self.list_returned.inc_by(returned as u64);
        if let Some((observer, resource)) = &self.list_observer {
            observer.cached_list(resource, index, fetched, returned);
        }
    }

    /// A consistent read the cache took on (kube's `ConsistentReadTotal`): whether it
    /// succeeded, and whether the backend answered it after the cache did not reach
    /// the backend's revision in time.
    pub(crate) fn record_consistent_read(&self, success: bool, fallback: bool) {
        let mut labels = refs(&self.consistent_reads.labels);
        labels.push(if success { "true" } else { "false" });
        labels.push(if fallback { "true" } else { "false" });
        self.consistent_reads
            .family
            .with_label_values(&labels)
            .inc();
    }

    /// A read waited `waited` for the cache to reach its revision (kube's
    /// `WatchCacheReadWait`, observed only when the cache was behind).
    pub(crate) fn record_read_wait(&self, waited: Duration) {
        self.read_wait.observe(waited.as_secs_f64());
    }

    /// kube 1.37's initialization metrics: a list-and-watch round ended in an error.
    pub(crate) fn record_initialization_error(&self) {
        if let Some(errors) = &self.initialization_errors {
            errors.inc();
        }
    }

    /// One live event handed to a watcher's consumer (kube 1.37's dispatch latency;
    /// initial events and bookmarks are not observed, as in kube): `received` is when
    /// the cache got it from the backend, `queued` when the dispatcher put it in the
    /// watcher's buffer, where it waited for the consumer (kube's `cache_to_watcher`:
    /// the time blocked handing it to the client).
    pub(crate) fn observe_dispatch(&self, received: Instant, queued: Instant) {
        if let Some(stages) = &self.dispatch {
            let now = Instant::now();
            stages
                .total
                .observe(now.saturating_duration_since(received).as_secs_f64());
            stages
                .cache_to_watcher
                .observe(now.saturating_duration_since(queued).as_secs_f64());
        }
    }

    /// A list-and-watch round made the cache ready `took` after it started.
    pub(crate) fn record_initialization(&self, took: Duration) {
        self.initializations.inc();
        if let Some(duration) = &self.initialization_duration {
            duration.observe(took.as_secs_f64());
        }
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

    /// kube's `RecordResourceVersion`: from kube 1.36 the 15 least significant digits;
    /// before, the whole revision (saturating: beyond `i64` it does not fit anyway).
    pub(crate) fn record_resource_version(&self, resource_version: u64) {
        let recorded = if self.truncate_resource_version {
            resource_version % RESOURCE_VERSION_MODULUS
        } else {
            resource_version
        };
        self.resource_version
            .set(i64::try_from(recorded).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::label_values;

    #[test]
    fn group_resource_strings_become_kube_labels() {
        let by_group = ["group", "resource"];
        assert_eq!(label_values(&by_group, "pods"), ["", "pods"]);
        assert_eq!(
            label_values(&by_group, "deployments.apps"),
            ["apps", "deployments"]
        );
        assert_eq!(
            label_values(&by_group, "widgets.example.com"),
            ["example.com", "widgets"]
        );
        assert_eq!(
            label_values(&["resource"], "deployments.apps"),
            ["deployments.apps"]
        );
    }
}
