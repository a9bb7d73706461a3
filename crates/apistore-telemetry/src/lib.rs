//! kube-apiserver's storage telemetry for apistore: Prometheus metrics under the
//! reference's names and the reference's tracing spans, bridged to OpenTelemetry.
//!
//! This crate owns the *what* of telemetry: metric names, help strings, labels and
//! buckets exactly as k8s.io/apiserver registers them at the kube minor chosen
//! (1.31 to 1.37: `pkg/storage/etcd3/metrics/metrics.go`, `pkg/storage/metrics`,
//! `pkg/storage/value/metrics.go`,
//! `pkg/storage/value/encrypt/envelope/metrics/metrics.go`), and the spans and events
//! of `pkg/storage/etcd3/store.go`. The *when* (which call records what) belongs to
//! the stores and transformers that use it; the exporter setup belongs to the
//! application. Of the other apistore crates it knows only the contract's label types
//! and apistore-value's `KmsObserver` hook, which [`EnvelopeMetrics`] implements.
//!
//! # Metrics
//!
//! [`StorageMetrics::register_for`] registers every storage metric of one kube minor
//! into a [`prometheus::Registry`] ([`StorageMetrics::register`]: of the newest);
//! registering again into the same registry returns the same metrics, so each store can
//! register on its own. The minor decides the families and their labels: kube 1.34
//! labels resources `group` and `resource` where 1.31–1.33 wrote one `resource` (or
//! `type`) string, 1.36 counts bookmarks in `etcd_bookmark_total`, 1.37 labels lists by
//! the `storage` that served them and hides `apiserver_storage_objects`. Recording methods take typed
//! arguments; [`StorageMetrics::for_resource`] resolves a resource's series once for
//! hot paths. [`encode_text`] writes the text exposition as kube-apiserver's `/metrics`
//! does (Go's float spelling included).
//!
//! ```
//! use std::time::Duration;
//! use apistore_storage::KubeVersion;
//! use apistore_telemetry::{encode_text, Operation, StorageMetrics};
//!
//! # fn main() -> Result<(), apistore_telemetry::TelemetryError> {
//! let registry = prometheus::Registry::new();
//! let metrics = StorageMetrics::register_for(&registry, KubeVersion::V1_37)?;
//!
//! let deployments = metrics.for_resource("deployments.apps");
//! deployments.record_etcd_request(Operation::Get, true, Duration::from_millis(3));
//! deployments.record_list(10, 10, 4);
//! metrics.record_decode_error("deployments.apps");
//!
//! // A second registration is the same set of metrics.
//! assert!(StorageMetrics::register_for(&registry, KubeVersion::V1_37)?.same_as(&metrics));
//!
//! let text = encode_text(&registry);
//! assert!(text.contains(
//!     r#"etcd_requests_total{group="apps",operation="get",resource="deployments"} 1"#
//! ));
//! assert!(text.contains(
//!     r#"apiserver_storage_list_returned_objects_total{group="apps",resource="deployments",storage="etcd"} 4"#
//! ));
//!
//! // kube 1.31 wrote the group-resource as one label.
//! let old = prometheus::Registry::new();
//! StorageMetrics::register_for(&old, KubeVersion::V1_31)?
//!     .record_etcd_request(Operation::Get, "deployments.apps", true, Duration::ZERO);
//! assert!(encode_text(&old)
//!     .contains(r#"etcd_requests_total{operation="get",type="deployments.apps"} 1"#));
//! # Ok(())
//! # }
//! ```
//!
//! # Tracing
//!
//! [`StepTrace`] opens the reference's spans (`Create etcd3`, `GuaranteedUpdate etcd3`,
//! `List(recursive=...) etcd3`) as `tracing` spans with the reference's attribute keys,
//! records the reference's steps and hands them to the OpenTelemetry span as its events
//! when it ends (with the times they happened), and logs the steps of an operation
//! that took longer than 500 ms. As in kube-apiserver, a span is only opened when the
//! caller is itself traced. [`otel_layer`] turns the spans into OpenTelemetry spans.
//!
//! ```
//! use apistore_telemetry::{ObjectTraceAttrs, StepAttr, StepTrace};
//! use opentelemetry::trace::TracerProvider as _;
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
//! let subscriber = tracing_subscriber::Registry::default()
//!     .with(apistore_telemetry::otel_layer(provider.tracer("apistore")));
//!
//! tracing::subscriber::with_default(subscriber, || {
//!     let request = tracing::info_span!("request");
//!     let _entered = request.enter();
//!
//!     let mut trace = StepTrace::create(&ObjectTraceAttrs {
//!         audit_id: Some("4f2c"),
//!         key: "/pods/default/web-0",
//!         type_name: "Pod",
//!         resource: "pods",
//!     });
//!     trace.event("About to Encode");
//!     trace.event_with("Encode succeeded", &[StepAttr::Len(312)]);
//!     trace.event("TransformToStorage succeeded");
//!     trace.event("Txn call succeeded");
//!     trace.event_with("decode succeeded", &[StepAttr::Len(312)]);
//! }); // the span ends when `trace` is dropped
//! ```

mod envelope_families;
mod envelope_metrics;
mod error;
mod exposition;
mod families;
mod label_cache;
mod labels;
mod otel;
mod registration;
mod resource_metrics;
mod slow_log;
mod storage_metrics;
mod trace;
mod transformation;

pub use envelope_metrics::{EnvelopeMetrics, KEY_ID_SERIES_LIMIT};
pub use error::{Result, TelemetryError};
pub use exposition::{encode_families, encode_text};
pub use labels::{Operation, STATUS_OK, STATUS_UNKNOWN_NON_GRPC, TransformationType};
pub use otel::otel_layer;
pub use resource_metrics::ResourceMetrics;
pub use storage_metrics::StorageMetrics;
pub use trace::{
    DEFAULT_LOG_THRESHOLD, ListTraceAttrs, ObjectTraceAttrs, StepAttr, StepTrace, TRACE_TARGET,
};

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
