//! Printing objects as JSON, YAML, a table or `<resource>/<name>` lines.

use std::io::Write;

use serde::Serialize;

use crate::args::OutputFormat;
use crate::error::CliError;

/// Prints a value in the chosen format on stdout; a page of a list cut short also
/// prints its continue token on stderr, whatever the format, so that a script reading
/// `-o name` or `-o yaml` learns that there is more.
pub(crate) fn print<T: Serialize>(format: OutputFormat, value: &T) -> Result<(), CliError> {
    if format != OutputFormat::Table {
        // The table prints it itself, from the value it already has.
        let value = serde_json::to_value(value).map_err(|e| CliError::Output(e.to_string()))?;
        page_on_stderr(&value);
    }
    let text = match format {
        OutputFormat::Json => {
            let mut text =
                serde_json::to_string_pretty(value).map_err(|e| CliError::Output(e.to_string()))?;
            text.push('\n');
            text
        }
        OutputFormat::Yaml => {
            serde_norway::to_string(value).map_err(|e| CliError::Output(e.to_string()))?
        }
        OutputFormat::Table => {
            let value = serde_json::to_value(value).map_err(|e| CliError::Output(e.to_string()))?;
            page_on_stderr(&value);
            table(&value, now_unix())
        }
        OutputFormat::Name => {
            let value = serde_json::to_value(value).map_err(|e| CliError::Output(e.to_string()))?;
            objects(&value).iter().map(|o| name_of(o) + "\n").collect()
        }
    };
    write_stdout(&text)
}

/// Writes text on stdout and flushes it.
pub(crate) fn write_stdout(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::Output(e.to_string()))
}

// KIND and AGE come last so that the first four columns stay where scripts read them.
const COLUMNS: [&str; 6] = [
    "NAME",
    "NAMESPACE",
    "RESOURCEVERSION",
    "CREATED",
    "KIND",
    "AGE",
];

/// The objects of a value: the items of a list, or the object itself.
fn objects(value: &serde_json::Value) -> Vec<&serde_json::Value> {
    match value.get("items").and_then(|i| i.as_array()) {
        Some(items) => items.iter().collect(),
        None => vec![value],
    }
}

fn meta_field(object: &serde_json::Value, name: &str) -> String {
    object
        .get("metadata")
        .and_then(|m| m.get(name))
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_owned()
}

/// `<resource>/<name>` as `kubectl get -o name` prints it: the kind in lower case, with
/// its group when it has one (`configmap/cm1`, `deployment.apps/d1`).
pub(crate) fn name_of(object: &serde_json::Value) -> String {
    let text = |field: &str| object.get(field).and_then(|v| v.as_str()).unwrap_or("");
    let kind = text("kind").to_lowercase();
    let resource = match text("apiVersion").rsplit_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind,
    };
    format!("{resource}/{}", meta_field(object, "name"))
}

/// For a page of a list, the continue token and how many items remain, on stderr
/// (stdout keeps the output alone), the same lines for every format.
fn page_on_stderr(value: &serde_json::Value) {
    let metadata = value.get("metadata");
    let token = metadata
        .and_then(|m| m.get("continue"))
        .and_then(|v| v.as_str())
        .unwrap_or("");
    if token.is_empty() {
        return;
    }
    let remaining = metadata
        .and_then(|m| m.get("remainingItemCount"))
        .and_then(serde_json::Value::as_i64)
        .map_or_else(|| "unknown".to_owned(), |n| n.to_string());
    eprintln!("continue: {token}");
    eprintln!("remaining: {remaining}");
}

/// One row per object (the items of a list, or the object itself), kubectl-style:
/// name, namespace, resourceVersion, the creation timestamp, kind and age (from the
/// creation timestamp, against `now` in Unix seconds).
fn table(value: &serde_json::Value, now: i64) -> String {
    let rows: Vec<[String; 6]> = objects(value).iter().map(|o| row(o, now)).collect();
    columns(&COLUMNS, &rows)
}

/// A table row of one object.
pub(crate) fn row(object: &serde_json::Value, now: i64) -> [String; 6] {
    let created = meta_field(object, "creationTimestamp");
    let age = parse_timestamp(&created).map_or_else(String::new, |then| age(now - then));
    [
        meta_field(object, "name"),
        meta_field(object, "namespace"),
        meta_field(object, "resourceVersion"),
        created,
        object
            .get("kind")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned(),
        age,
    ]
}

/// Cells padded to their column's width, three spaces apart, with a header.
pub(crate) fn columns<const N: usize>(header: &[&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(str::len);
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("   ").trim_end().to_owned() + "\n"
    };
    let mut text = line(header.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

/// Now, in Unix seconds.
pub(crate) fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An RFC 3339 UTC timestamp as kube writes them (`2024-01-02T03:04:05Z`), in Unix
/// seconds.
fn parse_timestamp(text: &str) -> Option<i64> {
    let text = text.strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (y, m, d) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let time = time.split('.').next()?;
    let mut time = time.splitn(3, ':').map(str::parse::<i64>);
    let (hh, mm, ss) = (time.next()?.ok()?, time.next()?.ok()?, time.next()?.ok()?);
    // Howard Hinnant's days_from_civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// An age as kubectl prints it, to its largest unit: `45s`, `12m`, `5h`, `3d`.
fn age(seconds: i64) -> String {
    let seconds = seconds.max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 120 * 60 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_prints_one_row_per_item() {
        let list = serde_json::json!({
            "kind": "List",
            "items": [
                {"metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5",
                              "creationTimestamp": "2024-01-01T00:00:00Z"}},
                {"metadata": {"name": "bb", "resourceVersion": "12"}}
            ]
        });
        let text = table(&list, 1_704_067_200 + 300);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("NAME   NAMESPACE   RESOURCEVERSION   CREATED"));
        assert!(lines[1].starts_with("a      ns          5                 2024-01-01T00:00:00Z"));
        assert_eq!(lines[2], "bb                 12");
    }

    #[test]
    fn one_object_prints_one_row() {
        let object = serde_json::json!({"metadata": {"name": "cm1", "namespace": "default"}});
        assert_eq!(table(&object, 0).lines().count(), 2);
    }

    #[test]
    fn kind_and_age_come_last() {
        let object = serde_json::json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "cm1", "creationTimestamp": "2024-01-01T00:00:00Z"}});
        let text = table(&object, 1_704_067_200 + 3 * 86_400);
        assert!(
            text.lines().next().unwrap().ends_with("KIND        AGE"),
            "{text}"
        );
        assert!(
            text.lines().nth(1).unwrap().ends_with("ConfigMap   3d"),
            "{text}"
        );
        assert_eq!(name_of(&object), "configmap/cm1");
        let d = serde_json::json!({"kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": "d1"}});
        assert_eq!(name_of(&d), "deployment.apps/d1");
    }

    #[test]
    fn timestamps_and_ages() {
        assert_eq!(parse_timestamp("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_timestamp("2024-01-01T00:00:00Z"), Some(1_704_067_200));
        assert_eq!(age(30), "30s");
        assert_eq!(age(600), "10m");
        assert_eq!(age(5 * 3600), "5h");
    }
}
