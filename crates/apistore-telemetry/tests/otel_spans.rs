//! The reference's spans, read back from OpenTelemetry's in-memory exporter.

// Helpers outside `#[test]` functions panic too: a panic there is a failed test.
#![allow(clippy::unwrap_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apistore_telemetry::{ListTraceAttrs, ObjectTraceAttrs, StepAttr, StepTrace, otel_layer};
use opentelemetry::trace::{TraceContextExt, Tracer as _, TracerProvider as _};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

/// Runs `f` under a subscriber that exports to memory; returns the finished spans.
fn export(f: impl FnOnce(&opentelemetry_sdk::trace::SdkTracer)) -> Vec<SpanData> {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let tracer = provider.tracer("test");
    let subscriber = tracing_subscriber::Registry::default().with(otel_layer(tracer.clone()));
    tracing::subscriber::with_default(subscriber, || f(&tracer));
    provider.force_flush().unwrap();
    exporter.get_finished_spans().unwrap()
}

fn span<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name:?} in {:?}", names(spans)))
}

fn names(spans: &[SpanData]) -> Vec<&str> {
    spans.iter().map(|s| &*s.name).collect()
}

fn attributes(span: &SpanData) -> Vec<(String, Value)> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.to_string(), kv.value.clone()))
        .collect()
}

fn string(key: &str, value: &str) -> (String, Value) {
    (key.to_owned(), Value::from(value.to_owned()))
}

fn event_names(span: &SpanData) -> Vec<&str> {
    span.events.iter().map(|e| &*e.name).collect()
}

/// An event's attributes (without the `level` and `target` tracing-opentelemetry adds
/// to `tracing` events, should a step ever arrive as one).
fn event_attributes(span: &SpanData, name: &str) -> Vec<KeyValue> {
    span.events
        .iter()
        .find(|e| e.name == name)
        .unwrap_or_else(|| panic!("no event {name:?}"))
        .attributes
        .iter()
        .filter(|kv| kv.key.as_str() != "level" && kv.key.as_str() != "target")
        .cloned()
        .collect()
}

fn pod_attrs() -> ObjectTraceAttrs<'static> {
    ObjectTraceAttrs {
        audit_id: Some("4f2c6f0e-8d1b-4c5a-9c3e-1f2a3b4c5d6e"),
        key: "/pods/default/web-0",
        type_name: "*example.Pod",
        resource: "pods",
    }
}

#[test]
fn create_span_carries_the_reference_attributes_and_events_in_order() {
    let spans = export(|_| {
        let request = tracing::info_span!("request");
        let _entered = request.enter();
        let mut trace = StepTrace::create(&pod_attrs());
        trace.event("About to Encode");
        trace.event_with("Encode succeeded", &[StepAttr::Len(312)]);
        trace.event("TransformToStorage succeeded");
        trace.event("Txn call succeeded");
        trace.event_with("decode succeeded", &[StepAttr::Len(312)]);
    });
    assert_eq!(names(&spans), ["Create etcd3", "request"]);
    let create = span(&spans, "Create etcd3");
    assert_eq!(
        attributes(create),
        [
            string("audit-id", "4f2c6f0e-8d1b-4c5a-9c3e-1f2a3b4c5d6e"),
            string("key", "/pods/default/web-0"),
            string("type", "*example.Pod"),
            string("resource", "pods"),
        ]
    );
    assert_eq!(
        event_names(create),
        [
            "About to Encode",
            "Encode succeeded",
            "TransformToStorage succeeded",
            "Txn call succeeded",
            "decode succeeded",
        ]
    );
    assert_eq!(event_attributes(create, "About to Encode"), []);
    assert_eq!(
        event_attributes(create, "Encode succeeded"),
        [KeyValue::new("len", 312_i64)]
    );
    // Nothing but the reference's attributes: the steps bypass tracing's event fields.
    assert!(create.events.iter().all(|e| {
        e.attributes
            .iter()
            .all(|kv| kv.key.as_str() == "len" || kv.key.as_str() == "err")
    }));
    // Each step keeps the time it happened, within the span and in order.
    let times: Vec<_> = create.events.iter().map(|e| e.timestamp).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    assert!(create.start_time <= times[0] && times[4] <= create.end_time);
}

