//! Test support for apistore: a real etcd to run stores against, and the conformance
//! suite every backend runs.
//!
//! - [`etcd`]: starts, stops, kills and restarts real etcd processes on free loopback
//!   ports, and shares one etcd per test process. Nothing here mocks etcd: tests that
//!   touch etcd run against the real binary, which `cargo xtask test` provisions.
//! - [`suite`]: the conformance suite, ported from kube-apiserver's storage tests, that
//!   any `Storage` implementation runs through its [`suite::Backend`] (raw access to
//!   the bytes it stores, compaction, a read counter, the test transformer). The etcd3
//!   store and the in-memory store both run every case of its three lists.
//!
//! A backend's `tests/` instantiates the lists, one `#[tokio::test]` per case, from a
//! function that makes its backend for a case:
//!
//! ```text
//! // tests/conformance.rs of a backend crate; `MyBackend` implements `Backend`
//! // (see crates/apistore-memory/tests/common/mod.rs).
//! async fn backend(test_name: &str, needs: Needs) -> MyBackend {
//!     // a key space of its own for Needs::Fresh and Needs::ProgressNotify
//! }
//! apistore_testing::store_conformance!(backend);
//! apistore_testing::list_conformance!(backend);
//! apistore_testing::watch_conformance!(backend);
//! ```
//!
//! And a real etcd for any test, started on a free loopback port and removed on drop:
//!
//! ```no_run
//! use apistore_testing::etcd::{EtcdOptions, EtcdServer};
//!
//! let etcd = EtcdServer::start(EtcdOptions::default()).expect("etcd");
//! println!("etcd at {}", etcd.endpoint());
//! ```

pub mod etcd;
#[cfg(feature = "metrics")]
pub mod metrics;
pub mod suite;

/// The KMS v2 test plugin, served in process or over gRPC on a unix socket (feature
/// `kms-plugin`).
///
/// It is defined in `apistore_value::kms_v2` (features `test-plugin` and
/// `grpc-test-plugin`), beside the envelope its own unit tests exercise, and only
/// re-exported here: this crate already depends on apistore-value, so the other way
/// round would be a cycle.
#[cfg(feature = "kms-plugin")]
pub mod kms {
    #[doc(inline)]
    pub use apistore_value::kms_v2::{KmsOperation, KmsPluginServer, TestKmsPlugin};
}

// README.md's example, compiled with the doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
