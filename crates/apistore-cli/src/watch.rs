//! `apistore watch`: events printed as they arrive, in the chosen format.

use std::io::Write;

use apistore::layers::etcd3::Etcd3Store;
use apistore::{WatchEvent, WatchStream};

use crate::args::OutputFormat;
use crate::error::CliError;
use crate::object::{Selectable, Unreadable};

/// Prints watch events until `max_events` were printed; an Error event is printed,
/// then returned as the command's error. An event about a value the store could not
/// read (a store made with `skip_undecodable`) is named on stderr and not counted.
pub(crate) async fn print_watch_events(
    store: &Etcd3Store<Selectable>,
    prefix: &str,
    mut events: WatchStream<Selectable>,
    max_events: Option<u64>,
    format: Option<OutputFormat>,
) -> Result<(), CliError> {
    // A bad prefix is refused before anything is printed.
    store.prepare_key(prefix)?;
    if format == Some(OutputFormat::Table) {
        // Printed before the first event arrives, so that a reader sees what the
        // tab-separated columns are whether or not any event ever comes.
        write_line(WATCH_TABLE_HEADER)?;
    }
    let mut printed = 0;
    while max_events.is_none_or(|max| printed < max) {
        let Some(event) = apistore::layers::etcd3::next_event(&mut events).await else {
            return Ok(());
        };
        if let Some(unreadable) = event.object().and_then(|o| o.unreadable.as_ref()) {
            let revision = event
                .object()
                .map_or("", |o| &o.object.metadata.resource_version);
            let key = key_of(store, prefix, unreadable, revision).await;
            eprintln!(
                "skipped {key} ({} at resourceVersion {revision}): {}",
                event.type_name(),
                unreadable.reason
            );
            continue;
        }
        write_line(&event_line(&event, format)?)?;
        printed += 1;
        if let WatchEvent::Error(mut status) = event {
            // The error line starts with the reason already (`Timeout: Timeout: ...`).
            let prefix = format!("{}: ", status.reason);
            if let Some(rest) = status.message.strip_prefix(&prefix) {
                status.message = rest.to_owned();
            }
            // kube's message names the key the watch failed on (the object's, for an
            // unreadable value); naming the watched prefix after it would name two.
            return Err(CliError::WatchEnded(status));
        }
    }
    Ok(())
}

/// The header line of `watch -o table`: the columns of [`event_line`]'s table rows.
pub(crate) const WATCH_TABLE_HEADER: &str = "TYPE\tNAME\tNAMESPACE\tRESOURCEVERSION\tKIND\n";

/// One event as printed: a JSON line, a YAML document, `<resource>/<name>`, or a tab
/// separated TYPE NAME NAMESPACE RESOURCEVERSION KIND line.
fn event_line(
    event: &WatchEvent<Selectable>,
    format: Option<OutputFormat>,
) -> Result<String, CliError> {
    let output = |e: String| CliError::Output(e);
    let value = serde_json::to_value(event).map_err(|e| output(e.to_string()))?;
    let object = value.get("object").cloned().unwrap_or_default();
    Ok(match format {
        None | Some(OutputFormat::Json) => {
            serde_json::to_string(event).map_err(|e| output(e.to_string()))? + "\n"
        }
        Some(OutputFormat::Yaml) => {
            let text = serde_norway::to_string(&value).map_err(|e| output(e.to_string()))?;
            format!("---\n{text}")
        }
        Some(OutputFormat::Name) => crate::output::name_of(&object) + "\n",
        Some(OutputFormat::Table) => {
            let row = crate::output::row(&object, crate::output::now_unix());
            format!(
                "{}\t{}\t{}\t{}\t{}\n",
                event.type_name(),
                row[0],
                row[1],
                row[2],
                row[4]
            )
        }
    })
}

fn write_line(line: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(line.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::Output(e.to_string()))
}

/// The key of an unreadable value, relative to the prefix: from the transformer when it
/// failed, else the key under `prefix` whose value was written at `revision` (a codec
/// does not know the key it decodes).
async fn key_of(
    store: &Etcd3Store<Selectable>,
    prefix: &str,
    unreadable: &Unreadable,
    revision: &str,
) -> String {
    let relative = |key: &str| {
        key.strip_prefix(store.path_prefix())
            .map_or(key, |k| k.trim_start_matches('/'))
            .to_owned()
    };
    if let Some(key) = &unreadable.key {
        return relative(key);
    }
    let Ok(revision) = revision.parse::<i64>() else {
        return format!("a value under {prefix}");
    };
    match store.raw_entries(prefix, revision).await {
        Ok(entries) => entries
            .iter()
            .find(|e| e.mod_revision == revision)
            .map_or_else(|| format!("a value under {prefix}"), |e| relative(&e.key)),
        Err(_) => format!("a value under {prefix}"),
    }
}
