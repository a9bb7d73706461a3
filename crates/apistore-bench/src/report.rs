//! The report: one markdown table per section, then the targets with PASS or
//! MISS, printed on the terminal and written between two markers in
//! `docs/benchmarks.md` (the text around the markers is the reader's analysis and is
//! kept).

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use crate::error::{BenchError, Result};
use crate::machine::RunInfo;
use crate::stats::{Comparison, Metric, Section, Unit};

/// The line before the generated part of `docs/benchmarks.md`.
pub(crate) const BEGIN_MARKER: &str =
    "<!-- BEGIN cargo xtask bench output: generated, do not edit by hand -->";
/// The line after it.
pub(crate) const END_MARKER: &str = "<!-- END cargo xtask bench output -->";

/// Column headings shared by the workloads and the targets.
pub(crate) mod col {
    /// Calls per second.
    pub(crate) const OPS: &str = "ops/s";
    /// Median latency.
    pub(crate) const P50: &str = "p50";
    /// 99th percentile latency.
    pub(crate) const P99: &str = "p99";
    /// Bench-process CPU per call.
    pub(crate) const CLIENT_CPU: &str = "client CPU/op";
    /// etcd CPU per call.
    pub(crate) const ETCD_CPU: &str = "etcd CPU/op";
    /// Median duration of one list.
    pub(crate) const TIME: &str = "time";
    /// Keys listed per second.
    pub(crate) const KEYS: &str = "keys/s";
    /// Peak bytes held during one list.
    pub(crate) const PEAK: &str = "peak memory";
    /// Peak bytes over the bytes etcd returned for one call.
    pub(crate) const PEAK_RATIO: &str = "peak ÷ bytes listed";
    /// Events delivered per second.
    pub(crate) const EVENTS: &str = "events/s";
    /// Median time from sending a write to receiving its event.
    pub(crate) const LAG_P50: &str = "lag p50";
    /// 99th percentile of the same.
    pub(crate) const LAG_P99: &str = "lag p99";
    /// Events delivered per second when a watch replays history.
    pub(crate) const REPLAY: &str = "replay events/s";
    /// Bytes one idle watch holds.
    pub(crate) const PER_WATCH: &str = "bytes per watch";
}

/// A target of the issue and whether the run met it.
#[derive(Debug, Clone)]
struct Target {
    what: String,
    figure: Option<f64>,
    at_least: bool,
    goal: f64,
    unit: Unit,
}

impl Target {
    fn verdict(&self) -> String {
        let Some(figure) = self.figure else {
            return "N/A (did not run)".to_owned();
        };
        let met = if self.at_least {
            figure >= self.goal
        } else {
            figure <= self.goal
        };
        if met {
            "PASS".to_owned()
        } else {
            let off = (figure / self.goal - 1.0).abs() * 100.0;
            let how = if self.at_least { "short" } else { "over" };
            format!("MISS ({how} by {off:.1}%)")
        }
    }
}

/// Everything one run found.
#[derive(Debug)]
pub(crate) struct Report {
    /// How and where it ran.
    pub(crate) info: RunInfo,
    /// The comparisons, in run order.
    pub(crate) comparisons: Vec<Comparison>,
    /// Extra lines worth knowing (spans exported, skipped parts).
    pub(crate) notes: Vec<String>,
    /// The kube section's side-by-side table, when it ran.
    pub(crate) side_by_side: Option<crate::side_by_side::SideBySide>,
    /// The offline section's table, when it ran.
    pub(crate) offline: Option<crate::offline::OfflineSection>,
}

