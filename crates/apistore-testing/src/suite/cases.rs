//! The case lists: every conformance case, once, with what it needs of its backend
//! ([`Needs`](super::Needs)). A backend's `tests/` instantiates them with
//! [`store_conformance!`](crate::store_conformance),
//! [`list_conformance!`](crate::list_conformance) and
//! [`watch_conformance!`](crate::watch_conformance), each given an async function
//! `(test_name: &str, needs: Needs) -> impl Backend`; each case becomes a
//! `#[tokio::test]` on a multi-threaded runtime named after it.
//!
//! Every case here runs on every backend. Cases about etcd itself (its watch stream,
//! its versions, losing it) are not here: they live beside the etcd3 store's tests.
//! `docs/conformance.md` lists which case runs where.

/// Instantiates one `#[tokio::test]` per `test => case [needs]` entry for `$backend`.
#[doc(hidden)]
#[macro_export]
macro_rules! conformance_cases {
    ($backend:path; $($test:ident => $case:ident [$needs:ident]),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $test() {
                let backend = $backend(stringify!($test), $crate::suite::Needs::$needs).await;
                $crate::suite::$case(&backend).await;
            }
        )*
    };
}

/// The create, get, update, delete, count and key cases of `store_tests.go` (28; three from v0.37).
#[macro_export]
macro_rules! store_conformance {
    ($backend:path) => {
        $crate::conformance_cases!($backend;
            run_test_create => run_test_create [Shared],
            run_test_create_with_key_exist => run_test_create_with_key_exist [Shared],
            run_test_create_with_ttl => run_test_create_with_ttl [Shared],
            run_test_get => run_test_get [Shared],
            run_test_unconditional_delete => run_test_unconditional_delete [Shared],
            run_test_conditional_delete => run_test_conditional_delete [Shared],
            run_test_delete_with_suggestion => run_test_delete_with_suggestion [Shared],
            run_test_delete_with_suggestion_and_conflict => run_test_delete_with_suggestion_and_conflict [Shared],
            run_test_delete_expected_transform_or_decode_error => run_test_delete_expected_transform_or_decode_error [Shared],
            run_test_delete_with_suggestion_and_missing_expected_transform_or_decode_error => run_test_delete_with_suggestion_and_missing_expected_transform_or_decode_error [Shared],
            run_test_delete_with_conflict_and_missing_expected_transform_or_decode_error => run_test_delete_with_conflict_and_missing_expected_transform_or_decode_error [Shared],
            run_test_delete_with_conflict => run_test_delete_with_conflict [Shared],
            run_test_delete_with_suggestion_of_deleted_object => run_test_delete_with_suggestion_of_deleted_object [Shared],
            run_test_validate_deletion_with_suggestion => run_test_validate_deletion_with_suggestion [Shared],
            run_test_validate_deletion_with_only_suggestion_valid => run_test_validate_deletion_with_only_suggestion_valid [Shared],
            run_test_preconditional_delete_with_suggestion => run_test_preconditional_delete_with_suggestion [Shared],
            run_test_preconditional_delete_with_only_suggestion_pass => run_test_preconditional_delete_with_only_suggestion_pass [Shared],
            run_test_guaranteed_update => run_test_guaranteed_update [Shared],
            run_test_guaranteed_update_with_ttl => run_test_guaranteed_update_with_ttl [Shared],
            run_test_guaranteed_update_checks_stored_data => run_test_guaranteed_update_checks_stored_data [Shared],
            run_test_guaranteed_update_with_conflict => run_test_guaranteed_update_with_conflict [Shared],
            run_test_guaranteed_update_with_suggestion_and_conflict => run_test_guaranteed_update_with_suggestion_and_conflict [Shared],
            run_test_guaranteed_update_with_stale_suggestion_failing_precondition => run_test_guaranteed_update_with_stale_suggestion_failing_precondition [Shared],
            run_test_transformation_failure => run_test_transformation_failure [Shared],
            run_test_undecodable_value => run_test_undecodable_value [Shared],
            run_test_count => run_test_count [Shared],
            run_test_invalid_keys => run_test_invalid_keys [Shared],
            run_test_no_lost_updates => run_test_no_lost_updates [Shared],
        );
    };
}

/// Corrupt objects under kube's `AllowUnsafeMalformedObjectDeletion` (k8s.io/apiserver
/// v0.37's cases, 3): lists naming every corrupt object, a list failing at the first
/// without the gate, and a watch seeing an object deleted unread. The backend must
/// make stores with the gate on and off
/// ([`Backend::store_with_unsafe_malformed_object_deletion`](crate::suite::Backend::store_with_unsafe_malformed_object_deletion)).
#[macro_export]
macro_rules! corrupt_object_conformance {
    ($backend:path) => {
        $crate::conformance_cases!($backend;
            run_test_get_list_with_error_aggregation => run_test_get_list_with_error_aggregation [Fresh],
            run_test_get_list_without_error_aggregation => run_test_get_list_without_error_aggregation [Fresh],
            run_test_watch_with_unsafe_delete => run_test_watch_with_unsafe_delete [Fresh],
        );
    };
}

