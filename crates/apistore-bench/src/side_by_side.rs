//! The kube section's table: each workload's figures per round on three sides
//! (apistore, kube's Go storage layer, raw etcd-client), the medians, the median of
//! the per-round ratios apistore ÷ kube and the goal for it, in markdown.

use std::fmt::Write as _;

use crate::error::BenchError;
use crate::report::format_value;
use crate::stats::{Metric, Unit, median};

/// The three sides, in the order each round runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    Apistore,
    Kube,
    Raw,
}

impl Side {
    /// The `--arm` index that selects this side alone.
    pub(crate) fn arm(self) -> usize {
        match self {
            Self::Apistore => 0,
            Self::Raw => 1,
            Self::Kube => 2,
        }
    }
}

/// One figure of a workload: its values per round on each side.
#[derive(Debug, Clone)]
struct Figure {
    metric: Metric,
    raw: Vec<f64>,
    higher_is_better: bool,
    /// The goal for apistore ÷ kube, if it sets one.
    goal: Option<f64>,
}

/// One workload's figures.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    workload: String,
    figures: Vec<Figure>,
}

/// What the section measured, for the report.
#[derive(Debug, Clone, Default)]
pub(crate) struct SideBySide {
    /// One row per workload, in run order.
    pub(crate) rows: Vec<Row>,
    /// Lines worth knowing (data sizes, what did not run).
    pub(crate) notes: Vec<String>,
    /// The groups of rows that failed, each with its error.
    pub(crate) failed: Vec<String>,
}

/// The spec of one figure: heading, unit, direction, goal.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    name: &'static str,
    unit: Unit,
    higher_is_better: bool,
    goal: Option<f64>,
}

/// A figure: its heading, unit, which way is better, and the goal for apistore ÷ kube.
pub(crate) const fn spec(
    name: &'static str,
    unit: Unit,
    higher_is_better: bool,
    goal: Option<f64>,
) -> Spec {
    Spec {
        name,
        unit,
        higher_is_better,
        goal,
    }
}

/// Collects a workload's per-round values, side by side.
pub(crate) struct Collector {
    specs: Vec<Spec>,
    values: [Vec<Vec<f64>>; 3],
}

impl Collector {
    /// No rounds yet, for these figures.
    pub(crate) fn new(specs: &[Spec]) -> Self {
        let empty = || vec![Vec::new(); specs.len()];
        Self {
            specs: specs.to_vec(),
            values: [empty(), empty(), empty()],
        }
    }

    /// One side's figures of one round, in the order of the specs.
    pub(crate) fn push(&mut self, side: Side, round: Vec<f64>) {
        let index = match side {
            Side::Apistore => 0,
            Side::Kube => 1,
            Side::Raw => 2,
        };
        for (values, value) in self.values[index].iter_mut().zip(round) {
            values.push(value);
        }
    }

    /// The workload's row.
    pub(crate) fn row(self, workload: String) -> Row {
        let [a, b, raw] = self.values;
        let figures = self
            .specs
            .iter()
            .zip(a.into_iter().zip(b).zip(raw))
            .map(|(spec, ((a, b), raw))| Figure {
                metric: Metric::new(spec.name, spec.unit, a, b),
                raw,
                higher_is_better: spec.higher_is_better,
                goal: spec.goal,
            })
            .collect();
        Row { workload, figures }
    }
}

impl SideBySide {
    /// Notes `group` as failed with `result`'s error, if it has one: the rows it
    /// finished stay in the table, the report names it, and the run goes on (and ends
    /// in failure once the report is written).
    pub(crate) fn record_failure(&mut self, group: &str, result: Result<(), BenchError>) {
        if let Err(error) = result {
            let failure = format!("{group} FAILED: {error}");
            eprintln!("  {failure}");
            self.failed.push(failure);
        }
    }

