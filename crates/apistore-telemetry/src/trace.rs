//! The spans of `pkg/storage/etcd3/store.go`, through `tracing`.
//!
//! kube-apiserver starts its storage spans with component-base's `tracing.Start`, which
//! does two things this module does too:
//!
//! - it opens an OpenTelemetry span, **only when the caller's context already carries
//!   one** (a storage call outside a traced request is not traced), with the reference's
//!   attribute keys (`audit-id`, `key`, `type`, `resource`; for lists `key`,
//!   `resourceVersion`, `resourceVersionMatch`, `limit`, `continue`) and point-in-time
//!   events named as in `store.go` ("About to Encode", "Encode succeeded" {len}, ...);
//! - it keeps a step log (`k8s.io/utils/trace`) and, when the operation took longer
//!   than 500 ms, logs the trace with the steps that took more than their share.
//!
//! Here the span is a `tracing` span (target [`TRACE_TARGET`], at INFO); with the
//! [`otel_layer`](crate::otel_layer) installed it becomes the OpenTelemetry span. The
//! steps are recorded in the [`StepTrace`] as they happen, with their times, and are
//! attached to the OpenTelemetry span as its events, with those times, when the
//! operation ends: one hand-over per step instead of a `tracing` event dispatched
//! through every layer while the request is under way (which cost about a fifth of a
//! create's client CPU). A subscriber without the OpenTelemetry layer sees the span
//! and, for slow operations, the step log. "The caller's context carries a span" means:
//! a `tracing` span is current, or an OpenTelemetry context with an active span is
//! attached.

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::KeyValue;
use opentelemetry::trace::TraceContextExt;
use tracing::{Level, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::slow_log::{self, Step};

/// The `tracing` target of the storage spans, their events and the slow-operation log.
pub const TRACE_TARGET: &str = "apistore::storage";

/// How long an operation may take before its step log is written, as in `store.go`'s
/// `span.End(500 * time.Millisecond)`.
pub const DEFAULT_LOG_THRESHOLD: Duration = Duration::from_millis(500);

/// kube-apiserver truncates audit ids to this many bytes before putting them on spans.
const MAX_AUDIT_ID_LEN: usize = 64;

/// The attributes of the `Create etcd3` and `GuaranteedUpdate etcd3` spans.
#[derive(Debug, Clone, Copy, Default)]
pub struct ObjectTraceAttrs<'a> {
    /// The request's audit id, if the request is audited (`audit-id`; empty when not,
    /// truncated to 64 bytes).
    pub audit_id: Option<&'a str>,
    /// The key as the caller gave it, before the storage prefix is added (`key`).
    pub key: &'a str,
    /// The type name of the object (`type`; kube-apiserver writes the Go type, such as
    /// `*core.Pod`).
    pub type_name: &'a str,
    /// The GroupResource string, such as `pods` or `deployments.apps` (`resource`).
    pub resource: &'a str,
}

/// The attributes of the `List(recursive=...) etcd3` span.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListTraceAttrs<'a> {
    /// The request's audit id, if the request is audited (`audit-id`).
    pub audit_id: Option<&'a str>,
    /// Whether the list reads a key range (names the span).
    pub recursive: bool,
    /// The key as the caller gave it (`key`).
    pub key: &'a str,
    /// The requested resourceVersion (`resourceVersion`).
    pub resource_version: &'a str,
    /// The requested resourceVersionMatch (`resourceVersionMatch`).
    pub resource_version_match: &'a str,
    /// The page size, 0 for none (`limit`, an integer attribute).
    pub limit: i64,
    /// The continue token (`continue`).
    pub continue_token: &'a str,
}

/// An attribute of a step event; the reference's events carry only these two.
#[derive(Clone, Copy)]
pub enum StepAttr<'a> {
    /// `len`: a byte length (an integer attribute).
    Len(usize),
    /// `err`: an error's message (a string attribute).
    Err(&'a dyn fmt::Display),
}

impl fmt::Debug for StepAttr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Len(len) => write!(f, "len:{len}"),
            Self::Err(err) => write!(f, "err:{err}"),
        }
    }
}

/// One traced storage operation: a span (when the caller is traced) plus a step log
/// written if the operation turns out slow.
///
/// Created by [`StepTrace::create`], [`StepTrace::guaranteed_update`] or
/// [`StepTrace::list`]; ended when dropped (or by [`StepTrace::end`]), like `store.go`'s
/// `defer span.End(500 * time.Millisecond)`. It borrows the attributes it was started
/// with, so that nothing is copied unless the operation turns out slow. Run the
/// operation's futures inside [`StepTrace::span`] (`.instrument(trace.span().clone())`)
/// if spans of the etcd client should nest under it; the steps are the span's events
/// wherever they are recorded.
#[derive(Debug)]
pub struct StepTrace<'a> {
    span: Span,
    name: &'static str,
    attrs: Attrs<'a>,
    start: Instant,
    steps: Vec<Step>,
    threshold: Duration,
}

