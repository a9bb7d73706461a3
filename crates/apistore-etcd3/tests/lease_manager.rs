//! The lease manager against a real etcd, through the store: objects created with the
//! same TTL share a lease until it holds `max_object_count` objects (kube-apiserver's
//! `TestLeaseMaxObjectCount` in `etcd3/lease_manager_test.go`).

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use apistore_etcd3::{
    ClientConfig, Etcd3Store, EtcdClient, LeaseManagerConfig, ResourceConfig, StoreConfig,
};
use apistore_storage::Storage;
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use apistore_testing::suite::Pod;

/// With at most two objects per lease, the third object with the same TTL gets a lease
/// of its own.
#[tokio::test]
async fn a_full_lease_is_not_reused() {
    let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("test etcd: {err}"));
    let endpoint = endpoint.split(',').next().unwrap_or_default().to_owned();
    let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()]))
        .await
        .unwrap();
    let prefix = unique_prefix("lease-max-object-count");
    let store: Etcd3Store<Pod> = Etcd3Store::new(
        client,
        StoreConfig {
            resource: ResourceConfig {
                prefix: prefix.clone(),
                ..ResourceConfig::for_resource("pods")
            },
            lease: LeaseManagerConfig {
                reuse_duration_seconds: 60,
                max_object_count: 2,
            },
            ..StoreConfig::default()
        },
    );
    let mut raw = etcd_client::Client::connect([endpoint.as_str()], None)
        .await
        .unwrap();

    let mut leases = Vec::new();
    for name in ["p1", "p2", "p3"] {
        store
            .create(&format!("pods/ns/{name}"), Pod::new("ns", name), 120)
            .await
            .unwrap();
        let response = raw
            .get(format!("{prefix}/pods/ns/{name}"), None)
            .await
            .unwrap();
        let lease = response.kvs().first().map(etcd_client::KeyValue::lease);
        leases.push(lease.unwrap_or_else(|| panic!("{name} was not stored")));
    }
    assert_ne!(leases[0], 0, "an object with a TTL is stored under a lease");
    assert_eq!(leases[0], leases[1], "the second object reuses the lease");
    assert_ne!(
        leases[1], leases[2],
        "the third object gets a lease of its own"
    );

    for id in [leases[0], leases[2]] {
        // Revoking deletes the objects with their leases: it only tidies the shared etcd.
        let _ = raw.lease_revoke(id).await;
    }
}
