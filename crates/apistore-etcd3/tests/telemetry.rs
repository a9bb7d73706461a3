//! The telemetry a real `Etcd3Store` produces against a real etcd: the Prometheus
//! exposition after a known sequence of store calls, and the OpenTelemetry spans of
//! calls made under a caller's trace.
//!
//! Expected values follow `pkg/storage/etcd3/store.go` and
//! `pkg/storage/etcd3/metrics/metrics.go` of k8s.io/apiserver v0.31.1: which etcd
//! request each call makes (and under which `operation` label), which failures count as
//! request errors, how a list counts fetched, evaluated and returned objects, and which
//! span events each step adds.

// Helpers outside `#[test]` functions panic too: a panic there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, SystemTime};

use apistore_etcd3::next_event;
use apistore_storage::{
    DeleteOptions, ErrorKind, GetOptions, LabelSelector, ListOptions, ResourceVersionMatch,
    Storage, StorageError, Update, UpdateOptions, WatchEvent,
};
use apistore_telemetry::{TRACE_TARGET, encode_text, otel_layer};
use apistore_testing::suite::{Backend, Pod};
use common::Etcd3Backend;
use opentelemetry::trace::{
    FutureExt as _, SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    TracerProvider as _,
};
use opentelemetry::{Context, KeyValue, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;

/// The marker the common backend's test transformer puts before every stored value.
const MARKER_LEN: usize = b"test!".len();

/// More than etcd's default `--max-request-bytes` (1.5 MiB) and less than its gRPC
/// receive limit (that plus 512 KiB): etcd itself rejects the write ("request is too
/// large"), a failed etcd request on a healthy etcd and a healthy connection.
const OVERSIZED_ANNOTATION: usize = 1_600_000;

fn pod(namespace: &str, name: &str, app: &str) -> Pod {
    Pod::new(namespace, name).with_label("app", app)
}

fn oversized(namespace: &str, name: &str) -> Pod {
    let mut pod = Pod::new(namespace, name);
    pod.metadata
        .annotations
        .insert("padding".to_owned(), "x".repeat(OVERSIZED_ANNOTATION));
    pod
}

fn selecting(app: &str, limit: i64) -> ListOptions {
    let mut options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    options.predicate.label = LabelSelector::parse(&format!("app={app}")).unwrap();
    options.predicate.limit = limit;
    options
}

fn names(items: &[Pod]) -> Vec<&str> {
    items.iter().map(|p| p.metadata.name.as_str()).collect()
}

/// The sample lines of one series name (`name{...} value` or `name value`), in
/// exposition order.
fn samples<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .collect()
}

/// A recursive watch of `prefix` from `object`'s resourceVersion.
async fn watch_after(
    store: &apistore_etcd3::Etcd3Store<Pod>,
    prefix: &str,
    object: &Pod,
) -> apistore_storage::WatchStream<Pod> {
    let options = ListOptions {
        resource_version: object.metadata.resource_version.clone(),
        recursive: true,
        ..ListOptions::default()
    };
    store.watch(prefix, &options).await.unwrap()
}

async fn next_within(
    stream: &mut apistore_storage::WatchStream<Pod>,
    what: &str,
) -> WatchEvent<Pod> {
    tokio::time::timeout(Duration::from_secs(30), next_event(stream))
        .await
        .unwrap_or_else(|_| panic!("no {what} event within 30 s"))
        .unwrap_or_else(|| panic!("the watch ended before the {what} event"))
}

