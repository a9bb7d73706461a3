//! `apistore analyze [PREFIX]`: where the bytes go, online or from a snapshot.
//!
//! Each stored value is counted under its resource (kube's layout places the key; keys
//! of no resource under `other:<first segment>`), and with `--by namespace` its
//! namespace: count, bytes of current values, bytes of every revision held (a snapshot
//! holds them all; online only the current values are read, so it is absent), the
//! encodings and the encryption provider and key of each value (read from its prefix),
//! the share of `managedFields` and of the last-applied annotation in the objects (in
//! the protobuf's own bytes, read off the wire, or in the decoded JSON), and the
//! largest values. A value stored in plaintext under a resource the
//! `--encryption-config` encrypts is a security finding, counted per row and named.

use std::collections::{BTreeMap, HashMap};

use apistore::{ApiStore, StorageLayout};
use apistore_snapshot::SnapshotError;
use apistore_snapshot::mvcc::Revision;
use bytes::Bytes;
use serde::Serialize;

use crate::args::{AnalyzeArgs, AnalyzeBy, GlobalArgs, OutputFormat};
use crate::error::CliError;
use crate::layers::{Layers, Reader};
use crate::offline::Offline;
use crate::output::{columns, print, write_stdout};

/// kube's last-applied annotation (`kubectl apply`'s client-side record).
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// One stored key: its current value and the bytes of all its revisions, when known.
pub(crate) struct Stored {
    /// The key, relative to the prefix.
    pub(crate) key: String,
    /// The etcd key.
    pub(crate) etcd_key: String,
    /// The current value; `None` for a key deleted since, whose past revisions the
    /// source still holds (they count in revision bytes only).
    pub(crate) value: Option<Bytes>,
    /// Bytes of every revision the source holds, when it holds them.
    pub(crate) revision_bytes: Option<u64>,
}

/// What a row of the report counts.
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
struct Row {
    resource: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    count: u64,
    bytes: u64,
    revision_bytes: Option<u64>,
    encodings: BTreeMap<String, u64>,
    encryption: BTreeMap<String, u64>,
    managed_fields_share: f64,
    last_applied_share: f64,
    plaintext_under_encryption: u64,
    undecodable: u64,
    #[serde(skip)]
    decoded_bytes: u64,
    #[serde(skip)]
    managed_fields_bytes: u64,
    #[serde(skip)]
    last_applied_bytes: u64,
}

/// One of the largest values.
#[derive(Debug, Serialize)]
struct Largest {
    key: String,
    bytes: u64,
}

/// The report as `-o json` prints it.
#[derive(Debug, Serialize)]
struct Report {
    resources: Vec<Row>,
    largest: Vec<Largest>,
    findings: Vec<String>,
}

/// `analyze` from etcd: the current values under the prefix.
pub(crate) async fn online(
    api: &ApiStore,
    global: &GlobalArgs,
    args: &AnalyzeArgs,
) -> Result<(), CliError> {
    let prefix = args.key_prefix.as_deref();
    let store = crate::commands::raw_store(api, global, prefix);
    let entries = store.raw_entries(prefix.unwrap_or_default(), 0).await?;
    let path_prefix = store.path_prefix().to_owned();
    let mut tally = Tally::new(Layers::Online(api), args);
    for entry in entries {
        tally.add(Stored {
            etcd_key: format!("{path_prefix}{}", entry.key),
            key: entry.key,
            value: Some(entry.value),
            revision_bytes: None,
        });
    }
    tally.print(global)
}

