//! The crate's error type: every failure names the kind and, where there is one, the
//! field path (`spec.containers[0].ports[1].containerPort`) it is about.

use apistore_storage::KubeVersion;

/// An error from decoding stored protobuf or encoding JSON into it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtobufError {
    /// The bytes do not start with `k8s\0`, so they are not kube's protobuf.
    #[error("not kube protobuf: the value does not start with the k8s\\0 magic")]
    NotProtobuf,
    /// The runtime.Unknown envelope around the object is malformed.
    #[error(
        "malformed runtime.Unknown envelope{}: {reason}",
        of_kind(api_version, kind)
    )]
    Envelope {
        /// The apiVersion in the envelope's typeMeta, if it was read before the fault.
        api_version: Option<String>,
        /// The kind in the envelope's typeMeta, if it was read before the fault.
        kind: Option<String>,
        /// What was wrong.
        reason: String,
    },
    /// The apiVersion/kind is not one the embedded schema knows.
    #[error(
        "unknown kind {kind:?} in apiVersion {api_version:?}: the kube {version} protobuf schema has no such built-in kind{}",
        unknown_kind_hint(api_version, kind, *version)
    )]
    UnknownKind {
        /// The apiVersion asked for.
        api_version: String,
        /// The kind asked for.
        kind: String,
        /// The kube version of the schema asked.
        version: KubeVersion,
    },
    /// A write would drop fields of the value it replaces that the schema has no name
    /// for (a newer kube wrote them), and they cannot be carried into the new bytes.
    #[error(transparent)]
    WouldDropFields(Box<WouldDropFields>),
    /// A field read by path (`LazyObject::field_str`) is there but not a scalar that
    /// reads as text: an object, a list, a float, or a path through a scalar.
    #[error("reading {kind} field {path} as text: {reason}")]
    NotText {
        /// The object's kind.
        kind: String,
        /// The field path asked for, dotted.
        path: String,
        /// What the value is instead.
        reason: String,
    },
    /// The object's protobuf bytes are malformed.
    #[error("decoding {kind} protobuf at {path}: {reason}")]
    Decode {
        /// The kind being decoded.
        kind: String,
        /// The field path, `.` for the object itself.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The protobuf is well formed but the target type refused a value (a missing
    /// field, a type mismatch): what `serde_json` would say reading the same JSON.
    #[error("deserializing {kind} at {path}: {reason}")]
    Deserialize {
        /// The kind being decoded.
        kind: String,
        /// The field path, `.` for the object itself.
        path: String,
        /// What the target type said.
        reason: String,
    },
    /// The JSON could not be encoded as the kind's protobuf.
    #[error("encoding {kind} as protobuf at {path}: {reason}")]
    Encode {
        /// The kind being encoded.
        kind: String,
        /// The field path, `.` for the object itself.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// The JSON has a field the kind's Go type does not have.
    #[error("unknown field {path:?} in {kind}")]
    UnknownField {
        /// The kind being encoded.
        kind: String,
        /// The path of the unknown field.
        path: String,
    },
    /// A stored value that is not kube protobuf is not a JSON API object either.
    #[error("stored value is neither kube protobuf nor a JSON API object: {reason}")]
    StoredJson {
        /// What `serde_json` said.
        reason: String,
    },
    /// The JSON text itself is not valid JSON.
    #[error("invalid JSON at byte {offset}: {reason}")]
    Json {
        /// Byte offset of the problem.
        offset: usize,
        /// What was wrong.
        reason: String,
    },
}

/// Why a write was refused rather than drop fields of the value it replaces
/// ([`ProtobufError::WouldDropFields`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "refusing to write this {kind}: the stored value holds fields the kube {version} schema does not know ({fields}) under {path}, and {reason}, so the write would drop them; {fix}"
)]
pub struct WouldDropFields {
    /// The kind being written.
    pub kind: String,
    /// The kube version of the schema used.
    pub version: KubeVersion,
    /// The JSON path of the message the fields could not be placed in.
    pub path: String,
    /// The fields, each with its protobuf number and the kube version that has it.
    pub fields: String,
    /// Why they cannot be carried.
    pub reason: String,
    /// What to do instead.
    pub fix: String,
}

/// ` of Pod in v1` for an envelope whose typeMeta was read, else nothing.
fn of_kind(api_version: &Option<String>, kind: &Option<String>) -> String {
    match (api_version.as_deref(), kind.as_deref()) {
        (Some(av), Some(k)) => format!(" of {k:?} in {av:?}"),
        (None, Some(k)) => format!(" of {k:?}"),
        (Some(av), None) => format!(" in {av:?}"),
        (None, None) => String::new(),
    }
}

/// Where an unknown kind can be read instead: a newer schema that has it, or JSON.
fn unknown_kind_hint(api_version: &str, kind: &str, version: KubeVersion) -> String {
    let newer = KubeVersion::ALL
        .iter()
        .copied()
        .filter(|v| *v > version)
        .find(|v| crate::KubeProtobuf::for_version(*v).knows(api_version, kind));
    match newer {
        Some(v) => format!(" (kube {v} has it: choose --kube-version {v} or newer)"),
        None => " (custom resources and kinds of aggregated servers are stored as JSON)".to_owned(),
    }
}

/// The crate's result type.
pub type Result<T, E = ProtobufError> = std::result::Result<T, E>;

/// One step of a field path, kept as a stack while walking and formatted only when
/// an error needs it.
#[derive(Debug, Clone)]
pub(crate) enum Step<'a> {
    Field(&'a str),
    Index(usize),
    Key(String),
    /// A map key as the value holds it (Go string bytes, not always UTF-8): read
    /// only if an error names the path, so walking a map allocates nothing for it.
    RawKey(&'a [u8]),
}

/// Formats a path stack as `spec.containers[0].env["X"]`, `.` when empty.
pub(crate) fn format_path(steps: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Field(name) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(name);
            }
            Step::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
            Step::Key(k) => out.push_str(&format!("[{k:?}]")),
            Step::RawKey(k) => out.push_str(&format!("[{:?}]", String::from_utf8_lossy(k))),
        }
    }
    if out.is_empty() {
        out.push('.');
    }
    out
}
