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
