//! What a backend of apistore over a revisioned key-value store shares.
//!
//! kube-apiserver has one storage backend, `pkg/storage/etcd3`; apistore has three that
//! behave alike, the etcd3 store (`apistore-etcd3`), the in-memory MVCC store
//! (`apistore-memory`) and the read-only snapshot store (`apistore-snapshot`). Everything in which they must not differ lives here once, so
//! that a rule of the reference (k8s.io/apiserver v0.31.1) is kept in one place:
//!
//! - [`config`]: the configuration every store of one resource takes, and the
//!   [`KeyScope`] it makes (the path prefix, the resource prefix, the confine check);
//! - [`key`]: key scoping: the path prefix, `prepareKey`'s validation, the directory
//!   form of a recursive read and etcd's prefix range end (`etcd3/store.go`);
//! - [`object`]: objects to stored bytes and back, the codec then the value
//!   transformer with the stored key as authenticated data, the resourceVersion cleared
//!   before encoding and set from the mod revision after decoding (`etcd3/store.go`);
//! - [`event`]: a stored key-value change as a watch event, with the predicate
//!   transitions and bookmarks (`etcd3/event.go`, `transform` of `etcd3/watcher.go`);
//! - [`list`]: where a list starts, the loop over its pages and the continue token it
//!   ends with, and the 410s after compaction (`GetList`, `resolveGetListRev`,
//!   `interpretListError` of `etcd3/store.go`); a large page's values are read back on
//!   several threads and taken in key order (`read_ahead`, private);
//!   With a stored selector (apistore-storage's `StoredSelector`, opt-in) a list judges
//!   its selectors on the plain bytes and decodes only the values they keep;
//! - [`write`](mod@write): the guaranteed update and the conditional delete, decided once over a
//!   backend's two transactions ([`CompareAndSwap`]) (`GuaranteedUpdate`,
//!   `conditionalDelete` of `etcd3/store.go`);
//! - [`watch`]: where a watch starts and what it sends first, the checks before its
//!   initial events, the channel to its consumer and the status of its Error event
//!   (`etcd3/watcher.go`).
//!
//! What stays in each backend: its key-value store (requests, revisions, history,
//! compaction), its transactions, how its raw changes are read and followed, and its
//! tasks. This crate knows no etcd and starts nothing (only a watch's channel is
//! tokio's); it depends on the contract, the versioner and the transformers.

pub mod config;
pub mod event;
pub mod key;
pub mod list;
pub mod object;
mod read_ahead;
pub mod watch;
pub mod write;

pub use config::{KeyScope, ResourceConfig, watch_list_default};
pub use event::{Change, RawEvent};
pub use object::{DecodeErrors, ObjState, ObjectLayers};
pub use write::{CompareAndSwap, StoredValue, Swap, WriteTrace};

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
