//! Group-resources (kube's `schema.GroupResource`) as kube writes them: `secrets`,
//! `deployments.apps`, `widgets.example.com`, and the wildcards an encryption
//! configuration may name: `*.` (every core resource), `*.apps` (every resource of a
//! group) and `*.*` (everything). Parsed as kube's `schema.ParseGroupResource`: the
//! resource is what precedes the first `.`, the group what follows it. The storage
//! layout and the encryption configuration both key on it, so it lives in the contract.

use std::fmt;

/// A resource and its API group; the core group is the empty string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    /// The API group, empty for the core group, `*` for any group.
    pub group: String,
    /// The resource (plural, lower case), `*` for any resource.
    pub resource: String,
}

impl GroupResource {
    /// The `*.*` rule: every resource of every group.
    pub fn any() -> Self {
        Self::new("*", "*")
    }

    /// A group-resource from its parts.
    pub fn new(group: impl Into<String>, resource: impl Into<String>) -> Self {
        Self {
            group: group.into(),
            resource: resource.into(),
        }
    }

    /// Splits `resource.group` at the first dot; no dot means the core group.
    pub fn parse(text: &str) -> Self {
        match text.split_once('.') {
            Some((resource, group)) => Self::new(group, resource),
            None => Self::new("", text),
        }
    }

    /// The rule matching every resource of this one's group (`*.<group>`).
    pub fn any_in_group(&self) -> Self {
        Self::new(self.group.clone(), "*")
    }

    /// Whether this is a wildcard rule rather than one resource.
    pub fn is_wildcard(&self) -> bool {
        self.resource == "*"
    }
}

impl fmt::Display for GroupResource {
    /// `resource.group`, `resource` for the core group, and `*.` for every core
    /// resource (so that it reads as written in the configuration).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            if self.resource == "*" {
                return f.write_str("*.");
            }
            return f.write_str(&self.resource);
        }
        write!(f, "{}.{}", self.resource, self.group)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_kube() {
        assert_eq!(
            GroupResource::parse("secrets"),
            GroupResource::new("", "secrets")
        );
        assert_eq!(
            GroupResource::parse("deployments.apps"),
            GroupResource::new("apps", "deployments")
        );
        assert_eq!(
            GroupResource::parse("pandas.awesome.bears.example"),
            GroupResource::new("awesome.bears.example", "pandas")
        );
        assert_eq!(GroupResource::parse("*."), GroupResource::new("", "*"));
        assert_eq!(
            GroupResource::parse("*.apps"),
            GroupResource::new("apps", "*")
        );
        assert_eq!(GroupResource::parse("*.*"), GroupResource::any());
    }

    #[test]
    fn displays_as_written() {
        for text in ["secrets", "deployments.apps", "*.", "*.apps", "*.*"] {
            assert_eq!(GroupResource::parse(text).to_string(), text);
        }
    }
}