/// The attributes a trace was started with, kept for the step log.
#[derive(Debug, Clone, Copy)]
enum Attrs<'a> {
    Object(ObjectTraceAttrs<'a>),
    List(ListTraceAttrs<'a>),
}

impl<'a> StepTrace<'a> {
    /// Starts the `Create etcd3` span.
    pub fn create(attrs: &ObjectTraceAttrs<'a>) -> Self {
        let audit_id = truncate_audit_id(attrs.audit_id);
        let span = if caller_is_traced() {
            tracing::info_span!(
                target: TRACE_TARGET,
                "Create etcd3",
                "audit-id" = audit_id,
                key = attrs.key,
                "type" = attrs.type_name,
                resource = attrs.resource,
            )
        } else {
            Span::none()
        };
        Self::started(span, "Create etcd3", Attrs::Object(*attrs))
    }

    /// Starts the `GuaranteedUpdate etcd3` span.
    pub fn guaranteed_update(attrs: &ObjectTraceAttrs<'a>) -> Self {
        let audit_id = truncate_audit_id(attrs.audit_id);
        let span = if caller_is_traced() {
            tracing::info_span!(
                target: TRACE_TARGET,
                "GuaranteedUpdate etcd3",
                "audit-id" = audit_id,
                key = attrs.key,
                "type" = attrs.type_name,
                resource = attrs.resource,
            )
        } else {
            Span::none()
        };
        Self::started(span, "GuaranteedUpdate etcd3", Attrs::Object(*attrs))
    }

    /// Starts the `List(recursive=true) etcd3` or `List(recursive=false) etcd3` span.
    pub fn list(attrs: &ListTraceAttrs<'a>) -> Self {
        let audit_id = truncate_audit_id(attrs.audit_id);
        let name = if attrs.recursive {
            "List(recursive=true) etcd3"
        } else {
            "List(recursive=false) etcd3"
        };
        // A span's name is fixed at its call site, hence one macro call per name.
        macro_rules! list_span {
            ($name:literal) => {
                tracing::info_span!(
                    target: TRACE_TARGET,
                    $name,
                    "audit-id" = audit_id,
                    key = attrs.key,
                    resourceVersion = attrs.resource_version,
                    resourceVersionMatch = attrs.resource_version_match,
                    limit = attrs.limit,
                    "continue" = attrs.continue_token,
                )
            };
        }
        let span = match (caller_is_traced(), attrs.recursive) {
            (false, _) => Span::none(),
            (true, true) => list_span!("List(recursive=true) etcd3"),
            (true, false) => list_span!("List(recursive=false) etcd3"),
        };
        Self::started(span, name, Attrs::List(*attrs))
    }

    fn started(span: Span, name: &'static str, attrs: Attrs<'a>) -> Self {
        Self {
            span,
            name,
            attrs,
            start: Instant::now(),
            steps: Vec::with_capacity(8),
            threshold: DEFAULT_LOG_THRESHOLD,
        }
    }

    /// Sets how long the operation may take before its step log is written (default
    /// [`DEFAULT_LOG_THRESHOLD`]; zero logs every operation).
    #[must_use]
    pub fn with_log_threshold(mut self, threshold: Duration) -> Self {
        self.threshold = threshold;
        self
    }

    /// The span; disabled when the caller was not traced.
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// The span's name, as in the reference (`Create etcd3`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Records a step without attributes, such as "About to Encode".
    pub fn event(&mut self, name: &'static str) {
        self.event_with(name, &[]);
    }

    /// Records a step with attributes, such as "Encode succeeded" {len} or
    /// "Txn call failed" {err}. It becomes an event of the OpenTelemetry span, at the
    /// time it was recorded, when the trace ends.
    pub fn event_with(&mut self, name: &'static str, attrs: &[StepAttr<'_>]) {
        let mut len = None;
        let mut err = None;
        for attr in attrs {
            match *attr {
                StepAttr::Len(n) => len = Some(i64::try_from(n).unwrap_or(i64::MAX)),
                StepAttr::Err(e) => err = Some(e),
            }
        }
        self.steps.push(Step {
            at: Instant::now(),
            name,
            len,
            err: err.map(ToString::to_string),
        });
    }

    /// Ends the operation now; the same as dropping it.
    pub fn end(self) {}
}

