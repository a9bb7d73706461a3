//! Label-resolved handles for one resource, so recording on the hot path is a few
//! atomic operations instead of a label hash and a map lookup per metric.
//!
//! A series must not appear before kube-apiserver would create it: `etcd_request_errors_total`
//! for an operation exists only once that operation failed, the list counters only once
//! a list was served. So every child is resolved on its first use and then kept.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use apistore_storage::{GroupResource, KubeVersion};
use prometheus::{Histogram, IntCounter, IntGauge};

use crate::families::Families;
use crate::labels::Operation;

/// The `storage` label of kube 1.37's list families for lists etcd served.
const STORAGE_ETCD: &str = "etcd";
/// The `storage` label of kube 1.37's list families for lists the watch cache served.
const STORAGE_WATCH_CACHE: &str = "watchcache";

/// Storage metrics bound to one resource: a GroupResource string such as `pods` or
/// `deployments.apps`, the `type` of the `etcd_request_*` metrics and the `resource`
/// of the rest before kube 1.34, split into `group` and `resource` labels from 1.34
/// (see [`StorageMetrics::register_for`](crate::StorageMetrics::register_for)).
///
/// A store serves one resource, so it resolves this once with
/// [`StorageMetrics::for_resource`](crate::StorageMetrics::for_resource) and records
/// through it. Cloning is cheap; all clones share the same series.
#[derive(Clone)]
pub struct ResourceMetrics {
    inner: Arc<Handles>,
}

struct Handles {
    families: Arc<Families>,
    /// The group-resource string.
    resource: Box<str>,
    /// Its parts, the label values from kube 1.34.
    group: Box<str>,
    resource_name: Box<str>,
    operations: [OperationHandles; Operation::ALL.len()],
    decode_errors: OnceLock<IntCounter>,
    events_received: OnceLock<IntCounter>,
    /// `etcd_bookmark_counts` before 1.36, `etcd_bookmark_total` from 1.36.
    bookmarks: OnceLock<(Option<IntGauge>, Option<IntCounter>)>,
    objects: OnceLock<Option<IntGauge>>,
    list: OnceLock<ListHandles>,
    /// kube 1.37's list latency, unstreamed then streamed.
    list_duration: [OnceLock<Option<Histogram>>; 2],
}

#[derive(Default)]
struct OperationHandles {
    /// Latency and count are always recorded together.
    requests: OnceLock<(Histogram, IntCounter)>,
    errors: OnceLock<IntCounter>,
}

struct ListHandles {
    total: IntCounter,
    fetched: IntCounter,
    evaluated: IntCounter,
    returned: IntCounter,
}

impl std::fmt::Debug for ResourceMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceMetrics")
            .field("resource", &self.inner.resource)
            .finish_non_exhaustive()
    }
}

impl ResourceMetrics {
    pub(crate) fn new(families: Arc<Families>, resource: &str) -> Self {
        let parsed = GroupResource::parse(resource);
        Self {
            inner: Arc::new(Handles {
                families,
                resource: resource.into(),
                group: parsed.group.into(),
                resource_name: parsed.resource.into(),
                operations: Default::default(),
                decode_errors: OnceLock::new(),
                events_received: OnceLock::new(),
                bookmarks: OnceLock::new(),
                objects: OnceLock::new(),
                list: OnceLock::new(),
                list_duration: Default::default(),
            }),
        }
    }

    /// The resource label these handles record under (the group-resource string).
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// The kube minor whose labels these handles write.
    pub fn kube_version(&self) -> KubeVersion {
        self.inner.families.version
    }

    /// Records one etcd request: observes `etcd_request_duration_seconds`, counts
    /// `etcd_requests_total`, and counts `etcd_request_errors_total` when the etcd call
    /// returned an error (`ok == false`). A transaction whose compare failed is not an
    /// error.
    pub fn record_etcd_request(&self, operation: Operation, ok: bool, elapsed: Duration) {
        let h = &self.inner;
        let slot = &h.operations[operation.index()];
        let (latency, count) = slot.requests.get_or_init(|| {
            let labels = h.request_labels(operation);
            (
                h.families.request_duration.with_label_values(&labels),
                h.families.requests.with_label_values(&labels),
            )
        });
        latency.observe(elapsed.as_secs_f64());
        count.inc();
        if !ok {
            slot.errors
                .get_or_init(|| {
                    h.families
                        .request_errors
                        .with_label_values(&h.request_labels(operation))
                })
                .inc();
        }
    }

    /// Counts one stored object that failed to decode (`apiserver_storage_decode_errors_total`).
    pub fn record_decode_error(&self) {
        let h = &self.inner;
        h.decode_errors
            .get_or_init(|| h.families.decode_errors.with_label_values(&h.labels(&[])))
            .inc();
    }

    /// Counts one event received from an etcd watch
    /// (`apiserver_storage_events_received_total`).
    pub fn record_events_received(&self) {
        let h = &self.inner;
        h.events_received
            .get_or_init(|| h.families.events_received.with_label_values(&h.labels(&[])))
            .inc();
    }

