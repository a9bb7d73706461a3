//! The tests of [`super::PACKAGES`] that do not run on kine, each with why; the run
//! skips them by name and prints them with their reasons first.

/// A test that does not apply to kine: the binary (cargo target name), the test's full
/// name, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotApplicable {
    /// The test binary's target name (`watch_conformance`, `command`).
    pub(crate) target: &'static str,
    /// The test's name as the binary lists it (`--list`), matched exactly.
    pub(crate) test: &'static str,
    /// What kine lacks, or why the test cannot be about kine.
    pub(crate) reason: &'static str,
}

/// Starts an etcd of its own (to stop, kill or restart it, to give it flags, or to
/// build a cluster): whatever it shows is about that etcd, not kine.
const OWN_ETCD: &str = "starts an etcd process of its own (stops, kills or restarts it, or \
                        passes it flags): not about kine; runs on etcd in `cargo xtask test`";
/// Talks to a fake server (a port that never answers, one that is not etcd).
const FAKE_SERVER: &str = "talks to a fake server (a silent port, a server that is not etcd), \
                           never to the endpoint under test";
/// kine keeps no per-key version counter.
const NO_KEY_VERSION: &str = "kine keeps no per-key version counter: every key-value's \
                              `version` is 0 (the command prints what the server says; etcd \
                              says 1 after a create)";
/// kine refuses DeleteRange.
const NO_DELETE_RANGE: &str = "the test tidies up with a raw DeleteRange, which kine refuses \
                               (`delete is not implemented by kine`); apistore itself sends \
                               only kube-apiserver's conditional delete transaction";
/// kine's leases are not etcd's.
const LEASE_ID_IS_TTL: &str = "kine's LeaseGrant answers the TTL as the lease ID, so two grants \
                               of one TTL share an ID; the lease manager's reuse limit cannot \
                               be seen (objects still expire by their TTL)";
/// kine has no request size limit.
const NO_REQUEST_LIMIT: &str = "kine has no request size limit (etcd's --max-request-bytes, \
                                1.5 MiB), so the oversized create the test expects refused \
                                succeeds";
/// kine answers a re-create with a revision that is not the create's.
const RECREATE_REVISION: &str = "kine v0.17.3 to v0.17.5 answers a create of a key that \
    was deleted before with its cached current revision, not the revision the create wrote \
    at (pkg/logstructured/logstructured.go, Create: the second try's `rev, event, err :=` \
    shadows the `rev` returned, which stays 0 and is replaced by CurrentRevision; v0.17.0 to \
    v0.17.2 return the insert's id). The case re-creates its key before every step and expects an \
    update that changes nothing to keep the create's resourceVersion; when another client \
    writes at the same time kine's answer is off by 1 to 3 (kine's trace: `CREATE ... => \
    rev=52005` for the row it broadcast at 52004). Failed 1 CI run on kine-postgres, and 6 \
    of 16 runs beside a second run of the binary (0 of 15 alone). kube-apiserver on kine \
    gets the same answer";
/// kine has RangeStream though it reports an etcd without it.
const STREAMS_AS_3_6: &str = "kine v0.17.5 implements RangeStream itself \
    (pkg/server/rangestream.go) while it reports etcd 3.6.11, its emulated version: the \
    test expects the paged fallback from that version, and kine streams instead. Lists on \
    kine at kube 1.37 do stream: the kube_1_37 list cases that run on kine pass";
/// kine drops a progress request it cannot answer at once.
const PROGRESS_DROPPED: &str = "kine answers a progress request only when every watch of the \
                                stream has been sent the current revision and otherwise drops \
                                it (v0.17.5 pkg/server/watch.go, ProgressAll), where etcd \
                                defers it until they catch up; kube-apiserver's cacher (and \
                                apistore's) asks again every 100 ms, this test asks once, so a \
                                write by a test running beside it leaves it unanswered (failed \
                                1 kine-postgres run of 3; beside writing tests 1 of 6, alone 0 \
                                of 6)";

