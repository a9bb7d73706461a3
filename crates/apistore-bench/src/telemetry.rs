//! "Telemetry on": kube-apiserver's storage metrics in a Prometheus registry, and a
//! tracing subscriber (INFO and above) with apistore-telemetry's OpenTelemetry layer
//! exporting through a batch span processor to an exporter that counts and discards
//! (the cost up to the export call, none of the network). "Off" is no metrics and no
//! subscriber.
//!
//! The store opens its spans only when the caller is traced, as kube-apiserver does.
//! The comparison runs twice: with callers untraced (most requests), and with every
//! call of both arms under a sampled *remote* parent span context, the state a request
//! that arrived with a sampled `traceparent` header is in. The parent is not a local
//! span: its cost would be the caller's, not the store's.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing::Dispatch;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

/// The tracing side of "telemetry on".
#[derive(Debug)]
pub(crate) struct Tracing {
    /// The subscriber the "on" callers run under.
    pub(crate) dispatch: Dispatch,
    provider: SdkTracerProvider,
    exported: Arc<AtomicU64>,
}

impl Tracing {
    /// A subscriber with the OpenTelemetry layer over a discarding batch exporter.
    pub(crate) fn install() -> Self {
        let exported = Arc::new(AtomicU64::new(0));
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(DiscardExporter(Arc::clone(&exported)))
            .build();
        // INFO and above, as an application would filter: without a filter the
        // transport's TRACE-level spans (h2, tonic) would be exported too.
        let subscriber = tracing_subscriber::Registry::default().with(
            apistore_telemetry::otel_layer(provider.tracer("apistore-bench"))
                .with_filter(Targets::new().with_default(tracing::Level::INFO)),
        );
        Self {
            dispatch: Dispatch::new(subscriber),
            provider,
            exported,
        }
    }

    /// Spans exported so far (after flushing the batch processor).
    pub(crate) fn spans_exported(&self) -> u64 {
        // A failed flush only means some spans are not counted yet.
        let _ = self.provider.force_flush();
        self.exported.load(Ordering::Relaxed)
    }
}

impl Drop for Tracing {
    fn drop(&mut self) {
        let _ = self.provider.shutdown();
    }
}

/// The context every telemetry-arm call runs in: a sampled remote parent span.
pub(crate) fn traced_request_context() -> opentelemetry::Context {
    let parent = SpanContext::new(
        TraceId::from(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128),
        SpanId::from(0x00f0_67aa_0ba9_02b7_u64),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    );
    opentelemetry::Context::new().with_remote_span_context(parent)
}

/// Counts spans and drops them.
#[derive(Debug)]
struct DiscardExporter(Arc<AtomicU64>);

impl SpanExporter for DiscardExporter {
    fn export(&self, batch: Vec<SpanData>) -> impl Future<Output = OTelSdkResult> + Send {
        self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        std::future::ready(Ok(()))
    }
}
