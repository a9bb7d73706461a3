//! Resolved handles for the value-transformation metrics of `pkg/storage/value/metrics.go`,
//! one set per transformer prefix.
//!
//! Every stored object passes through a transformer on each read and write, so these
//! are recorded as often as the etcd request metrics. The `OK` status is the common
//! case and is cached; failure statuses resolve their series on each call.

use std::sync::OnceLock;

use prometheus::{Histogram, IntCounter};

use crate::families::Families;
use crate::labels::{STATUS_OK, TransformationType};

#[derive(Default)]
pub(crate) struct PrefixHandles {
    duration: [OnceLock<Histogram>; 2],
    ok: [OnceLock<IntCounter>; 2],
}

impl PrefixHandles {
    pub(crate) fn record(
        &self,
        families: &Families,
        kind: TransformationType,
        prefix: &str,
        status: &str,
        elapsed: Option<std::time::Duration>,
    ) {
        let i = kind as usize;
        if status == STATUS_OK {
            self.ok[i]
                .get_or_init(|| {
                    families.transformation_operations.with_label_values(&[
                        kind.as_str(),
                        prefix,
                        STATUS_OK,
                    ])
                })
                .inc();
        } else {
            families
                .transformation_operations
                .with_label_values(&[kind.as_str(), prefix, status])
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
