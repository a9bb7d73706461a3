//! The conformance suite against the watch cache over the in-memory store, with
//! consistent reads from the cache (the in-memory store answers progress requests).
//! Cases that cannot pass on a cache by design are listed in `docs/watch-cache.md`
//! and left out of `common/cases.rs` by name.

// A conformance case is a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../apistore-memory/tests/common/mod.rs"]
mod memory;

mod common;

use apistore_testing::suite::Needs;
use common::Cached;
use memory::MemoryBackend;

async fn backend(test_name: &str, needs: Needs) -> Cached<MemoryBackend> {
    Cached::new(test_name, memory::backend(test_name, needs).await, true).await
}

include!("common/cases.rs");

// Watch-list requests need progress requests, which the in-memory store answers.
apistore_testing::conformance_cases!(backend;
    run_watch_semantic_initial_events_extended => run_watch_semantic_initial_events_extended [Fresh],
    run_test_too_large_resource_version_error_for_watch_list => run_test_too_large_resource_version_error_for_watch_list [Fresh],
);
