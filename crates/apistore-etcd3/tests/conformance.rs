//! kube-apiserver's storage conformance cases, run against the etcd3 store and a real
//! etcd (shared by the tests of this binary, each under a prefix of its own).

mod common;

use apistore_testing::suite;
use common::Etcd3Backend;

macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $name() {
                let backend = Etcd3Backend::new(stringify!($name)).await;
                suite::$name(&backend).await;
            }
        )*
    };
}

conformance!(
    run_test_create,
    run_test_create_with_key_exist,
    run_test_create_with_ttl,
    run_test_get,
    run_test_unconditional_delete,
    run_test_conditional_delete,
    run_test_delete_with_suggestion,
    run_test_delete_with_suggestion_and_conflict,
    run_test_delete_with_conflict,
    run_test_delete_with_suggestion_of_deleted_object,
    run_test_validate_deletion_with_suggestion,
    run_test_validate_deletion_with_only_suggestion_valid,
    run_test_preconditional_delete_with_suggestion,
    run_test_preconditional_delete_with_only_suggestion_pass,
    run_test_guaranteed_update,
    run_test_guaranteed_update_with_ttl,
    run_test_guaranteed_update_checks_stored_data,
    run_test_guaranteed_update_with_conflict,
    run_test_guaranteed_update_with_suggestion_and_conflict,
    run_test_guaranteed_update_with_stale_suggestion_failing_precondition,
    run_test_transformation_failure,
    run_test_undecodable_value,
    run_test_count,
    run_test_invalid_keys,
    run_test_no_lost_updates,
);
