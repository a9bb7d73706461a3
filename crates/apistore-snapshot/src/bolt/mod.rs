//! A read-only reader of bbolt files, the B+tree store under etcd (go.etcd.io/bbolt).
//!
//! Owns the on-disk format as bbolt writes it (read from `internal/common/page.go`,
//! `meta.go`, `bucket.go` and `db.go` of bbolt; the code here is our own): two meta
//! pages, of which the valid one with the higher transaction id is current; branch and
//! leaf pages, with overflow pages after a page too large for one; buckets as B+trees
//! whose root is a page or, for a small bucket, a page inline in its parent's value.
//! The freelist is never read: a reader only follows the tree from the meta page.
//!
//! Pages are read with positioned reads, one page (and its overflow) at a time, and a
//! small cache keeps the most recent ones (a walk reads ahead, in windows of 256 KiB,
//! eight of them kept); the file is never read whole. Every length,
//! offset and page id read from the file is checked before it is used, and every walk
//! of the tree remembers the pages it has entered, so a corrupt file is an error that
//! names the page and byte offset, never a panic or a loop.

mod bucket;
mod file;
mod meta;
mod page;

pub use bucket::{Bucket, Entry};
pub use file::BoltFile;
pub use meta::Meta;

#[cfg(test)]
pub(crate) mod testfile;

#[cfg(test)]
mod tests;