/// `--snapshot FILE analyze`: the values at the file's last revision, and the bytes of
/// every revision it holds of them.
pub(crate) fn offline(
    offline: &Offline,
    global: &GlobalArgs,
    args: &AnalyzeArgs,
) -> Result<(), CliError> {
    let snapshot = &offline.snapshot;
    let path_prefix = crate::commands::path_prefix(&offline.prefix);
    let prefix = format!(
        "{path_prefix}{}",
        args.key_prefix.as_deref().unwrap_or_default()
    );
    // Every revision of every key under the prefix, in one pass over the file in its
    // own order (by revision), so each page is read once and no record is looked up
    // (in key order the reads jump about the file and the page cache cannot help; a
    // lookup per revision descends the file's tree each time). A key is reported at
    // its last revision, when all of its revisions have been counted; memory stays at
    // the index, the running sums of the keys not yet reported, and one value.
    let last_of: HashMap<Revision, &Bytes> = snapshot
        .keys_under(prefix.as_bytes())
        .map_err(CliError::Snapshot)?
        .filter_map(|(key, revisions)| revisions.last().map(|at| (at.revision, key)))
        .collect();
    // Keyed by copies: a record's key is a slice of its page, which it would keep.
    let mut sums: HashMap<Box<[u8]>, u64> = HashMap::new();
    let mut tally = Tally::new(Layers::Offline(offline), args);
    snapshot
        .scan_under(prefix.as_bytes(), |record| {
            let value = (!record.tombstone).then_some(record.kv.value);
            let bytes = value.as_ref().map_or(0, |v| v.len() as u64);
            let key = record.kv.key;
            match last_of.get(&record.revision) {
                Some(last) if **last == key => {}
                Some(last) => {
                    return Err(SnapshotError::CorruptRecord {
                        path: snapshot.path().to_owned(),
                        record: format!("revision {}", record.revision.main),
                        page: 0,
                        offset: 0,
                        problem: format!(
                            "it holds {:?} where the index built before had {:?}: the file \
                             changed",
                            String::from_utf8_lossy(&key),
                            String::from_utf8_lossy(last)
                        ),
                    });
                }
                None => {
                    *sums.entry(Box::from(&key[..])).or_default() += bytes;
                    return Ok(true);
                }
            }
            let revision_bytes = sums.remove(&key[..]).unwrap_or_default() + bytes;
            let etcd_key = String::from_utf8_lossy(&key).into_owned();
            tally.add(Stored {
                key: etcd_key
                    .strip_prefix(&path_prefix)
                    .unwrap_or(&etcd_key)
                    .to_owned(),
                etcd_key,
                // The last revision is the live value unless it deleted the key.
                value,
                revision_bytes: Some(revision_bytes),
            });
            Ok(true)
        })
        .map_err(CliError::Snapshot)?;
    tally.print(global)
}

/// The report being counted, one stored value at a time.
struct Tally<'a> {
    layers: Layers<'a>,
    by: AnalyzeBy,
    top: usize,
    rows: BTreeMap<(String, Option<String>), Row>,
    readers: HashMap<String, Reader>,
    largest: Vec<Largest>,
    plaintext: BTreeMap<String, (u64, String)>,
}

impl<'a> Tally<'a> {
    fn new(layers: Layers<'a>, args: &AnalyzeArgs) -> Self {
        Self {
            layers,
            by: args.by,
            top: args.top,
            rows: BTreeMap::new(),
            readers: HashMap::new(),
            largest: Vec::new(),
            plaintext: BTreeMap::new(),
        }
    }

