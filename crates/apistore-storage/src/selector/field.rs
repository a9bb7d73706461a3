//! Field selectors: apimachinery's `fields.Selector` (`pkg/fields/selector.go`).
//!
//! A field selector is a comma-separated list of `field=value`, `field==value` and
//! `field!=value` terms. Fields are taken literally (no escaping, no trimming); values
//! escape `\`, `,` and `=` with a backslash, and no other escape is accepted. As in the
//! reference, terms are kept in the order of their sorted source text, a term whose
//! field and value are both empty is dropped, and a field missing from the object
//! compares as the empty string.

use std::fmt;

use super::{Operator, SelectorError};
use crate::object::Fields;

/// One term of a field selector.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldRequirement {
    field: String,
    negated: bool,
    value: String,
}

impl FieldRequirement {
    /// The field name, e.g. `metadata.name`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// [`Operator::Equals`] (`=` and `==`) or [`Operator::NotEquals`] (`!=`).
    pub fn operator(&self) -> Operator {
        if self.negated {
            Operator::NotEquals
        } else {
            Operator::Equals
        }
    }

    /// The value, unescaped.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether `fields` satisfy this term (a missing field reads as "").
    pub fn matches(&self, fields: &Fields) -> bool {
        let have = fields.get(&self.field).map_or("", String::as_str);
        (have == self.value) != self.negated
    }
}

impl fmt::Display for FieldRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let operator = if self.negated { "!=" } else { "=" };
        write!(f, "{}{operator}{}", self.field, escape_value(&self.value))
    }
}

/// A parsed field selector; the empty selector matches everything.
///
/// Equality ignores the order of terms; `Display` gives the reference's text, which
/// parses back to an equal selector.
#[derive(Debug, Clone, Default)]
pub struct FieldSelector {
    terms: Vec<FieldRequirement>,
}

impl FieldSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a field selector, as apimachinery's `fields.ParseSelector`.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut parts = split_terms(text);
        parts.sort_unstable();
        let mut terms = Vec::with_capacity(parts.len());
        for part in parts.into_iter().filter(|part| !part.is_empty()) {
            let Some((field, operator, raw_value)) = split_term(part) else {
                return Err(SelectorError::Parse {
                    selector: text.to_owned(),
                    reason: format!("invalid selector: '{text}'; can't understand '{part}'"),
                });
            };
            let value =
                unescape_value(raw_value).map_err(|reason| SelectorError::InvalidFieldValue {
                    selector: text.to_owned(),
                    value: raw_value.to_owned(),
                    reason,
                })?;
            // The reference drops a term that names nothing at all (`=`, `!=`).
            if field.is_empty() && value.is_empty() {
                continue;
            }
            terms.push(FieldRequirement {
                field: field.to_owned(),
                negated: operator == "!=",
                value,
            });
        }
        Ok(Self { terms })
    }

    /// A selector requiring exactly the given fields (`SelectorFromSet`), in field order.
    pub fn from_set(fields: &Fields) -> Self {
        let terms = fields
            .iter()
            .map(|(field, value)| FieldRequirement {
                field: field.clone(),
                negated: false,
                value: value.clone(),
            })
            .collect();
        Self { terms }
    }

    /// `field=value` (`OneTermEqualSelector`).
    pub fn one_term_equal(field: &str, value: &str) -> Self {
        Self::one_term(field, value, false)
    }

    /// `field!=value` (`OneTermNotEqualSelector`).
    pub fn one_term_not_equal(field: &str, value: &str) -> Self {
        Self::one_term(field, value, true)
    }

    fn one_term(field: &str, value: &str, negated: bool) -> Self {
        Self {
            terms: vec![FieldRequirement {
                field: field.to_owned(),
                negated,
                value: value.to_owned(),
            }],
        }
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The terms, in the reference's order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.terms
    }

    /// Whether `fields` satisfy every term; a missing field compares as "".
    pub fn matches(&self, fields: &Fields) -> bool {
        self.terms.iter().all(|term| term.matches(fields))
    }

    /// The value `field` must equal, if an `=` term names it (the first such term).
    /// kube-apiserver uses it to read a single object (`metadata.name`) or namespace.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|term| !term.negated && term.field == field)
            .map(|term| term.value.as_str())
    }
}

impl PartialEq for FieldSelector {
    fn eq(&self, other: &Self) -> bool {
        let mut mine: Vec<_> = self.terms.iter().collect();
        let mut theirs: Vec<_> = other.terms.iter().collect();
        mine.sort_unstable();
        theirs.sort_unstable();
        mine == theirs
    }
}

impl Eq for FieldSelector {}

impl fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, term) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{term}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for FieldSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// Escapes a literal value for a field selector: `\` → `\\`, `,` → `\,`, `=` → `\=`.
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for ch in value.chars() {
        if matches!(ch, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

/// Unescapes a field selector value. Only `\\`, `\,` and `\=` are escapes; any other
/// escape, a trailing lone `\`, or an unescaped `,` or `=` is an error, described in
/// the reference's words.
pub fn unescape_value(raw: &str) -> Result<String, String> {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(ch) = chars.next() {
        match ch {
            '\\' => match chars.next() {
                Some(escaped @ ('\\' | ',' | '=')) => out.push(escaped),
                Some(other) => return Err(format!("invalid escape sequence: \\{other}")),
                None => return Err("invalid escape sequence: \\".to_owned()),
            },
            ',' | '=' => return Err(format!("unescaped character in value: '{ch}'")),
            _ => out.push(ch),
        }
    }
    Ok(out)
}

/// The comma-separated terms; a backslash protects the character after it, and stays.
fn split_terms(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, ch) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if ch == '\\' {
            escaped = true;
        } else if ch == ',' {
            terms.push(text.get(start..i).unwrap_or_default());
            start = i + 1;
        }
    }
    terms.push(text.get(start..).unwrap_or_default());
    terms
}

/// Splits a term at its first operator (`!=`, then `==`, then `=` at each position):
/// field, operator and the raw (escaped) value.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..).unwrap_or_default();
        for operator in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(operator) {
                return Some((term.get(..i).unwrap_or_default(), operator, value));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests;
