//! What can be wrong with a snapshot file: every error names the file and, where the
//! problem is in the bytes, the page and the byte offset.

use std::io;
use std::path::PathBuf;

/// A snapshot that could not be opened or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// A directory holds no etcd database where a member keeps it (`member/snap/db`).
    #[error("{path}: no etcd database in this directory (looked for {looked_for})")]
    NoDatabase {
        /// The directory.
        path: PathBuf,
        /// The paths that were tried.
        looked_for: String,
    },
    /// Neither meta page is a bbolt meta page: not a bbolt file at all.
    #[error("{path}: not a bbolt file: {reason}")]
    NotBbolt {
        /// The file.
        path: PathBuf,
        /// What the first bytes hold instead.
        reason: String,
    },
    /// The file ends before bytes it must hold.
    #[error("{path}: truncated: {what} needs bytes {offset}..{end}, but the file holds {len}")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// What was being read (`page 12`, `the meta page's 40 pages`).
        what: String,
        /// The first byte needed.
        offset: u64,
        /// One past the last byte needed.
        end: u64,
        /// The length of the file's bbolt data (without a trailing snapshot hash).
        len: u64,
    },
    /// A page's bytes do not make sense.
    #[error("{path}: corrupt page {page} at byte {offset}: {problem}")]
    CorruptPage {
        /// The file.
        path: PathBuf,
        /// The page id (of the page holding an inline bucket, for one).
        page: u64,
        /// The file offset of the bad bytes.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// The file is bbolt but not etcd's: a bucket etcd always has is missing.
    #[error("{path}: a bbolt file but not an etcd database: it has no {bucket:?} bucket")]
    NotEtcd {
        /// The file.
        path: PathBuf,
        /// The missing bucket.
        bucket: String,
    },
    /// A record of etcd's `key` or `meta` bucket does not decode.
    #[error("{path}: corrupt etcd record {record} (page {page}, byte {offset}): {problem}")]
    CorruptRecord {
        /// The file.
        path: PathBuf,
        /// The record: its revision key or meta key.
        record: String,
        /// The leaf page holding it.
        page: u64,
        /// The file offset of its value.
        offset: u64,
        /// What is wrong.
        problem: String,
    },
    /// The sha256 appended by `etcdctl snapshot save` does not match the data.
    #[error("{path}: the snapshot's sha256 {stored} does not match its data's {computed}")]
    HashMismatch {
        /// The file.
        path: PathBuf,
        /// The hash the file ends with.
        stored: String,
        /// The hash of the bytes before it.
        computed: String,
    },
}

/// The result of reading a snapshot.
pub(crate) type Result<T, E = SnapshotError> = std::result::Result<T, E>;
