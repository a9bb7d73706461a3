//! Kubernetes label and field selectors.
//!
//! Follows `k8s.io/apimachinery/pkg/labels` and `pkg/fields`: the same grammar, the same
//! matching rules, and parse errors that name the offending part.

mod field;
mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;

/// A selector that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectorError {
    /// The selector text is malformed at the given part.
    #[error("unable to parse selector {selector:?}: {reason}")]
    Parse {
        /// The whole selector text.
        selector: String,
        /// What is wrong, naming the offending part.
        reason: String,
    },
}