impl Report {
    /// The generated markdown: run details, tables, targets.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        self.info.write_markdown(&mut out);
        let sections = [
            (
                Section::Crud,
                "CRUD: apistore against raw etcd-client",
                "A = apistore, B = raw etcd-client (same transactions, same JSON, same type).",
            ),
            (
                Section::KineCrud,
                "CRUD on kine over SQLite: apistore against raw etcd-client",
                "The same workloads against kine v0.17.5 (k3s-io/kine, `interop/kine`) over a new SQLite file instead of etcd: A = apistore, B = raw etcd-client, both on the same kine. *etcd CPU* is kine's. Runs are not cleared (kine refuses DeleteRange); each writes to a fresh namespace.",
            ),
            (
                Section::List,
                "List of 10,000 objects",
                "One call lists everything, or a walk of pages of 500 (each page dropped before the next). *peak memory*: the most bytes allocated at once during the call (a walk: during any page), above what was allocated before it; *bytes listed*: the keys and values etcd returned for that call (a walk: its largest page).",
            ),
            (
                Section::PodList,
                "List of 10,000 Pods: protobuf against JSON and raw",
                "10,000 realistic Pods (two containers with resources, probes, env and mounts; status with conditions and container statuses) stored twice, as kube's protobuf and as Go's JSON, each listed in one call through `Etcd3Store<DynamicObject>` with `StorageCodec` (protobuf resp. JSON). *raw range + decode*: one etcd-client range of the JSON copies, each value decoded with `serde_json` into the same `DynamicObject`. *decode/object*: the stored values decoded alone, no etcd.",
            ),
            (
                Section::Watch,
                "Watch: one watcher, many writes",
                "16 raw writers put new keys as fast as etcd takes them while one watcher decodes every event; *events/s* is bounded by how fast etcd takes the writes. *lag*: from sending a write to receiving its event. The client CPU includes the writers, the same in both arms. *replay*: a second watch from the same revision reads the same events from etcd's history, with no writers: the watch path alone.",
            ),
            (
                Section::Cacher,
                "Watch cache: lists served from memory",
                "A = `apistore-cacher` over the etcd3 store, B = raw etcd-client: 10,000 objects of 1 KiB listed from the cache with resourceVersion 0 and, on an etcd that answers progress requests (3.4.31+, 3.5.13+), with resourceVersion \"\" (consistent: the cache waits for a progress request to bring it to etcd's current revision), against one range of the same keys with every value decoded.",
            ),
            (
                Section::CacherWatch,
                "Watch cache: many watchers, one etcd watch",
                "A = N watchers of one namespace served by `apistore-cacher` (one etcd watch for all), B = one raw etcd-client watch decoding every event, while 16 raw writers create objects; *events/s per watcher* is the writes over the time from the first write to that watcher's last event (median over watchers; a watcher the cache terminated for not keeping up counts as 0).",
            ),
            (
                Section::CacherSnapshot,
                "Watch cache: Exact and continued lists from snapshots",
                "A = `apistore-cacher` with snapshots (kube 1.34+'s `ListFromCacheSnapshot`), B = the etcd3 store it sends these lists to without them (kube 1.31–1.33): 10,000 objects of 1 KiB listed at a revision 100 writes in the cache's past, with resourceVersionMatch=Exact in one call, or as a walk of pages of 500 (the first Exact, the rest with the continue token of the page before).",
            ),
            (
                Section::RangeStream,
                "A list of 100,000 objects with and without `RangeStream`, etcd 3.7",
                "100,000 ConfigMaps of 1,000 payload bytes (about 1.1 KiB stored; 10,000 with `--quick`) on an etcd 3.7 of the section's own, listed as `DynamicObject`s by the etcd3 store at kube 1.37 (A: one `RangeStream`, each chunk decoded as it arrives; *list whole*: returned whole by `list`, *list in chunks*: handed out chunk by chunk by `Etcd3Store::list_chunks`, each chunk counted and dropped) against the store at kube 1.36 listing it whole (B: one `Range`; the same B figures in both rows). *time*: one list; *peak memory*: the most bytes held at once during a second list, above what was held before it (the counting allocator, which slows allocation, is on only then). The list returned is part of both peaks.",
            ),
            (
                Section::IdleWatch,
                "Idle watches",
                "Bytes still allocated per watch after opening 1,000 watches on distinct keys and letting them settle.",
            ),
            (
                Section::Encryption,
                "Encryption: AES-GCM against identity",
                "Both arms are apistore; A encrypts with `aesgcm` (provider `k8s:enc:aesgcm:v1:`, key `key1:`) from an EncryptionConfiguration, B stores plain JSON.",
            ),
            (
                Section::KmsV2,
                "Encryption: KMS v2 against AES-GCM",
                "Both arms are apistore; A encrypts with a `kms` provider at apiVersion v2 (`k8s:enc:kms:v2:bench:`) whose plugin is apistore-testing's test plugin, served over gRPC on a unix socket in the bench process; B with `aesgcm` and a local key.",
            ),
            (
                Section::Telemetry,
                "Telemetry: metrics and tracing on against off, every call traced",
                "Both arms are apistore and run every call under a sampled remote parent span context, so that every create and update exports a span. A registers kube-apiserver's storage metrics and runs under a tracing subscriber (INFO and above) with apistore-telemetry's OpenTelemetry layer (batch span processor, exporter that discards); B has neither.",
            ),
            (
                Section::TelemetryUntraced,
                "Telemetry: metrics and tracing on against off, callers untraced",
                "As above, but no call runs under a trace: the state of every request that arrives without a sampled `traceparent`, which under kube-apiserver's default sampling (0 per million, parent-based) is all requests but the ones a caller chose to trace. A has the metrics and the same subscriber and OpenTelemetry layer; B has neither.",
            ),
        ];
        for (section, title, legend) in sections {
            let rows: Vec<&Comparison> = self
                .comparisons
                .iter()
                .filter(|c| c.section == section)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n### {title}\n\n{legend}\n");
            write_table(&mut out, &rows);
        }
        if let Some(side_by_side) = &self.side_by_side {
            out.push_str(&side_by_side.markdown());
        }
        if let Some(offline) = &self.offline {
            out.push_str(&offline.markdown());
        }
        let _ = writeln!(out, "\n### Targets\n");
        let _ = writeln!(
            out,
            "Each figure is the median over the rounds of the ratio A/B within a round (or, for absolute limits, the median of A).\n"
        );
        let _ = writeln!(out, "| target | figure | goal | verdict |");
        let _ = writeln!(out, "|---|--:|--:|---|");
        for target in self.targets() {
            let figure = target
                .figure
                .map_or_else(|| "—".to_owned(), |f| format_value(target.unit, f, true));
            let goal = format!(
                "{} {}",
                if target.at_least { "≥" } else { "≤" },
                format_value(target.unit, target.goal, true)
            );
            let _ = writeln!(
                out,
                "| {} | {figure} | {goal} | {} |",
                target.what,
                target.verdict()
            );
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nNotes:");
            for note in &self.notes {
                let _ = writeln!(out, "- {note}");
            }
        }
        out
    }

    fn targets(&self) -> Vec<Target> {
        let mut targets = Vec::new();
        let find = |section: Section, workload: &str| {
            self.comparisons
                .iter()
                .find(|c| c.section == section && c.workload == workload)
        };
        let ratio = |c: Option<&Comparison>, metric: &str| {
            c.filter(|c| c.unavailable.is_none())
                .and_then(|c| c.metric(metric))
                .map(Metric::ratio)
        };
        let a_median = |c: Option<&Comparison>, metric: &str| {
            c.filter(|c| c.unavailable.is_none())
                .and_then(|c| c.metric(metric))
                .map(Metric::median_a)
        };
        let mut push =
            |what: String, figure: Option<f64>, at_least: bool, goal: f64, unit: Unit| {
                targets.push(Target {
                    what,
                    figure,
                    at_least,
                    goal,
                    unit,
                });
            };
        for op in ["create", "get", "guaranteed update"] {
            let workload = format!("{op}, 16 callers");
            let c = find(Section::Crud, &workload);
            push(
                format!("{workload}: ops/s apistore/raw"),
                ratio(c, col::OPS),
                true,
                0.9,
                Unit::Ratio,
            );
            push(
                format!("{workload}: client CPU/op apistore/raw"),
                ratio(c, col::CLIENT_CPU),
                false,
                1.3,
                Unit::Ratio,
            );
        }
        // The issue: "on kine-sqlite: CRUD within 0.95× of raw etcd-client against the
        // same kine".
        for op in ["create", "get", "guaranteed update", "delete"] {
            let workload = format!("{op}, 16 callers");
            push(
                format!("kine-sqlite {workload}: ops/s apistore/raw"),
                ratio(find(Section::KineCrud, &workload), col::OPS),
                true,
                0.95,
                Unit::Ratio,
            );
        }
        for workload in ["whole", "pages of 500"] {
            let c = find(Section::List, workload);
            push(
                format!("list 10,000, {workload}: time apistore/raw"),
                ratio(c, col::TIME),
                false,
                1.15,
                Unit::Ratio,
            );
            push(
                format!("list 10,000, {workload}: apistore peak memory ÷ bytes listed"),
                a_median(c, col::PEAK_RATIO),
                false,
                3.0,
                Unit::Ratio,
            );
        }
        for (workload, what, goal) in [
            (crate::pods::AGAINST_JSON, "time protobuf/json", 1.0),
            (
                crate::pods::AGAINST_RAW,
                "time protobuf/(raw range + decode)",
                1.15,
            ),
        ] {
            push(
                format!("list 10,000 Pods: {what}"),
                ratio(find(Section::PodList, workload), col::TIME),
                false,
                goal,
                Unit::Ratio,
            );
        }
        let c = self
            .comparisons
            .iter()
            .find(|c| c.section == Section::Watch);
        push(
            "watch: events/s apistore/raw".to_owned(),
            ratio(c, col::EVENTS),
            true,
            0.9,
            Unit::Ratio,
        );
        push(
            "watch: replay events/s apistore/raw".to_owned(),
            ratio(c, col::REPLAY),
            true,
            0.9,
            Unit::Ratio,
        );
        for workload in [crate::snapshot::EXACT, crate::snapshot::CONTINUED] {
            let c = self
                .comparisons
                .iter()
                .find(|c| c.section == Section::CacherSnapshot && c.workload.starts_with(workload));
            push(
                format!("{workload}: keys/s cache snapshot/etcd3 store"),
                ratio(c, col::KEYS),
                true,
                10.0,
                Unit::Ratio,
            );
        }
        // The issue: "a list of 100,000 × 1 KiB on etcd 3.7 with RangeStream: peak
        // client memory ≤ 0.5× the same list unstreamed, time ≤ 1.05×".
        for (workload, what) in [
            (crate::range_stream::WHOLE, "whole: RangeStream/Range"),
            (
                crate::range_stream::CHUNKS,
                "in chunks: RangeStream in chunks/Range whole",
            ),
        ] {
            let c = find(Section::RangeStream, workload);
            for (metric, goal) in [(col::PEAK, 0.5), (col::TIME, 1.05)] {
                push(
                    format!("list 100,000 {what}: {metric}"),
                    ratio(c, metric),
                    false,
                    goal,
                    Unit::Ratio,
                );
            }
        }
        let c = self
            .comparisons
            .iter()
            .find(|c| c.section == Section::IdleWatch);
        push(
            "idle watch: apistore bytes per watch".to_owned(),
            a_median(c, col::PER_WATCH),
            false,
            16.0 * 1024.0,
            Unit::Bytes,
        );
        for op in ["create", "get"] {
            let workload = format!("{op}, 16 callers");
            let c = find(Section::Encryption, &workload);
            push(
                format!("{workload}: ops/s AES-GCM/identity"),
                ratio(c, col::OPS),
                true,
                0.9,
                Unit::Ratio,
            );
        }
        for op in ["create", "get"] {
            let workload = format!("{op}, 16 callers");
            let c = find(Section::KmsV2, &workload);
            push(
                format!("{workload}: ops/s KMS v2/AES-GCM"),
                ratio(c, col::OPS),
                true,
                0.9,
                Unit::Ratio,
            );
        }
        for (section, how) in [
            (Section::TelemetryUntraced, "untraced"),
            (Section::Telemetry, "every call traced"),
        ] {
            for op in ["create", "get", "guaranteed update"] {
                let workload = format!("{op}, 16 callers");
                let c = find(section, &workload);
                push(
                    format!("{workload}: ops/s telemetry on/off, {how} (cost ≤ 3%)"),
                    ratio(c, col::OPS),
                    true,
                    0.97,
                    Unit::Ratio,
                );
                push(
                    format!("{workload}: client CPU/op telemetry on/off, {how} (cost ≤ 3%)"),
                    ratio(c, col::CLIENT_CPU),
                    false,
                    1.03,
                    Unit::Ratio,
                );
            }
        }
        targets
    }

    /// Writes the generated markdown into `path` between the markers, keeping what is
    /// around them; a new file gets a heading and an empty analysis section.
    pub(crate) fn write_doc(&self, path: &Path) -> Result<()> {
        let generated = format!("{BEGIN_MARKER}\n{}\n{END_MARKER}", self.markdown());
        let existing = fs::read_to_string(path).ok();
        let text = match existing.as_deref().and_then(split_markers) {
            Some((before, after)) => format!("{before}{generated}{after}"),
            None => format!(
                "# Benchmarks\n\n`cargo xtask bench` runs apistore's etcd3 store and a raw etcd-client baseline side by side in one run.\n\n{generated}\n\n## Analysis\n\n(to be written after a full run)\n"
            ),
        };
        fs::write(path, text).map_err(|source| BenchError::Io {
            what: format!("write {}", path.display()),
            source,
        })
    }
}

