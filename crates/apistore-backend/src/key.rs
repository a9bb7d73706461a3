//! Key scoping for every backend, written once: the path prefix every key is joined to,
//! `prepareKey`'s validation (no `.` or `..` segments, no empty key), the directory form
//! a recursive read uses, and etcd's prefix range end, exactly as kube-apiserver's etcd3
//! store has them (`TestPrefix`, `TestValidateKey`). The etcd3, memory and snapshot
//! stores all call these, so the same caller key maps to the same stored key, and the
//! same keys are refused with the same words, whichever backend holds the objects.

use apistore_storage::{Result, StorageError};

/// Normalises a configured prefix into the path prefix every key is joined to:
/// `"/" + clean(prefix) + "/"`, so `custom/prefix`, `/custom//prefix//` and
/// `/custom/prefix` all become `/custom/prefix/`, and the empty prefix becomes `/`.
pub fn path_prefix(prefix: &str) -> String {
    let cleaned = clean_path(&format!("/{prefix}"));
    if cleaned.ends_with('/') {
        cleaned
    } else {
        cleaned + "/"
    }
}

/// Go's `path.Clean` for absolute paths: collapses `//`, drops `.`, resolves `..`.
pub fn clean_path(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            s => parts.push(s),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Validates a caller's key and joins it to the path prefix. `.` and `..` segments are
/// refused (`invalid key`), as are `""` and `"/"` (`empty key`); one leading `/` is
/// dropped; nothing else is normalised (`//` stays, `bar..` is fine).
pub fn prepare_key(path_prefix: &str, key: &str) -> Result<String> {
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
    // On every request's path: two pushes into one allocation, not a format.
    let mut prepared = String::with_capacity(path_prefix.len() + rest.len());
    prepared.push_str(path_prefix);
    prepared.push_str(rest);
    Ok(prepared)
}

/// The key with a trailing `/`, so that a recursive operation on `/a` sees `/a/b` but
/// not `/ab`.
pub fn as_directory(mut key: String) -> String {
    if !key.ends_with('/') {
        key.push('/');
    }
    key
}

/// The end of the etcd range holding every key that starts with `prefix`
/// (etcd's `GetPrefixRangeEnd`), for tools that read the store's keys with etcd-client.
pub fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the keyspace.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    // TestPrefix
    #[test]
    fn path_prefix_is_cleaned_and_ends_with_a_slash() {
        for (input, want) in [
            ("custom/prefix", "/custom/prefix/"),
            ("/custom//prefix//", "/custom/prefix/"),
            ("/registry", "/registry/"),
            ("", "/"),
            ("/", "/"),
        ] {
            assert_eq!(path_prefix(input), want, "{input:?}");
        }
    }

    // TestValidateKey
    #[test]
    fn keys_are_validated_like_kube_apiserver() {
        let prefix = path_prefix("/first/second");
        for (key, want) in [
            ("/foo/bar/baz/a.b.c/", "/first/second/foo/bar/baz/a.b.c/"),
            ("/foo", "/first/second/foo"),
            ("foo/bar/baz", "/first/second/foo/bar/baz"),
            ("/foo/bar..baz/", "/first/second/foo/bar..baz/"),
            ("/foo/bar..", "/first/second/foo/bar.."),
            ("foo", "/first/second/foo"),
            ("foo/bar", "/first/second/foo/bar"),
            ("/foo/bar/", "/first/second/foo/bar/"),
            ("/pods//pod-1", "/first/second/pods//pod-1"),
        ] {
            assert_eq!(prepare_key(&prefix, key).unwrap(), want, "{key:?}");
        }
        for key in [
            "/foo/bar/../a.b.c/",
            "..",
            "/..",
            "../",
            "/foo/bar/..",
            "../foo/bar",
            "/../foo",
            "/foo/bar/../",
            ".",
            "/.",
            "./",
            "/./",
            "/foo/.",
            "./bar",
            "/foo/./bar/",
        ] {
            let err = prepare_key(&prefix, key).unwrap_err();
            assert_eq!(err.to_string(), format!("invalid key: {key:?}"));
            assert_eq!(err.key(), key);
        }
        for key in ["", "/"] {
            let err = prepare_key(&prefix, key).unwrap_err();
            assert_eq!(err.to_string(), format!("empty key: {key:?}"));
        }
    }

    mod hostile {
        use super::*;
        use proptest::prelude::*;

        /// Keys built mostly of the characters that matter (`/`, `.`), with some of
        /// everything else.
        fn keys() -> impl Strategy<Value = String> {
            prop_oneof![
                "[/.a]{0,12}",
                "[/.a\\\\\\x00-\\x1f]{0,16}",
                any::<String>(),
                proptest::collection::vec(prop_oneof!["\\.", "\\.\\.", "a", "", "é"], 0..6)
                    .prop_map(|segments| segments.join("/")),
            ]
        }

        fn has_dot_segment(path: &str) -> bool {
            path.split('/')
                .any(|segment| segment == "." || segment == "..")
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// Any key is accepted or refused, never a panic; an accepted key stays under
            /// the prefix and has no `.` or `..` segment; a refused one is named as given.
            #[test]
            fn prepared_keys_stay_under_the_prefix(prefix in keys(), key in keys()) {
                let path_prefix = path_prefix(&prefix);
                match prepare_key(&path_prefix, &key) {
                    Ok(prepared) => {
                        prop_assert!(prepared.starts_with(&path_prefix), "{prepared:?}");
                        prop_assert!(!has_dot_segment(&prepared), "{prepared:?}");
                        prop_assert!(!prepared.contains("/./") && !prepared.contains("/../"));
                        let rest = key.strip_prefix('/').unwrap_or(&key);
                        prop_assert_eq!(&prepared[path_prefix.len()..], rest);
                    }
                    Err(err) => {
                        prop_assert_eq!(err.key(), key.as_str());
                        prop_assert!(key.is_empty() || key == "/" || has_dot_segment(&key), "{key:?}: {err}");
                    }
                }
            }

            /// A configured prefix of any shape becomes `/`…`/` with no `.`, `..` or
            /// empty segments.
            #[test]
            fn path_prefixes_are_clean(prefix in keys()) {
                let cleaned = path_prefix(&prefix);
                prop_assert!(cleaned.starts_with('/') && cleaned.ends_with('/'), "{cleaned:?}");
                prop_assert!(!has_dot_segment(&cleaned), "{cleaned:?}");
                prop_assert!(cleaned == "/" || !cleaned.contains("//"), "{cleaned:?}");
            }

            /// The range end is past every key with the prefix.
            #[test]
            fn prefix_range_end_bounds_every_extension(
                prefix in proptest::collection::vec(any::<u8>(), 1..8),
                tail in proptest::collection::vec(any::<u8>(), 0..8),
            ) {
                let end = prefix_range_end(&prefix);
                let mut key = prefix;
                key.extend_from_slice(&tail);
                prop_assert!(end == [0] || key < end, "{key:?} !< {end:?}");
            }
        }
    }

    #[test]
    fn prefix_range_end_increments_the_last_byte() {
        assert_eq!(prefix_range_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_range_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_range_end(b"\xff\xff"), vec![0]);
    }
}
