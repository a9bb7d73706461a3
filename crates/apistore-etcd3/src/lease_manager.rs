//! The lease manager: objects with similar TTLs share one etcd lease, as in
//! kube-apiserver's `etcd3/lease_manager.go`, because granting a lease per write is
//! expensive for etcd.

use std::time::{Duration, Instant};

use etcd_client::LeaseClient;
use tokio::sync::Mutex;

/// How leases are reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseManagerConfig {
    /// The longest time in seconds a lease is reused for (default 60).
    pub reuse_duration_seconds: i64,
    /// The most objects attached to one lease (default 1,000; 0 or less means default).
    pub max_object_count: i64,
}

impl Default for LeaseManagerConfig {
    fn default() -> Self {
        Self {
            reuse_duration_seconds: 60,
            max_object_count: 1000,
        }
    }
}

const REUSE_DURATION_PERCENT: f64 = 0.05;

#[derive(Debug, Default)]
struct CachedLease {
    id: i64,
    expires_at: Option<Instant>,
    attached_objects: i64,
}

/// Hands out lease ids for TTLs, reusing the previous lease when its expiry is within
/// the reuse window of the one asked for.
#[derive(Debug)]
pub(crate) struct LeaseManager {
    config: LeaseManagerConfig,
    cached: Mutex<CachedLease>,
}

impl LeaseManager {
    pub(crate) fn new(mut config: LeaseManagerConfig) -> Self {
        if config.max_object_count <= 0 {
            config.max_object_count = LeaseManagerConfig::default().max_object_count;
        }
        Self {
            config,
            cached: Mutex::new(CachedLease::default()),
        }
    }

    /// The reuse window for a TTL: 5% of it, at most the configured duration.
    pub(crate) fn reuse_duration_seconds(&self, ttl: i64) -> i64 {
        // Truncation toward zero is the rule (int64 of the product in the reference).
        let percent = (REUSE_DURATION_PERCENT * ttl as f64) as i64;
        percent.min(self.config.reuse_duration_seconds)
    }

    /// A lease id for an object with `ttl` seconds to live. The lock is held across the
    /// grant so that concurrent writers share the new lease instead of each granting one.
    /// Returns the lease id and, when a new lease was granted, the attached-object count
    /// kube-apiserver observes into `etcd_lease_object_counts` at that moment.
    pub(crate) async fn get_lease(
        &self,
        client: &mut LeaseClient,
        ttl: i64,
    ) -> Result<(i64, Option<i64>), etcd_client::Error> {
        let now = Instant::now();
        let mut cached = self.cached.lock().await;
        let reuse = self.reuse_duration_seconds(ttl);
        let wanted = now + secs(ttl);
        cached.attached_objects += 1;
        if let Some(expires_at) = cached.expires_at {
            let valid = wanted < expires_at;
            let sufficient = wanted + secs(reuse) > expires_at;
            if valid && sufficient && cached.attached_objects <= self.config.max_object_count {
                return Ok((cached.id, None));
            }
        }
        let granted_ttl = ttl + reuse;
        let response = client.grant(granted_ttl, None).await?;
        // As the reference records it: the count includes the object that asked for
        // this new lease.
        let previous_count = cached.attached_objects;
        cached.id = response.id();
        cached.expires_at = Some(now + secs(granted_ttl));
        cached.attached_objects = 1;
        Ok((response.id(), Some(previous_count)))
    }
}

fn secs(seconds: i64) -> Duration {
    Duration::from_secs(seconds.max(0).unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    // TestGetReuseDurationSeconds
    #[test]
    fn reuse_duration_is_five_percent_capped_at_the_configured_duration() {
        let manager = LeaseManager::new(LeaseManagerConfig::default());
        assert_eq!(manager.reuse_duration_seconds(3600), 60);
        assert_eq!(manager.reuse_duration_seconds(1000), 50);
        assert_eq!(manager.reuse_duration_seconds(10), 0);
    }

    #[test]
    fn non_positive_max_object_count_means_the_default() {
        let manager = LeaseManager::new(LeaseManagerConfig {
            reuse_duration_seconds: 60,
            max_object_count: 0,
        });
        assert_eq!(manager.config.max_object_count, 1000);
    }

    // TestLeaseMaxObjectCount runs against etcd, from tests/lease_manager.rs.
}