impl Drop for StepTrace<'_> {
    fn drop(&mut self) {
        let end = Instant::now();
        let total = end.duration_since(self.start);
        let slow = total >= self.threshold;
        if self.span.is_none() && !slow {
            return;
        }
        // The wall clock is read once, here: step times are offsets from the start.
        let started_at = SystemTime::now()
            .checked_sub(total)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        if !self.span.is_none() {
            self.attach_steps(started_at);
        }
        if slow {
            self.log(started_at, end);
        }
    }
}

impl StepTrace<'_> {
    /// Hands the steps to the OpenTelemetry span as its events, at the times they
    /// happened. A subscriber without the OpenTelemetry layer ignores this.
    fn attach_steps(&self, started_at: SystemTime) {
        if self.steps.is_empty() {
            return;
        }
        // One look-up of the OpenTelemetry span for all steps; it is started here rather
        // than when the tracing span closes, a moment later.
        let context = self.span.context();
        let span = context.span();
        if !span.is_recording() {
            return;
        }
        for step in &self.steps {
            let mut attributes = Vec::with_capacity(
                usize::from(step.len.is_some()) + usize::from(step.err.is_some()),
            );
            if let Some(len) = step.len {
                attributes.push(KeyValue::new("len", len));
            }
            if let Some(err) = &step.err {
                attributes.push(KeyValue::new("err", err.clone()));
            }
            let at = started_at + step.at.saturating_duration_since(self.start);
            span.add_event_with_timestamp(step.name, at, attributes);
        }
    }

    /// Writes the step log of a slow operation.
    fn log(&self, started_at: SystemTime, end: Instant) {
        let fields = match &self.attrs {
            Attrs::Object(attrs) => slow_log::fields(&[
                ("audit-id", truncate_audit_id(attrs.audit_id)),
                ("key", attrs.key),
                ("type", attrs.type_name),
                ("resource", attrs.resource),
            ]),
            Attrs::List(attrs) => slow_log::fields(&[
                ("audit-id", truncate_audit_id(attrs.audit_id)),
                ("key", attrs.key),
                ("resourceVersion", attrs.resource_version),
                ("resourceVersionMatch", attrs.resource_version_match),
                ("limit", &attrs.limit.to_string()),
                ("continue", attrs.continue_token),
            ]),
        };
        let text = slow_log::render(&slow_log::Trace {
            id: slow_log::trace_id(started_at),
            name: self.name,
            fields: &fields,
            start: self.start,
            started_at,
            end,
            steps: &self.steps,
            threshold: self.threshold,
            all_steps: tracing::enabled!(target: TRACE_TARGET, Level::TRACE),
        });
        // Logged on its own, not as an event of the span: the span already has the steps.
        tracing::info!(target: TRACE_TARGET, parent: None, "{text}");
    }
}

/// Whether the caller's context carries a span, which component-base requires before
/// it starts a child span.
fn caller_is_traced() -> bool {
    // The subscriber's current span, looked up without taking a reference to it (which
    // `Span::current` would, and release again, through the registry).
    tracing::dispatcher::get_default(|dispatch| dispatch.current_span().id().is_some())
        || opentelemetry::Context::map_current(|cx| cx.has_active_span())
}

fn truncate_audit_id(audit_id: Option<&str>) -> &str {
    let id = audit_id.unwrap_or("");
    if id.len() <= MAX_AUDIT_ID_LEN {
        return id;
    }
    let mut end = MAX_AUDIT_ID_LEN;
    while !id.is_char_boundary(end) {
        end -= 1;
    }
    &id[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_ids_are_truncated_to_64_bytes_on_a_char_boundary() {
        assert_eq!(truncate_audit_id(None), "");
        assert_eq!(truncate_audit_id(Some("abc")), "abc");
        let long = "x".repeat(100);
        assert_eq!(truncate_audit_id(Some(&long)).len(), 64);
        let multibyte = format!("{}é", "x".repeat(63));
        assert_eq!(truncate_audit_id(Some(&multibyte)), "x".repeat(63));
    }

    #[test]
    fn untraced_callers_get_no_span_but_steps_are_kept() {
        let mut trace = StepTrace::create(&ObjectTraceAttrs {
            key: "/pods/ns/a",
            ..Default::default()
        });
        assert!(trace.span().is_none());
        trace.event("About to Encode");
        trace.event_with("Encode succeeded", &[StepAttr::Len(42)]);
        assert_eq!(trace.steps.len(), 2);
        assert_eq!(trace.steps[1].len, Some(42));
    }
}
