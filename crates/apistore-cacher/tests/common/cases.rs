// The suite's cases that run on the cached store: `store_conformance!`,
// `list_conformance!` and `watch_conformance!` without the cases a cache cannot pass
// by design. Those are listed, with the reason, in docs/watch-cache.md ("The
// conformance suite on the cache"); keep the two in step. The watch-list cases that
// need progress requests are added by the backends that support them.
apistore_testing::store_conformance!(backend);
apistore_testing::conformance_cases!(backend;
    non_recursive_list_reads_one_key_at_any_revision => run_test_get_list_non_recursive [Fresh],
    recursive_list_of_an_object_key_lists_nothing => run_test_get_list_recursive_prefix [Shared],
    exact_list_at_a_list_revision_is_identical_despite_concurrent_writes => run_test_list_resource_version_match [Shared],
    continue_tokens_are_kube_apiservers => run_test_continue_tokens_are_kube_apiservers [Shared],
);
apistore_testing::conformance_cases!(backend;
    run_test_watch => run_test_watch [Shared],
    run_test_delete_trigger_watch => run_test_delete_trigger_watch [Shared],
    run_test_watch_from_non_zero => run_test_watch_from_non_zero [Shared],
    run_test_delayed_watch_delivery => run_test_delayed_watch_delivery [Shared],
    run_test_watch_context_cancel => run_test_watch_context_cancel [Shared],
    run_test_watcher_timeout => run_test_watcher_timeout [Shared],
    run_test_watch_delete_event_object_have_latest_rv => run_test_watch_delete_event_object_have_latest_rv [Shared],
    run_test_cluster_scoped_watch => run_test_cluster_scoped_watch [Shared],
    run_test_namespace_scoped_watch => run_test_namespace_scoped_watch [Shared],
    run_send_initial_events_backward_compatibility => run_send_initial_events_backward_compatibility [Shared],
    run_test_watch_from_zero => run_test_watch_from_zero [Fresh],
    run_test_watch_dispatch_bookmark_events => run_test_watch_dispatch_bookmark_events [ProgressNotify],
    invalid_resource_version_is_refused => run_test_invalid_resource_version_is_refused [Shared],
);
