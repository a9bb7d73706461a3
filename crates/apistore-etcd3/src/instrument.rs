//! The store's instrumentation seam: etcd request metrics, list and decode metrics,
//! lease object counts, and the reference's spans. Without metrics configured, only the
//! spans remain, and those open only when the caller is traced.

use std::time::Duration;

use apistore_storage::{KubeVersion, ListOptions};
use apistore_telemetry::{
    ListTraceAttrs, ObjectTraceAttrs, ResourceMetrics, StepAttr, StepTrace, StorageMetrics,
};

/// The `operation` label of `etcd_request_*` metrics: the telemetry crate's, so that
/// the store names its requests exactly as the metrics label them.
pub(crate) use apistore_telemetry::Operation;

/// Metrics and tracing for one store.
#[derive(Debug, Clone, Default)]
pub(crate) struct Instrumentation {
    metrics: Option<Metrics>,
}

#[derive(Debug, Clone)]
struct Metrics {
    all: StorageMetrics,
    resource: ResourceMetrics,
}

/// Decode failures of reads are `apiserver_storage_decode_errors_total`.
impl apistore_backend::DecodeErrors for Instrumentation {
    fn record_decode_error(&self) {
        Self::record_decode_error(self);
    }
}

impl Instrumentation {
    pub(crate) fn new(metrics: Option<StorageMetrics>, resource: &str) -> Self {
        Self {
            metrics: metrics.map(|all| Metrics {
                resource: all.for_resource(resource),
                all,
            }),
        }
    }

    pub(crate) fn metrics(&self) -> Option<&StorageMetrics> {
        self.metrics.as_ref().map(|m| &m.all)
    }

    /// Records one etcd request on `key`. Kube before 1.34 labels a count's `type`
    /// with the key it counts under; every other request, and from 1.34 a count too,
    /// with the resource.
    pub(crate) fn record_etcd_request(
        &self,
        operation: Operation,
        key: &str,
        ok: bool,
        elapsed: Duration,
    ) {
        let Some(metrics) = &self.metrics else {
            return;
        };
        if operation == Operation::ListWithCount && metrics.all.kube_version() < KubeVersion::V1_34
        {
            metrics.all.record_etcd_request(operation, key, ok, elapsed);
        } else {
            metrics.resource.record_etcd_request(operation, ok, elapsed);
        }
    }

    pub(crate) fn record_decode_error(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.resource.record_decode_error();
        }
    }

    pub(crate) fn observe_lease_object_count(&self, count: i64) {
        if let Some(metrics) = &self.metrics {
            metrics.all.observe_lease_object_count(count);
        }
    }

    /// Records one GetList: its counts, and from kube 1.37 its latency and whether it
    /// streamed.
    pub(crate) fn record_list(
        &self,
        (fetched, evaluated, returned): (usize, usize, usize),
        streamed: bool,
        elapsed: Duration,
    ) {
        if let Some(metrics) = &self.metrics {
            metrics.resource.record_list(fetched, evaluated, returned);
            metrics.resource.record_list_latency(streamed, elapsed);
        }
    }

    pub(crate) fn record_events_received(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.resource.record_events_received();
        }
    }

    pub(crate) fn record_bookmark(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.resource.record_bookmark();
        }
    }

    pub(crate) fn create_span<'a>(
        &self,
        key: &'a str,
        type_name: &'a str,
        resource: &'a str,
    ) -> Trace<'a> {
        Trace(StepTrace::create(&ObjectTraceAttrs {
            audit_id: None,
            key,
            type_name,
            resource,
        }))
    }

    pub(crate) fn update_span<'a>(
        &self,
        key: &'a str,
        type_name: &'a str,
        resource: &'a str,
    ) -> Trace<'a> {
        Trace(StepTrace::guaranteed_update(&ObjectTraceAttrs {
            audit_id: None,
            key,
            type_name,
            resource,
        }))
    }

    pub(crate) fn list_span<'a>(&self, key: &'a str, options: &'a ListOptions) -> Trace<'a> {
        Trace(StepTrace::list(&ListTraceAttrs {
            audit_id: None,
            recursive: options.recursive,
            key,
            resource_version: &options.resource_version,
            resource_version_match: options.resource_version_match.as_str(),
            limit: options.predicate.limit,
            continue_token: &options.predicate.continue_token,
        }))
    }
}

/// The steps of one traced operation; the span ends when this is dropped.
#[derive(Debug)]
pub(crate) struct Trace<'a>(StepTrace<'a>);

impl Trace<'_> {
    pub(crate) fn event(&mut self, name: &'static str) {
        self.0.event(name);
    }

    pub(crate) fn event_len(&mut self, name: &'static str, len: usize) {
        self.0.event_with(name, &[StepAttr::Len(len)]);
    }

    pub(crate) fn event_err(&mut self, name: &'static str, err: &dyn std::fmt::Display) {
        self.0.event_with(name, &[StepAttr::Err(err)]);
    }

    pub(crate) fn event_len_err(
        &mut self,
        name: &'static str,
        len: usize,
        err: &dyn std::fmt::Display,
    ) {
        self.0
            .event_with(name, &[StepAttr::Len(len), StepAttr::Err(err)]);
    }
}
