//! List continue tokens, byte-compatible with kube-apiserver's
//! (`k8s.io/apiserver/pkg/storage/continue.go` at v0.31.1).
//!
//! A token is the unpadded URL-safe base64 of the JSON
//! `{"v":"meta.k8s.io/v1","rv":<revision>,"start":"<key suffix>"}`, written with Go's
//! `encoding/json` escaping. `start` is the etcd key the next page starts at (the last
//! returned key followed by a NUL byte), relative to the list's key prefix; `rv` pins the
//! revision every page reads, or is −1 when a compacted list resumes at the latest one.
//!
//! A token made by kube-apiserver decodes here and a token made here decodes in
//! kube-apiserver. Decoding is defensive: the token comes from the client, so every
//! malformed token is a [`ContinueTokenError`] naming what is wrong, and the start key
//! can never climb out of the key prefix.
//!
//! ```
//! use apistore_versioning::continue_token;
//!
//! let token = continue_token::encode("/pods/second/foo", 5, "/pods/").unwrap();
//! assert_eq!(
//!     token,
//!     "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6NSwic3RhcnQiOiJzZWNvbmQvZm9vXHUwMDAwIn0"
//! );
//! let (start, rv) = continue_token::decode(&token, "/pods/").unwrap();
//! assert_eq!((start.as_str(), rv), ("/pods/second/foo\0", 5));
//! ```
//!
//! # Keys that are not UTF-8
//! etcd keys are bytes, but the token carries the start key as a JSON string. Go's
//! encoder turns each invalid byte into U+FFFD, so the decoded start key is not the key
//! that was encoded and the next page starts at the wrong place (it can repeat items,
//! or loop forever with a limit of 1). Rather than hand out such a token, [`encode`]
//! refuses a key whose part after the prefix is not UTF-8
//! ([`ContinueTokenError::NonUtf8Key`]). Keys written by kube-apiserver or by apistore are
//! always UTF-8, so no token kube-apiserver would produce is refused.

mod go_json;

use apistore_storage::SelectionPredicate;
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// The only token version kube-apiserver writes and reads.
pub const TOKEN_VERSION: &str = "meta.k8s.io/v1";

/// Tokens longer than this (1 MiB) are refused before any decoding.
pub const MAX_TOKEN_LEN: usize = 1 << 20;

/// Go's `base64.RawURLEncoding`: URL alphabet, no padding written or accepted, and (Go
/// decoding is not strict) non-zero trailing bits accepted.
const RAW_URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Why a continue token could not be made or read.
///
/// The messages are kube-apiserver's: decoding errors start with
/// `continue key is not valid`, so a client sees the same text from either server.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ContinueTokenError {
    /// The last key of the page is not under the list's key prefix (or the prefix is
    /// empty, which kube-apiserver also refuses).
    #[error("unable to encode next field: the key and key prefix do not match")]
    KeyPrefixMismatch {
        /// The key, lossily decoded for display.
        key: String,
        /// The list's key prefix.
        key_prefix: String,
    },
    /// The key after the prefix is not UTF-8 and cannot round-trip through a token.
    #[error("unable to encode next field: the key {key:?} is not valid UTF-8")]
    NonUtf8Key {
        /// The key, lossily decoded for display.
        key: String,
    },
    /// The token is longer than [`MAX_TOKEN_LEN`].
    #[error("continue key is not valid: token is {len} bytes long, longer than the {max} allowed")]
    TooLong {
        /// The token's length in bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The token is not unpadded URL-safe base64.
    #[error("continue key is not valid: {reason}")]
    NotBase64 {
        /// What the base64 decoder found.
        reason: String,
    },
    /// The decoded token is not the token's JSON object.
    #[error("continue key is not valid: {reason}")]
    NotJson {
        /// What the JSON reader found.
        reason: String,
    },
    /// The token's `v` is not [`TOKEN_VERSION`].
    #[error("continue key is not valid: server does not recognize this encoded version {version}")]
    UnrecognizedVersion {
        /// The version the token names.
        version: String,
    },
    /// The token's `rv` is 0 (or absent).
    #[error(
        "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
    )]
    InvalidStartResourceVersion,
    /// The token's `start` is empty (or absent).
    #[error("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")]
    EmptyStartKey,
    /// The token's `start` is not a clean path (`..`, `.`, `//` or a trailing `/`), so
    /// it could reach outside the key prefix.
    #[error("continue key is not valid: {start}")]
    InvalidStartKey {
        /// The start key as the token gives it.
        start: String,
    },
}

/// The token for the page after one whose last key is `last_key`: the next page starts
/// just after it (at `last_key` + NUL) and reads at `resource_version`.
///
/// `key_prefix` is the list's prefix with its trailing `/` (`/registry/pods/`); the
/// token carries the key relative to it. This is kube-apiserver's
/// `EncodeContinue(keyLastItem+"\x00", keyPrefix, rv)`.
pub fn encode(
    last_key: impl AsRef<[u8]>,
    resource_version: i64,
    key_prefix: &str,
) -> Result<String, ContinueTokenError> {
    let mut start_key = last_key.as_ref().to_vec();
    start_key.push(0);
    encode_start_key(start_key, resource_version, key_prefix)
}

