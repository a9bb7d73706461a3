//! Watch events, as kube-apiserver's `watch.Event`.

use std::pin::Pin;

use futures_core::Stream;
use serde::{Serialize, Serializer};

use crate::status::Status;

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<T> {
    /// An object was created, or started to match the selectors.
    Added(T),
    /// An object that matches was modified.
    Modified(T),
    /// An object was deleted, or stopped matching: its last state, with the
    /// resourceVersion of the change that removed it.
    Deleted(T),
    /// No object changed, but everything up to this object's resourceVersion has been seen.
    Bookmark(T),
    /// The watch failed and ends after this event. Boxed: a status is several times
    /// the size of a pointer, and every event of every watch is moved through the
    /// layers of a stream at the size of its largest variant.
    Error(Box<Status>),
}

impl<T> WatchEvent<T> {
    /// The Error event carrying `status`.
    pub fn error(status: Status) -> Self {
        Self::Error(Box::new(status))
    }

    /// The wire name of the event type (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`, `ERROR`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Added(_) => "ADDED",
            Self::Modified(_) => "MODIFIED",
            Self::Deleted(_) => "DELETED",
            Self::Bookmark(_) => "BOOKMARK",
            Self::Error(_) => "ERROR",
        }
    }

    /// The object of the event, if it is not an error.
    pub fn object(&self) -> Option<&T> {
        match self {
            Self::Added(o) | Self::Modified(o) | Self::Deleted(o) | Self::Bookmark(o) => Some(o),
            Self::Error(_) => None,
        }
    }
}

/// `{"type":"ADDED","object":{...}}`, as the watch API streams it.
impl<T: Serialize> Serialize for WatchEvent<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("WatchEvent", 2)?;
        s.serialize_field("type", self.type_name())?;
        match self {
            Self::Error(status) => s.serialize_field("object", status)?,
            Self::Added(o) | Self::Modified(o) | Self::Deleted(o) | Self::Bookmark(o) => {
                s.serialize_field("object", o)?;
            }
        }
        s.end()
    }
}

/// The stream a watch returns. Dropping it stops the watch.
pub type WatchStream<T> = Pin<Box<dyn Stream<Item = WatchEvent<T>> + Send>>;
