//! kube 1.34+'s `DetectCacheInconsistency`: a cache that agrees with its backend passes
//! the check; a cache whose watch lost an object's creation fails it, drops its
//! snapshots and lists the backend again, after which it passes; each check counts in
//! `apiserver_storage_consistency_checks_total`. The periodic checker finds the same
//! injected inconsistency by itself; kube 1.31's cache does not check.

// A test: a failed step must fail it loudly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

mod common;

use apistore_cacher::{Cacher, CacherConfig, CacherMetrics};
use apistore_memory::KvConfig;
use apistore_storage::{KubeVersion, ListOptions, ResourceVersionMatch, Storage};
use apistore_testing::metrics::counter;
use apistore_testing::suite::Pod;
use common::wrapped::Wrapped;

fn checks(registry: &prometheus::Registry, status: &str) -> f64 {
    counter(
        registry,
        "apiserver_storage_consistency_checks_total",
        &[("resource", "pods"), ("status", status)],
    )
}

async fn cacher(
    backend: &Wrapped,
    config: CacherConfig<Pod>,
) -> (Cacher<Wrapped>, prometheus::Registry) {
    let registry = prometheus::Registry::new();
    let mut config = config.with_key_fn(Pod::key);
    config.metrics = Some(CacherMetrics::register(&registry).unwrap());
    let cacher = Cacher::new(backend.clone(), config);
    cacher.wait_until_ready().await.unwrap();
    (cacher, registry)
}

async fn create(backend: &Wrapped, name: &str) -> u64 {
    let pod = Pod::new("ns", name);
    let created = backend.create(&pod.key(), pod, 0).await.unwrap();
    created.metadata.resource_version.parse().unwrap()
}

/// Creates `hidden`, which the cache's watch does not see, then `visible`, and waits
/// for the cache to reach it: the cache now lacks `hidden`.
async fn lose_an_object(backend: &Wrapped, cacher: &Cacher<Wrapped>) {
    *backend.lost.lock().unwrap() = Some("hidden".to_owned());
    create(backend, "hidden").await;
    let rv = create(backend, "visible").await;
    cacher.wait_until_fresh(rv).await.unwrap();
}

/// The names the cache lists, or `None` while it (re)initializes (429): the re-list a
/// found inconsistency asks for may start between a readiness check and the list.
async fn cached_names(cacher: &Cacher<Wrapped>) -> Option<Vec<String>> {
    let options = ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan);
    match cacher.list("/pods", &options).await {
        Ok(list) => Some(
            list.items
                .into_iter()
                .map(|pod| pod.metadata.name)
                .collect(),
        ),
        Err(err) if err.status().code == 429 => None,
        Err(err) => panic!("listing the cache: {err}"),
    }
}

/// Waits (up to 30 s) until the cache holds `hidden` again, after its re-list.
async fn wait_for_relist(cacher: &Cacher<Wrapped>) {
    let relisted = async {
        loop {
            let names = cached_names(cacher).await.unwrap_or_default();
            if names.contains(&"hidden".to_owned()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), relisted)
        .await
        .expect("the cache did not list the backend again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_injected_inconsistency_is_detected_and_repaired() {
    let backend = Wrapped::new(KvConfig::default());
    for name in ["a", "b"] {
        create(&backend, name).await;
    }
    let mut config = CacherConfig::new("/pods", "pods");
    config.consistency_check_period = None;
    let (cacher, registry) = cacher(&backend, config).await;

    let check = cacher.check_consistency().await.unwrap();
    assert!(check.consistent(), "{check:?}");
    assert_eq!(check.resource_version, cacher.resource_version());
    assert_eq!(check.first_difference, None);
    assert_eq!(checks(&registry, "success"), 1.0);

    lose_an_object(&backend, &cacher).await;
    assert!(cacher.snapshot_count() > 0);
    let check = cacher.check_consistency().await.unwrap();
    assert!(!check.consistent(), "{check:?}");
    let (in_cache, in_backend) = check.first_difference.clone().unwrap();
    assert!(in_backend.starts_with("ns/hidden/"), "{check:?}");
    assert!(in_cache.starts_with("ns/visible/"), "{check:?}");
    assert_eq!(checks(&registry, "failure"), 1.0);

    wait_for_relist(&cacher).await;
    let check = cacher.check_consistency().await.unwrap();
    assert!(check.consistent(), "{check:?}");
    assert_eq!(checks(&registry, "success"), 2.0);
    assert!(
        cacher.snapshot_count() > 0,
        "snapshots again after the re-list"
    );
    assert_eq!(
        counter(
            &registry,
            "apiserver_watch_cache_initializations_total",
            &[]
        ),
        2.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_checker_finds_it_by_itself() {
    let backend = Wrapped::new(KvConfig::default());
    create(&backend, "a").await;
    let mut config = CacherConfig::new("/pods", "pods");
    config.consistency_check_period = Some(Duration::from_millis(50));
    let (cacher, registry) = cacher(&backend, config).await;
    lose_an_object(&backend, &cacher).await;
    wait_for_relist(&cacher).await;
    assert!(checks(&registry, "failure") >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kube_1_31_does_not_check() {
    let config = CacherConfig::<Pod>::new("/pods", "pods").with_kube_version(KubeVersion::V1_31);
    assert_eq!(config.consistency_check_period, None);
    assert!(!config.list_from_cache_snapshot);
    let config = CacherConfig::<Pod>::new("/pods", "pods").with_kube_version(KubeVersion::V1_34);
    assert!(config.consistency_check_period.is_some());
    assert!(config.list_from_cache_snapshot);
}