    /// Counts one stored key.
    fn add(&mut self, item: Stored) {
        let layers = self.layers;
        let (resource, namespace) = place(layers.layout(), &item.key);
        let namespace = (self.by == AnalyzeBy::Namespace).then(|| namespace.unwrap_or_default());
        let row = self
            .rows
            .entry((resource.clone(), namespace.clone()))
            .or_insert_with(|| Row {
                resource: resource.clone(),
                namespace,
                revision_bytes: Some(0),
                ..Row::default()
            });
        row.revision_bytes = match (row.revision_bytes, item.revision_bytes) {
            (Some(sum), Some(more)) => Some(sum + more),
            _ => None,
        };
        let Some(value) = &item.value else {
            return;
        };
        let bytes = value.len() as u64;
        row.count += 1;
        row.bytes += bytes;
        let encryption = match crate::raw::encoding(value) {
            encrypted if value.starts_with(b"k8s:enc:") => encrypted,
            _ => "identity".to_owned(),
        };
        let encrypts = layers
            .encryption()
            .and_then(|config| config.write_provider(&resource))
            .is_some();
        if encryption == "identity" && encrypts {
            row.plaintext_under_encryption += 1;
            let (count, _) = self
                .plaintext
                .entry(resource.clone())
                .or_insert_with(|| (0, item.key.clone()));
            *count += 1;
        }
        *row.encryption.entry(encryption).or_default() += 1;
        let reader = self
            .readers
            .entry(resource.clone())
            .or_insert_with(|| layers.reader(&resource));
        match measure(reader, &item.etcd_key, value) {
            Some((encoding, sizes)) => {
                *row.encodings.entry(encoding).or_default() += 1;
                row.decoded_bytes += sizes[0];
                row.managed_fields_bytes += sizes[1];
                row.last_applied_bytes += sizes[2];
            }
            None => {
                row.undecodable += 1;
                *row.encodings.entry("unreadable".to_owned()).or_default() += 1;
            }
        }
        self.largest.push(Largest {
            key: item.key,
            bytes,
        });
        if self.largest.len() > self.top.saturating_mul(2).max(64) {
            keep_largest(&mut self.largest, self.top);
        }
    }

    /// Prints the report.
    fn print(self, global: &GlobalArgs) -> Result<(), CliError> {
        let mut largest = self.largest;
        keep_largest(&mut largest, self.top);
        let mut resources: Vec<Row> = self.rows.into_values().collect();
        for row in &mut resources {
            if row.decoded_bytes > 0 {
                row.managed_fields_share = share(row.managed_fields_bytes, row.decoded_bytes);
                row.last_applied_share = share(row.last_applied_bytes, row.decoded_bytes);
            }
        }
        let findings = self
            .plaintext
            .into_iter()
            .map(|(resource, (count, first))| {
                format!(
                    "{count} value(s) of {resource} stored in plaintext though the encryption \
                     configuration encrypts {resource} (first: {first}); `apistore encryption \
                     rewrite` encrypts them"
                )
            })
            .collect();
        let report = Report {
            resources,
            largest,
            findings,
        };
        match global.output {
            Some(format @ (OutputFormat::Json | OutputFormat::Yaml)) => print(format, &report),
            _ => write_stdout(&table(&report, self.by)),
        }
    }
}

/// The resource of a key (relative to the prefix) and its namespace, when the key has
/// one (`<resource prefix>/<namespace>/<name>`).
fn place(layout: StorageLayout, key: &str) -> (String, Option<String>) {
    match layout.resolve_key(key) {
        Ok(resource) => {
            let rest = key
                .strip_prefix(resource.key_prefix.as_str())
                .unwrap_or(key)
                .trim_start_matches('/');
            let namespace = rest
                .split_once('/')
                .map(|(namespace, _)| namespace.to_owned());
            (resource.group_resource.to_string(), namespace)
        }
        Err(_) => {
            let first = key.split('/').next().unwrap_or_default();
            (format!("other:{first}"), None)
        }
    }
}

fn keep_largest(largest: &mut Vec<Largest>, top: usize) {
    largest.sort_by(|a, b| b.bytes.cmp(&a.bytes).then_with(|| a.key.cmp(&b.key)));
    largest.truncate(top);
}

fn share(part: u64, whole: u64) -> f64 {
    // Two decimals are what a reader compares; more is noise.
    (part as f64 / whole as f64 * 100.0).round() / 100.0
}

