//! Installing the `tracing` to OpenTelemetry bridge.
//!
//! The storage spans are `tracing` spans; an application that exports OpenTelemetry
//! adds [`otel_layer`] to its subscriber. The layer is `tracing-opentelemetry`'s, set up
//! so that spans carry exactly the reference's attributes: its own extras (source
//! location, thread, target, busy/idle time) are turned off. The step events are
//! handed to the OpenTelemetry span directly (see [`StepTrace`](crate::StepTrace)), so
//! they carry only the reference's `len` and `err`.
//!
//! The spans are at INFO under [`TRACE_TARGET`](crate::TRACE_TARGET): a filter in
//! front of this layer must let them through (for example a per-layer filter
//! `apistore::storage=info`).

use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

/// A `tracing-opentelemetry` layer exporting through `tracer`, configured so that the
/// storage spans carry only the reference's attribute keys.
///
/// ```
/// use opentelemetry::trace::TracerProvider as _;
/// use tracing_subscriber::layer::SubscriberExt;
///
/// // Any OpenTelemetry tracer; an SDK provider with the application's exporter.
/// let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
/// let subscriber = tracing_subscriber::Registry::default()
///     .with(apistore_telemetry::otel_layer(provider.tracer("apistore")));
/// tracing::subscriber::set_global_default(subscriber).expect("no other subscriber yet");
/// ```
pub fn otel_layer<S, T>(tracer: T) -> OpenTelemetryLayer<S, T>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
}
