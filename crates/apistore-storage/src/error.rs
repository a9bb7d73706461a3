//! Storage errors with kube-apiserver's kinds.
//!
//! Follows `pkg/storage/errors.go` and the way kube-apiserver's registry turns storage
//! errors into API statuses (`pkg/storage/errors/storage.go`). Every error carries the
//! key it is about (the prepared etcd key where there is one) so that a message in a log
//! or on a terminal always says which object went wrong.

use std::fmt;

use crate::corrupt::{CorruptObjectError, StoreReadErrors};
use crate::status::{Status, StatusCause, StatusReason};

/// A boxed error from a lower layer (etcd client, codec, transformer).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// `Result` with [`StorageError`] as its default error.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// The cause type of [`StorageError::ResourceVersionTooLarge`] in a [`Status`].
pub const CAUSE_RESOURCE_VERSION_TOO_LARGE: &str = "ResourceVersionTooLarge";

/// Message of kube-apiserver's `ErrResourceVersionSetOnCreate`.
pub const RESOURCE_VERSION_SET_ON_CREATE: &str =
    "resourceVersion should not be set on objects to be created";

/// The kind of a [`StorageError`], one per kube-apiserver storage error code, plus the
/// request-level kinds the store raises itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The key does not exist (storage code 1).
    NotFound,
    /// The key already exists (storage code 2).
    KeyExists,
    /// A write lost a compare-and-swap race (storage code 3).
    Conflict,
    /// Preconditions or validation refused the object (storage code 4).
    InvalidObject,
    /// etcd could not be reached (storage code 5).
    Unreachable,
    /// The request did not complete in time (storage code 6).
    Timeout,
    /// The requested resourceVersion is newer than etcd's revision.
    ResourceVersionTooLarge,
    /// The requested revision was compacted away (410).
    Expired,
    /// A field of the request is invalid (422).
    Invalid,
    /// The key is malformed (empty, or with `.`/`..` segments).
    InvalidKey,
    /// The request is malformed (bad resourceVersion, bad continue token, ...).
    BadRequest,
    /// A status returned by caller code (update or validation functions), passed through.
    Api,
    /// Anything else: undecryptable or undecodable data, unexpected etcd answers.
    Internal,
    /// A list met stored values that cannot be decrypted or decoded and names them all
    /// (500 `StoreReadError`, kube 1.37's default).
    StoreRead,
}

