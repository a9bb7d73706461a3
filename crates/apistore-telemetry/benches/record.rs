//! Instrumentation overhead per call: `cargo bench -p apistore-telemetry --bench record`.
//!
//! Prints ns per call for each recording path and its ratio to the baseline measured in
//! the same run: resolving the series with `with_label_values` on every call, the way
//! kube-apiserver's `RecordEtcdRequest` does.

use std::hint::black_box;
use std::time::{Duration, Instant};

use apistore_telemetry::{
    ObjectTraceAttrs, Operation, StepAttr, StepTrace, StorageMetrics, TransformationType,
};
use opentelemetry::trace::TracerProvider as _;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use tracing_subscriber::layer::SubscriberExt;

const ITERATIONS: u32 = 2_000_000;
const TRACE_ITERATIONS: u32 = 200_000;

fn time_per_call(iterations: u32, mut f: impl FnMut(u32)) -> f64 {
    // Warm up caches and lazily created series.
    for i in 0..iterations / 10 {
        f(i);
    }
    let start = Instant::now();
    for i in 0..iterations {
        f(i);
    }
    start.elapsed().as_nanos() as f64 / f64::from(iterations)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let elapsed = Duration::from_micros(750);

    // Baseline: label resolution on every call, three metrics per request.
    let latency = HistogramVec::new(
        HistogramOpts::new("b_duration", "b").buckets(vec![0.005, 0.025, 0.05, 0.1, 0.2]),
        &["operation", "type"],
    )?;
    let count = IntCounterVec::new(Opts::new("b_total", "b"), &["operation", "type"])?;
    let errors = IntCounterVec::new(Opts::new("b_errors", "b"), &["operation", "type"])?;
    let baseline = time_per_call(ITERATIONS, |i| {
        let labels = [Operation::Get.as_str(), black_box("pods")];
        latency
            .with_label_values(&labels)
            .observe(elapsed.as_secs_f64());
        count.with_label_values(&labels).inc();
        if black_box(i) == u32::MAX {
            errors.with_label_values(&labels).inc();
        }
    });

    // The same for a transformation: a counter and a histogram with a long prefix label.
    let t_latency = HistogramVec::new(
        HistogramOpts::new("t_duration", "t")
            .buckets(prometheus::exponential_buckets(5e-6, 2.0, 25)?),
        &["transformation_type", "transformer_prefix"],
    )?;
    let t_count = IntCounterVec::new(
        Opts::new("t_total", "t"),
        &["transformation_type", "transformer_prefix", "status"],
    )?;
    let transformation_baseline = time_per_call(ITERATIONS, |_| {
        let prefix = black_box("k8s:enc:aesgcm:v1:key1:");
        t_count
            .with_label_values(&["from_storage", prefix, "OK"])
            .inc();
        t_latency
            .with_label_values(&["from_storage", prefix])
            .observe(Duration::from_micros(20).as_secs_f64());
    });

    let registry = Registry::new();
    let metrics = StorageMetrics::register(&registry)?;
    let by_name = time_per_call(ITERATIONS, |_| {
        metrics.record_etcd_request(Operation::Get, black_box("pods"), true, elapsed);
    });
    let pods = metrics.for_resource("pods");
    let resolved = time_per_call(ITERATIONS, |_| {
        pods.record_etcd_request(Operation::Get, true, elapsed);
    });
    let decode_error = time_per_call(ITERATIONS, |_| {
        metrics.record_decode_error(black_box("pods"));
    });
    let transformation = time_per_call(ITERATIONS, |_| {
        metrics.record_transformation(
            TransformationType::FromStorage,
            black_box("k8s:enc:aesgcm:v1:key1:"),
            "OK",
            Some(Duration::from_micros(20)),
        );
    });

    // Two threads recording the same series (the machine has two cores).
    let contended = std::thread::scope(|s| {
        // Both threads are started before either is joined.
        #[allow(clippy::needless_collect)]
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    time_per_call(ITERATIONS, |_| {
                        pods.record_etcd_request(Operation::Get, true, elapsed);
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| "a bench thread panicked"))
            .try_fold(0.0, |worst, ns| ns.map(|ns| f64::max(worst, ns)))
    })?;

    let create_trace = |_| {
        let mut trace = StepTrace::create(&ObjectTraceAttrs {
            audit_id: Some("4f2c6f0e-8d1b-4c5a-9c3e-1f2a3b4c5d6e"),
            key: "/pods/default/web-0",
            type_name: "Pod",
            resource: "pods",
        });
        trace.event("About to Encode");
        trace.event_with("Encode succeeded", &[StepAttr::Len(312)]);
        trace.event("TransformToStorage succeeded");
        trace.event("Txn call succeeded");
        trace.event_with("decode succeeded", &[StepAttr::Len(312)]);
    };
    // No subscriber: steps are kept for the slow log, no span is opened.
    let trace_untraced = time_per_call(TRACE_ITERATIONS, create_trace);
    // Under a request span with the OpenTelemetry layer and an SDK tracer that samples
    // everything but exports nowhere.
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder().build();
    let subscriber = tracing_subscriber::Registry::default()
        .with(apistore_telemetry::otel_layer(provider.tracer("bench")));
    let (trace_exported, span_only) = tracing::subscriber::with_default(subscriber, || {
        let request = tracing::info_span!("request");
        let _entered = request.enter();
        let with_steps = time_per_call(TRACE_ITERATIONS, create_trace);
        // The span alone: what the five steps add is the difference.
        let span_only = time_per_call(TRACE_ITERATIONS, |_| {
            StepTrace::create(&ObjectTraceAttrs {
                audit_id: Some("4f2c6f0e-8d1b-4c5a-9c3e-1f2a3b4c5d6e"),
                key: "/pods/default/web-0",
                type_name: "Pod",
                resource: "pods",
            })
            .end();
        });
        (with_steps, span_only)
    });

    println!("{:<58} {:>10} {:>8}", "path", "ns/call", "ratio");
    let rows = [
        ("baseline: with_label_values per call (request)", baseline),
        ("StorageMetrics::record_etcd_request (by name)", by_name),
        ("ResourceMetrics::record_etcd_request (resolved)", resolved),
        ("ResourceMetrics::record_etcd_request, 2 threads", contended),
        (
            "StorageMetrics::record_decode_error (by name)",
            decode_error,
        ),
        (
            "baseline: with_label_values per call (transformation)",
            transformation_baseline,
        ),
        ("StorageMetrics::record_transformation (OK)", transformation),
        (
            "StepTrace create + 5 events, caller untraced",
            trace_untraced,
        ),
        (
            "StepTrace create + 5 events, OTel layer + SDK",
            trace_exported,
        ),
        ("StepTrace create, no events, OTel layer + SDK", span_only),
    ];
    for (name, ns) in rows {
        println!("{name:<58} {ns:>10.1} {:>8.2}", ns / baseline);
    }
    Ok(())
}
