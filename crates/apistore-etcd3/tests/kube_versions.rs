//! Where kube versions' storage layers differ, the store follows the one it is told
//! (`StoreConfig::kube_version`): a list at a revision etcd has not reached is etcd's
//! error passed on (500) up to kube 1.33, and from 1.34 a too-large resourceVersion
//! (504, with etcd's current revision), as k8s.io/apiserver v0.34's `listReadError`.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig};
use apistore_storage::{KubeVersion, ListOptions, ResourceVersionMatch, Storage, StorageError};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use apistore_testing::suite::Pod;

async fn store(kube_version: KubeVersion) -> Etcd3Store<Pod> {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("test etcd: {err}"));
    let client = EtcdClient::connect(&ClientConfig::new(endpoint.split(',')))
        .await
        .unwrap();
    Etcd3Store::new(
        client,
        StoreConfig {
            resource: ResourceConfig {
                prefix: unique_prefix("kube-versions"),
                kube_version,
                ..ResourceConfig::for_resource("pods")
            },
            ..StoreConfig::default()
        },
    )
}

fn exact(rv: u64) -> ListOptions {
    ListOptions {
        resource_version: rv.to_string(),
        resource_version_match: ResourceVersionMatch::Exact,
        recursive: true,
        ..ListOptions::default()
    }
}

#[tokio::test]
async fn a_list_at_a_future_revision_is_too_large_from_kube_134() {
    for version in [KubeVersion::V1_34, KubeVersion::LATEST] {
        let store = store(version).await;
        let created = store
            .create("pods/ns/a", Pod::new("ns", "a"), 0)
            .await
            .unwrap();
        let now: u64 = created.metadata.resource_version.parse().unwrap();
        let err = store
            .list("pods/ns", &exact(now + 1_000_000))
            .await
            .unwrap_err();
        let StorageError::ResourceVersionTooLarge {
            requested, current, ..
        } = &err
        else {
            panic!("{version}: {err}");
        };
        assert_eq!(*requested, now + 1_000_000, "{version}");
        assert!(
            *current >= now && *current < now + 1_000_000,
            "{version}: {err}"
        );
        let status = err.status();
        assert_eq!(
            (status.code, status.reason.to_string()),
            (504, "Timeout".to_owned())
        );
        assert!(
            status
                .message
                .contains(&format!("Too large resource version: {}", now + 1_000_000)),
            "{}",
            status.message
        );
    }
}

#[tokio::test]
async fn a_list_at_a_future_revision_is_etcds_error_up_to_kube_133() {
    for version in [KubeVersion::V1_31, KubeVersion::V1_33] {
        let store = store(version).await;
        store
            .create("pods/ns/a", Pod::new("ns", "a"), 0)
            .await
            .unwrap();
        let err = store
            .list("pods/ns", &exact(900_000_000_000))
            .await
            .unwrap_err();
        assert!(!err.is_too_large_resource_version(), "{version}: {err}");
        assert_eq!(err.status().code, 500, "{version}: {err}");
        assert!(
            err.to_string().contains("future revision"),
            "{version}: {err}"
        );
    }
}
