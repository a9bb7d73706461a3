//! Test support for apistore: a real etcd to run stores against.
//!
//! - [`etcd`]: starts, stops, kills and restarts real etcd processes on free loopback
//!   ports, and shares one etcd per test process. Nothing here mocks etcd: tests that
//!   touch etcd run against the real binary, which `cargo xtask test` provisions.
//! - [`suite`]: the conformance suite, ported from kube-apiserver's storage tests, that
//!   any `Storage` implementation runs through its [`suite::Backend`].
//!
//! A test of another backend runs the suite's cases against its own store:
//!
//! ```no_run
//! use apistore_testing::suite::{self, Backend};
//!
//! // `MyBackend` implements `Backend` (its store, raw reads and writes, and the test
//! // transformer's controls); see `crates/apistore-etcd3/tests/common/mod.rs`.
//! async fn conformance<B: Backend>(backend: &B) {
//!     suite::run_test_create(backend).await;
//!     suite::run_test_get(backend).await;
//!     suite::run_test_guaranteed_update(backend).await;
//! }
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
pub mod suite;