/// An error from a storage operation.
///
/// Each variant names the key it is about; [`StorageError::status`] gives the HTTP status,
/// reason and message kube-apiserver would answer with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// The key does not exist.
    #[error("key not found: {key:?}")]
    NotFound {
        /// The prepared etcd key.
        key: String,
        /// The revision at which the key was found missing, 0 when unknown.
        resource_version: u64,
    },
    /// A create found the key already present.
    #[error("key exists: {key:?}")]
    KeyExists {
        /// The prepared etcd key.
        key: String,
        /// The revision of the existing key, 0 when unknown.
        resource_version: u64,
    },
    /// A write conflicted with another writer.
    #[error("resource version conflicts for {key:?}: {message}")]
    Conflict {
        /// The prepared etcd key.
        key: String,
        /// What conflicted.
        message: String,
    },
    /// Preconditions or validation refused the object.
    #[error("invalid object {key:?}: {message}")]
    InvalidObject {
        /// The prepared etcd key.
        key: String,
        /// What was refused, e.g. `Precondition failed: UID in precondition: B, UID in object meta: A`.
        message: String,
    },
    /// A resourceVersion newer than etcd's current revision was asked for.
    #[error("Too large resource version: {requested}, current: {current} (key {key:?})")]
    ResourceVersionTooLarge {
        /// The key of the request.
        key: String,
        /// The resourceVersion that was asked for.
        requested: u64,
        /// etcd's revision when the request was served.
        current: u64,
        /// Seconds after which a retry may succeed (0 for get and list).
        retry_after_seconds: u32,
    },
    /// The revision asked for has been compacted away.
    #[error("{message} (key {key:?})")]
    Expired {
        /// The key of the request.
        key: String,
        /// kube-apiserver's message for this case.
        message: String,
        /// For a list continued past compaction: a token that continues from the latest
        /// revision instead (an inconsistent but complete continuation).
        continue_token: Option<String>,
    },
    /// The request did not complete in time.
    #[error("request did not complete within requested timeout (key {key:?}): {message}")]
    Timeout {
        /// The key of the request.
        key: String,
        /// What timed out.
        message: String,
    },
    /// etcd could not be reached.
    #[error("etcd is unreachable (key {key:?}): {source}")]
    Unreachable {
        /// The key of the request.
        key: String,
        /// The transport error.
        #[source]
        source: BoxError,
    },
    /// The key is malformed; nothing was sent to etcd.
    #[error("{problem}: {key:?}")]
    InvalidKey {
        /// The key as the caller gave it.
        key: String,
        /// `invalid key` or `empty key`, as kube-apiserver words it.
        problem: &'static str,
    },
    /// A field of the request is invalid.
    #[error("{field}: Invalid value: {value:?}: {message}{}", key_suffix(key))]
    Invalid {
        /// The key of the request.
        key: String,
        /// The field path, e.g. `resourceVersion`.
        field: String,
        /// The offending value.
        value: String,
        /// Why it is invalid.
        message: String,
    },
    /// The request is malformed.
    #[error("{message} (key {key:?})")]
    BadRequest {
        /// The key of the request.
        key: String,
        /// What is wrong, e.g. `invalid resource version: "abc"`.
        message: String,
    },
    /// An object to be created already carries a resourceVersion.
    #[error("resourceVersion should not be set on objects to be created (key {key:?})")]
    ResourceVersionSetOnCreate {
        /// The prepared etcd key.
        key: String,
    },
    /// A status returned by caller code (an update or validation function), passed through.
    #[error("{} (key {key:?})", status.message)]
    Api {
        /// The key of the request.
        key: String,
        /// The status the caller's function produced.
        status: Box<Status>,
    },
    /// Stored data could not be turned back into an object, or etcd answered unexpectedly.
    #[error("{message} (key {key:?})")]
    Internal {
        /// The key of the request.
        key: String,
        /// What went wrong.
        message: String,
        /// The underlying error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A list met values that cannot be decrypted or decoded, and went past them to name
    /// them all (kube's `AllowUnsafeMalformedObjectDeletion`, on by default from 1.37).
    #[error("{errors} (key {key:?})")]
    StoreRead {
        /// The key prefix of the list.
        key: String,
        /// The corrupt objects, in key order.
        errors: Box<StoreReadErrors>,
    },
}

