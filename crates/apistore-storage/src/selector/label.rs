//! Label selectors: apimachinery's `labels.Selector` (`pkg/labels/selector.go`).
//!
//! A selector is a conjunction of requirements kept sorted by key, the way the
//! reference's parser leaves them, so that equal selectors print the same text. The
//! grammar itself lives in [`parser`].

mod parser;

use std::fmt;

use super::validation::{label_value_errors, qualified_name_errors};
use super::{Operator, SelectorError};
use crate::object::Labels;

/// One condition of a label selector: a key, an operator and its values.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and free of duplicates.
    values: Vec<String>,
}

impl Requirement {
    /// A validated requirement, as apimachinery's `NewRequirement`: the key must be a
    /// qualified name, every value a valid label value, `in`/`notin` need at least one
    /// value, `=`/`==`/`!=` exactly one, exists/does-not-exist none, `>`/`<` exactly one
    /// integer. The values are kept as a sorted set.
    pub fn new<I, S>(key: &str, operator: Operator, values: I) -> Result<Self, SelectorError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self::validated(
            key,
            operator,
            values.into_iter().map(Into::into).collect(),
            "",
        )
    }

    fn validated(
        key: &str,
        operator: Operator,
        mut values: Vec<String>,
        selector: &str,
    ) -> Result<Self, SelectorError> {
        check_key(key, selector)?;
        let arity = match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                Some("for 'in', 'notin' operators, values set can't be empty")
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals
                if values.len() != 1 =>
            {
                Some("exact-match compatibility requires one single value")
            }
            Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
                Some("values set must be empty for exists and does not exist")
            }
            Operator::GreaterThan | Operator::LessThan if values.len() != 1 => {
                Some("for 'Gt', 'Lt' operators, exactly one value is required")
            }
            _ => None,
        };
        if let Some(reason) = arity {
            return Err(SelectorError::InvalidRequirement {
                selector: selector.to_owned(),
                key: key.to_owned(),
                reason: reason.to_owned(),
            });
        }
        for value in &values {
            let mut reasons = Vec::new();
            if matches!(operator, Operator::GreaterThan | Operator::LessThan)
                && value.parse::<i64>().is_err()
            {
                reasons.push("for 'Gt', 'Lt' operators, the value must be an integer".to_owned());
            }
            reasons.extend(label_value_errors(value));
            if !reasons.is_empty() {
                return Err(SelectorError::InvalidLabelValue {
                    selector: selector.to_owned(),
                    key: key.to_owned(),
                    value: value.clone(),
                    reason: reasons.join("; "),
                });
            }
        }
        values.sort();
        values.dedup();
        Ok(Self {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted; empty for exists and does-not-exist.
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement. `!=` and `notin` match labels without
    /// the key; `>` and `<` need the key with an integer value.
    pub fn matches(&self, labels: &Labels) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(|v| self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), [want]) = (value, self.values.as_slice()) else {
                    return false;
                };
                match (have.parse::<i64>(), want.parse::<i64>()) {
                    (Ok(have), Ok(want)) if self.operator == Operator::GreaterThan => have > want,
                    (Ok(have), Ok(want)) => have < want,
                    _ => false,
                }
            }
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.operator == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let (open, close) = match self.operator {
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
            Operator::In => (" in (", ")"),
            Operator::NotIn => (" notin (", ")"),
            Operator::Equals => ("=", ""),
            Operator::DoubleEquals => ("==", ""),
            Operator::NotEquals => ("!=", ""),
            Operator::GreaterThan => (">", ""),
            Operator::LessThan => ("<", ""),
        };
        f.write_str(open)?;
        f.write_str(&self.values.join(","))?;
        f.write_str(close)
    }
}

/// A parsed label selector; the empty selector matches everything.
///
/// `Display` gives the canonical text (requirements by key, values sorted), which parses
/// back to an equal selector.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// Sorted by key; requirements on the same key keep their order.
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The selector that matches everything.
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses a label selector, as apimachinery's `labels.Parse`:
    /// `a=b,c!=d,e in (f,g),h notin (i),j,!k,l>1,m<2`. Whitespace (space, tab, CR, LF)
    /// may surround any token. Keys and values are validated as label keys and values.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = parser::parse(text)?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(Self { requirements })
    }

    /// A selector requiring exactly the given labels (apimachinery's `SelectorFromSet`;
    /// like it, keys and values are not validated).
    pub fn from_set(labels: &Labels) -> Self {
        let requirements = labels
            .iter()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                operator: Operator::Equals,
                values: vec![value.clone()],
            })
            .collect();
        Self { requirements }
    }

    /// Like [`LabelSelector::from_set`], validating keys and values
    /// (`ValidatedSelectorFromSet`).
    pub fn validated_from_set(labels: &Labels) -> Result<Self, SelectorError> {
        let requirements = labels
            .iter()
            .map(|(key, value)| Requirement::new(key, Operator::Equals, [value.as_str()]))
            .collect::<Result<_, _>>()?;
        Ok(Self { requirements })
    }

    /// This selector with more requirements, kept sorted by key (the reference's `Add`).
    #[must_use]
    pub fn with_requirements(
        mut self,
        requirements: impl IntoIterator<Item = Requirement>,
    ) -> Self {
        self.requirements.extend(requirements);
        self.requirements.sort_by(|a, b| a.key.cmp(&b.key));
        self
    }

    /// Whether this selector matches everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements, sorted by key.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &Labels) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// The single value `label` must have, if the first requirement on `label` pins one
    /// (`=`, `==`, or `in` with one value). apimachinery's `RequiresExactMatch`.
    pub fn requires_exact_match(&self, label: &str) -> Option<&str> {
        let requirement = self.requirements.iter().find(|r| r.key == label)?;
        match (requirement.operator, requirement.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

fn check_key(key: &str, selector: &str) -> Result<(), SelectorError> {
    let errors = qualified_name_errors(key);
    if errors.is_empty() {
        return Ok(());
    }
    Err(SelectorError::InvalidLabelKey {
        selector: selector.to_owned(),
        key: key.to_owned(),
        reason: errors.join("; "),
    })
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
