//! kube-apiserver's list conformance cases (`store_tests.go`: `RunTestList` and the
//! paging, resourceVersion and continue cases) against the etcd3 store and a real etcd.
//!
//! Cases that compact, or that compare a list's resourceVersion with the last write,
//! get an etcd of their own: compaction is global to an etcd, and so is its revision.
//! The others share the test process's etcd, each under a prefix of its own.

mod common;

use apistore_testing::etcd::EtcdOptions;
use apistore_testing::suite;
use common::Etcd3Backend;

async fn dedicated(name: &str) -> Etcd3Backend {
    Etcd3Backend::dedicated(name, EtcdOptions::default()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn list_table_over_multi_level_data() {
    let backend = dedicated("list_table_over_multi_level_data").await;
    suite::run_test_list(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn consistent_list_answers_the_current_revision() {
    let backend = dedicated("consistent_list_answers_the_current_revision").await;
    suite::run_test_consistent_list(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn non_recursive_list_reads_one_key_at_any_revision() {
    let backend = dedicated("non_recursive_list_reads_one_key_at_any_revision").await;
    suite::run_test_get_list_non_recursive(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn recursive_list_of_an_object_key_lists_nothing() {
    let backend = Etcd3Backend::new("recursive_list_of_an_object_key_lists_nothing").await;
    suite::run_test_get_list_recursive_prefix(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn continued_pages_keep_the_first_page_revision_and_read_once() {
    let backend = dedicated("continued_pages_keep_the_first_page_revision_and_read_once").await;
    suite::run_test_list_continuation(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rare_object_is_found_in_ten_doubling_reads() {
    let backend = Etcd3Backend::new("rare_object_is_found_in_ten_doubling_reads").await;
    suite::run_test_list_pagination_rare_object(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn filtered_pages_fetch_more_but_decode_only_what_they_need() {
    let backend = dedicated("filtered_pages_fetch_more_but_decode_only_what_they_need").await;
    suite::run_test_list_continuation_with_filter(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compacted_continue_token_is_gone_with_an_inconsistent_one() {
    let backend = dedicated("compacted_continue_token_is_gone_with_an_inconsistent_one").await;
    suite::run_test_list_inconsistent_continuation(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exact_list_at_a_list_revision_is_identical_despite_concurrent_writes() {
    let backend =
        Etcd3Backend::new("exact_list_at_a_list_revision_is_identical_despite_concurrent_writes")
            .await;
    suite::run_test_list_resource_version_match(&backend).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_undecryptable_item_fails_the_whole_list() {
    let backend = Etcd3Backend::new("one_undecryptable_item_fails_the_whole_list").await;
    suite::run_test_transformation_failure_list(&backend).await;
}