/// The token for a page that starts exactly at `start_key`, as kube-apiserver's
/// `EncodeContinue`. Used to re-issue a decoded token, e.g. with `resource_version` −1
/// when the pinned revision was compacted and the list may continue at the latest one.
pub fn encode_start_key(
    start_key: impl AsRef<[u8]>,
    resource_version: i64,
    key_prefix: &str,
) -> Result<String, ContinueTokenError> {
    let key = start_key.as_ref();
    let relative = match key.strip_prefix(key_prefix.as_bytes()) {
        Some(relative) if !key_prefix.is_empty() => relative,
        _ => {
            return Err(ContinueTokenError::KeyPrefixMismatch {
                key: String::from_utf8_lossy(key).into_owned(),
                key_prefix: key_prefix.to_owned(),
            });
        }
    };
    if std::str::from_utf8(relative).is_err() {
        return Err(ContinueTokenError::NonUtf8Key {
            key: String::from_utf8_lossy(key).into_owned(),
        });
    }
    let json = go_json::write_token(TOKEN_VERSION, resource_version, relative);
    Ok(RAW_URL.encode(json))
}

/// Reads a continue token of a list under `key_prefix`: the full etcd key the next page
/// starts at, and the revision to read at (−1: the latest).
///
/// This is kube-apiserver's `DecodeContinue`, with its checks and messages: the token
/// must be base64 of the token JSON, of version [`TOKEN_VERSION`], with a non-zero `rv`
/// and a non-empty `start` that is a clean relative path (`..`, `.`, `//` are refused).
/// Like Go's decoder it skips `\r` and `\n` in the base64 and reads the JSON with Go's
/// leniency (case-insensitive keys, unknown fields ignored); unlike it, tokens longer
/// than [`MAX_TOKEN_LEN`] are refused outright.
pub fn decode(token: &str, key_prefix: &str) -> Result<(String, i64), ContinueTokenError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(ContinueTokenError::TooLong {
            len: token.len(),
            max: MAX_TOKEN_LEN,
        });
    }
    let data = decode_base64(token)?;
    let raw =
        go_json::read_token(&data).map_err(|reason| ContinueTokenError::NotJson { reason })?;
    if raw.version != TOKEN_VERSION {
        return Err(ContinueTokenError::UnrecognizedVersion {
            version: raw.version,
        });
    }
    if raw.resource_version == 0 {
        return Err(ContinueTokenError::InvalidStartResourceVersion);
    }
    if raw.start.is_empty() {
        return Err(ContinueTokenError::EmptyStartKey);
    }
    let relative = raw.start.strip_prefix('/').unwrap_or(&raw.start);
    if !is_clean_relative_path(relative) {
        return Err(ContinueTokenError::InvalidStartKey { start: raw.start });
    }
    Ok((format!("{key_prefix}{relative}"), raw.resource_version))
}

/// A following page, as kube-apiserver's `PrepareContinueToken` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextPage {
    /// The continue token for the next page.
    pub continue_token: String,
    /// How many items remain after this page, when it can be known: only for a
    /// predicate that selects everything (otherwise etcd's count includes objects the
    /// selectors would drop).
    pub remaining_item_count: Option<i64>,
}

/// The continue token and remaining item count a list page reports: `None` when there
/// are no more items. `items_count` is etcd's count of keys from this page's start to
/// the end of the range, at the pinned revision.
pub fn prepare(
    last_key: impl AsRef<[u8]>,
    key_prefix: &str,
    resource_version: i64,
    items_count: i64,
    has_more_items: bool,
    predicate: &SelectionPredicate,
) -> Result<Option<NextPage>, ContinueTokenError> {
    if !has_more_items {
        return Ok(None);
    }
    let continue_token = encode(last_key, resource_version, key_prefix)?;
    let remaining_item_count = predicate.is_empty().then(|| items_count - predicate.limit);
    Ok(Some(NextPage {
        continue_token,
        remaining_item_count,
    }))
}

/// Go's base64 decoder skips carriage returns and newlines anywhere in the input.
fn decode_base64(token: &str) -> Result<Vec<u8>, ContinueTokenError> {
    let result = if token.contains(['\r', '\n']) {
        let compact: String = token
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n'))
            .collect();
        RAW_URL.decode(compact)
    } else {
        RAW_URL.decode(token)
    };
    result.map_err(|err| ContinueTokenError::NotBase64 {
        reason: format!("illegal base64 data: {err}"),
    })
}

/// Whether `"/" + path` is unchanged by Go's `path.Clean`: no empty, `.` or `..`
/// segment, and no trailing slash (the root `"/"` itself, i.e. an empty `path`, is
/// clean).
fn is_clean_relative_path(path: &str) -> bool {
    path.is_empty()
        || path
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

#[cfg(test)]
mod tests;
