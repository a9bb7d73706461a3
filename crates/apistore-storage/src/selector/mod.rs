//! Kubernetes label and field selectors.
//!
//! Follows `k8s.io/apimachinery` v0.31.1, `pkg/labels/selector.go` and
//! `pkg/fields/selector.go`: the same grammar (whitespace, NUL bytes and keyword quirks
//! included), the same key and value validation, the same matching rules and the same
//! canonical text, so a selector a client sends kube-apiserver selects the same objects
//! here. Parse errors are typed and name the offending part.
//!
//! ```
//! use apistore_storage::{FieldSelector, LabelSelector, Labels};
//!
//! let selector = LabelSelector::parse("tier in (web, api), !canary, env != prod").unwrap();
//! assert_eq!(selector.to_string(), "!canary,env!=prod,tier in (api,web)");
//! let labels = Labels::from([("tier".to_owned(), "web".to_owned())]);
//! assert!(selector.matches(&labels));
//!
//! let fields = FieldSelector::parse("metadata.name=nginx,status.phase!=Failed").unwrap();
//! assert_eq!(fields.requires_exact_match("metadata.name"), Some("nginx"));
//! ```

mod field;
mod label;
mod validation;

use std::fmt;

pub use field::{FieldRequirement, FieldSelector, escape_value, unescape_value};
pub use label::{LabelSelector, Requirement};

/// How a requirement relates a key to its values (apimachinery's `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operator {
    /// `key=value`: the key is present with that value.
    Equals,
    /// `key==value`: the same as [`Operator::Equals`], kept apart for display.
    DoubleEquals,
    /// `key!=value`: the key is absent, or present with another value.
    NotEquals,
    /// `key in (a,b)`: the key is present with one of the values.
    In,
    /// `key notin (a,b)`: the key is absent, or present with none of the values.
    NotIn,
    /// `key`: the key is present.
    Exists,
    /// `!key`: the key is absent.
    DoesNotExist,
    /// `key>1`: the key is present with an integer value greater than the given one.
    GreaterThan,
    /// `key<1`: the key is present with an integer value less than the given one.
    LessThan,
}

impl Operator {
    /// The operator's name in apimachinery (`"="`, `"in"`, `"!"`, `"gt"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equals => "=",
            Self::DoubleEquals => "==",
            Self::NotEquals => "!=",
            Self::In => "in",
            Self::NotIn => "notin",
            Self::Exists => "exists",
            Self::DoesNotExist => "!",
            Self::GreaterThan => "gt",
            Self::LessThan => "lt",
        }
    }
}

impl fmt::Display for Operator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A selector that could not be parsed or a requirement that is not valid.
///
/// `selector` is the text being parsed; it is empty for requirements built in code
/// ([`Requirement::new`]).
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
    /// A label key is not a qualified name with an optional DNS subdomain prefix.
    #[error("invalid label key {key:?}{}: {reason}", in_selector(.selector))]
    InvalidLabelKey {
        /// The whole selector text.
        selector: String,
        /// The key.
        key: String,
        /// apimachinery's validation messages, joined with `; `.
        reason: String,
    },
    /// A label value is not valid, or not an integer where `>`/`<` need one.
    #[error("invalid value {value:?} for label {key:?}{}: {reason}", in_selector(.selector))]
    InvalidLabelValue {
        /// The whole selector text.
        selector: String,
        /// The key the value is for.
        key: String,
        /// The value.
        value: String,
        /// apimachinery's validation messages, joined with `; `.
        reason: String,
    },
    /// An operator was given the wrong number of values.
    #[error("invalid requirement on {key:?}{}: {reason}", in_selector(.selector))]
    InvalidRequirement {
        /// The whole selector text.
        selector: String,
        /// The requirement's key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A field selector value has a bad escape or an unescaped `,` or `=`.
    #[error("invalid field selector {selector:?}: {reason}")]
    InvalidFieldValue {
        /// The whole selector text.
        selector: String,
        /// The raw (still escaped) value.
        value: String,
        /// What is wrong, naming the sequence or character.
        reason: String,
    },
}

fn in_selector(selector: &str) -> String {
    if selector.is_empty() {
        String::new()
    } else {
        format!(" in selector {selector:?}")
    }
}
