//! Label selectors (placeholder until the full grammar lands).

use std::fmt;

use super::SelectorError;
use crate::object::Labels;

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    text: String,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a label selector.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        if text.trim().is_empty() {
            return Ok(Self::everything());
        }
        Err(SelectorError::Parse {
            selector: text.to_owned(),
            reason: "label selectors are not supported yet".to_owned(),
        })
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// Whether `labels` satisfy the selector.
    pub fn matches(&self, _labels: &Labels) -> bool {
        self.is_empty()
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
