//! What a store says about the objects it holds: kube-apiserver's `storage.Stats` (kube
//! 1.34+, replacing `Count` for the periodic object-count metrics) and the key listing a
//! watch cache hands its backend for size estimation (`storage.KeysFunc`, 1.35+).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::error::Result;

/// How many objects a store holds under its resource prefix, and how large they are on
/// average (kube-apiserver's `storage.Stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// The number of objects stored under the store's resource prefix.
    pub object_count: i64,
    /// An estimate of the average size of one stored value in bytes (the bytes as
    /// stored: encoded, then transformed). 0 when the store does not estimate sizes
    /// (size estimation not enabled) or holds nothing it has seen. Neither exact nor
    /// consistent with `object_count`: it follows the values the store last saw.
    pub estimated_average_object_size_bytes: i64,
}

/// The future a [`KeysFn`] returns.
pub type KeysFuture = Pin<Box<dyn Future<Output = Result<Vec<String>>> + Send>>;

/// Lists the keys a store currently holds under its resource prefix (kube-apiserver's
/// `storage.KeysFunc`), either as stored (`/registry/pods/ns/name`) or relative to the
/// store's prefix (`pods/ns/name`, as a watch cache keeps them). A store estimating
/// sizes calls it to forget the keys that were deleted without it seeing the deletion.
pub type KeysFn = Arc<dyn Fn() -> KeysFuture + Send + Sync>;