#[tokio::test]
async fn exposition_after_a_known_sequence_of_store_operations() {
    let backend = Etcd3Backend::new("telemetry_exposition").await;
    let store = &backend.store;

    // Four creates: four `create` transactions.
    for (name, app) in [("a", "web"), ("b", "db"), ("c", "web"), ("d", "db")] {
        store
            .create(&format!("/pods/ns1/{name}"), pod("ns1", name, app), 0)
            .await
            .unwrap();
    }
    let last_created = store
        .get("/pods/ns1/d", &GetOptions::default())
        .await
        .unwrap();

    // A watch from a revision > 0 syncs nothing (no etcd read); it sees the update of b
    // and the delete of d below: two etcd events, `events_received_total` 2.
    let mut watch = watch_after(store, "/pods/ns1", &last_created).await;

    // The create etcd rejects: `create` request 5, `create` error 1.
    let err = store
        .create("/pods/ns1/e", oversized("ns1", "e"), 0)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("request is too large"), "{err}");

    // get 2 (the read of d above was get 1); a missing key is not a request error.
    store
        .get("/pods/ns1/a", &GetOptions::default())
        .await
        .unwrap();
    let missing = store
        .get("/pods/ns1/missing", &GetOptions::default())
        .await
        .unwrap_err();
    assert_eq!(missing.kind(), ErrorKind::NotFound);

    // Without a cached object the update reads first (get 4), then one `update` txn.
    store
        .guaranteed_update(
            "/pods/ns1/b",
            UpdateOptions::default(),
            |mut pod: Pod, _| {
                pod.spec.node_name = "node-1".to_owned();
                Ok(Update::new(pod))
            },
        )
        .await
        .unwrap();
    // Likewise a delete: get 5, one `delete` txn.
    store
        .delete("/pods/ns1/d", DeleteOptions::default())
        .await
        .unwrap();

    assert!(
        matches!(next_within(&mut watch, "update").await, WatchEvent::Modified(p) if p.metadata.name == "b")
    );
    assert!(
        matches!(next_within(&mut watch, "delete").await, WatchEvent::Deleted(p) if p.metadata.name == "d")
    );
    drop(watch);

    // A count is `listWithCount`, typed by the prepared key with its trailing slash.
    assert_eq!(store.count("/pods/ns1").await.unwrap(), 3);
    let count_type = format!("{}/", backend.etcd_key("/pods/ns1"));

    // Left under /pods/ns1: a (web), b (db), c (web). The list counters, per the
    // reference's GetList loop: every kv etcd returns is fetched; a kv is evaluated once
    // decoded and tested against the predicate; only matches are returned; and once a
    // page is full, the kvs after it in the same etcd response are fetched but neither
    // decoded nor evaluated.
    //
    // List 1, everything, one etcd read: fetched 3, evaluated 3, returned 3.
    let all = store
        .list(
            "/pods/ns1",
            &ListOptions {
                recursive: true,
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(names(&all.items), ["a", "b", "c"]);

    // List 2, app=db with limit 1: etcd page 1 (limit 1) is [a], evaluated and dropped;
    // etcd said more, so the limit doubles to 2: page 2 is [b, c]; b is evaluated and
    // fills the page, c is fetched only. Two etcd reads: fetched 3, evaluated 2,
    // returned 1, and a continue token (the page was cut short).
    let page = store.list("/pods/ns1", &selecting("db", 1)).await.unwrap();
    assert_eq!(names(&page.items), ["b"]);
    assert!(!page.metadata.continue_token.is_empty());

    // List 3, the continuation: one etcd read (limit 1) of [c], nothing more: fetched 1,
    // evaluated 1, returned 0, no further token.
    let mut next = selecting("db", 1);
    next.predicate.continue_token = page.metadata.continue_token.clone();
    let rest = store.list("/pods/ns1", &next).await.unwrap();
    assert!(rest.items.is_empty());
    assert!(rest.metadata.continue_token.is_empty());

    // List 4, non-recursive: the etcd read is a `get` (get 6): fetched 1, evaluated 1,
    // returned 1.
    let one = store
        .list("/pods/ns1/a", &ListOptions::default())
        .await
        .unwrap();
    assert_eq!(names(&one.items), ["a"]);

    // List 5, at an exact revision etcd has not reached: etcd fails the read (a `list`
    // error). The reference records the list counters on every return after the read
    // started, this one included: list 5 with nothing fetched.
    let future = ListOptions {
        resource_version: "900000000000".to_owned(),
        resource_version_match: ResourceVersionMatch::Exact,
        recursive: true,
        ..ListOptions::default()
    };
    let err = store.list("/pods/ns1", &future).await.unwrap_err();
    assert!(err.to_string().contains("future revision"), "{err}");

    // Lists refused before they reach etcd (a malformed continue token, a
    // resourceVersion that is no number) are no lists to the reference: no request, no
    // list counters.
    let mut bad_token = selecting("db", 1);
    bad_token.predicate.continue_token = "not-base64!".to_owned();
    let err = store.list("/pods/ns1", &bad_token).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::BadRequest, "{err}");
    let bad_rv = ListOptions {
        resource_version: "abc".to_owned(),
        recursive: true,
        ..ListOptions::default()
    };
    store.list("/pods/ns1", &bad_rv).await.unwrap_err();

    // A watch on the prefix the garbage below goes to: it receives the etcd event
    // (events received 3) and ends with an error, but a watch's decode failure is not
    // one of `apiserver_storage_decode_errors_total`'s (the reference's watcher decodes
    // without counting).
    let mut bad_watch = watch_after(store, "/pods/bad", &last_created).await;

    // Bytes that carry the transformer's marker but are no object: a get and a list of
    // them fail to decode (decode errors 2). The get is get 7; list 6 fetched the kv but
    // did not evaluate it (decoding failed first).
    let garbage_key = backend.etcd_key("/pods/bad/x");
    backend
        .raw_put(&garbage_key, b"test!{not json".to_vec())
        .await;
    assert!(
        matches!(next_within(&mut bad_watch, "error").await, WatchEvent::Error(status) if status.message.contains("decode")),
    );
    drop(bad_watch);
    let err = store
        .get("/pods/bad/x", &GetOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("decode"), "{err}");
    let err = store
        .list(
            "/pods/bad",
            &ListOptions {
                recursive: true,
                ..ListOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("decode"), "{err}");

    let text = encode_text(&backend.registry);
    let by_operation = |name: &str, counts: [u64; 6]| -> Vec<String> {
        // Series sort by label values: operation first, then type.
        let types = ["pods", "pods", "pods", "pods", count_type.as_str(), "pods"];
        let operations = ["create", "delete", "get", "list", "listWithCount", "update"];
        operations
            .iter()
            .zip(types)
            .zip(counts)
            .map(|((op, ty), n)| format!("{name}{{operation=\"{op}\",type=\"{ty}\"}} {n}"))
            .collect()
    };
    let requests = [5, 1, 7, 6, 1, 1];
    assert_eq!(
        samples(&text, "etcd_requests_total"),
        by_operation("etcd_requests_total", requests),
        "{text}"
    );
    // Every request is observed once in the latency histogram.
    assert_eq!(
        samples(&text, "etcd_request_duration_seconds_count"),
        by_operation("etcd_request_duration_seconds_count", requests),
        "{text}"
    );
    // Only the oversized create and the future-revision list failed in etcd: no error
    // series at all for get (a missing key is an answer), update, delete or count.
    assert_eq!(
        samples(&text, "etcd_request_errors_total"),
        [
            r#"etcd_request_errors_total{operation="create",type="pods"} 1"#,
            r#"etcd_request_errors_total{operation="list",type="pods"} 1"#,
        ],
        "{text}"
    );
    let resource = |name: &str, n: u64| vec![format!("{name}{{resource=\"pods\"}} {n}")];
    // Lists 1-6 as tallied above.
    for (name, n) in [
        ("apiserver_storage_list_total", 6),
        (
            "apiserver_storage_list_fetched_objects_total",
            3 + 3 + 1 + 1 + 1,
        ),
        (
            "apiserver_storage_list_evaluated_objects_total",
            3 + 2 + 1 + 1,
        ),
        ("apiserver_storage_list_returned_objects_total", 3 + 1 + 1),
        ("apiserver_storage_decode_errors_total", 2),
        ("apiserver_storage_events_received_total", 3),
    ] {
        assert_eq!(samples(&text, name), resource(name, n), "{text}");
    }
    // No progress notification was asked for: no bookmark series.
    assert_eq!(
        samples(&text, "etcd_bookmark_counts"),
        Vec::<&str>::new(),
        "{text}"
    );
}

// ---------------------------------------------------------------------------------------
// Spans

const PARENT_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_SPAN: &str = "00f067aa0ba902b7";

/// A caller's context as a propagator extracts it from an incoming request: a sampled
/// span of another process.
fn remote_parent() -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from_hex(PARENT_TRACE).unwrap(),
        SpanId::from_hex(PARENT_SPAN).unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

fn string(key: &str, value: &str) -> (String, Value) {
    (key.to_owned(), Value::from(value.to_owned()))
}

fn attributes(span: &SpanData) -> Vec<(String, Value)> {
    span.attributes
        .iter()
        .map(|kv| (kv.key.to_string(), kv.value.clone()))
        .collect()
}

/// The events of a span as (name, attributes), without the `level` and `target`
/// attributes tracing-opentelemetry would add had a step arrived as a `tracing` event
/// (they are handed to the span directly, so today there are none to drop).
fn events(span: &SpanData) -> Vec<(String, Vec<KeyValue>)> {
    span.events
        .iter()
        .map(|event| {
            let attrs = event
                .attributes
                .iter()
                .filter(|kv| kv.key.as_str() != "level" && kv.key.as_str() != "target")
                .cloned()
                .collect();
            (event.name.to_string(), attrs)
        })
        .collect()
}

fn step(name: &str) -> (String, Vec<KeyValue>) {
    (name.to_owned(), Vec::new())
}

fn step_len(name: &str, len: usize) -> (String, Vec<KeyValue>) {
    (
        name.to_owned(),
        vec![KeyValue::new("len", i64::try_from(len).unwrap())],
    )
}

fn step_err(name: &str, err: &StorageError) -> (String, Vec<KeyValue>) {
    (name.to_owned(), vec![KeyValue::new("err", err.to_string())])
}

/// The events of one update attempt that reached etcd and committed (or lost the race).
fn update_attempt(len: usize) -> Vec<(String, Vec<KeyValue>)> {
    vec![
        step("About to Encode"),
        step_len("Encode succeeded", len),
        step("TransformToStorage succeeded"),
        step("Transaction prepared"),
        step("Txn call completed"),
        step("Transaction committed"),
    ]
}

/// Checks that `span` joined the caller's trace and that its events lie, in order,
/// within it.
fn assert_joins_the_caller(span: &SpanData) {
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex(PARENT_TRACE).unwrap(),
        "{}",
        span.name
    );
    assert_eq!(
        span.parent_span_id,
        SpanId::from_hex(PARENT_SPAN).unwrap(),
        "{}",
        span.name
    );
    assert!(span.parent_span_is_remote, "{}", span.name);
    assert!(span.span_context.is_sampled(), "{}", span.name);
    let times: Vec<SystemTime> = span.events.iter().map(|e| e.timestamp).collect();
    assert!(times.is_sorted(), "{}: event times {times:?}", span.name);
    if let (Some(first), Some(last)) = (times.first(), times.last()) {
        assert!(
            span.start_time <= *first && *last <= span.end_time,
            "{}",
            span.name
        );
    }
}

