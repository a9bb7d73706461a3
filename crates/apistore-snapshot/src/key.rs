//! Key preparation as kube-apiserver's `prepareKey` (and so as the etcd3 and memory
//! stores, whose copies are private to them): the same caller key maps to the same
//! stored key, and the same keys are refused with the same words.

use apistore_storage::{Result, StorageError};

/// `"/" + clean(prefix) + "/"`: `custom//prefix/` becomes `/custom/prefix/`, the empty
/// prefix `/`.
pub(crate) fn path_prefix(prefix: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for segment in prefix.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    if parts.is_empty() {
        "/".to_owned()
    } else {
        format!("/{}/", parts.join("/"))
    }
}

/// Validates a caller's key and joins it to the path prefix: `.` and `..` segments are
/// an `invalid key`, `""` and `"/"` an `empty key`; one leading `/` is dropped.
pub(crate) fn prepare_key(path_prefix: &str, key: &str) -> Result<String> {
    let climbs =
        key == ".." || key.starts_with("../") || key.ends_with("/..") || key.contains("/../");
    let dots = key == "." || key.starts_with("./") || key.ends_with("/.") || key.contains("/./");
    if climbs || dots {
        return Err(StorageError::InvalidKey {
            key: key.to_owned(),
            problem: "invalid key",
        });
    }
    if key.is_empty() || key == "/" {
        return Err(StorageError::InvalidKey {
            key: key.to_owned(),
            problem: "empty key",
        });
    }
    let rest = key.strip_prefix('/').unwrap_or(key);
    Ok(format!("{path_prefix}{rest}"))
}

/// The key with a trailing `/`, so that a recursive read of `/a` sees `/a/b` but not
/// `/ab`.
pub(crate) fn as_directory(mut key: String) -> String {
    if !key.ends_with('/') {
        key.push('/');
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_prepared_like_the_other_stores() {
        assert_eq!(path_prefix("/custom//prefix//"), "/custom/prefix/");
        let prefix = path_prefix("/registry");
        assert_eq!(
            prepare_key(&prefix, "/pods/a").ok().as_deref(),
            Some("/registry/pods/a")
        );
        for key in ["..", "/foo/../bar", "./x", "/foo/.", "", "/"] {
            assert!(prepare_key(&prefix, key).is_err(), "{key}");
        }
    }
}
