//! Reading what a test's metrics registry recorded.

/// The sum of the counter family `name`'s series in `registry` whose labels include
/// every `(name, value)` pair of `labels` (all its series for `&[]`); 0 when there are
/// none.
pub fn counter(registry: &prometheus::Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == name)
        .flat_map(|family| family.get_metric().iter())
        .filter(|metric| {
            labels.iter().all(|(label, value)| {
                metric
                    .get_label()
                    .iter()
                    .any(|pair| pair.name() == *label && pair.value() == *value)
            })
        })
        .map(|metric| metric.get_counter().get_value())
        .sum()
}
