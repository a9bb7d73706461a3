//! Test support for apistore: a real etcd to run stores against.
//!
//! - [`etcd`]: starts, stops, kills and restarts real etcd processes on free loopback
//!   ports, and shares one etcd per test process. Nothing here mocks etcd: tests that
//!   touch etcd run against the real binary, which `cargo xtask test` provisions.
//! - [`suite`]: the conformance suite, ported from kube-apiserver's storage tests, that
//!   any `Storage` implementation runs through its [`suite::Backend`].

pub mod etcd;
pub mod suite;
