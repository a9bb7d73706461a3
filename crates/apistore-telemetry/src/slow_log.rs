//! The step log of a slow operation, in the shape `k8s.io/utils/trace` gives it when
//! component-base's `span.End(threshold)` finds the operation took too long:
//!
//! ```text
//! Trace[1392]: "Create etcd3" audit-id:,key:/pods/ns/a,type:Pod,resource:pods (05-Mar-2025 10:00:00.000) (total time: 612ms):
//! Trace[1392]: ---"Txn call succeeded" 600ms (10:00:00.605)
//! Trace[1392]: [612.3ms] [612.3ms] END
//! ```
//!
//! Each step's time is measured from the step before it, and a step is listed only if
//! that time reached its share of the threshold (threshold / (steps + 1)), unless all
//! steps are asked for (the reference does so at klog verbosity 4; here when TRACE is
//! enabled for the trace target). Wall-clock times are
//! UTC.

use std::fmt::Write as _;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One recorded step.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) at: Instant,
    pub(crate) name: &'static str,
    pub(crate) len: Option<i64>,
    pub(crate) err: Option<String>,
}

/// A finished trace to render.
pub(crate) struct Trace<'a> {
    pub(crate) id: u32,
    pub(crate) name: &'a str,
    /// Already joined by [`fields`].
    pub(crate) fields: &'a str,
    pub(crate) start: Instant,
    pub(crate) started_at: SystemTime,
    pub(crate) end: Instant,
    pub(crate) steps: &'a [Step],
    pub(crate) threshold: Duration,
    pub(crate) all_steps: bool,
}

/// A number to tell one logged trace's lines from another's (the reference draws a
/// random one); taken from the start time's nanoseconds.
pub(crate) fn trace_id(started_at: SystemTime) -> u32 {
    let nanos = started_at
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos & 0x7fff_ffff
}

pub(crate) fn render(trace: &Trace<'_>) -> String {
    let id = trace.id;
    let total = trace.end.duration_since(trace.start);
    let mut out = format!("Trace[{id}]: {:?} ", trace.name);
    if !trace.fields.is_empty() {
        out.push_str(trace.fields);
        out.push(' ');
    }
    let _ = write!(
        out,
        "({}) (total time: {}ms):",
        date_time(trace.started_at),
        total.as_millis()
    );

    let steps = u32::try_from(trace.steps.len()).unwrap_or(u32::MAX);
    let step_threshold = trace.threshold / steps.saturating_add(1);
    let mut previous = trace.start;
    for step in trace.steps {
        let took = step.at.saturating_duration_since(previous);
        if trace.all_steps || took >= step_threshold {
            let _ = write!(out, "\nTrace[{id}]: ---{:?} ", step.name);
            let len = step.len.map(|n| n.to_string());
            let fields = len
                .as_deref()
                .map(|len| ("len", len))
                .into_iter()
                .chain(step.err.as_deref().map(|err| ("err", err)));
            let before = out.len();
            write_fields(&mut out, fields);
            if out.len() > before {
                out.push(' ');
            }
            let at = trace.started_at + step.at.saturating_duration_since(trace.start);
            let _ = write!(out, "{}ms ({})", took.as_millis(), time_of_day(at));
        }
        previous = step.at;
    }
    let _ = write!(out, "\nTrace[{id}]: [{total:?}] [{total:?}] END");
    out
}

/// Joins a trace's fields as the step log prints them, `key:value,key:value`, in one
/// allocation.
pub(crate) fn fields(fields: &[(&str, &str)]) -> String {
    let len = fields.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
    let mut out = String::with_capacity(len);
    write_fields(&mut out, fields.iter().copied());
    out
}

fn write_fields<'a>(out: &mut String, fields: impl Iterator<Item = (&'a str, &'a str)>) {
    for (i, (key, value)) in fields.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(key);
        out.push(':');
        out.push_str(value);
    }
}

/// UTC civil time of `t`: (year, month 1-12, day, hour, minute, second, millisecond).
fn civil(t: SystemTime) -> (i64, u32, u32, u64, u64, u64, u32) {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's days-to-civil for the proleptic Gregorian calendar.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60,
        since.subsec_millis(),
    )
}

/// `02-Jan-2006 15:04:05.000`
fn date_time(t: SystemTime) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (year, month, day, h, m, s, ms) = civil(t);
    let month = month
        .checked_sub(1)
        .and_then(|i| MONTHS.get(i as usize))
        .copied()
        .unwrap_or("???");
    format!("{day:02}-{month}-{year} {h:02}:{m:02}:{s:02}.{ms:03}")
}

/// `15:04:05.000`
fn time_of_day(t: SystemTime) -> String {
    let (_, _, _, h, m, s, ms) = civil(t);
    format!("{h:02}:{m:02}:{s:02}.{ms:03}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn civil_dates_are_utc_gregorian() {
        assert_eq!(date_time(at(0, 0)), "01-Jan-1970 00:00:00.000");
        // 2006-01-02T15:04:05.123Z, Go's reference time.
        assert_eq!(
            date_time(at(1_136_214_245, 123)),
            "02-Jan-2006 15:04:05.123"
        );
        // A leap day.
        assert_eq!(date_time(at(1_709_210_096, 7)), "29-Feb-2024 12:34:56.007");
        assert_eq!(time_of_day(at(1_136_214_245, 123)), "15:04:05.123");
    }

    #[test]
    fn slow_steps_are_listed_and_quick_ones_left_out() {
        let start = Instant::now();
        let started_at = at(1_136_214_245, 0);
        let fields = fields(&[("audit-id", "abc"), ("key", "/pods/ns/a")]);
        let steps = [
            Step {
                at: start + Duration::from_millis(1),
                name: "About to Encode",
                len: None,
                err: None,
            },
            Step {
                at: start + Duration::from_millis(2),
                name: "Encode succeeded",
                len: Some(42),
                err: None,
            },
            Step {
                at: start + Duration::from_millis(602),
                name: "Txn call failed",
                len: None,
                err: Some("deadline exceeded".to_owned()),
            },
        ];
        let trace = Trace {
            id: 7,
            name: "Create etcd3",
            fields: &fields,
            start,
            started_at,
            end: start + Duration::from_millis(612),
            steps: &steps,
            threshold: Duration::from_millis(500),
            all_steps: false,
        };
        assert_eq!(
            render(&trace),
            "Trace[7]: \"Create etcd3\" audit-id:abc,key:/pods/ns/a (02-Jan-2006 15:04:05.000) (total time: 612ms):\n\
             Trace[7]: ---\"Txn call failed\" err:deadline exceeded 600ms (15:04:05.602)\n\
             Trace[7]: [612ms] [612ms] END"
        );
        let everything = render(&Trace {
            all_steps: true,
            ..trace
        });
        assert!(everything.contains("---\"About to Encode\" 1ms (15:04:05.001)"));
        assert!(everything.contains("---\"Encode succeeded\" len:42 1ms (15:04:05.002)"));
    }
}
