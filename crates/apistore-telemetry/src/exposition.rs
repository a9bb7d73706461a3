//! The Prometheus text exposition (format 0.0.4), written the way kube-apiserver's
//! `/metrics` writes it.
//!
//! The `prometheus` crate's own `TextEncoder` prints floats with Rust's `Display`
//! (`le="0.000005"`, `1000000000`); Go's `expfmt` prints them with
//! `strconv.FormatFloat(f, 'g', -1, 64)` (`le="5e-06"`, `1e+09`). Both parse to the same
//! number, but label values are strings to anything that does not re-parse them, so
//! this encoder follows Go's spelling to give byte-for-byte the lines a kube-apiserver
//! would serve.

use prometheus::Registry;
use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType};

/// Gathers `registry` and returns its text exposition, as kube-apiserver writes it.
///
/// Families come sorted by name and series by label values (the registry's order);
/// histograms get their `+Inf` bucket, `_sum` and `_count` lines.
pub fn encode_text(registry: &Registry) -> String {
    encode_families(&registry.gather())
}

/// Writes already-gathered families in the text exposition format.
pub fn encode_families(families: &[MetricFamily]) -> String {
    let mut out = String::new();
    for family in families {
        write_family(&mut out, family);
    }
    out
}

fn write_family(out: &mut String, family: &MetricFamily) {
    let name = family.name();
    let help = family.help();
    if !help.is_empty() {
        out.push_str("# HELP ");
        out.push_str(name);
        out.push(' ');
        push_escaped(out, help, false);
        out.push('\n');
    }
    let kind = family.get_field_type();
    out.push_str("# TYPE ");
    out.push_str(name);
    out.push(' ');
    out.push_str(type_name(kind));
    out.push('\n');

    for metric in family.get_metric() {
        match kind {
            MetricType::COUNTER => {
                let value = go_float(metric.get_counter().get_value());
                write_sample(out, name, "", metric, None, &value);
            }
            MetricType::GAUGE => {
                let value = go_float(metric.get_gauge().get_value());
                write_sample(out, name, "", metric, None, &value);
            }
            MetricType::HISTOGRAM => write_histogram(out, name, metric),
            MetricType::SUMMARY => write_summary(out, name, metric),
            // The prometheus crate produces no untyped metrics.
            MetricType::UNTYPED => {}
        }
    }
}

fn write_histogram(out: &mut String, name: &str, metric: &Metric) {
    let histogram = metric.get_histogram();
    let mut saw_inf = false;
    for bucket in histogram.get_bucket() {
        let bound = bucket.upper_bound();
        saw_inf |= bound == f64::INFINITY;
        write_sample(
            out,
            name,
            "_bucket",
            metric,
            Some(("le", &go_float(bound))),
            &bucket.cumulative_count().to_string(),
        );
    }
    let count = histogram.get_sample_count().to_string();
    if !saw_inf {
        write_sample(out, name, "_bucket", metric, Some(("le", "+Inf")), &count);
    }
    let sum = go_float(histogram.get_sample_sum());
    write_sample(out, name, "_sum", metric, None, &sum);
    write_sample(out, name, "_count", metric, None, &count);
}

fn write_summary(out: &mut String, name: &str, metric: &Metric) {
    let summary = metric.get_summary();
    for quantile in summary.get_quantile() {
        let q = go_float(quantile.quantile());
        let value = go_float(quantile.value());
        write_sample(out, name, "", metric, Some(("quantile", &q)), &value);
    }
    let sum = go_float(summary.sample_sum());
    write_sample(out, name, "_sum", metric, None, &sum);
    let count = summary.sample_count().to_string();
    write_sample(out, name, "_count", metric, None, &count);
}

fn type_name(kind: MetricType) -> &'static str {
    match kind {
        MetricType::COUNTER => "counter",
        MetricType::GAUGE => "gauge",
        MetricType::HISTOGRAM => "histogram",
        MetricType::SUMMARY => "summary",
        MetricType::UNTYPED => "untyped",
    }
}

fn write_sample(
    out: &mut String,
    name: &str,
    suffix: &str,
    metric: &Metric,
    extra_label: Option<(&str, &str)>,
    value: &str,
) {
    out.push_str(name);
    out.push_str(suffix);
    write_labels(out, metric.get_label(), extra_label);
    out.push(' ');
    out.push_str(value);
    let timestamp = metric.timestamp_ms();
    if timestamp != 0 {
        out.push(' ');
        out.push_str(&timestamp.to_string());
    }
    out.push('\n');
}

fn write_labels(out: &mut String, labels: &[LabelPair], extra: Option<(&str, &str)>) {
    if labels.is_empty() && extra.is_none() {
        return;
    }
    let mut separator = '{';
    let pairs = labels.iter().map(|l| (l.name(), l.value())).chain(extra);
    for (name, value) in pairs {
        out.push(separator);
        out.push_str(name);
        out.push_str("=\"");
        push_escaped(out, value, true);
        out.push('"');
        separator = ',';
    }
    out.push('}');
}

/// Escapes `\` and newline (help text), and `"` too in label values.
fn push_escaped(out: &mut String, text: &str, quote: bool) {
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// Formats a float as Go's `strconv.FormatFloat(f, 'g', -1, 64)`, which `expfmt` uses:
/// the shortest digits that round-trip, in exponent form when the decimal exponent is
/// below -4 or at least 6 (with a sign and at least two exponent digits), plain
/// otherwise.
pub(crate) fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        // Go keeps the sign of negative zero.
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` gives the same shortest round-trip digits, as `d.ddde-7`.
    let scientific = format!("{f:e}");
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return scientific;
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return scientific;
    };
    if (-4..6).contains(&exponent) {
        // Plain notation with the same digits; Rust's `Display` never uses an exponent.
        return f.to_string();
    }
    let sign = if exponent < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_spelled_as_go_spells_them() {
        let cases = [
            (0.0, "0"),
            (1.0, "1"),
            (-1.0, "-1"),
            (5e-6, "5e-06"),
            (1e-5, "1e-05"),
            (8e-5, "8e-05"),
            (0.00016, "0.00016"),
            (0.005, "0.005"),
            (0.025, "0.025"),
            (1.25, "1.25"),
            (60.0, "60"),
            (83.886_08, "83.88608"),
            (5000.0, "5000"),
            (123_456.0, "123456"),
            (1e6, "1e+06"),
            (1_234_567.0, "1.234567e+06"),
            (1e9, "1e+09"),
            (2.5e21, "2.5e+21"),
            (1.5e-300, "1.5e-300"),
            (-0.5, "-0.5"),
            (f64::INFINITY, "+Inf"),
            (f64::NEG_INFINITY, "-Inf"),
            (f64::NAN, "NaN"),
        ];
        for (value, want) in cases {
            assert_eq!(go_float(value), want, "{value:?}");
        }
    }

    #[test]
    fn escaping_follows_the_text_format() {
        let mut help = String::new();
        push_escaped(&mut help, "a\\b\n\"c\"", false);
        assert_eq!(help, "a\\\\b\\n\"c\"");
        let mut label = String::new();
        push_escaped(&mut label, "a\\b\n\"c\"", true);
        assert_eq!(label, "a\\\\b\\n\\\"c\\\"");
    }
}
