//! The whole conformance suite of `apistore-testing` against the in-memory store: every
//! case of its store, list and watch lists, each on a key space of its own.

mod common;

use common::backend;

apistore_testing::store_conformance!(backend);
apistore_testing::corrupt_object_conformance!(backend);
apistore_testing::list_conformance!(backend);
apistore_testing::watch_conformance!(backend);
apistore_testing::interface_conformance!(backend);
