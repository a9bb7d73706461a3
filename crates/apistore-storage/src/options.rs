//! Request options and preconditions, after kube-apiserver's `interfaces.go`.

use std::fmt;
use std::str::FromStr;

use crate::error::{Result, StorageError};
use crate::object::ApiObject;
use crate::selection::SelectionPredicate;

/// Options of [`Storage::get`](crate::Storage::get).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GetOptions {
    /// Return a zero-valued object instead of a not-found error.
    pub ignore_not_found: bool,
    /// The minimum resourceVersion the answer must reflect; empty for "latest".
    pub resource_version: String,
}

/// How a list's resourceVersion is interpreted (`metav1.ResourceVersionMatch`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ResourceVersionMatch {
    /// The legacy rule: no match given.
    #[default]
    Unset,
    /// The answer reflects at least the given resourceVersion.
    NotOlderThan,
    /// The answer is read at exactly the given resourceVersion.
    Exact,
}

impl ResourceVersionMatch {
    /// The wire spelling (`""`, `NotOlderThan`, `Exact`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "",
            Self::NotOlderThan => "NotOlderThan",
            Self::Exact => "Exact",
        }
    }
}

impl fmt::Display for ResourceVersionMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown `resourceVersionMatch` value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown ResourceVersionMatch value: {0}")]
pub struct UnknownResourceVersionMatch(pub String);

impl FromStr for ResourceVersionMatch {
    type Err = UnknownResourceVersionMatch;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "" => Ok(Self::Unset),
            "NotOlderThan" => Ok(Self::NotOlderThan),
            "Exact" => Ok(Self::Exact),
            other => Err(UnknownResourceVersionMatch(other.to_owned())),
        }
    }
}

/// Options of [`Storage::list`](crate::Storage::list) and [`Storage::watch`](crate::Storage::watch).
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// The resourceVersion to list at or watch from; empty for "latest".
    pub resource_version: String,
    /// How `resource_version` is interpreted by lists.
    pub resource_version_match: ResourceVersionMatch,
    /// Selectors, limit and continue token.
    pub predicate: SelectionPredicate,
    /// List or watch everything under the key as a prefix (`key/`), rather than the one key.
    pub recursive: bool,
    /// Ask the backend for progress notifications (turned into bookmarks; etcd's
    /// progress notify).
    pub progress_notify: bool,
    /// Watch only: send the current state first (`sendInitialEvents`).
    pub send_initial_events: Option<bool>,
}

impl ListOptions {
    /// Options for everything under a key prefix (`recursive`), the usual list or watch
    /// of a resource or a namespace. The default options read one key: a list of a
    /// prefix without `recursive` finds nothing, as in kube-apiserver.
    ///
    /// ```
    /// use apistore_storage::ListOptions;
    ///
    /// let options = ListOptions::prefix().labels("app=web")?.limit(500);
    /// assert!(options.recursive);
    /// assert_eq!(options.predicate.limit, 500);
    /// # Ok::<(), apistore_storage::SelectorError>(())
    /// ```
    pub fn prefix() -> Self {
        Self {
            recursive: true,
            ..Self::default()
        }
    }

    /// Only objects with these labels (builder style); the selector is parsed here.
    pub fn labels(mut self, selector: &str) -> Result<Self, crate::SelectorError> {
        self.predicate.label = crate::LabelSelector::parse(selector)?;
        Ok(self)
    }

    /// Only objects with these fields (builder style); the selector is parsed here.
    pub fn fields(mut self, selector: &str) -> Result<Self, crate::SelectorError> {
        self.predicate.field = crate::FieldSelector::parse(selector)?;
        Ok(self)
    }

    /// At most `limit` items per page (builder style).
    pub fn limit(mut self, limit: i64) -> Self {
        self.predicate.limit = limit;
        self
    }

    /// Continue a previous page (builder style).
    pub fn continue_from(mut self, token: impl Into<String>) -> Self {
        self.predicate.continue_token = token.into();
        self
    }

    /// List at, or watch from, a resourceVersion (builder style).
    pub fn at(
        mut self,
        resource_version: impl Into<String>,
        matching: ResourceVersionMatch,
    ) -> Self {
        self.resource_version = resource_version.into();
        self.resource_version_match = matching;
        self
    }

    /// Accept bookmarks on a watch (builder style).
    pub fn bookmarks(mut self) -> Self {
        self.predicate.allow_watch_bookmarks = true;
        self
    }
}

/// Conditions a delete or update checks against the stored object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Preconditions {
    /// The object's uid must be this.
    pub uid: Option<String>,
    /// The object's resourceVersion must be this.
    pub resource_version: Option<String>,
}

impl Preconditions {
    /// Preconditions on the uid only.
    pub fn uid(uid: impl Into<String>) -> Self {
        Self {
            uid: Some(uid.into()),
            resource_version: None,
        }
    }

    /// Preconditions on the resourceVersion only.
    pub fn resource_version(resource_version: impl Into<String>) -> Self {
        Self {
            uid: None,
            resource_version: Some(resource_version.into()),
        }
    }

    /// Checks `object` (stored under `key`); a mismatch is an invalid-object error worded
    /// as kube-apiserver words it.
    pub fn check(&self, key: &str, object: &dyn ApiObject) -> Result<()> {
        if let Some(uid) = &self.uid {
            if uid != object.uid() {
                return Err(StorageError::InvalidObject {
                    key: key.to_owned(),
                    message: format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        object.uid()
                    ),
                });
            }
        }
        if let Some(rv) = &self.resource_version {
            if rv != object.resource_version() {
                return Err(StorageError::InvalidObject {
                    key: key.to_owned(),
                    message: format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                        object.resource_version()
                    ),
                });
            }
        }
        Ok(())
    }
}