/// The text before the begin marker and after the end marker.
fn split_markers(text: &str) -> Option<(&str, &str)> {
    let begin = text.find(BEGIN_MARKER)?;
    let end = text.find(END_MARKER)? + END_MARKER.len();
    (begin < end).then(|| (&text[..begin], &text[end..]))
}

fn write_table(out: &mut String, rows: &[&Comparison]) {
    let Some(columns) = rows
        .iter()
        .find(|c| c.unavailable.is_none())
        .map(|c| c.metrics.iter().map(|m| m.name).collect::<Vec<_>>())
    else {
        for c in rows {
            if let Some(why) = &c.unavailable {
                let _ = writeln!(out, "{}: not available ({why})", c.workload);
            }
        }
        return;
    };
    let _ = write!(out, "| workload | arm |");
    for column in &columns {
        let _ = write!(out, " {column} |");
    }
    let _ = write!(out, "\n|---|---|");
    for _ in &columns {
        let _ = write!(out, "--:|");
    }
    let _ = writeln!(out);
    for c in rows {
        if let Some(why) = &c.unavailable {
            let _ = writeln!(
                out,
                "| {} | — | not available ({}) |",
                c.workload,
                why.replace('|', "/")
            );
            continue;
        }
        let cells = |f: &dyn Fn(&Metric) -> String| {
            columns
                .iter()
                .map(|name| c.metric(name).map_or_else(String::new, f))
                .collect::<Vec<_>>()
                .join(" | ")
        };
        let rounds = c.rounds();
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            c.workload,
            c.arms[0],
            cells(&|m| format_value(m.unit, m.median_a(), false))
        );
        let _ = writeln!(
            out,
            "| ({rounds} rounds) | {} | {} |",
            c.arms[1],
            cells(&|m| format_value(m.unit, m.median_b(), false))
        );
        let _ = writeln!(
            out,
            "| | **{}/{}** | {} |",
            c.arms[0],
            c.arms[1],
            cells(&|m| {
                let (lo, hi) = m.ratio_range();
                format!("**{:.3}** ({lo:.2}–{hi:.2})", m.ratio())
            })
        );
    }
}

