//! Label values with a fixed vocabulary, as kube-apiserver spells them.
//!
//! Follows `pkg/storage/etcd3/store.go` (the `operation` label of `etcd_request_*`) and
//! `pkg/storage/value/metrics.go` (`transformation_type`, `status`).

use std::fmt;

use apistore_storage::KubeVersion;

/// The `operation` label of `etcd_request_duration_seconds`, `etcd_requests_total` and
/// `etcd_request_errors_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// `get`: a single-key read (Get, the state refresh of GuaranteedUpdate and Delete,
    /// a non-recursive list, a non-recursive watch's initial read).
    Get,
    /// `list`: a range read (recursive GetList, a recursive watch's initial read).
    List,
    /// `create`: the create transaction.
    Create,
    /// `update`: the update transaction of GuaranteedUpdate.
    Update,
    /// `delete`: the delete transaction.
    Delete,
    /// `listWithCount`: a count-only range read (Count).
    ListWithCount,
    /// `listStream`: a recursive GetList read with one etcd `RangeStream` (kube 1.37's
    /// `EtcdRangeStream`, on etcd 3.7 and later), recorded once for the whole stream.
    ListStream,
    /// `listOnlyKeys`: the keys-only range the size estimator of kube 1.34+ reads
    /// (labelled `list` before 1.34).
    ListOnlyKeys,
    /// `getCurrentResourceVersion`: the read of etcd's current revision (kube 1.37's
    /// label; `get` before).
    GetCurrentResourceVersion,
}

impl Operation {
    /// Every operation, in declaration order.
    pub const ALL: [Self; 9] = [
        Self::Get,
        Self::List,
        Self::Create,
        Self::Update,
        Self::Delete,
        Self::ListWithCount,
        Self::ListStream,
        Self::ListOnlyKeys,
        Self::GetCurrentResourceVersion,
    ];

    /// The label value, exactly as kube-apiserver writes it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::List => "list",
            Self::Create => "create",
            Self::Update => "update",
            Self::Delete => "delete",
            Self::ListWithCount => "listWithCount",
            Self::ListStream => "listStream",
            Self::ListOnlyKeys => "listOnlyKeys",
            Self::GetCurrentResourceVersion => "getCurrentResourceVersion",
        }
    }

    /// The label value kube-apiserver of `version` writes for this request: the
    /// operations later minors named are labelled as the request they were before.
    pub fn label_at(self, version: KubeVersion) -> &'static str {
        match self {
            Self::ListOnlyKeys if version < KubeVersion::V1_34 => Self::List.as_str(),
            Self::GetCurrentResourceVersion if version < KubeVersion::V1_37 => Self::Get.as_str(),
            other => other.as_str(),
        }
    }

    /// A dense index, for per-operation handle tables.
    pub(crate) const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `transformation_type` label of the transformation metrics: the contract's type,
/// which the transformers report with.
pub use apistore_storage::TransformationType;

/// The `status` label of a successful transformation.
pub const STATUS_OK: &str = "OK";

/// The `status` label of a failed transformation whose error carries no gRPC status.
pub const STATUS_UNKNOWN_NON_GRPC: &str = "unknown-non-grpc";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_labels_match_kube_apiserver() {
        let labels: Vec<_> = Operation::ALL.iter().map(|op| op.as_str()).collect();
        assert_eq!(
            labels,
            [
                "get",
                "list",
                "create",
                "update",
                "delete",
                "listWithCount",
                "listStream",
                "listOnlyKeys",
                "getCurrentResourceVersion"
            ]
        );
        for (i, op) in Operation::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
    }

    #[test]
    fn operations_named_later_keep_their_old_label_before() {
        use KubeVersion::{V1_33, V1_34, V1_36, V1_37};
        assert_eq!(Operation::ListOnlyKeys.label_at(V1_33), "list");
        assert_eq!(Operation::ListOnlyKeys.label_at(V1_34), "listOnlyKeys");
        assert_eq!(Operation::GetCurrentResourceVersion.label_at(V1_36), "get");
        assert_eq!(
            Operation::GetCurrentResourceVersion.label_at(V1_37),
            "getCurrentResourceVersion"
        );
        assert_eq!(Operation::Create.label_at(V1_33), "create");
    }

    #[test]
    fn transformation_type_labels_match_kube_apiserver() {
        assert_eq!(TransformationType::FromStorage.to_string(), "from_storage");
        assert_eq!(TransformationType::ToStorage.to_string(), "to_storage");
    }
}