    /// The side-by-side table, in markdown.
    pub(crate) fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n### Side by side: apistore, kube-apiserver's storage layer (Go), raw etcd-client\n\n\
             The same workloads, the same realistic Pods stored as kube's protobuf, the same etcd, \
             one run: per round apistore, then k8s.io/apiserver v0.37.2's etcd3 store (Go, \
             interop/gobench), then raw etcd-client (the same etcd requests, no codec). Figures \
             are medians over the rounds; apistore ÷ kube is the median of the per-round ratios \
             (range in brackets). For times and bytes below 1.0 is apistore ahead; for rates \
             above 1.0 is. Client CPU is each side's own process (apistore and raw: the bench \
             process; kube: the Go process).\n"
        );
        if !self.failed.is_empty() {
            let _ = writeln!(
                out,
                "**Incomplete run.** These groups of rows failed; the rows each finished are \
                 below, the rest are missing:\n"
            );
            for failure in &self.failed {
                let _ = writeln!(out, "- {failure}");
            }
            let _ = writeln!(out);
        }
        let _ = writeln!(
            out,
            "| workload | figure | apistore | kube (Go) | raw etcd-client | apistore ÷ kube | goal |"
        );
        let _ = writeln!(out, "|---|---|--:|--:|--:|--:|---|");
        for row in &self.rows {
            for figure in &row.figures {
                let metric = &figure.metric;
                let cell = |values: &[f64]| {
                    if values.is_empty() {
                        "—".to_owned()
                    } else {
                        format_value(metric.unit, median(values), false)
                    }
                };
                // Every round's kube figure 0 (kube's cacher ended all its watchers,
                // say): no round gives a ratio. A rate apistore kept above 0 then meets
                // a rate goal; anything else has no verdict.
                let kube_zero = !metric.b.is_empty() && metric.b.iter().all(|&b| b == 0.0);
                let ratio = if metric.a.is_empty() || metric.b.is_empty() {
                    "—".to_owned()
                } else if kube_zero {
                    "— (kube 0 in every round)".to_owned()
                } else {
                    let (lo, hi) = metric.ratio_range();
                    format!("{:.2} ({lo:.2}–{hi:.2})", metric.ratio())
                };
                let goal = match figure.goal {
                    None => String::new(),
                    Some(goal) if metric.a.is_empty() || metric.b.is_empty() => {
                        format!(
                            "{} {goal}",
                            if figure.higher_is_better {
                                "≥"
                            } else {
                                "≤"
                            }
                        )
                    }
                    Some(goal) if kube_zero => {
                        if figure.higher_is_better && median(&metric.a) > 0.0 {
                            format!("≥ {goal}: PASS")
                        } else {
                            "no ratio".to_owned()
                        }
                    }
                    Some(goal) => {
                        let ratio = metric.ratio();
                        let met = if figure.higher_is_better {
                            ratio >= goal
                        } else {
                            ratio <= goal
                        };
                        format!(
                            "{} {goal}: {}",
                            if figure.higher_is_better {
                                "≥"
                            } else {
                                "≤"
                            },
                            if met { "PASS" } else { "MISS" }
                        )
                    }
                };
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {ratio} | {goal} |",
                    row.workload,
                    metric.name,
                    cell(&metric.a),
                    cell(&metric.b),
                    cell(&figure.raw),
                );
            }
        }
        for note in &self.notes {
            let _ = writeln!(out, "\n- {note}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_line_per_figure_with_the_ratio() {
        let mut collector = Collector::new(&[
            spec("time/list", Unit::Seconds, false, Some(0.9)),
            spec("list-objs/s", Unit::PerSec, true, Some(1.0)),
        ]);
        collector.push(Side::Apistore, vec![0.5, 2000.0]);
        collector.push(Side::Kube, vec![1.0, 1000.0]);
        collector.push(Side::Raw, vec![0.1]);
        let table = SideBySide {
            rows: vec![collector.row("kube list whole".to_owned())],
            notes: vec![],
            failed: vec![],
        }
        .markdown();
        assert!(table.contains("| kube list whole | time/list | 500.00 ms | 1.00 s | 100.00 ms | 0.50 (0.50–0.50) | ≤ 0.9: PASS |"), "{table}");
        assert!(
            table.contains("| list-objs/s | 2,000 | 1,000 | — | 2.00 (2.00–2.00) | ≥ 1: PASS |"),
            "{table}"
        );
    }

    #[test]
    fn a_kube_figure_of_0_in_every_round_gives_no_ratio() {
        let mut collector = Collector::new(&[
            spec("events/s per watcher", Unit::PerSec, true, Some(1.0)),
            spec("time/list", Unit::Seconds, false, Some(1.0)),
        ]);
        for _ in 0..3 {
            collector.push(Side::Apistore, vec![1800.0, 0.5]);
            collector.push(Side::Kube, vec![0.0, 0.0]);
        }
        let table = SideBySide {
            rows: vec![collector.row("kube cache watchers".to_owned())],
            notes: vec![],
            failed: vec![],
        }
        .markdown();
        assert!(
            table.contains("| 1,800 | 0.0 | — | — (kube 0 in every round) | ≥ 1: PASS |"),
            "{table}"
        );
        assert!(
            table.contains("| — (kube 0 in every round) | no ratio |"),
            "{table}"
        );
    }

    #[test]
    fn a_failed_group_is_named_above_the_rows_it_finished() {
        let mut table = SideBySide::default();
        table.record_failure("the list rows", Ok(()));
        assert!(table.failed.is_empty());
        table.record_failure(
            "the cache and write-throughput rows",
            Err(BenchError::Invalid("etcd went away".to_owned())),
        );
        let markdown = table.markdown();
        assert!(markdown.contains("**Incomplete run.**"), "{markdown}");
        assert!(
            markdown.contains("- the cache and write-throughput rows FAILED: "),
            "{markdown}"
        );
        assert!(markdown.contains("etcd went away"), "{markdown}");
    }
}