impl StorageError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotFound { .. } => ErrorKind::NotFound,
            Self::KeyExists { .. } => ErrorKind::KeyExists,
            Self::Conflict { .. } => ErrorKind::Conflict,
            Self::InvalidObject { .. } => ErrorKind::InvalidObject,
            Self::ResourceVersionTooLarge { .. } => ErrorKind::ResourceVersionTooLarge,
            Self::Expired { .. } => ErrorKind::Expired,
            Self::Timeout { .. } => ErrorKind::Timeout,
            Self::Unreachable { .. } => ErrorKind::Unreachable,
            Self::InvalidKey { .. } => ErrorKind::InvalidKey,
            Self::Invalid { .. } => ErrorKind::Invalid,
            Self::BadRequest { .. } | Self::ResourceVersionSetOnCreate { .. } => {
                ErrorKind::BadRequest
            }
            Self::Api { .. } => ErrorKind::Api,
            Self::Internal { .. } => ErrorKind::Internal,
            Self::StoreRead { .. } => ErrorKind::StoreRead,
        }
    }

    /// The key this error is about.
    pub fn key(&self) -> &str {
        match self {
            Self::NotFound { key, .. }
            | Self::KeyExists { key, .. }
            | Self::Conflict { key, .. }
            | Self::InvalidObject { key, .. }
            | Self::ResourceVersionTooLarge { key, .. }
            | Self::Expired { key, .. }
            | Self::Timeout { key, .. }
            | Self::Unreachable { key, .. }
            | Self::InvalidKey { key, .. }
            | Self::Invalid { key, .. }
            | Self::BadRequest { key, .. }
            | Self::ResourceVersionSetOnCreate { key }
            | Self::Api { key, .. }
            | Self::Internal { key, .. }
            | Self::StoreRead { key, .. } => key,
        }
    }

    /// kube-apiserver's storage error code (`ErrCodeKeyNotFound` = 1, ...), for the kinds
    /// that have one.
    pub fn storage_code(&self) -> Option<u8> {
        match self.kind() {
            ErrorKind::NotFound => Some(1),
            ErrorKind::KeyExists => Some(2),
            ErrorKind::Conflict => Some(3),
            ErrorKind::InvalidObject => Some(4),
            ErrorKind::Unreachable => Some(5),
            ErrorKind::Timeout => Some(6),
            _ => None,
        }
    }

    /// Whether this is a not-found error.
    pub fn is_not_found(&self) -> bool {
        self.kind() == ErrorKind::NotFound
    }

    /// Whether this is a key-exists error.
    pub fn is_exists(&self) -> bool {
        self.kind() == ErrorKind::KeyExists
    }

    /// Whether kube-apiserver would answer this error with 409 Conflict: a
    /// resourceVersion conflict, a failed precondition (kube's registry turns
    /// `InvalidObject` into 409 Conflict), or a conflict status passed through from caller
    /// code. "Already exists" is a 409 too, but not a conflict: see [`Self::is_exists`].
    pub fn is_conflict(&self) -> bool {
        match self {
            Self::Conflict { .. } | Self::InvalidObject { .. } => true,
            Self::Api { status, .. } => status.reason == StatusReason::Conflict.as_str(),
            _ => false,
        }
    }

    /// Whether this is an invalid-object (failed precondition or validation) error.
    pub fn is_invalid_object(&self) -> bool {
        self.kind() == ErrorKind::InvalidObject
    }

    /// Whether this is a too-large-resourceVersion error. Like kube-apiserver's, it is also a
    /// timeout in the API sense (504).
    pub fn is_too_large_resource_version(&self) -> bool {
        self.kind() == ErrorKind::ResourceVersionTooLarge
    }

    /// Whether this is an internal error.
    pub fn is_internal(&self) -> bool {
        self.kind() == ErrorKind::Internal
    }

    /// Whether this is a 410 (compacted revision) error, including a 410 status that a
    /// watch's error event carried.
    pub fn is_expired(&self) -> bool {
        match self {
            Self::Api { status, .. } => status.code == 410,
            _ => self.kind() == ErrorKind::Expired,
        }
    }

    /// The corrupt value behind this error: set when a read failed because a stored value
    /// could not be decrypted or decoded (kube's `IsCorruptObject`), whatever the
    /// message says.
    pub fn corrupt_object(&self) -> Option<&CorruptObjectError> {
        match self {
            Self::Internal {
                source: Some(source),
                ..
            } => source.downcast_ref::<CorruptObjectError>(),
            _ => None,
        }
    }

    /// Whether a stored value that cannot be decrypted or decoded caused this error
    /// ([`Self::corrupt_object`]).
    pub fn is_corrupt_object(&self) -> bool {
        self.corrupt_object().is_some()
    }

    /// The corrupt objects a list named ([`ErrorKind::StoreRead`]).
    pub fn store_read_errors(&self) -> Option<&StoreReadErrors> {
        match self {
            Self::StoreRead { errors, .. } => Some(errors),
            _ => None,
        }
    }

    /// Whether this is a bad-request error.
    pub fn is_bad_request(&self) -> bool {
        self.kind() == ErrorKind::BadRequest
    }

    /// The API status kube-apiserver would answer with for this error.
    pub fn status(&self) -> Status {
        let message = self.to_string();
        match self {
            Self::NotFound { .. } => Status::failure(404, StatusReason::NotFound, message),
            Self::KeyExists { .. } => Status::failure(409, StatusReason::AlreadyExists, message),
            // kube-apiserver's registry answers failed preconditions with 409 Conflict.
            Self::Conflict { .. } | Self::InvalidObject { .. } => {
                Status::failure(409, StatusReason::Conflict, message)
            }
            Self::ResourceVersionTooLarge {
                requested,
                current,
                retry_after_seconds,
                ..
            } => {
                let mut status = Status::failure(
                    504,
                    StatusReason::Timeout,
                    format!("Timeout: Too large resource version: {requested}, current: {current}"),
                );
                let details = status.details.get_or_insert_with(Default::default);
                details.retry_after_seconds = Some(*retry_after_seconds);
                details.causes.push(StatusCause {
                    reason: CAUSE_RESOURCE_VERSION_TOO_LARGE.to_owned(),
                    message: "Too large resource version".to_owned(),
                    field: String::new(),
                });
                status
            }
            Self::Expired {
                message,
                continue_token,
                ..
            } => {
                let mut status = Status::failure(410, StatusReason::Expired, message.clone());
                status.metadata.continue_token = continue_token.clone();
                status
            }
            Self::Timeout { .. } => Status::failure(504, StatusReason::Timeout, message),
            Self::Unreachable { .. } => {
                Status::failure(503, StatusReason::ServiceUnavailable, message)
            }
            Self::InvalidKey { .. }
            | Self::BadRequest { .. }
            | Self::ResourceVersionSetOnCreate { .. } => {
                Status::failure(400, StatusReason::BadRequest, message)
            }
            Self::Invalid {
                field,
                value,
                message: why,
                ..
            } => {
                let mut status = Status::failure(422, StatusReason::Invalid, message);
                status
                    .details
                    .get_or_insert_with(Default::default)
                    .causes
                    .push(StatusCause {
                        reason: "FieldValueInvalid".to_owned(),
                        message: format!("Invalid value: {value:?}: {why}"),
                        field: field.clone(),
                    });
                status
            }
            Self::Api { status, .. } => (**status).clone(),
            Self::Internal { .. } => Status::failure(
                500,
                StatusReason::InternalError,
                format!("Internal error occurred: {message}"),
            ),
            Self::StoreRead { errors, .. } => errors.status(),
        }
    }

    /// A not-found error for `key`.
    pub fn not_found(key: impl Into<String>) -> Self {
        Self::NotFound {
            key: key.into(),
            resource_version: 0,
        }
    }

    /// An internal error for `key` with a message and a cause.
    pub fn internal(key: impl Into<String>, message: impl Into<String>, source: BoxError) -> Self {
        Self::Internal {
            key: key.into(),
            message: message.into(),
            source: Some(source),
        }
    }

    /// A bad-request error for `key`.
    pub fn bad_request(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::BadRequest {
            key: key.into(),
            message: message.into(),
        }
    }

    /// A conflict status, as an update function returns when it sees an object it cannot
    /// update (kube-apiserver's `apierrors.NewConflict`).
    pub fn conflict(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Conflict {
            key: key.into(),
            message: message.into(),
        }
    }

    /// Replaces the key this error names (used when a lower layer knew only a partial key).
    pub fn with_key(mut self, new_key: impl Into<String>) -> Self {
        let new_key = new_key.into();
        match &mut self {
            Self::NotFound { key, .. }
            | Self::KeyExists { key, .. }
            | Self::Conflict { key, .. }
            | Self::InvalidObject { key, .. }
            | Self::ResourceVersionTooLarge { key, .. }
            | Self::Expired { key, .. }
            | Self::Timeout { key, .. }
            | Self::Unreachable { key, .. }
            | Self::InvalidKey { key, .. }
            | Self::Invalid { key, .. }
            | Self::BadRequest { key, .. }
            | Self::ResourceVersionSetOnCreate { key }
            | Self::Api { key, .. }
            | Self::Internal { key, .. }
            | Self::StoreRead { key, .. } => *key = new_key,
        }
        self
    }
}

