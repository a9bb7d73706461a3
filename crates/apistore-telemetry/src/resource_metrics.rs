//! Label-resolved handles for one resource, so recording on the hot path is a few
//! atomic operations instead of a label hash and a map lookup per metric.
//!
//! A series must not appear before kube-apiserver would create it: `etcd_request_errors_total`
//! for an operation exists only once that operation failed, the list counters only once
//! a list was served. So every child is resolved on its first use and then kept.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use prometheus::{Histogram, IntCounter, IntGauge};

use crate::families::Families;
use crate::labels::Operation;

/// Storage metrics bound to one resource label: the `type` of the `etcd_request_*`
/// metrics and the `resource` of the rest (a GroupResource string such as `pods` or
/// `deployments.apps`).
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
    resource: Box<str>,
    operations: [OperationHandles; Operation::ALL.len()],
    decode_errors: OnceLock<IntCounter>,
    events_received: OnceLock<IntCounter>,
    bookmarks: OnceLock<IntGauge>,
    objects: OnceLock<IntGauge>,
    list: OnceLock<ListHandles>,
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
        Self {
            inner: Arc::new(Handles {
                families,
                resource: resource.into(),
                operations: Default::default(),
                decode_errors: OnceLock::new(),
                events_received: OnceLock::new(),
                bookmarks: OnceLock::new(),
                objects: OnceLock::new(),
                list: OnceLock::new(),
            }),
        }
    }

    /// The resource label these handles record under.
    pub fn resource(&self) -> &str {
        &self.inner.resource
    }

    /// Records one etcd request: observes `etcd_request_duration_seconds`, counts
    /// `etcd_requests_total`, and counts `etcd_request_errors_total` when the etcd call
    /// returned an error (`ok == false`). A transaction whose compare failed is not an
    /// error.
    pub fn record_etcd_request(&self, operation: Operation, ok: bool, elapsed: Duration) {
        let h = &self.inner;
        let slot = &h.operations[operation.index()];
        let (latency, count) = slot.requests.get_or_init(|| {
            let labels = [operation.as_str(), &*h.resource];
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
                        .with_label_values(&[operation.as_str(), &*h.resource])
                })
                .inc();
        }
    }

    /// Counts one stored object that failed to decode (`apiserver_storage_decode_errors_total`).
    pub fn record_decode_error(&self) {
        let h = &self.inner;
        h.decode_errors
            .get_or_init(|| h.families.decode_errors.with_label_values(&[&*h.resource]))
            .inc();
    }

    /// Counts one event received from an etcd watch
    /// (`apiserver_storage_events_received_total`).
    pub fn record_events_received(&self) {
        let h = &self.inner;
        h.events_received
            .get_or_init(|| {
                h.families
                    .events_received
                    .with_label_values(&[&*h.resource])
            })
            .inc();
    }

    /// Counts one progress-notify response from an etcd watch (`etcd_bookmark_counts`,
    /// a gauge that is only ever incremented, as in kube-apiserver).
    pub fn record_bookmark(&self) {
        let h = &self.inner;
        h.bookmarks
            .get_or_init(|| h.families.bookmarks.with_label_values(&[&*h.resource]))
            .inc();
    }

    /// Sets `apiserver_storage_objects`: the object count at the last check, or -1 when
    /// the count could not be fetched.
    pub fn set_object_count(&self, count: i64) {
        let h = &self.inner;
        h.objects
            .get_or_init(|| h.families.objects.with_label_values(&[&*h.resource]))
            .set(count);
    }

    /// Records one LIST served from storage: `apiserver_storage_list_total` +1, and the
    /// objects fetched from etcd (over all pages), evaluated against the predicate, and
    /// returned.
    pub fn record_list(&self, fetched: usize, evaluated: usize, returned: usize) {
        let h = &self.inner;
        let list = h.list.get_or_init(|| {
            let labels = [&*h.resource];
            ListHandles {
                total: h.families.list_total.with_label_values(&labels),
                fetched: h.families.list_fetched.with_label_values(&labels),
                evaluated: h.families.list_evaluated.with_label_values(&labels),
                returned: h.families.list_returned.with_label_values(&labels),
            }
        });
        list.total.inc();
        list.fetched.inc_by(count(fetched));
        list.evaluated.inc_by(count(evaluated));
        list.returned.inc_by(count(returned));
    }
}

fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}
