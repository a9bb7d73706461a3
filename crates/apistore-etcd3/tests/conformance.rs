//! kube-apiserver's storage conformance cases (the store list of `apistore-testing`),
//! run against the etcd3 store and a real etcd (shared by the tests of this binary,
//! each under a prefix of its own). The in-memory store runs the same list.

mod common;

apistore_testing::store_conformance!(common::backend);
apistore_testing::corrupt_object_conformance!(common::backend);