#[test]
fn failure_events_carry_the_error_message() {
    let spans = export(|_| {
        let request = tracing::info_span!("request");
        let _entered = request.enter();
        let mut trace = StepTrace::create(&pod_attrs());
        trace.event("About to Encode");
        trace.event_with("Encode succeeded", &[StepAttr::Len(10)]);
        trace.event("TransformToStorage succeeded");
        let err = std::io::Error::other("context deadline exceeded");
        trace.event_with("Txn call failed", &[StepAttr::Err(&err)]);
        trace.event_with(
            "decode failed",
            &[StepAttr::Len(3), StepAttr::Err(&"unexpected EOF")],
        );
    });
    let create = span(&spans, "Create etcd3");
    assert_eq!(
        event_attributes(create, "Txn call failed"),
        [KeyValue::new("err", "context deadline exceeded")]
    );
    assert_eq!(
        event_attributes(create, "decode failed"),
        [
            KeyValue::new("len", 3_i64),
            KeyValue::new("err", "unexpected EOF")
        ]
    );
}

#[test]
fn guaranteed_update_span_records_attempts_in_order() {
    let spans = export(|_| {
        let request = tracing::info_span!("request");
        let _entered = request.enter();
        let mut trace = StepTrace::guaranteed_update(&ObjectTraceAttrs {
            audit_id: None,
            ..pod_attrs()
        });
        trace.event("initial value restored");
        for attempt in 0..2 {
            trace.event("About to Encode");
            trace.event_with("Encode succeeded", &[StepAttr::Len(100)]);
            trace.event("TransformToStorage succeeded");
            trace.event("Transaction prepared");
            trace.event("Txn call completed");
            trace.event("Transaction committed");
            if attempt == 0 {
                trace.event("Retry value restored");
            }
        }
        trace.event_with("decode succeeded", &[StepAttr::Len(100)]);
    });
    let update = span(&spans, "GuaranteedUpdate etcd3");
    // Without an audit id the attribute is still there, empty, as in kube-apiserver.
    assert_eq!(
        attributes(update),
        [
            string("audit-id", ""),
            string("key", "/pods/default/web-0"),
            string("type", "*example.Pod"),
            string("resource", "pods"),
        ]
    );
    let attempt = [
        "About to Encode",
        "Encode succeeded",
        "TransformToStorage succeeded",
        "Transaction prepared",
        "Txn call completed",
        "Transaction committed",
    ];
    let mut expected = vec!["initial value restored"];
    expected.extend(attempt);
    expected.push("Retry value restored");
    expected.extend(attempt);
    expected.push("decode succeeded");
    assert_eq!(event_names(update), expected);
}

#[test]
fn list_spans_are_named_by_recursion_and_carry_list_options() {
    let spans = export(|_| {
        let request = tracing::info_span!("request");
        let _entered = request.enter();
        let attrs = ListTraceAttrs {
            audit_id: Some("a1"),
            recursive: true,
            key: "/pods/default",
            resource_version: "0",
            resource_version_match: "NotOlderThan",
            limit: 500,
            continue_token: "",
        };
        drop(StepTrace::list(&attrs));
        StepTrace::list(&ListTraceAttrs {
            recursive: false,
            key: "/pods/default/web-0",
            limit: 0,
            ..attrs
        })
        .end();
    });
    assert_eq!(
        names(&spans),
        [
            "List(recursive=true) etcd3",
            "List(recursive=false) etcd3",
            "request"
        ]
    );
    let list = span(&spans, "List(recursive=true) etcd3");
    assert_eq!(
        attributes(list),
        [
            string("audit-id", "a1"),
            string("key", "/pods/default"),
            string("resourceVersion", "0"),
            string("resourceVersionMatch", "NotOlderThan"),
            ("limit".to_owned(), Value::I64(500)),
            string("continue", ""),
        ]
    );
    assert!(list.events.is_empty());
    let get = span(&spans, "List(recursive=false) etcd3");
    assert!(attributes(get).contains(&("limit".to_owned(), Value::I64(0))));
}

