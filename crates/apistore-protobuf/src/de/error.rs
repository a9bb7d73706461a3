//! The field path a value is read at, and the deserializer's error.

use std::fmt;

use serde::de;

use crate::error::{ProtobufError, Step, format_path};

/// The field path, as a chain of stack frames' steps; formatted only for errors.
pub(super) struct Path<'p> {
    pub(super) parent: Option<&'p Self>,
    pub(super) step: PathStep<'p>,
}

#[derive(Clone, Copy)]
pub(super) enum PathStep<'p> {
    Root,
    Field(&'p str),
    Index(usize),
    Key(&'p [u8]),
}

impl<'p> Path<'p> {
    pub(super) fn child(&'p self, step: PathStep<'p>) -> Self {
        Self {
            parent: Some(self),
            step,
        }
    }

    pub(super) fn format(&self) -> String {
        let mut steps = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            match p.step {
                PathStep::Root => {}
                PathStep::Field(f) => steps.push(Step::Field(f)),
                PathStep::Index(i) => steps.push(Step::Index(i)),
                PathStep::Key(k) => steps.push(Step::Key(String::from_utf8_lossy(k).into_owned())),
            }
            at = p.parent;
        }
        steps.reverse();
        format_path(&steps)
    }
}

/// The deserializer's error: a protobuf error already naming kind and path, or a
/// visitor's own complaint (a missing field, a wrong type) that gets the path of the
/// innermost value it came out of. Boxed, so the `Result`s passed up through every
/// visitor call stay a word wide.
#[derive(Debug)]
pub(crate) struct DeError(Box<DeErrorKind>);

#[derive(Debug)]
pub(super) enum DeErrorKind {
    Protobuf(ProtobufError),
    Custom {
        reason: String,
        path: Option<String>,
    },
}

impl DeError {
    pub(super) fn protobuf(e: ProtobufError) -> Self {
        Self(Box::new(DeErrorKind::Protobuf(e)))
    }

    pub(super) fn custom_text(reason: String) -> Self {
        Self(Box::new(DeErrorKind::Custom { reason, path: None }))
    }

    pub(super) fn at(mut self, at: &Path<'_>) -> Self {
        if let DeErrorKind::Custom {
            path: path @ None, ..
        } = &mut *self.0
        {
            *path = Some(at.format());
        }
        self
    }

    pub(super) fn into_protobuf(self, kind: &str) -> ProtobufError {
        match *self.0 {
            DeErrorKind::Protobuf(e) => e,
            DeErrorKind::Custom { reason, path } => ProtobufError::Deserialize {
                kind: kind.to_string(),
                path: path.unwrap_or_else(|| ".".into()),
                reason,
            },
        }
    }
}

impl fmt::Display for DeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            DeErrorKind::Protobuf(e) => e.fmt(f),
            DeErrorKind::Custom { reason, path } => match path {
                Some(p) => write!(f, "at {p}: {reason}"),
                None => f.write_str(reason),
            },
        }
    }
}

impl std::error::Error for DeError {}

impl de::Error for DeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self::custom_text(msg.to_string())
    }
}

pub(super) fn json_err(e: &serde_json::Error) -> DeError {
    DeError::custom_text(e.to_string())
}
