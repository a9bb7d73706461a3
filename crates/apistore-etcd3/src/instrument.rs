//! The store's instrumentation seam: etcd request metrics, decode errors, lease object
//! counts and the reference's spans. Without telemetry configured, every call is a no-op.

use std::time::Duration;

/// The `operation` label of `etcd_request_*` metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Operation {
    /// A single-key read (get, state refresh, non-recursive list).
    Get,
    /// A range read.
    List,
    /// The create transaction.
    Create,
    /// The update transaction.
    Update,
    /// The delete transaction.
    Delete,
    /// A count-only range read.
    ListWithCount,
    /// A lease grant (not recorded, as in kube-apiserver).
    Lease,
}

/// Metrics and tracing for one store.
#[derive(Debug, Clone, Default)]
pub(crate) struct Instrumentation {}

impl Instrumentation {
    pub(crate) fn record_etcd_request(
        &self,
        _operation: Operation,
        _type_label: &str,
        _ok: bool,
        _elapsed: Duration,
    ) {
    }

    pub(crate) fn record_decode_error(&self, _resource: &str) {}

    pub(crate) fn observe_lease_object_count(&self, _count: i64) {}

    pub(crate) fn create_span(&self, _key: &str, _resource: &str) -> Trace {
        Trace {}
    }

    pub(crate) fn update_span(&self, _key: &str, _resource: &str) -> Trace {
        Trace {}
    }

    pub(crate) fn list_span(&self, _key: &str, _options: &apistore_storage::ListOptions) -> Trace {
        Trace {}
    }

    pub(crate) fn record_list(&self, _resource: &str, _fetched: usize, _evaluated: usize, _returned: usize) {}
}

/// The steps of one traced operation.
#[derive(Debug)]
pub(crate) struct Trace {}

impl Trace {
    pub(crate) fn event(&mut self, _name: &'static str) {}

    pub(crate) fn event_with(&mut self, _name: &'static str, _attributes: &[(&'static str, &str)]) {}
}
