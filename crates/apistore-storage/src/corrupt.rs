//! Corrupt objects: stored values that cannot be decrypted or decoded, told apart from
//! every other internal error by type, and a list's corrupt objects gathered into one
//! error.
//!
//! Follows kube-apiserver 1.32+ (`pkg/storage/errors.go`'s `ErrCodeCorruptObj` and
//! `IsCorruptObject`, `etcd3/corrupt_obj_deleter.go`): a failed transform or decode is
//! a [`CorruptObjectError`] carried as the source of the store's internal error, whose
//! message stays kube's (`unable to transform value: …`). With kube's
//! `AllowUnsafeMalformedObjectDeletion` gate (on by default from 1.37) a list goes past
//! corrupt objects and fails at its end with every one of them named, up to
//! [`MAX_CORRUPT_OBJECTS_IN_LIST`] ([`StoreReadErrors`]); without it, a list fails at the
//! first, as before 1.37.

use std::fmt;

use crate::error::{BoxError, StorageError};
use crate::status::{Status, StatusCause, StatusDetails, StatusReason};

/// How many corrupt objects a list gathers before it stops reading (kube's
/// `maxCorruptObjErrsToAggregate`).
pub const MAX_CORRUPT_OBJECTS_IN_LIST: usize = 100;

/// The message of the cause a list adds when it stopped at
/// [`MAX_CORRUPT_OBJECTS_IN_LIST`].
pub const TOO_MANY_CORRUPT_OBJECTS: &str = "too many errors, the list is truncated";

/// Why a stored value is corrupt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CorruptReason {
    /// The value transformer could not read it back (wrong or missing key, bad bytes).
    Untransformable,
    /// It was read back but the codec could not decode it.
    Undecodable,
}

impl CorruptReason {
    /// kube-apiserver's words for this reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Untransformable => "data from the storage is not transformable",
            Self::Undecodable => "object not decodable",
        }
    }
}

/// A stored value that could not be decrypted or decoded: the source of the internal
/// error a read of it returns ([`StorageError::corrupt_object`]). Only such a value may
/// be deleted unread ([`crate::DeleteOptions::expect_transform_or_decode_error`]).
#[derive(Debug, thiserror::Error)]
#[error("{} revision={revision}: {source}", reason.as_str())]
pub struct CorruptObjectError {
    /// Whether the transform or the decode failed.
    pub reason: CorruptReason,
    /// The mod revision of the value where the store knew it, else 0 (kube records it
    /// for decode failures only).
    pub revision: i64,
    /// The transformer's or codec's error.
    #[source]
    pub source: BoxError,
}

impl CorruptObjectError {
    /// A value the transformer could not read back.
    pub fn untransformable(source: BoxError) -> Self {
        Self {
            reason: CorruptReason::Untransformable,
            revision: 0,
            source,
        }
    }

    /// A value the codec could not decode, stored at mod revision `revision`.
    pub fn undecodable(revision: i64, source: BoxError) -> Self {
        Self {
            reason: CorruptReason::Undecodable,
            revision,
            source,
        }
    }
}

/// One corrupt object a list met: its stored key and its error.
#[derive(Debug)]
pub struct CorruptListItem {
    /// The stored key of the value.
    pub key: String,
    /// The read's error, whose source is a [`CorruptObjectError`].
    pub error: StorageError,
}

impl CorruptListItem {
    /// The item as kube's `StorageError` of code 7 prints it, the text of its cause.
    fn kube_text(&self) -> String {
        let detail = match self.error.corrupt_object() {
            Some(corrupt) => corrupt.to_string(),
            None => self.error.to_string(),
        };
        format!(
            "StorageError: corrupt object, Code: 7, Key: {}, ResourceVersion: 0, AdditionalErrorMsg: {detail}",
            self.key
        )
    }
}

/// The corrupt objects one list met, in key order, and why it stopped early if it did
/// (kube's `aggregatedStorageError`).
#[derive(Debug)]
pub struct StoreReadErrors {
    /// The group-resource listed (`pods`, `deployments.apps`), as kube names it in the
    /// message.
    pub group_resource: String,
    /// The corrupt objects, at least one.
    pub items: Vec<CorruptListItem>,
    /// Whether the list stopped at [`MAX_CORRUPT_OBJECTS_IN_LIST`].
    pub truncated: bool,
    /// The error of another kind that stopped the list, if one did.
    pub aborted: Option<String>,
}

impl StoreReadErrors {
    /// kube-apiserver's message: the first object's error, and how many more there are.
    pub fn message(&self) -> String {
        let first = self
            .items
            .first()
            .map(CorruptListItem::kube_text)
            .unwrap_or_default();
        let mut message = format!(
            "failed to read one or more {} from the storage: {first}",
            self.group_resource
        );
        if self.items.len() > 1 {
            message.push_str(&format!(" (and {} more)", self.items.len() - 1));
        }
        message
    }

    /// The stored keys of the corrupt objects, in key order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.items.iter().map(|item| item.key.as_str())
    }

    /// The 500 `StoreReadError` status kube-apiserver answers with: one cause per
    /// corrupt object (its key as the field), and a `FieldValueTooMany` cause when the
    /// list was cut short.
    pub fn status(&self) -> Status {
        let mut status = Status::failure(500, StatusReason::StoreReadError, self.message());
        let (group, resource) = match self.group_resource.split_once('.') {
            Some((resource, group)) => (group, resource),
            None => ("", self.group_resource.as_str()),
        };
        let mut causes: Vec<StatusCause> = self
            .items
            .iter()
            .map(|item| StatusCause {
                reason: "UnexpectedServerResponse".to_owned(),
                message: item.kube_text(),
                field: item.key.clone(),
            })
            .collect();
        if self.truncated {
            causes.push(StatusCause {
                reason: "FieldValueTooMany".to_owned(),
                message: TOO_MANY_CORRUPT_OBJECTS.to_owned(),
                field: String::new(),
            });
        } else if let Some(aborted) = &self.aborted {
            causes.push(StatusCause {
                reason: "UnexpectedServerResponse".to_owned(),
                message: aborted.clone(),
                field: String::new(),
            });
        }
        status.details = Some(StatusDetails {
            name: "list".to_owned(),
            group: group.to_owned(),
            kind: resource.to_owned(),
            causes,
            retry_after_seconds: None,
        });
        status
    }
}

impl fmt::Display for StoreReadErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message())
    }
}
