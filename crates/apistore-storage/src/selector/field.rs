//! Field selectors (placeholder until the full grammar lands).

use std::fmt;

use super::SelectorError;
use crate::object::Fields;

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    text: String,
}

impl FieldSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a field selector.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.trim().is_empty() {
            return Ok(Self::everything());
        }
        Err(SelectorError::Parse {
            selector: text.to_owned(),
            reason: "field selectors are not supported yet".to_owned(),
        })
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Whether `fields` satisfy the selector.
    pub fn matches(&self, _fields: &Fields) -> bool {
        self.is_empty()
    }
}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
