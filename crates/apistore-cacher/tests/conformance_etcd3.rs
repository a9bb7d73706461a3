//! The conformance suite against the watch cache over the etcd3 store and a real etcd
//! (the shared test etcd, or one of the case's own). The installed etcd's version
//! decides whether consistent reads may come from the cache: only where the etcd3
//! store trusts progress requests (3.4.31+, 3.5.13+); otherwise they go to etcd.
//! Cases that cannot pass on a cache by design are listed in `docs/watch-cache.md` and
//! left out of `common/cases.rs` by name.

// A conformance case is a test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../apistore-etcd3/tests/common/mod.rs"]
mod etcd3;

mod common;

use apistore_testing::suite::Needs;
use common::Cached;
use etcd3::Etcd3Backend;

async fn backend(test_name: &str, needs: Needs) -> Cached<Etcd3Backend> {
    let inner = etcd3::backend(test_name, needs).await;
    let progress = inner
        .store
        .check_request_watch_progress_support()
        .await
        .unwrap();
    Cached::new(test_name, inner, progress).await
}

include!("common/cases.rs");
