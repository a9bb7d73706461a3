//! kube-apiserver's list conformance cases (`store_tests.go`: `RunTestList` and the
//! paging, resourceVersion and continue cases; the list list of `apistore-testing`)
//! against the etcd3 store and a real etcd. The in-memory store runs the same list.
//!
//! Cases that compact, or that compare a list's resourceVersion with the last write,
//! get an etcd of their own (`Needs::Fresh`): compaction is global to an etcd, and so
//! is its revision. The others share the test process's etcd, each under a prefix of
//! its own.

mod common;

apistore_testing::list_conformance!(common::backend);

/// The same cases with the store at kube 1.37: its unlimited recursive lists read with
/// one `RangeStream` where etcd has it (3.7 and later) and with paged `Range` requests
/// where it answers `Unimplemented` (3.4 to 3.6). `range_stream.rs` shows which.
mod kube_1_37 {
    use super::common;

    apistore_testing::list_conformance!(common::backend_1_37);
}
