//! The conformance cases of the interface kube gained after v0.31.1
//! (`interface_conformance!` of `apistore-testing`) against the etcd3 store at kube
//! 1.37, where it sees compactions made by other servers (the other suites run the
//! store at 1.31). `interface_versions.rs` tests where the versions differ.

// A conformance case is a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

apistore_testing::interface_conformance!(common::backend_1_37);