/// Every test of [`PACKAGES`] that does not run on kine. docs/conformance.md's
/// "Backends" section lists the same, with the same reasons.
pub(crate) const NOT_APPLICABLE: &[NotApplicable] = &[
    // What kine does not have.
    NotApplicable {
        target: "command",
        test: "keys_lists_metadata_and_encoding_without_decrypting",
        reason: NO_KEY_VERSION,
    },
    NotApplicable {
        target: "hostile_input",
        test: "arbitrary_bytes_in_etcd_are_internal_errors_naming_the_key_and_stay_untouched",
        reason: NO_DELETE_RANGE,
    },
    NotApplicable {
        target: "lease_manager",
        test: "a_full_lease_is_not_reused",
        reason: LEASE_ID_IS_TTL,
    },
    NotApplicable {
        target: "conformance",
        test: "run_test_guaranteed_update",
        reason: RECREATE_REVISION,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "request_watch_progress_on_this_etcd",
        reason: PROGRESS_DROPPED,
    },
    NotApplicable {
        target: "telemetry",
        test: "exposition_after_a_known_sequence_of_store_operations",
        reason: NO_REQUEST_LIMIT,
    },
    NotApplicable {
        target: "telemetry",
        test: "store_calls_under_a_callers_trace_export_the_reference_spans",
        reason: NO_REQUEST_LIMIT,
    },
    // Tests of etcd itself, on an etcd of their own.
    NotApplicable {
        target: "compactor",
        test: "a_compactor_compacts_to_the_revision_seen_one_interval_earlier",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "a_shared_compactor_starts_again_after_every_share_is_gone",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "a_smaller_interval_replaces_the_shared_compactor",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "a_zero_interval_compacts_nothing",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "dropping_a_compactor_stops_it",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "stopping_a_compactor_ends_its_task",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "two_compactors_compact_once_per_interval_between_them",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_frozen_leader_slows_nobody_for_long",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_watch_across_the_leaders_death_goes_on_without_a_gap",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_watch_ends_with_service_unavailable_once_etcd_stays_away_past_the_limit",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_watch_whose_member_dies_resumes_on_another_member",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "five_leader_kills_under_sixteen_writers_end_no_watch",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "killing_and_restarting_a_single_etcd_under_load_loses_no_acknowledged_write",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "killing_the_leader_under_load_loses_no_acknowledged_write",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "health",
        test: "a_missing_health_key_is_healthy_and_ready",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "health",
        test: "probes_are_rate_limited_to_one_per_half_timeout",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "health",
        test: "probes_time_out_after_their_own_timeout",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "compacted_continue_token_is_gone_with_an_inconsistent_one",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::compacted_continue_token_is_gone_with_an_inconsistent_one",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::consistent_list_answers_the_current_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::continued_pages_keep_the_first_page_revision_and_read_once",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::filtered_pages_fetch_more_but_decode_only_what_they_need",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::list_table_over_multi_level_data",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::non_recursive_list_reads_one_key_at_any_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "range_stream",
        test: "streamed_lists_at_a_future_or_compacted_revision_fail_as_paged_ones_do",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "range_stream",
        test: "unlimited_lists_stream_on_etcd_3_7_and_page_with_range_before_it",
        reason: STREAMS_AS_3_6,
    },
    NotApplicable {
        target: "range_stream",
        test: "a_member_dying_mid_stream_fails_the_list_and_the_next_list_is_whole",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "range_stream",
        test: "list_chunks_hands_out_the_list_chunk_by_chunk",
        reason: STREAMS_AS_3_6,
    },
    NotApplicable {
        target: "range_stream",
        test: "a_watchs_initial_state_streams_at_kube_1_37_on_etcd_3_7",
        reason: STREAMS_AS_3_6,
    },
    NotApplicable {
        target: "list_conformance",
        test: "consistent_list_answers_the_current_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "continued_pages_keep_the_first_page_revision_and_read_once",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "filtered_pages_fetch_more_but_decode_only_what_they_need",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "list_table_over_multi_level_data",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "non_recursive_list_reads_one_key_at_any_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "polling",
        test: "the_storage_size_is_the_members_db_size_and_goes_when_etcd_does",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "a_plain_http_etcd_behind_an_https_endpoint_is_a_tls_error",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "a_server_name_the_certificate_lacks_is_refused",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "etcd_users_authenticate_at_connect_and_secrets_stay_hidden",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "mutual_tls_needs_a_client_certificate_etcd_trusts",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "tls_and_a_password_together",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "tls_with_a_wrong_ca_fails_at_connect_saying_the_server_is_not_trusted",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "tls_with_the_right_ca_creates_and_gets",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "dropped_watches_cancel_their_etcd_watchers",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "lost_etcd_resumes_the_watch_once_it_is_back",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "missing_previous_value_is_internal_error",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "request_watch_progress_with_a_watch_at_a_future_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_progress_notify",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_too_large_resource_version_error_for_watch_list",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_watch_dispatch_bookmark_events",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_watch_from_zero",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_watch_semantics",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_watch_semantic_initial_events_extended",
        reason: OWN_ETCD,
    },
    // Tests of no server at all.
    NotApplicable {
        target: "faults",
        test: "an_endpoint_that_is_not_etcd_is_service_unavailable_with_a_hint",
        reason: FAKE_SERVER,
    },
    NotApplicable {
        target: "faults",
        test: "an_etcd_that_never_answers_fails_calls_with_a_timeout_within_the_deadline",
        reason: FAKE_SERVER,
    },
];

/// The arguments that skip `target`'s tests that do not apply to kine.
pub(super) fn skip_args(target: &str) -> Vec<&'static str> {
    let mut args = Vec::new();
    for case in NOT_APPLICABLE.iter().filter(|case| case.target == target) {
        args.extend(["--skip", case.test]);
    }
    if !args.is_empty() {
        // `--skip` matches substrings unless told otherwise.
        args.push("--exact");
    }
    args
}

/// Prints every test that does not run on kine, with why.
pub(super) fn print_not_applicable() {
    println!(
        "xtask: {} tests do not apply to kine and are skipped:",
        NOT_APPLICABLE.len()
    );
    for case in NOT_APPLICABLE {
        println!("  {} {}: {}", case.target, case.test, case.reason);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn skips_are_exact_and_explained() {
        for case in NOT_APPLICABLE {
            assert!(!case.reason.is_empty(), "{case:?}");
            assert!(!case.test.is_empty() && !case.target.is_empty(), "{case:?}");
            let same = NOT_APPLICABLE
                .iter()
                .filter(|other| other.target == case.target && other.test == case.test)
                .count();
            assert_eq!(same, 1, "listed twice: {case:?}");
        }
        assert!(skip_args("no_such_binary").is_empty());
    }
}