/// The interface kube gained after v0.31.1 (k8s.io/apiserver v0.37's cases, 4):
/// `GetCurrentResourceVersion`, `Stats` without and with size estimation, and
/// `CompactRevision`. The last expects the store to see a compaction made by the
/// backend around it, which the etcd3 store does from kube 1.34 on: run these with a
/// store at 1.34 or later.
#[macro_export]
macro_rules! interface_conformance {
    ($backend:path) => {
        $crate::conformance_cases!($backend;
            run_test_get_current_resource_version => run_test_get_current_resource_version [Fresh],
            run_test_stats => run_test_stats [Shared],
            run_test_stats_with_size_estimation => run_test_stats_with_size_estimation [Shared],
            run_test_compact_revision => run_test_compact_revision [Fresh],
        );
    };
}

/// The list cases of `store_tests.go`: `RunTestList` and the paging, resourceVersion
/// and continue cases, and the tokens' bytes (11).
#[macro_export]
macro_rules! list_conformance {
    ($backend:path) => {
        $crate::conformance_cases!($backend;
            list_table_over_multi_level_data => run_test_list [Fresh],
            consistent_list_answers_the_current_revision => run_test_consistent_list [Fresh],
            non_recursive_list_reads_one_key_at_any_revision => run_test_get_list_non_recursive [Fresh],
            recursive_list_of_an_object_key_lists_nothing => run_test_get_list_recursive_prefix [Shared],
            continued_pages_keep_the_first_page_revision_and_read_once => run_test_list_continuation [Fresh],
            rare_object_is_found_in_ten_doubling_reads => run_test_list_pagination_rare_object [Shared],
            filtered_pages_fetch_more_but_decode_only_what_they_need => run_test_list_continuation_with_filter [Fresh],
            compacted_continue_token_is_gone_with_an_inconsistent_one => run_test_list_inconsistent_continuation [Fresh],
            exact_list_at_a_list_revision_is_identical_despite_concurrent_writes => run_test_list_resource_version_match [Shared],
            one_undecryptable_item_fails_the_whole_list => run_test_transformation_failure_list [Shared],
            continue_tokens_are_kube_apiservers => run_test_continue_tokens_are_kube_apiservers [Shared],
        );
    };
}

/// The watch cases of `watcher_tests.go` and `etcd3/watcher_test.go`, and the watch
/// error cases every backend must answer alike (20).
#[macro_export]
macro_rules! watch_conformance {
    ($backend:path) => {
        $crate::conformance_cases!($backend;
            run_test_watch => run_test_watch [Shared],
            run_test_delete_trigger_watch => run_test_delete_trigger_watch [Shared],
            run_test_watch_from_non_zero => run_test_watch_from_non_zero [Shared],
            run_test_delayed_watch_delivery => run_test_delayed_watch_delivery [Shared],
            run_test_watch_error => run_test_watch_error [Shared],
            run_test_watch_context_cancel => run_test_watch_context_cancel [Shared],
            run_test_watcher_timeout => run_test_watcher_timeout [Shared],
            run_test_watch_delete_event_object_have_latest_rv => run_test_watch_delete_event_object_have_latest_rv [Shared],
            run_test_cluster_scoped_watch => run_test_cluster_scoped_watch [Shared],
            run_test_namespace_scoped_watch => run_test_namespace_scoped_watch [Shared],
            run_send_initial_events_backward_compatibility => run_send_initial_events_backward_compatibility [Shared],
            run_watch_semantic_initial_events_extended => run_watch_semantic_initial_events_extended [Fresh],
            run_test_watch_from_zero => run_test_watch_from_zero [Fresh],
            run_test_progress_notify => run_test_progress_notify [ProgressNotify],
            run_test_watch_dispatch_bookmark_events => run_test_watch_dispatch_bookmark_events [ProgressNotify],
            run_watch_semantics => run_watch_semantics [Fresh],
            run_test_too_large_resource_version_error_for_watch_list => run_test_too_large_resource_version_error_for_watch_list [Fresh],
            invalid_resource_version_is_refused => run_test_invalid_resource_version_is_refused [Shared],
            undecodable_value_ends_watch_with_internal_error => run_test_undecodable_value_ends_watch [Shared],
            missing_previous_value_is_internal_error => run_test_missing_previous_value_ends_watch [Fresh],
        );
    };
}
