//! Comparisons: the figures of two arms over alternating rounds, their medians and the
//! median of their per-round ratios.

/// How a figure is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unit {
    /// Operations (or events, or keys) per second.
    PerSec,
    /// Wall-clock seconds (a latency or a call's duration).
    Seconds,
    /// CPU seconds.
    CpuSeconds,
    /// Bytes.
    Bytes,
    /// A plain ratio.
    Ratio,
}

/// One figure of a comparison, measured once per round in each arm.
#[derive(Debug, Clone)]
pub(crate) struct Metric {
    /// Column heading.
    pub(crate) name: &'static str,
    /// How values print.
    pub(crate) unit: Unit,
    /// Arm A's value in each round.
    pub(crate) a: Vec<f64>,
    /// Arm B's value in each round.
    pub(crate) b: Vec<f64>,
}

impl Metric {
    /// A metric with its per-round values.
    pub(crate) fn new(name: &'static str, unit: Unit, a: Vec<f64>, b: Vec<f64>) -> Self {
        Self { name, unit, a, b }
    }

    /// Arm A's median.
    pub(crate) fn median_a(&self) -> f64 {
        median(&self.a)
    }

    /// Arm B's median.
    pub(crate) fn median_b(&self) -> f64 {
        median(&self.b)
    }

    /// The median over rounds of A/B, each round's A against the B run right after it.
    pub(crate) fn ratio(&self) -> f64 {
        let ratios: Vec<f64> = self
            .a
            .iter()
            .zip(&self.b)
            .filter(|(_, b)| **b != 0.0)
            .map(|(a, b)| a / b)
            .collect();
        median(&ratios)
    }

    /// The smallest and largest per-round ratio, to show the spread.
    pub(crate) fn ratio_range(&self) -> (f64, f64) {
        self.a
            .iter()
            .zip(&self.b)
            .filter(|(_, b)| **b != 0.0)
            .map(|(a, b)| a / b)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                (lo.min(r), hi.max(r))
            })
    }
}

/// The sections of the report, in the order they print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Section {
    /// Create, get, guaranteed update and delete.
    Crud,
    /// The same on kine over SQLite.
    KineCrud,
    /// Whole and paged lists.
    List,
    /// Lists of Pods stored as protobuf, against JSON and against raw.
    PodList,
    /// One watcher and many writes.
    Watch,
    /// The watch cache's lists against raw etcd-client.
    Cacher,
    /// The watch cache's watchers against one raw watch.
    CacherWatch,
    /// Exact and continued lists from the watch cache's snapshots against the etcd3
    /// store.
    CacherSnapshot,
    /// A list of 100,000 objects with `RangeStream` against `Range`, on etcd 3.7.
    RangeStream,
    /// The memory of idle watches.
    IdleWatch,
    /// AES-GCM against identity.
    Encryption,
    /// KMS v2 against AES-GCM.
    KmsV2,
    /// Metrics and tracing on against off, every call traced.
    Telemetry,
    /// Metrics and tracing on against off, callers untraced (kube-apiserver's default
    /// for requests that arrive without a sampled trace).
    TelemetryUntraced,
}

/// Two arms of one workload, compared round by round.
#[derive(Debug, Clone)]
pub(crate) struct Comparison {
    /// Where it prints.
    pub(crate) section: Section,
    /// The workload, e.g. `create, 16 callers`.
    pub(crate) workload: String,
    /// The names of arms A and B.
    pub(crate) arms: [&'static str; 2],
    /// The figures.
    pub(crate) metrics: Vec<Metric>,
    /// Why the workload could not run, if it could not.
    pub(crate) unavailable: Option<String>,
}

impl Comparison {
    /// A comparison with figures.
    pub(crate) fn new(
        section: Section,
        workload: impl Into<String>,
        arms: [&'static str; 2],
        metrics: Vec<Metric>,
    ) -> Self {
        Self {
            section,
            workload: workload.into(),
            arms,
            metrics,
            unavailable: None,
        }
    }

    /// A workload that could not run, and why.
    pub(crate) fn unavailable(
        section: Section,
        workload: impl Into<String>,
        arms: [&'static str; 2],
        why: String,
    ) -> Self {
        Self {
            section,
            workload: workload.into(),
            arms,
            metrics: Vec::new(),
            unavailable: Some(why),
        }
    }

    /// The metric with this column heading.
    pub(crate) fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// How many rounds were compared.
    pub(crate) fn rounds(&self) -> usize {
        self.metrics.first().map_or(0, |m| m.a.len().min(m.b.len()))
    }
}

/// The median of `values` (the mean of the middle two for an even count); 0 if empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return 0.0;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    if sorted.len() % 2 == 0 {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn ratio_is_the_median_of_paired_ratios() {
        let m = Metric::new(
            "ops/s",
            Unit::PerSec,
            vec![90.0, 100.0, 50.0],
            vec![100.0, 100.0, 100.0],
        );
        assert_eq!(m.ratio(), 0.9);
        assert_eq!(m.ratio_range(), (0.5, 1.0));
    }
}
