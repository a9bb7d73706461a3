//! The stored bytes as they are: `apistore keys` and `get --raw`. Nothing here decrypts
//! or decodes: the encoding is read from the value's first bytes, as `auger` and
//! `etcdctl` users do by eye.

use std::io::Write;

use apistore::layers::etcd3::RawEntry;
use serde::Serialize;

use crate::args::OutputFormat;
use crate::error::CliError;
use crate::output::{print, write_stdout};

/// What a value is stored as: `json`, `protobuf`, `<provider>:<key>` for an encrypted
/// value (`k8s:enc:aesgcm:v1:key1:...` is `aesgcm:key1`), `unknown` otherwise.
pub(crate) fn encoding(value: &[u8]) -> String {
    if let Some(encryption) = apistore::layers::value::encryption_name(value) {
        return encryption;
    }
    if apistore::layers::protobuf::is_protobuf(value) {
        return "protobuf".to_owned();
    }
    let first = value.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'{') {
        return "json".to_owned();
    }
    "unknown".to_owned()
}

/// The bytes with printable ASCII as is and everything else escaped (`\n`, `\\`,
/// `\x00`), one line.
pub(crate) fn escape(value: &[u8]) -> String {
    value.escape_ascii().to_string()
}

/// One row of `apistore keys`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyRow {
    key: String,
    mod_revision: i64,
    create_revision: i64,
    version: i64,
    lease: i64,
    size: usize,
    encoding: String,
}

impl KeyRow {
    /// The row of a key (relative to the prefix) with etcd's metadata and its value.
    pub(crate) fn new(
        key: String,
        [mod_revision, create_revision, version, lease]: [i64; 4],
        value: &[u8],
    ) -> Self {
        Self {
            key,
            mod_revision,
            create_revision,
            version,
            lease,
            size: value.len(),
            encoding: encoding(value),
        }
    }
}

impl From<&RawEntry> for KeyRow {
    fn from(entry: &RawEntry) -> Self {
        let meta = [
            entry.mod_revision,
            entry.create_revision,
            entry.version,
            entry.lease,
        ];
        Self::new(entry.key.clone(), meta, &entry.value)
    }
}

const KEY_COLUMNS: [&str; 7] = [
    "KEY",
    "MOD_REV",
    "CREATE_REV",
    "VERSION",
    "LEASE",
    "SIZE",
    "ENCODING",
];

/// Prints the keys: a table (the default), JSON or YAML (a list of objects, one per
/// key), or the keys one a line (`-o name`).
pub(crate) fn print_keys(
    format: Option<OutputFormat>,
    entries: &[RawEntry],
) -> Result<(), CliError> {
    print_key_rows(format, entries.iter().map(KeyRow::from).collect())
}

/// Prints rows of keys as [`print_keys`] does.
pub(crate) fn print_key_rows(
    format: Option<OutputFormat>,
    rows: Vec<KeyRow>,
) -> Result<(), CliError> {
    match format.unwrap_or(OutputFormat::Table) {
        format @ (OutputFormat::Json | OutputFormat::Yaml) => print(format, &rows),
        OutputFormat::Name => {
            let text: String = rows.iter().map(|row| format!("{}\n", row.key)).collect();
            write_stdout(&text)
        }
        OutputFormat::Table => {
            let cells: Vec<[String; 7]> = rows
                .iter()
                .map(|row| {
                    [
                        row.key.clone(),
                        row.mod_revision.to_string(),
                        row.create_revision.to_string(),
                        row.version.to_string(),
                        row.lease.to_string(),
                        row.size.to_string(),
                        row.encoding.clone(),
                    ]
                })
                .collect();
            write_stdout(&crate::output::columns(&KEY_COLUMNS, &cells))
        }
    }
}

/// A value that is UTF-8 text without control characters but newlines and tabs (a
/// JSON or YAML value), as text: printed as it is, so that `get --raw | jq` reads it.
pub(crate) fn printable(value: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(value).ok()?;
    text.chars()
        .all(|c| !c.is_control() || c == '\n' || c == '\t')
        .then_some(text)
}

/// Prints a stored value (as it is when [`printable`], else escaped on one line), or
/// writes it as it is to `path`.
pub(crate) fn print_raw(value: &[u8], out: Option<&std::path::Path>) -> Result<(), CliError> {
    match out {
        Some(path) => std::fs::write(path, value).map_err(|e| {
            CliError::Output(format!("cannot write the value to {}: {e}", path.display()))
        }),
        None => {
            let mut line = printable(value).map_or_else(|| escape(value), str::to_owned);
            // One newline at the end, as a line printed; a value ending in one has it.
            if !line.ends_with('\n') {
                line.push('\n');
            }
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(line.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(|e| CliError::Output(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_are_read_from_the_first_bytes() {
        assert_eq!(encoding(b"k8s:enc:aesgcm:v1:key1:\x00\x01"), "aesgcm:key1");
        assert_eq!(encoding(b"k8s:enc:kms:v2:vault:..."), "kms:vault");
        assert_eq!(encoding(b"k8s\x00\x0a\x02v1"), "protobuf");
        assert_eq!(encoding(b"{\"kind\":\"Secret\"}"), "json");
        assert_eq!(encoding(b"\x00\x01 garbage"), "unknown");
    }

    #[test]
    fn printable_text_is_kept_and_anything_else_escaped() {
        assert_eq!(
            printable(b"{\"a\": \"\xc3\xa9\"}\n"),
            Some("{\"a\": \"\u{e9}\"}\n")
        );
        assert_eq!(printable(b"k8s\x00\x0a"), None);
        assert_eq!(printable(b"\xff{}"), None);
        assert_eq!(printable(b"a\x1b[31m"), None);
    }

    #[test]
    fn escaping_keeps_printable_ascii() {
        assert_eq!(escape(b"k8s\x00\n{\"a\"}"), "k8s\\x00\\n{\\\"a\\\"}");
    }
}
