//! resourceVersions and continue tokens, the way kube-apiserver makes them.
//!
//! - [`ApiObjectVersioner`] maps an object's `metadata.resourceVersion` to the etcd
//!   revision and back (kube-apiserver's `APIObjectVersioner`);
//! - [`parse_resource_version`] applies its parsing rules on their own;
//! - [`continue_token`] encodes and decodes list continue tokens byte for byte as
//!   kube-apiserver does, so a token made by one works with the other.
//!
//! ```
//! use apistore_versioning::parse_resource_version;
//!
//! assert_eq!(parse_resource_version("").unwrap(), 0);
//! assert_eq!(parse_resource_version("42").unwrap(), 42);
//! assert!(parse_resource_version("abc").is_err());
//! ```

pub mod continue_token;
mod versioner;

pub use versioner::{ApiObjectVersioner, compare_resource_versions, parse_resource_version};

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