#[test]
fn the_span_is_a_child_of_the_callers_tracing_span() {
    let spans = export(|_| {
        let request = tracing::info_span!("request");
        request.in_scope(|| StepTrace::create(&pod_attrs()).end());
    });
    let request = span(&spans, "request");
    let create = span(&spans, "Create etcd3");
    assert_eq!(create.parent_span_id, request.span_context.span_id());
    assert_eq!(
        create.span_context.trace_id(),
        request.span_context.trace_id()
    );
}

#[test]
fn the_span_joins_an_attached_opentelemetry_context() {
    let spans = export(|tracer| {
        let caller = tracer.start("caller");
        let cx = Context::current_with_span(caller);
        {
            let _attached = cx.clone().attach();
            StepTrace::create(&pod_attrs()).end();
        }
        cx.span().end();
    });
    let caller = span(&spans, "caller");
    let create = span(&spans, "Create etcd3");
    assert_eq!(create.parent_span_id, caller.span_context.span_id());
    assert_eq!(
        create.span_context.trace_id(),
        caller.span_context.trace_id()
    );
}

#[test]
fn an_untraced_caller_gets_no_span() {
    let spans = export(|_| {
        let mut trace = StepTrace::create(&pod_attrs());
        trace.event("About to Encode");
    });
    assert!(spans.is_empty(), "{:?}", names(&spans));
}

/// Collects the messages of root events (the slow-operation log).
#[derive(Clone, Default)]
struct RootMessages(Arc<Mutex<Vec<String>>>);

struct Message<'a>(&'a mut String);

impl Visit for Message<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber> Layer<S> for RootMessages {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        if event.is_root() {
            let mut message = String::new();
            event.record(&mut Message(&mut message));
            self.0.lock().unwrap().push(message);
        }
    }
}

#[test]
fn a_slow_operation_logs_its_steps_once() {
    let messages = RootMessages::default();
    // At INFO only the steps that took their share are listed (TRACE lists all).
    let subscriber = tracing_subscriber::Registry::default().with(
        messages
            .clone()
            .with_filter(tracing::level_filters::LevelFilter::INFO),
    );
    tracing::subscriber::with_default(subscriber, || {
        // Quick enough for the default threshold: nothing logged.
        let mut quick = StepTrace::create(&pod_attrs());
        quick.event("About to Encode");
        quick.end();

        let mut slow =
            StepTrace::create(&pod_attrs()).with_log_threshold(Duration::from_millis(20));
        slow.event("About to Encode");
        std::thread::sleep(Duration::from_millis(30));
        slow.event("Txn call succeeded");
        slow.end();
    });
    let messages = messages.0.lock().unwrap();
    assert_eq!(messages.len(), 1, "{messages:?}");
    let lines: Vec<&str> = messages[0].lines().collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines[0].starts_with("Trace["), "{}", lines[0]);
    assert!(
        lines[0].contains(
            "\"Create etcd3\" audit-id:4f2c6f0e-8d1b-4c5a-9c3e-1f2a3b4c5d6e,key:/pods/default/web-0,type:*example.Pod,resource:pods ("
        ),
        "{}",
        lines[0]
    );
    // Only the step that took more than its share (20 ms / 3) is listed.
    assert!(
        lines[1].contains("---\"Txn call succeeded\" "),
        "{}",
        lines[1]
    );
    assert!(lines[2].ends_with("END"), "{}", lines[2]);
}
