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
);
