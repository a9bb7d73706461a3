//! The rows: every resource kube-apiserver persists, with its key prefix, storage
//! version and encoding, one table per kube minor (1.31 to 1.37).
//!
//! The tables are generated (`generated/kube_1_<minor>.rs`, by `interop/layout`) from
//! each minor's own sources: kubernetes' integration data
//! (`test/integration/etcd/data.go`, `ExpectedEtcdPath` and `ExpectedGVK`) and the
//! kinds of that minor's k8s.io/api. Built-ins of every group sit at `/<plural>`
//! without their group, with the exceptions their registries name (nodes at `minions`,
//! services at `services/specs`, endpoints at `services/endpoints`,
//! replicationcontrollers at `controllers`, ingresses at `ingress`), events.k8s.io events
//! share the core events, and the two API servers kube-apiserver embeds store grouped
//! and as JSON (`apiextensions.k8s.io/customresourcedefinitions`,
//! `apiregistration.k8s.io/apiservices`). This file holds the row type the generated
//! tables are written in, the tables with their lookup by a key's first segment, and the
//! keys that are no object in any minor.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::StorageEncoding::{self, Protobuf};
use crate::{StorageLayout, first_segment};

#[path = "generated/mod.rs"]
mod generated;

#[cfg(test)]
pub(crate) use generated::KUBE_1_31;

impl StorageLayout {
    /// kube-apiserver 1.`minor`'s layout with its default storage media type, for
    /// `minor` 31 to 37 (`None` for any other).
    ///
    /// Resources a minor serves only at alpha or beta versions are in its table too:
    /// they are what kube-apiserver stores once those versions are enabled.
    pub fn for_kube_minor(minor: u32) -> Option<Self> {
        let index = usize::try_from(minor.checked_sub(31)?).ok()?;
        TABLES.get(index).map(|table| Self { table })
    }
}

/// A minor's rows, with the rows by the first segment of their key prefix.
#[derive(Debug)]
pub(crate) struct Table {
    pub(crate) rows: &'static [Row],
    by_first: OnceLock<HashMap<&'static str, Vec<&'static Row>>>,
}

/// Minor `minor`'s table (none is empty: `for_minor` has every minor of [`TABLES`]).
const fn table(minor: u32) -> Table {
    Table {
        rows: match generated::for_minor(minor) {
            Some(rows) => rows,
            None => &[],
        },
        by_first: OnceLock::new(),
    }
}

/// The tables of kube 1.31 to 1.37, in order.
pub(crate) static TABLES: [Table; 7] = [
    table(31),
    table(32),
    table(33),
    table(34),
    table(35),
    table(36),
    table(37),
];

impl Table {
    /// The rows whose key prefix begins with the segment `first`, in table order: a
    /// key lies under no other row's prefix (its first segment is the prefix's).
    /// Looked up, not scanned: `resolve_key` runs on every key an `analyze` or a scan
    /// of a snapshot reads (200,000 keys against 70-odd rows was a twentieth of an
    /// `analyze`).
    pub(crate) fn rows_beginning(&self, first: &str) -> &[&'static Row] {
        let by_first = self.by_first.get_or_init(|| {
            let mut by_first = HashMap::<_, Vec<_>>::new();
            for row in self.rows {
                by_first
                    .entry(first_segment(row.key_prefix))
                    .or_default()
                    .push(row);
            }
            by_first
        });
        by_first.get(first).map_or(&[], Vec::as_slice)
    }
}

/// Cluster-scoped or namespaced.
pub(crate) const NAMESPACED: bool = true;
pub(crate) const CLUSTER: bool = false;

/// One persisted resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) group: &'static str,
    pub(crate) resource: &'static str,
    /// Relative to `--etcd-prefix`, without slashes at either end.
    pub(crate) key_prefix: &'static str,
    /// The apiVersion kube-apiserver writes (its storage version).
    pub(crate) api_version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) namespaced: bool,
    pub(crate) encoding: StorageEncoding,
}

pub(crate) const fn row(
    group: &'static str,
    resource: &'static str,
    key_prefix: &'static str,
    api_version: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Row {
    Row {
        group,
        resource,
        key_prefix,
        api_version,
        kind,
        namespaced,
        encoding: Protobuf,
    }
}

/// Keys kube-apiserver keeps under its prefix that are not API objects.
pub(crate) const NON_OBJECT_KEYS: &[&str] = &[
    "compact_rev_key",
    "health",
    "masterleases",
    "ranges/serviceips",
    "ranges/servicenodeports",
];

#[cfg(test)]
#[test]
fn every_minor_the_generated_tables_have_has_its_table() {
    for minor in 0..100 {
        let rows = StorageLayout::for_kube_minor(minor).map(|layout| layout.table.rows);
        assert_eq!(rows, generated::for_minor(minor), "1.{minor}");
    }
}
