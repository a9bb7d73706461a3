//! What the exposition tests share: reading one family out of an exposition and the
//! lines a histogram is written as.

#![allow(dead_code)]

/// The lines of one family (its HELP, TYPE and samples) in an exposition.
pub(crate) fn family<'a>(text: &'a str, name: &str) -> Vec<&'a str> {
    let help = format!("# HELP {name} ");
    let lines: Vec<&str> = text.lines().collect();
    let Some(start) = lines.iter().position(|l| l.starts_with(&help)) else {
        return Vec::new();
    };
    let end = lines[start + 1..]
        .iter()
        .position(|l| l.starts_with("# HELP "))
        .map_or(lines.len(), |i| start + 1 + i);
    lines[start..end].to_vec()
}

pub(crate) fn histogram_lines(
    name: &str,
    labels: &str,
    bounds: &[&str],
    counts: &[u64],
    sum: &str,
    count: u64,
) -> Vec<String> {
    let sep = if labels.is_empty() { "" } else { "," };
    let mut lines: Vec<String> = bounds
        .iter()
        .zip(counts)
        .map(|(le, n)| format!("{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}"))
        .collect();
    lines.push(format!("{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}"));
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    lines.push(format!("{name}_sum{braces} {sum}"));
    lines.push(format!("{name}_count{braces} {count}"));
    lines
}

pub(crate) const REQUEST_BOUNDS: [&str; 23] = [
    "0.005", "0.025", "0.05", "0.1", "0.2", "0.4", "0.6", "0.8", "1", "1.25", "1.5", "2", "3", "4",
    "5", "6", "8", "10", "15", "20", "30", "45", "60",
];