/// The encoding of the decrypted value, and the sizes of the object, its managedFields
/// and its last-applied annotation; `None` when it cannot be read. Protobuf is measured
/// on the wire, in its own bytes, without decoding the object (a decode of every object
/// cost analyze 7 times what `etcdutl snapshot status` takes on the same file:
/// docs/benchmarks.md); JSON in the JSON of the decoded object.
fn measure(reader: &Reader, etcd_key: &str, value: &Bytes) -> Option<(String, [u64; 3])> {
    let plain = reader.decrypt(etcd_key, value).ok()?;
    if apistore::layers::protobuf::is_protobuf(&plain) {
        let sizes =
            apistore::layers::protobuf::KubeProtobuf::metadata_sizes(&plain, LAST_APPLIED).ok()?;
        return Some((
            "protobuf".to_owned(),
            [sizes.object, sizes.managed_fields, sizes.annotation],
        ));
    }
    let (plain, object) = reader.read(etcd_key, value).ok()?;
    let encoding = crate::raw::encoding(&plain);
    let total = serde_json::to_vec(&object).ok()?.len() as u64;
    let managed = object
        .metadata
        .extra
        .get("managedFields")
        .and_then(|fields| serde_json::to_vec(fields).ok())
        .map_or(0, |bytes| bytes.len() as u64);
    let applied = object
        .metadata
        .annotations
        .get(LAST_APPLIED)
        .map_or(0, |text| text.len() as u64);
    Some((encoding, [total, managed, applied]))
}

fn table(report: &Report, by: AnalyzeBy) -> String {
    let mut headers = vec!["RESOURCE"];
    if by == AnalyzeBy::Namespace {
        headers.push("NAMESPACE");
    }
    headers.extend([
        "COUNT",
        "BYTES",
        "REVISION_BYTES",
        "MANAGED_FIELDS",
        "LAST_APPLIED",
        "ENCODINGS",
        "ENCRYPTION",
        "PLAINTEXT!",
    ]);
    let counts = |map: &BTreeMap<String, u64>| -> String {
        map.iter()
            .map(|(name, n)| format!("{name}={n}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    let rows: Vec<Vec<String>> = report
        .resources
        .iter()
        .map(|row| {
            let mut cells = vec![row.resource.clone()];
            if by == AnalyzeBy::Namespace {
                cells.push(row.namespace.clone().unwrap_or_default());
            }
            cells.extend([
                row.count.to_string(),
                row.bytes.to_string(),
                row.revision_bytes
                    .map_or_else(|| "-".to_owned(), |b| b.to_string()),
                format!("{:.0}%", row.managed_fields_share * 100.0),
                format!("{:.0}%", row.last_applied_share * 100.0),
                counts(&row.encodings),
                counts(&row.encryption),
                row.plaintext_under_encryption.to_string(),
            ]);
            cells
        })
        .collect();
    let mut text = match by {
        AnalyzeBy::Namespace => fixed::<10>(&headers, rows),
        AnalyzeBy::Resource => fixed::<9>(&headers, rows),
    };
    if !report.largest.is_empty() {
        let largest: Vec<[String; 2]> = report
            .largest
            .iter()
            .map(|l| [l.key.clone(), l.bytes.to_string()])
            .collect();
        text.push('\n');
        text.push_str(&columns(&["LARGEST", "BYTES"], &largest));
    }
    for finding in &report.findings {
        text.push_str(&format!("\nFINDING: {finding}\n"));
    }
    text
}

/// The table of rows built with as many cells as `headers` (N of them).
fn fixed<const N: usize>(headers: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut header: [&str; N] = [""; N];
    for (slot, name) in header.iter_mut().zip(headers) {
        *slot = name;
    }
    let rows: Vec<[String; N]> = rows
        .into_iter()
        .map(|cells| {
            let mut row: [String; N] = std::array::from_fn(|_| String::new());
            for (slot, cell) in row.iter_mut().zip(cells) {
                *slot = cell;
            }
            row
        })
        .collect();
    columns(&header, &rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_placed_under_their_resource_and_namespace() {
        let layout = StorageLayout::for_kube(apistore::KubeVersion::LATEST);
        assert_eq!(
            place(layout, "deployments/default/d1"),
            ("deployments.apps".to_owned(), Some("default".to_owned()))
        );
        assert_eq!(place(layout, "minions/node-1"), ("nodes".to_owned(), None));
        assert_eq!(
            place(layout, "example.com/widgets/ns1/w1"),
            ("widgets.example.com".to_owned(), Some("ns1".to_owned()))
        );
        assert_eq!(share(1, 3), 0.33);
    }
}
