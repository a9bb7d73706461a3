//! Resolved handles for the value-transformation metrics of `pkg/storage/value/metrics.go`,
//! one set per resource and transformer prefix (kube 1.32 added the `resource` label to
//! `apiserver_storage_transformation_operations_total`; before, the resource is ignored).
//!
//! Every stored object passes through a transformer on each read and write, so these
//! are recorded as often as the etcd request metrics. The `OK` status is the common
//! case and is cached; failure statuses resolve their series on each call.

use std::sync::OnceLock;

use prometheus::{Histogram, IntCounter};

use apistore_storage::KubeVersion;

use crate::families::Families;
use crate::labels::{STATUS_OK, TransformationType};

/// The label values of `apiserver_storage_transformation_operations_total` at the
/// families' minor.
fn operation_labels<'a>(
    families: &Families,
    resource: &'a str,
    kind: TransformationType,
    prefix: &'a str,
    status: &'a str,
) -> Vec<&'a str> {
    if families.version >= KubeVersion::V1_32 {
        vec![resource, kind.as_str(), prefix, status]
    } else {
        vec![kind.as_str(), prefix, status]
    }
}

#[derive(Default)]
pub(crate) struct PrefixHandles {
    duration: [OnceLock<Histogram>; 2],
    ok: [OnceLock<IntCounter>; 2],
}

impl PrefixHandles {
    pub(crate) fn record(
        &self,
        families: &Families,
        (resource, kind, prefix): (&str, TransformationType, &str),
        status: &str,
        elapsed: Option<std::time::Duration>,
    ) {
        let i = kind as usize;
        if status == STATUS_OK {
            self.ok[i]
                .get_or_init(|| {
                    families
                        .transformation_operations
                        .with_label_values(&operation_labels(
                            families, resource, kind, prefix, STATUS_OK,
                        ))
                })
                .inc();
        } else {
            families
                .transformation_operations
                .with_label_values(&operation_labels(families, resource, kind, prefix, status))
                .inc();
        }
        if let Some(elapsed) = elapsed {
            self.duration[i]
                .get_or_init(|| {
                    families
                        .transformation_duration
                        .with_label_values(&[kind.as_str(), prefix])
                })
                .observe(elapsed.as_secs_f64());
        }
    }
}
