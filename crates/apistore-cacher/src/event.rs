//! What the watch cache keeps of one change: the new state, the state before it and
//! the revision (kube's `watchCacheEvent`). The previous state comes from the cache's
//! own store, since the backend's watch reports only the new one; it is what lets a
//! watcher see an object leave its selector as a deletion.

use std::sync::Arc;

use tokio::time::Instant;

/// The type of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventKind {
    /// The key was created.
    Added,
    /// The key was written again.
    Modified,
    /// The key was deleted.
    Deleted,
}

/// One change of the underlying store, shared by every watcher it is sent to.
#[derive(Debug)]
pub(crate) struct CacheEvent<T> {
    pub(crate) kind: EventKind,
    /// The key the cache's key function gives the object.
    pub(crate) key: Arc<str>,
    /// The new state (for a deletion: the object as the backend reported it).
    pub(crate) object: Arc<T>,
    /// The state before the change, when the cache held one.
    pub(crate) prev_object: Option<Arc<T>>,
    /// The revision of the change.
    pub(crate) resource_version: u64,
    /// When the cache saw it; the window's capacity follows these times.
    pub(crate) record_time: Instant,
}

/// Whether `key` is `prefix` or below it, `/` being the separator (kube's
/// `hasPathPrefix`): `/pods/a` is under `/pods` but `/podsx` is not, and nothing but
/// its children is under `/pods/a/`.
pub(crate) fn has_path_prefix(key: &str, prefix: &str) -> bool {
    if prefix.ends_with('/') {
        key.starts_with(prefix)
    } else {
        apistore_storage::key_prefix::lies_under(key, prefix)
    }
}

/// The cache's spelling of a caller's key: with a leading `/`, as backends treat `pods/a`
/// and `/pods/a` alike. `None` for a key a backend refuses (empty, or with `.` or `..`
/// segments): such requests go to the backend, which words the error.
pub(crate) fn canonical_key(key: &str) -> Option<std::borrow::Cow<'_, str>> {
    let dotted = key
        .split('/')
        .any(|segment| segment == "." || segment == "..");
    if dotted || key.is_empty() || key == "/" {
        return None;
    }
    if key.starts_with('/') {
        Some(std::borrow::Cow::Borrowed(key))
    } else {
        Some(std::borrow::Cow::Owned(format!("/{key}")))
    }
}

#[cfg(test)]
mod tests {
    use super::{canonical_key, has_path_prefix};

    #[test]
    fn keys_are_canonical_with_a_leading_slash() {
        assert_eq!(canonical_key("pods/a").as_deref(), Some("/pods/a"));
        assert_eq!(canonical_key("/pods//a").as_deref(), Some("/pods//a"));
        for invalid in ["", "/", "..", "/pods/../x", "./pods", "/pods/."] {
            assert_eq!(canonical_key(invalid), None, "{invalid}");
        }
    }

    #[test]
    fn test_has_path_prefix() {
        let cases = [
            ("/pods/ns/a", "/pods", true),
            ("/pods/ns/a", "/pods/", true),
            ("/pods/ns/a", "/pods/ns/a/", false),
            ("/pods", "/pods", true),
            ("/podsx/a", "/pods", false),
            ("/pods/ns/a", "/pods/ns/a", true),
            ("/pods/ns/ab", "/pods/ns/a", false),
            ("/other/a", "/pods", false),
        ];
        for (key, prefix, expected) in cases {
            assert_eq!(
                has_path_prefix(key, prefix),
                expected,
                "{key} under {prefix}"
            );
        }
    }
}
