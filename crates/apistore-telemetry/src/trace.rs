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
//! Here the span is a `tracing` span and the events are `tracing` events inside it
//! (target [`TRACE_TARGET`], span at INFO, events at DEBUG); with the
//! [`otel_layer`](crate::otel_layer) installed they become the OpenTelemetry span and
//! its events. "The caller's context carries a span" means: a `tracing` span is
//! current, or an OpenTelemetry context with an active span is attached.

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::trace::TraceContextExt;
use tracing::{Level, Span};

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
/// `defer span.End(500 * time.Millisecond)`. Run the operation's futures inside
/// [`StepTrace::span`] (`.instrument(trace.span().clone())`) so that spans of the etcd
/// client nest under it; events attach to the span wherever they are recorded.
#[derive(Debug)]
pub struct StepTrace {
    span: Span,
    name: &'static str,
    /// The span's attributes as the step log prints them, `key:value,...`.
    fields: String,
    start: Instant,
    steps: Vec<Step>,
    threshold: Duration,
}

impl StepTrace {
    /// Starts the `Create etcd3` span.
    pub fn create(attrs: &ObjectTraceAttrs<'_>) -> Self {
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
        Self::started(span, "Create etcd3", object_fields(audit_id, attrs))
    }

    /// Starts the `GuaranteedUpdate etcd3` span.
    pub fn guaranteed_update(attrs: &ObjectTraceAttrs<'_>) -> Self {
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
        Self::started(
            span,
            "GuaranteedUpdate etcd3",
            object_fields(audit_id, attrs),
        )
    }

    /// Starts the `List(recursive=true) etcd3` or `List(recursive=false) etcd3` span.
    pub fn list(attrs: &ListTraceAttrs<'_>) -> Self {
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
        let limit = attrs.limit.to_string();
        let fields = slow_log::fields(&[
            ("audit-id", audit_id),
            ("key", attrs.key),
            ("resourceVersion", attrs.resource_version),
            ("resourceVersionMatch", attrs.resource_version_match),
            ("limit", &limit),
            ("continue", attrs.continue_token),
        ]);
        Self::started(span, name, fields)
    }

    fn started(span: Span, name: &'static str, fields: String) -> Self {
        Self {
            span,
            name,
            fields,
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
    /// "Txn call failed" {err}.
    pub fn event_with(&mut self, name: &'static str, attrs: &[StepAttr<'_>]) {
        let mut len = None;
        let mut err = None;
        for attr in attrs {
            match *attr {
                StepAttr::Len(n) => len = Some(i64::try_from(n).unwrap_or(i64::MAX)),
                StepAttr::Err(e) => err = Some(e),
            }
        }
        if !self.span.is_none() {
            tracing::event!(
                target: TRACE_TARGET,
                parent: &self.span,
                Level::DEBUG,
                len,
                err = err.map(tracing::field::display),
                "{}",
                name,
            );
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

impl Drop for StepTrace {
    fn drop(&mut self) {
        let end = Instant::now();
        let total = end.duration_since(self.start);
        if total < self.threshold {
            return;
        }
        // The wall clock is read only for the log, not on every operation.
        let started_at = SystemTime::now()
            .checked_sub(total)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let text = slow_log::render(&slow_log::Trace {
            id: slow_log::trace_id(started_at),
            name: self.name,
            fields: &self.fields,
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
    !Span::current().is_none() || opentelemetry::Context::map_current(|cx| cx.has_active_span())
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

fn object_fields(audit_id: &str, attrs: &ObjectTraceAttrs<'_>) -> String {
    slow_log::fields(&[
        ("audit-id", audit_id),
        ("key", attrs.key),
        ("type", attrs.type_name),
        ("resource", attrs.resource),
    ])
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
