//! Prefix-selected transformer lists, kube's `NewPrefixTransformers`
//! (`pkg/storage/value/transformer.go`).
//!
//! A stored value names the transformer that wrote it by a leading byte prefix. Reading
//! tries, in order, every entry whose prefix the value starts with; writing always uses
//! the first entry. A value read by any entry but the first is *stale*: it should be
//! rewritten with the current write transformer. Encryption configurations nest two such
//! lists: providers (`k8s:enc:aesgcm:v1:`) and, inside each, keys (`key1:`).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::observer::{
    NoopObserver, PREFIX_LABEL_IDENTITY, PREFIX_LABEL_UNKNOWN, STATUS_OK, STATUS_UNKNOWN_NON_GRPC,
    TransformObserver, TransformationType,
};
use crate::{Plaintext, Result, TransformError, Transformer};

/// A transformer and the prefix its stored values carry.
#[derive(Debug, Clone)]
pub struct PrefixTransformer {
    /// The bytes written before the transformer's output. Empty for identity.
    pub prefix: Bytes,
    /// Turns the bytes after the prefix into plain bytes and back.
    pub transformer: Arc<dyn Transformer>,
}

impl PrefixTransformer {
    /// Pairs a prefix with a transformer.
    pub fn new(prefix: impl Into<Bytes>, transformer: Arc<dyn Transformer>) -> Self {
        Self {
            prefix: prefix.into(),
            transformer,
        }
    }
}

/// An ordered list of [`PrefixTransformer`]s acting as one transformer.
///
/// Reading: every entry whose prefix matches is tried in order with the prefix
/// stripped. An entry with an empty prefix (identity) that fails is skipped silently,
/// so identity placed first can migrate data away from encryption; other failures are
/// collected and the next entry tried, since two providers of the same kind share a
/// prefix. The first success wins and is stale if it was not the first entry or its
/// transformer says so. If every match failed, the errors are returned (one as it is,
/// several as an aggregate); if nothing matched, the configured not-found error.
///
/// Writing: the first entry's prefix followed by its transformer's output.
pub struct PrefixTransformers {
    entries: Vec<PrefixTransformer>,
    not_found: TransformError,
    observer: Arc<dyn TransformObserver>,
    /// The group-resource the observer is told the values belong to ("" unknown).
    resource: Arc<str>,
}

impl PrefixTransformers {
    /// A list that answers `not_found` for values no entry's prefix matches.
    pub fn new(not_found: TransformError, entries: Vec<PrefixTransformer>) -> Self {
        Self {
            entries,
            not_found,
            observer: Arc::new(NoopObserver),
            resource: Arc::from(""),
        }
    }

    /// A list that answers [`TransformError::NoMatchingTransformer`] for unmatched values,
    /// kube's default when no error is given.
    pub fn with_default_error(entries: Vec<PrefixTransformer>) -> Self {
        Self::new(TransformError::NoMatchingTransformer, entries)
    }

    /// Reports every transformation this list records to `observer`.
    #[must_use]
    pub fn with_observer(mut self, observer: Arc<dyn TransformObserver>) -> Self {
        self.observer = observer;
        self
    }

    /// Tells the observer the values this list transforms belong to `resource` (a
    /// group-resource string: `secrets`, `deployments.apps`); empty, the default,
    /// when the list serves no one resource.
    #[must_use]
    pub fn with_resource(mut self, resource: Arc<str>) -> Self {
        self.resource = resource;
        self
    }

    /// The entries, in order; the first is the write transformer.
    pub fn entries(&self) -> &[PrefixTransformer] {
        &self.entries
    }

    fn record(
        &self,
        kind: TransformationType,
        label: &str,
        start: Instant,
        outcome: std::result::Result<(), ()>,
    ) {
        let (status, elapsed): (&str, Option<Duration>) = match outcome {
            Ok(()) => (STATUS_OK, Some(start.elapsed())),
            Err(()) => (STATUS_UNKNOWN_NON_GRPC, None),
        };
        self.observer
            .observe_resource(&self.resource, kind, label, status, elapsed);
    }
}

impl fmt::Debug for PrefixTransformers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrefixTransformers")
            .field("entries", &self.entries)
            .field("not_found", &self.not_found)
            .finish_non_exhaustive()
    }
}

/// The metric label of a prefix: its bytes as text.
fn prefix_label(prefix: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(prefix)
}

impl Transformer for PrefixTransformers {
    fn transform_from_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Plaintext> {
        let start = Instant::now();
        let mut errors = Vec::new();
        for (index, entry) in self.entries.iter().enumerate() {
            if !data.starts_with(&entry.prefix) {
                continue;
            }
            let rest = data.slice(entry.prefix.len()..);
            let result = entry
                .transformer
                .transform_from_storage(rest, authenticated_data);
            if entry.prefix.is_empty() {
                // Identity refuses encrypted data; that must not stop the providers
                // after it from being tried, nor count as a failure.
                let Ok(plain) = result else { continue };
                self.record(
                    TransformationType::FromStorage,
                    PREFIX_LABEL_IDENTITY,
                    start,
                    Ok(()),
                );
                return Ok(Plaintext {
                    data: plain.data,
                    stale: plain.stale || index != 0,
                });
            }
            let label = prefix_label(&entry.prefix);
            match result {
                Ok(plain) => {
                    self.record(TransformationType::FromStorage, &label, start, Ok(()));
                    return Ok(Plaintext {
                        data: plain.data,
                        stale: plain.stale || index != 0,
                    });
                }
                Err(err) => {
                    self.record(TransformationType::FromStorage, &label, start, Err(()));
                    errors.push(err);
                }
            }
        }
        if let Some(err) = TransformError::reduce(errors) {
            return Err(err);
        }
        self.record(
            TransformationType::FromStorage,
            PREFIX_LABEL_UNKNOWN,
            start,
            Err(()),
        );
        Err(self.not_found.clone())
    }

    fn transform_to_storage(&self, data: Bytes, authenticated_data: &[u8]) -> Result<Bytes> {
        let start = Instant::now();
        let Some(entry) = self.entries.first() else {
            return Err(TransformError::NoWriteTransformer);
        };
        let label = prefix_label(&entry.prefix);
        match entry
            .transformer
            .transform_to_storage(data, authenticated_data)
        {
            Ok(out) => {
                self.record(TransformationType::ToStorage, &label, start, Ok(()));
                if entry.prefix.is_empty() {
                    return Ok(out);
                }
                let mut stored = BytesMut::with_capacity(entry.prefix.len() + out.len());
                stored.extend_from_slice(&entry.prefix);
                stored.extend_from_slice(&out);
                Ok(stored.freeze())
            }
            Err(err) => {
                self.record(TransformationType::ToStorage, &label, start, Err(()));
                Err(err)
            }
        }
    }
}

#[cfg(test)]
mod tests;
