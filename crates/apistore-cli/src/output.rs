//! Printing objects as JSON or YAML.

use std::io::Write;

use serde::Serialize;

use crate::args::OutputFormat;
use crate::commands::CliError;

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
            serde_yaml::to_string(value).map_err(|e| CliError::Output(e.to_string()))?
        }
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::Output(e.to_string()))
}
