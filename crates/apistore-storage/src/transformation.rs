//! Which way a value transformer ran: the `transformation_type` label of kube-apiserver's
//! transformation metrics (`pkg/storage/value/metrics.go`). Defined here, in the
//! contract, so that the transformers (which report it) and the metrics (which label
//! with it) share one type without depending on each other.

use std::fmt;

/// Which way a value was transformed: the `transformation_type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransformationType {
    /// `from_storage`: stored bytes to plain bytes (reading, decryption).
    FromStorage,
    /// `to_storage`: plain bytes to stored bytes (writing, encryption).
    ToStorage,
}

impl TransformationType {
    /// The label value, exactly as kube-apiserver writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::FromStorage => "from_storage",
            Self::ToStorage => "to_storage",
        }
    }
}

impl fmt::Display for TransformationType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