/// What the store knows about the current object when it calls an update function.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResponseMeta {
    /// The TTL of the object's lease, 0 when it has none or it is unknown.
    pub ttl: i64,
    /// The object's resourceVersion (the backend's revision of its last write; etcd's
    /// mod revision), 0 when it does not exist.
    pub resource_version: u64,
}

/// The result of an update function: the new object, and optionally a TTL in seconds
/// for it (a write without TTL drops any earlier expiry, as a write without a lease
/// does in etcd).
#[derive(Debug, Clone, PartialEq)]
pub struct Update<T> {
    /// The object to store.
    pub object: T,
    /// Seconds until the backend deletes the object, if it should expire.
    pub ttl: Option<u64>,
}

impl<T> Update<T> {
    /// An update that stores `object` with no TTL.
    pub fn new(object: T) -> Self {
        Self { object, ttl: None }
    }

    /// Sets a TTL in seconds.
    pub fn with_ttl(mut self, ttl: u64) -> Self {
        self.ttl = Some(ttl);
        self
    }
}

impl<T> From<T> for Update<T> {
    fn from(object: T) -> Self {
        Self::new(object)
    }
}

/// A validation run on the current object before it is deleted (kube-apiserver's
/// `ValidateObjectFunc`).
pub type ValidateObjectFn<T> = Box<dyn Fn(&T) -> Result<()> + Send + Sync>;

/// Options of [`Storage::delete`](crate::Storage::delete).
pub struct DeleteOptions<T> {
    /// Conditions on the object to delete.
    pub preconditions: Option<Preconditions>,
    /// A check of the object to delete; an error aborts the delete.
    pub validate_deletion: Option<ValidateObjectFn<T>>,
    /// The object as the caller last saw it, to save a read when it is still current.
    pub cached_existing_object: Option<T>,
    /// Delete a value that cannot be decrypted or decoded, and only such a value (kube's
    /// `ExpectTransformOrDecodeError`, 1.37; `IgnoreStoreReadError` from 1.32, behind
    /// its `AllowUnsafeMalformedObjectDeletion` gate): the value is deleted at the
    /// revision it was read at without being read into an object, a readable value is
    /// refused as an invalid object, and a cached object is ignored. Preconditions
    /// cannot be checked on what cannot be read (an error when set), the deletion
    /// validation is not run, and the result is the empty object with the deletion's
    /// resourceVersion. For breaking glass only: the normal flow leaves it false.
    pub expect_transform_or_decode_error: bool,
}

impl<T> Default for DeleteOptions<T> {
    fn default() -> Self {
        Self {
            preconditions: None,
            validate_deletion: None,
            cached_existing_object: None,
            expect_transform_or_decode_error: false,
        }
    }
}

impl<T> fmt::Debug for DeleteOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeleteOptions")
            .field("preconditions", &self.preconditions)
            .field("validate_deletion", &self.validate_deletion.is_some())
            .field(
                "cached_existing_object",
                &self.cached_existing_object.is_some(),
            )
            .field(
                "expect_transform_or_decode_error",
                &self.expect_transform_or_decode_error,
            )
            .finish()
    }
}

/// Options of [`Storage::guaranteed_update`](crate::Storage::guaranteed_update).
pub struct UpdateOptions<T> {
    /// When the key is absent, call the update function with a zero-valued object (and
    /// so create it) instead of failing with not-found.
    pub ignore_not_found: bool,
    /// Conditions on the current object.
    pub preconditions: Option<Preconditions>,
    /// The object as the caller last saw it, to save a read when it is still current.
    pub cached_existing_object: Option<T>,
}

impl<T> Default for UpdateOptions<T> {
    fn default() -> Self {
        Self {
            ignore_not_found: false,
            preconditions: None,
            cached_existing_object: None,
        }
    }
}

impl<T> fmt::Debug for UpdateOptions<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpdateOptions")
            .field("ignore_not_found", &self.ignore_not_found)
            .field("preconditions", &self.preconditions)
            .field(
                "cached_existing_object",
                &self.cached_existing_object.is_some(),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DynamicObject;

    #[test]
    fn preconditions_word_failures_like_kube_apiserver() {
        let mut obj = DynamicObject::new("v1", "Pod", "foo");
        obj.metadata.uid = "A".into();
        obj.metadata.resource_version = "5".into();
        assert!(Preconditions::uid("A").check("/k", &obj).is_ok());
        let err = Preconditions::uid("B").check("/k", &obj).unwrap_err();
        assert!(err.is_invalid_object());
        assert_eq!(err.key(), "/k");
        assert!(
            err.to_string()
                .contains("Precondition failed: UID in precondition: B, UID in object meta: A")
        );
        let err = Preconditions::resource_version("4")
            .check("/k", &obj)
            .unwrap_err();
        assert!(err.to_string().contains(
            "Precondition failed: ResourceVersion in precondition: 4, ResourceVersion in object meta: 5"
        ));
        assert!(Preconditions::default().check("/k", &obj).is_ok());
    }

    #[test]
    fn resource_version_match_parses_known_values_only() {
        assert_eq!("".parse(), Ok(ResourceVersionMatch::Unset));
        assert_eq!("Exact".parse(), Ok(ResourceVersionMatch::Exact));
        assert_eq!(
            "NotOlderThan".parse(),
            Ok(ResourceVersionMatch::NotOlderThan)
        );
        let err = "Invalid".parse::<ResourceVersionMatch>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown ResourceVersionMatch value: Invalid"
        );
    }
}
