//! The conformance cases of the interface kube gained after v0.31.1
//! (`interface_conformance!` of `apistore-testing`) against the etcd3 store at kube
//! 1.37, where it sees compactions made by other servers (the other suites run the
//! store at 1.31). `interface_versions.rs` tests where the versions differ.

// A conformance case is a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use apistore_storage::KubeVersion;
use apistore_testing::suite::Needs;
use common::Etcd3Backend;

/// The suite's etcd3 backend with its store at kube 1.37.
async fn backend(test_name: &str, needs: Needs) -> Etcd3Backend {
    let mut backend = common::backend(test_name, needs).await;
    backend.store = backend.store.clone().with_kube_version(KubeVersion::V1_37);
    backend
}

apistore_testing::interface_conformance!(backend);
