//! kube-apiserver's `Status` object (`meta.k8s.io/v1`), the shape of an API error on the
//! wire and of a watch `ERROR` event's object.

use serde::{Deserialize, Serialize};

/// The reason of a failed [`Status`], as kube-apiserver spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StatusReason {
    /// 404.
    NotFound,
    /// 409 on create.
    AlreadyExists,
    /// 409 on update or delete.
    Conflict,
    /// 410.
    Expired,
    /// 504.
    Timeout,
    /// 503.
    ServiceUnavailable,
    /// 400.
    BadRequest,
    /// 422.
    Invalid,
    /// 500.
    InternalError,
    /// 500 for stored data that could not be read back (kube 1.32+'s
    /// `StatusReasonStoreReadError`: a list's corrupt objects, a watch's delete of one).
    StoreReadError,
}

impl StatusReason {
    /// The reason's wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotFound => "NotFound",
            Self::AlreadyExists => "AlreadyExists",
            Self::Conflict => "Conflict",
            Self::Expired => "Expired",
            Self::Timeout => "Timeout",
            Self::ServiceUnavailable => "ServiceUnavailable",
            Self::BadRequest => "BadRequest",
            Self::Invalid => "Invalid",
            Self::InternalError => "InternalError",
            Self::StoreReadError => "StorageReadError",
        }
    }
}

/// `metav1.Status`, serialised exactly as kube-apiserver does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    /// Always `Status`.
    pub kind: String,
    /// Always `v1`.
    pub api_version: String,
    /// List metadata; carries `continue` for a 410 on a continued list.
    #[serde(default)]
    pub metadata: StatusListMeta,
    /// `Success` or `Failure`.
    pub status: String,
    /// A human-readable description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The machine-readable reason (`NotFound`, `Conflict`, ...).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Extra details.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<StatusDetails>,
    /// The HTTP status code.
    #[serde(default)]
    pub code: u16,
}

/// The list metadata of a [`Status`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusListMeta {
    /// A continue token to resume a list from the latest revision.
    #[serde(rename = "continue", default, skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// `metav1.StatusDetails`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDetails {
    /// The name of the object the failure is about (`list` for a list's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its API group.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Its kind (kube puts the resource here for a list's store-read failure).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kind: String,
    /// The causes of the failure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub causes: Vec<StatusCause>,
    /// Seconds after which the client may retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_seconds: Option<u32>,
}

/// `metav1.StatusCause`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatusCause {
    /// The cause type (serialised as `reason`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// A description.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The field the cause is about.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
}

impl Status {
    /// A failure status with the given code, reason and message.
    pub fn failure(code: u16, reason: StatusReason, message: impl Into<String>) -> Self {
        Self {
            kind: "Status".to_owned(),
            api_version: "v1".to_owned(),
            metadata: StatusListMeta::default(),
            status: "Failure".to_owned(),
            message: message.into(),
            reason: reason.as_str().to_owned(),
            details: None,
            code,
        }
    }
}
