//! Key-prefix containment: whether a key is a prefix "directory" or lies under it, for
//! every layer that reasons about keys (the layout's resource prefixes, a backend's
//! confinement of keys to its resource prefix). A prefix matches whole segments only:
//! `pods/a` lies under `pods`, `podsx/a` does not.

/// Whether `key` is `prefix` itself or lies under it as a directory, taken as given (no
/// slash on either is dropped).
pub fn lies_under(key: &str, prefix: &str) -> bool {
    match key.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

/// Whether `key` is `directory` or lies under it; one leading `/` on either, and one
/// trailing `/` on `directory`, are ignored, so `pods/default/p1` and `/pods` both lie
/// within `/pods`, but `podsx` does not.
pub fn within(key: &str, directory: &str) -> bool {
    let key = key.strip_prefix('/').unwrap_or(key);
    let directory = directory.strip_prefix('/').unwrap_or(directory);
    let directory = directory.strip_suffix('/').unwrap_or(directory);
    lies_under(key, directory)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_is_a_directory_test() {
        for (key, directory, inside) in [
            ("pods/default/p1", "/pods", true),
            ("/pods/default/p1", "pods", true),
            ("pods", "/pods", true),
            ("pods/", "/pods/", true),
            ("podsx/default/p1", "/pods", false),
            ("podtemplates/a", "/pods", false),
            ("services/endpoints/ns/e", "/services/specs", false),
            ("example.com/widgets/ns/w", "/example.com/widgets", true),
        ] {
            assert_eq!(within(key, directory), inside, "{key} in {directory}");
        }
    }

    #[test]
    fn lies_under_takes_both_as_given() {
        assert!(lies_under("pods/a", "pods"));
        assert!(lies_under("pods", "pods"));
        assert!(!lies_under("/pods/a", "pods"));
        assert!(!lies_under("podsx", "pods"));
        assert!(!lies_under("pods/a", "pods/"));
    }
}