/// ` (key "...")` when the key is known: errors raised before a key exists (parsing a
/// resourceVersion on its own) say nothing about it.
fn key_suffix(key: &str) -> String {
    if key.is_empty() {
        String::new()
    } else {
        format!(" (key {key:?})")
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_conflict_holds_wherever_the_status_is_a_409_conflict() {
        let precondition = StorageError::InvalidObject {
            key: "/registry/pods/a".into(),
            message: "Precondition failed: UID in precondition: B, UID in object meta: A".into(),
        };
        let conflict = StorageError::conflict("/registry/pods/a", "modified");
        for err in [&precondition, &conflict] {
            assert_eq!(err.status().code, 409);
            assert!(err.is_conflict(), "{err}");
        }
        let exists = StorageError::KeyExists {
            key: "/registry/pods/a".into(),
            resource_version: 0,
        };
        assert_eq!(exists.status().code, 409);
        assert!(!exists.is_conflict() && exists.is_exists());
    }

    #[test]
    fn a_watch_error_status_of_410_is_expired() {
        let status = Status::failure(410, StatusReason::Expired, "too old".to_owned());
        let err = StorageError::Api {
            key: "pods".into(),
            status: Box::new(status),
        };
        assert!(err.is_expired());
        let status = Status::failure(500, StatusReason::InternalError, "boom".to_owned());
        let err = StorageError::Api {
            key: "pods".into(),
            status: Box::new(status),
        };
        assert!(!err.is_expired());
    }

    #[test]
    fn invalid_key_message_matches_kube_apiserver() {
        let err = StorageError::InvalidKey {
            key: "/foo/bar/../baz".into(),
            problem: "invalid key",
        };
        assert_eq!(err.to_string(), r#"invalid key: "/foo/bar/../baz""#);
        assert_eq!(err.status().code, 400);
    }

    #[test]
    fn too_large_resource_version_is_a_504_timeout_with_its_cause() {
        let err = StorageError::ResourceVersionTooLarge {
            key: "/registry/pods".into(),
            requested: 102,
            current: 1,
            retry_after_seconds: 2,
        };
        let status = err.status();
        assert_eq!(status.code, 504);
        assert_eq!(status.reason, "Timeout");
        assert_eq!(
            status.message,
            "Timeout: Too large resource version: 102, current: 1"
        );
        let details = status.details.expect("details");
        assert_eq!(details.retry_after_seconds, Some(2));
        assert_eq!(details.causes[0].reason, CAUSE_RESOURCE_VERSION_TOO_LARGE);
    }

    #[test]
    fn every_kind_maps_to_kube_apiserver_status() {
        let cases: Vec<(StorageError, u16, &str)> = vec![
            (StorageError::not_found("k"), 404, "NotFound"),
            (
                StorageError::KeyExists {
                    key: "k".into(),
                    resource_version: 0,
                },
                409,
                "AlreadyExists",
            ),
            (StorageError::conflict("k", "m"), 409, "Conflict"),
            (
                StorageError::InvalidObject {
                    key: "k".into(),
                    message: "m".into(),
                },
                409,
                "Conflict",
            ),
            (
                StorageError::Expired {
                    key: "k".into(),
                    message: "m".into(),
                    continue_token: None,
                },
                410,
                "Expired",
            ),
            (
                StorageError::Timeout {
                    key: "k".into(),
                    message: "m".into(),
                },
                504,
                "Timeout",
            ),
            (
                StorageError::Unreachable {
                    key: "k".into(),
                    source: "down".into(),
                },
                503,
                "ServiceUnavailable",
            ),
            (StorageError::bad_request("k", "m"), 400, "BadRequest"),
            (
                StorageError::Invalid {
                    key: "k".into(),
                    field: "resourceVersion".into(),
                    value: "a".into(),
                    message: "must be a number".into(),
                },
                422,
                "Invalid",
            ),
            (
                StorageError::internal("k", "m", "cause".into()),
                500,
                "InternalError",
            ),
        ];
        for (err, code, reason) in cases {
            let status = err.status();
            assert_eq!(
                (status.code, status.reason.as_str()),
                (code, reason),
                "{err}"
            );
            assert_eq!(err.key(), "k");
        }
    }
}