/// A value in its unit, e.g. `1,234`, `0.82 ms`, `97.1 µs`, `10.4 MiB`.
pub(crate) fn format_value(unit: Unit, value: f64, precise: bool) -> String {
    match unit {
        Unit::PerSec => {
            if value >= 100.0 {
                thousands(value.round() as u64)
            } else {
                format!("{value:.1}")
            }
        }
        Unit::Seconds | Unit::CpuSeconds => {
            if value < 1e-3 {
                format!("{:.1} µs", value * 1e6)
            } else if value < 1.0 {
                format!("{:.2} ms", value * 1e3)
            } else {
                format!("{value:.2} s")
            }
        }
        Unit::Bytes => {
            if value.abs() < 1024.0 {
                format!("{value:.0} B")
            } else if value.abs() < 1024.0 * 1024.0 {
                format!("{:.1} KiB", value / 1024.0)
            } else {
                format!("{:.1} MiB", value / (1024.0 * 1024.0))
            }
        }
        Unit::Ratio => {
            if precise {
                format!("{value:.3}")
            } else {
                format!("{value:.2}")
            }
        }
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_print_in_their_units() {
        assert_eq!(format_value(Unit::PerSec, 12345.4, false), "12,345");
        assert_eq!(format_value(Unit::Seconds, 0.000_42, false), "420.0 µs");
        assert_eq!(format_value(Unit::Seconds, 0.012_3, false), "12.30 ms");
        assert_eq!(format_value(Unit::Bytes, 16.0 * 1024.0, false), "16.0 KiB");
        assert_eq!(format_value(Unit::Ratio, 0.96512, true), "0.965");
    }

    #[test]
    fn the_analysis_around_the_markers_is_kept() {
        let text = format!("# B\nintro\n{BEGIN_MARKER}\nold\n{END_MARKER}\n## Analysis\nkept\n");
        let (before, after) = split_markers(&text).unwrap();
        assert_eq!(before, "# B\nintro\n");
        assert_eq!(after, "\n## Analysis\nkept\n");
    }

    #[test]
    fn misses_say_by_how_much() {
        let target = Target {
            what: "x".into(),
            figure: Some(0.81),
            at_least: true,
            goal: 0.9,
            unit: Unit::Ratio,
        };
        assert_eq!(target.verdict(), "MISS (short by 10.0%)");
    }
}