/// The length of the plain (encoded, untransformed) value stored under `key`.
async fn stored_len(backend: &Etcd3Backend, key: &str) -> usize {
    let raw = backend.raw_get(&backend.etcd_key(key)).await.unwrap();
    raw.len() - MARKER_LEN
}

/// Spans of the store's own target only: the etcd client's transport (h2) opens
/// `tracing` spans of its own (`FramedWrite::buffer`, `poll_ready`, ...) while a call is
/// polled, and under an unfiltered layer those are exported too, as children of whatever
/// context is attached. They are no part of what the store emits.
fn store_spans_only() -> Targets {
    Targets::new().with_target(TRACE_TARGET, tracing::Level::TRACE)
}

#[tokio::test]
async fn store_calls_under_a_callers_trace_export_the_reference_spans() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::Registry::default()
        .with(otel_layer(provider.tracer("telemetry-test")).with_filter(store_spans_only()));
    // This test's thread only; the current-thread runtime polls every future here.
    let _default = tracing::subscriber::set_default(subscriber);

    let backend = Etcd3Backend::new("telemetry_spans").await;
    let store = &backend.store;
    let pod_type = std::any::type_name::<Pod>();
    let object_attrs = |key: &str| {
        vec![
            string("audit-id", ""),
            string("key", key),
            string("type", pod_type),
            string("resource", "pods"),
        ]
    };
    let list_attrs = |key: &str, rv: &str, rv_match: &str, limit: i64, token: &str| {
        vec![
            string("audit-id", ""),
            string("key", key),
            string("resourceVersion", rv),
            string("resourceVersionMatch", rv_match),
            ("limit".to_owned(), Value::I64(limit)),
            string("continue", token),
        ]
    };

    // Outside a trace: the same kinds of calls, and not one span.
    store
        .create("/pods/untraced/x", pod("untraced", "x", "web"), 0)
        .await
        .unwrap();
    store
        .guaranteed_update(
            "/pods/untraced/x",
            UpdateOptions::default(),
            |mut p: Pod, _| {
                p.spec.node_name = "n".to_owned();
                Ok(Update::new(p))
            },
        )
        .await
        .unwrap();
    store
        .list(
            "/pods/untraced",
            &ListOptions {
                recursive: true,
                ..ListOptions::default()
            },
        )
        .await
        .unwrap();
    store
        .list("/pods/untraced/x", &ListOptions::default())
        .await
        .unwrap();
    provider.force_flush().unwrap();
    let untraced = exporter.get_finished_spans().unwrap();
    assert!(
        untraced.is_empty(),
        "{:?}",
        untraced.iter().map(|s| &s.name).collect::<Vec<_>>()
    );

    let cx = remote_parent();

    // 1. A create that succeeds.
    let created = store
        .create("/pods/ns/a", pod("ns", "a", "web"), 0)
        .with_context(cx.clone())
        .await
        .unwrap();
    let created_len = stored_len(&backend, "/pods/ns/a").await;

    // 2. A create of an existing key: etcd answers (the compare failed), so the txn
    //    step succeeded; the reference then returns without a decode step.
    let exists = store
        .create("/pods/ns/a", pod("ns", "a", "web"), 0)
        .with_context(cx.clone())
        .await
        .unwrap_err();
    assert_eq!(exists.kind(), ErrorKind::KeyExists);

    // 3. A create etcd rejects: "Txn call failed" with the error.
    let too_large = store
        .create("/pods/ns/big", oversized("ns", "big"), 0)
        .with_context(cx.clone())
        .await
        .unwrap_err();
    assert!(
        too_large.to_string().contains("request is too large"),
        "{too_large}"
    );
    let big_len = serde_json_len(&oversized("ns", "big"));

    // 4. An update that writes.
    store
        .guaranteed_update("/pods/ns/a", UpdateOptions::default(), |mut p: Pod, _| {
            p.spec.node_name = "node-1".to_owned();
            Ok(Update::new(p))
        })
        .with_context(cx.clone())
        .await
        .unwrap();
    let updated_len = stored_len(&backend, "/pods/ns/a").await;

    // 5. An update from a stale cached object (the object as created): the first txn
    //    loses on the mod revision, the value etcd returned in its else branch is
    //    restored, and the second attempt commits.
    store
        .guaranteed_update(
            "/pods/ns/a",
            UpdateOptions {
                cached_existing_object: Some(created.clone()),
                ..UpdateOptions::default()
            },
            |mut p: Pod, _| {
                p.metadata
                    .labels
                    .insert("tier".to_owned(), "front".to_owned());
                Ok(Update::new(p))
            },
        )
        .with_context(cx.clone())
        .await
        .unwrap();
    let retried_len = stored_len(&backend, "/pods/ns/a").await;
    // The first attempt encoded the cached object plus the label, without node-1.
    let mut first_attempt = created.clone();
    first_attempt.metadata.resource_version.clear();
    first_attempt
        .metadata
        .labels
        .insert("tier".to_owned(), "front".to_owned());
    let first_attempt_len = serde_json_len(&first_attempt);

    // 6. An update whose function fails on the current object: nothing after the
    //    initial read.
    let refused = store
        .guaranteed_update("/pods/ns/a", UpdateOptions::default(), |_: Pod, _| {
            Err(StorageError::bad_request(
                "/pods/ns/a",
                "refused by the update function",
            ))
        })
        .with_context(cx.clone())
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("refused by the update function"),
        "{refused}"
    );

    // 7. An update etcd rejects.
    let update_too_large = store
        .guaranteed_update("/pods/ns/a", UpdateOptions::default(), |p: Pod, _| {
            let mut big = oversized("ns", "a");
            big.metadata.labels = p.metadata.labels;
            Ok(Update::new(big))
        })
        .with_context(cx.clone())
        .await
        .unwrap_err();
    assert!(
        update_too_large
            .to_string()
            .contains("request is too large"),
        "{update_too_large}"
    );
    let mut big_a = oversized("ns", "a");
    big_a.metadata.labels = pod("ns", "a", "web").metadata.labels;
    big_a
        .metadata
        .labels
        .insert("tier".to_owned(), "front".to_owned());
    let big_a_len = serde_json_len(&big_a);

    // 8. Lists: a recursive page, its continuation, and a single key at a minimum rv.
    store
        .create("/pods/ns/b", pod("ns", "b", "web"), 0)
        .await
        .unwrap();
    let mut paged = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    paged.predicate.limit = 1;
    let first = store
        .list("/pods/ns", &paged)
        .with_context(cx.clone())
        .await
        .unwrap();
    let token = first.metadata.continue_token.clone();
    assert!(!token.is_empty());
    paged.predicate.continue_token = token.clone();
    paged.resource_version = "0".to_owned();
    store
        .list("/pods/ns", &paged)
        .with_context(cx.clone())
        .await
        .unwrap();
    let single = ListOptions {
        resource_version: first.metadata.resource_version.clone(),
        resource_version_match: ResourceVersionMatch::NotOlderThan,
        ..ListOptions::default()
    };
    store
        .list("/pods/ns/a", &single)
        .with_context(cx.clone())
        .await
        .unwrap();

    provider.force_flush().unwrap();
    let spans = exporter.get_finished_spans().unwrap();
    let span_names: Vec<&str> = spans.iter().map(|s| &*s.name).collect();
    assert_eq!(
        span_names,
        [
            "Create etcd3",
            "Create etcd3",
            "Create etcd3",
            "GuaranteedUpdate etcd3",
            "GuaranteedUpdate etcd3",
            "GuaranteedUpdate etcd3",
            "GuaranteedUpdate etcd3",
            "List(recursive=true) etcd3",
            "List(recursive=true) etcd3",
            "List(recursive=false) etcd3",
        ]
    );
    for span in &spans {
        assert_joins_the_caller(span);
    }
    let [
        create_ok,
        create_exists,
        create_rejected,
        update_ok,
        update_retried,
        update_refused,
        update_rejected,
        list_page,
        list_continued,
        list_single,
    ] = &spans[..]
    else {
        unreachable!("ten spans, checked above");
    };

    for span in [create_ok, create_exists] {
        assert_eq!(attributes(span), object_attrs("/pods/ns/a"));
    }
    assert_eq!(attributes(create_rejected), object_attrs("/pods/ns/big"));
    assert_eq!(
        events(create_ok),
        [
            step("About to Encode"),
            step_len("Encode succeeded", created_len),
            step("TransformToStorage succeeded"),
            step("Txn call succeeded"),
            step_len("decode succeeded", created_len),
        ]
    );
    assert_eq!(
        events(create_exists),
        [
            step("About to Encode"),
            step_len("Encode succeeded", created_len),
            step("TransformToStorage succeeded"),
            step("Txn call succeeded"),
        ]
    );
    assert_eq!(
        events(create_rejected),
        [
            step("About to Encode"),
            step_len("Encode succeeded", big_len),
            step("TransformToStorage succeeded"),
            step_err("Txn call failed", &too_large),
        ]
    );

    for span in [update_ok, update_retried, update_refused, update_rejected] {
        assert_eq!(attributes(span), object_attrs("/pods/ns/a"));
    }
    let mut expected = vec![step("initial value restored")];
    expected.extend(update_attempt(updated_len));
    expected.push(step_len("decode succeeded", updated_len));
    assert_eq!(events(update_ok), expected);

    let mut expected = vec![step("initial value restored")];
    expected.extend(update_attempt(first_attempt_len));
    expected.push(step("Retry value restored"));
    expected.extend(update_attempt(retried_len));
    expected.push(step_len("decode succeeded", retried_len));
    assert_eq!(events(update_retried), expected);

    assert_eq!(events(update_refused), [step("initial value restored")]);

    assert_eq!(
        events(update_rejected),
        [
            step("initial value restored"),
            step("About to Encode"),
            step_len("Encode succeeded", big_a_len),
            step("TransformToStorage succeeded"),
            step("Transaction prepared"),
            step_err("Txn call failed", &update_too_large),
        ]
    );

    assert_eq!(attributes(list_page), list_attrs("/pods/ns", "", "", 1, ""));
    assert_eq!(
        attributes(list_continued),
        list_attrs("/pods/ns", "0", "", 1, &token)
    );
    assert_eq!(
        attributes(list_single),
        list_attrs(
            "/pods/ns/a",
            &first.metadata.resource_version,
            "NotOlderThan",
            0,
            ""
        )
    );
    for span in [list_page, list_continued, list_single] {
        assert!(events(span).is_empty(), "{}: {:?}", span.name, events(span));
    }
}

/// The length of `pod` as the store's JSON codec encodes it.
fn serde_json_len(pod: &Pod) -> usize {
    use apistore_storage::{Codec, JsonCodec};
    JsonCodec::<Pod>::new().encode(pod).unwrap().len()
}