    /// Counts one progress-notify response from an etcd watch: `etcd_bookmark_counts`
    /// (a gauge that is only ever incremented, as in kube-apiserver) before kube 1.36,
    /// `etcd_bookmark_total` from 1.36.
    pub fn record_bookmark(&self) {
        let h = &self.inner;
        let (gauge, counter) = h.bookmarks.get_or_init(|| {
            let labels = h.labels(&[]);
            (
                h.families
                    .bookmark_counts
                    .as_ref()
                    .map(|f| f.with_label_values(&labels)),
                h.families
                    .bookmark_total
                    .as_ref()
                    .map(|f| f.with_label_values(&labels)),
            )
        });
        if let Some(gauge) = gauge {
            gauge.inc();
        }
        if let Some(counter) = counter {
            counter.inc();
        }
    }

    /// Sets `apiserver_storage_objects`: the object count at the last check, or -1 when
    /// the count could not be fetched. Nothing from kube 1.37, which hides it.
    pub fn set_object_count(&self, count: i64) {
        let h = &self.inner;
        let gauge = h.objects.get_or_init(|| {
            // The one family still labelled by the group-resource string at 1.34+.
            h.families
                .objects
                .as_ref()
                .map(|f| f.with_label_values(&[&*h.resource]))
        });
        if let Some(gauge) = gauge {
            gauge.set(count);
        }
    }

    /// Records one LIST served from etcd: `apiserver_storage_list_total` +1, and the
    /// objects fetched from etcd (over all pages), evaluated against the predicate, and
    /// returned (from kube 1.37 under `storage="etcd"` and an empty `index`).
    pub fn record_list(&self, fetched: usize, evaluated: usize, returned: usize) {
        let h = &self.inner;
        let list = h.list.get_or_init(|| {
            let (indexed, plain) = h.list_labels(STORAGE_ETCD, "");
            ListHandles {
                total: h.families.list_total.with_label_values(&indexed),
                fetched: h.families.list_fetched.with_label_values(&indexed),
                evaluated: h.families.list_evaluated.with_label_values(&plain),
                returned: h.families.list_returned.with_label_values(&plain),
            }
        });
        list.total.inc();
        list.fetched.inc_by(count(fetched));
        list.evaluated.inc_by(count(evaluated));
        list.returned.inc_by(count(returned));
    }

    /// Records one LIST the watch cache served, as kube 1.37's cacher does into the
    /// storage list families: `storage="watchcache"`, the index it used (empty for
    /// none), the objects it took from the cache and those it returned, and no
    /// evaluated objects (kube counts 0). Before 1.37 the cacher records only its own
    /// `apiserver_cache_list_*`, so this records nothing.
    pub fn record_cache_list(&self, index: &str, fetched: usize, returned: usize) {
        let h = &self.inner;
        if h.families.version < KubeVersion::V1_37 {
            return;
        }
        // The index varies per call, so these are looked up each time; a cache list
        // is far rarer than an etcd request.
        let (indexed, plain) = h.list_labels(STORAGE_WATCH_CACHE, index);
        h.families.list_total.with_label_values(&indexed).inc();
        h.families
            .list_fetched
            .with_label_values(&indexed)
            .inc_by(count(fetched));
        h.families
            .list_evaluated
            .with_label_values(&plain)
            .inc_by(0);
        h.families
            .list_returned
            .with_label_values(&plain)
            .inc_by(count(returned));
    }

    /// Observes kube 1.37's `apiserver_storage_list_duration_seconds`: how long one
    /// GetList from etcd took, decoding included, and whether it read one `RangeStream`.
    /// Nothing before 1.37.
    pub fn record_list_latency(&self, streamed: bool, elapsed: Duration) {
        let h = &self.inner;
        let histogram = h.list_duration[usize::from(streamed)].get_or_init(|| {
            let streamed = if streamed { "true" } else { "false" };
            h.families
                .list_duration
                .as_ref()
                .map(|f| f.with_label_values(&[streamed, &*h.group, &*h.resource_name]))
        });
        if let Some(histogram) = histogram {
            histogram.observe(elapsed.as_secs_f64());
        }
    }
}

impl Handles {
    /// The resource's label values for this minor, after `before`.
    fn labels<'a>(&'a self, before: &[&'a str]) -> Vec<&'a str> {
        let mut labels = before.to_vec();
        if self.families.version >= KubeVersion::V1_34 {
            labels.extend([&*self.group, &*self.resource_name]);
        } else {
            labels.push(&self.resource);
        }
        labels
    }

    fn request_labels(&self, operation: Operation) -> Vec<&str> {
        self.labels(&[operation.label_at(self.families.version)])
    }

    /// The label values of the list families that count fetched objects, and of those
    /// that do not: from 1.37 with the storage and, on the first, the index.
    fn list_labels<'a>(&'a self, storage: &'a str, index: &'a str) -> (Vec<&'a str>, Vec<&'a str>) {
        let mut plain = self.labels(&[]);
        if self.families.version < KubeVersion::V1_37 {
            return (plain.clone(), plain);
        }
        plain.push(storage);
        let mut indexed = plain.clone();
        indexed.push(index);
        (indexed, plain)
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
