//! Printing objects as JSON, YAML or a table.

use std::io::Write;

use serde::Serialize;

use crate::args::OutputFormat;
use crate::error::CliError;

/// Prints a value in the chosen format on stdout.
pub(crate) fn print<T: Serialize>(format: OutputFormat, value: &T) -> Result<(), CliError> {
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
            table(&value)
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::Output(e.to_string()))
}

const COLUMNS: [&str; 4] = ["NAME", "NAMESPACE", "RESOURCEVERSION", "CREATED"];

/// One row per object (the items of a list, or the object itself), kubectl-style:
/// name, namespace, resourceVersion and the creation timestamp where present.
fn table(value: &serde_json::Value) -> String {
    let objects: Vec<&serde_json::Value> = match value.get("items").and_then(|i| i.as_array()) {
        Some(items) => items.iter().collect(),
        None => vec![value],
    };
    let field = |object: &serde_json::Value, name: &str| {
        object
            .get("metadata")
            .and_then(|m| m.get(name))
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    let rows: Vec<[String; 4]> = objects
        .iter()
        .map(|o| {
            [
                field(o, "name"),
                field(o, "namespace"),
                field(o, "resourceVersion"),
                field(o, "creationTimestamp"),
            ]
        })
        .collect();
    let mut widths = COLUMNS.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.len());
        }
    }
    let line = |cells: [&str; 4]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        padded.join("   ").trim_end().to_owned() + "\n"
    };
    let mut text = line(COLUMNS);
    for row in &rows {
        text.push_str(&line([&row[0], &row[1], &row[2], &row[3]]));
    }
    text
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
        let text = table(&list);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("NAME   NAMESPACE   RESOURCEVERSION   CREATED"));
        assert!(lines[1].starts_with("a      ns          5                 2024-01-01T00:00:00Z"));
        assert_eq!(lines[2], "bb                 12");
    }

    #[test]
    fn one_object_prints_one_row() {
        let object = serde_json::json!({"metadata": {"name": "cm1", "namespace": "default"}});
        assert_eq!(table(&object).lines().count(), 2);
    }
}
