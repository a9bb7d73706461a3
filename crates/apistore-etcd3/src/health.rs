//! Health and readiness of etcd, as kube-apiserver's `/healthz` and `/readyz` etcd
//! checks see them.
//!
//! Follows `newETCD3Check` and `etcd3ProberMonitor.Probe` in
//! `pkg/storage/storagebackend/factory/etcd3.go` of k8s.io/apiserver v0.31.1:
//!
//! - a probe is a (linearizable) read of `<prefix>/health`, path-joined
//!   (`/registry/health`); any answer is healthy, a missing key included, and an error
//!   is `error getting data from etcd: <err>`;
//! - each probe has a timeout, 2 s by default, separately for health and readiness;
//! - probes are rate limited to one per half timeout; a call in between gets the
//!   result of the last probe *sent* (a slow probe that ends after a newer one does not
//!   overwrite the newer one's result).
//!
//! The reference builds the probe's etcd client in the background and answers
//! `etcd client connection not yet established` until it exists; here the checker is
//! built from an [`EtcdClient`], which connects lazily, so that answer only reaches a
//! caller that comes while the very first probe is still out. Closing the prober on
//! shutdown is left to dropping the checker.
//!
//! [`Storage::readiness_check`](apistore_storage::Storage::readiness_check) of the
//! store stays `Ok(())`, as the reference's `etcd3.store.ReadinessCheck` does: the
//! reference wires etcd readiness into `/readyz` through this probe
//! (`CreateReadyCheck`), not through the storage interface.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::client::EtcdClient;

/// kube-apiserver's default health-check timeout (`--etcd-healthcheck-timeout`).
pub const DEFAULT_HEALTHCHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// kube-apiserver's default readiness-check timeout (`--etcd-readycheck-timeout`).
pub const DEFAULT_READINESS_TIMEOUT: Duration = Duration::from_secs(2);

/// Why etcd is not healthy (or not ready).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HealthError {
    /// No probe has finished yet (the reference's answer before its client exists).
    #[error("etcd client connection not yet established")]
    NotEstablished,
    /// etcd answered the probe with an error, or could not be reached.
    #[error("error getting data from etcd: {message}")]
    Etcd {
        /// The etcd client's error.
        message: String,
    },
    /// etcd did not answer within the probe's timeout (the reference's
    /// `context deadline exceeded`).
    #[error("error getting data from etcd: no answer within {timeout:?}")]
    Timeout {
        /// The probe's timeout.
        timeout: Duration,
    },
}

impl HealthError {
    /// Whether the probe timed out.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }
}

/// How to probe etcd. `Default` is kube-apiserver's: prefix `/registry`, 2 s timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthConfig {
    /// The storage prefix; the probe reads `<prefix>/health`.
    pub prefix: String,
    /// The timeout of a health probe; zero means the default.
    pub healthcheck_timeout: Duration,
    /// The timeout of a readiness probe; zero means the default.
    pub readiness_timeout: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        Self {
            prefix: "/registry".to_owned(),
            healthcheck_timeout: DEFAULT_HEALTHCHECK_TIMEOUT,
            readiness_timeout: DEFAULT_READINESS_TIMEOUT,
        }
    }
}

impl HealthConfig {
    /// The default config for another storage prefix.
    pub fn for_prefix(prefix: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            ..Self::default()
        }
    }
}

/// Health and readiness probes of one etcd cluster, each rate limited and cached.
///
/// Cheap to call as often as a load balancer likes: at most one etcd read per half
/// timeout per probe kind.
///
/// ```no_run
/// use apistore_etcd3::{ClientConfig, EtcdClient, HealthChecker, HealthConfig};
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let client = EtcdClient::connect(&ClientConfig::new(["http://127.0.0.1:2379"])).await?;
/// let checker = HealthChecker::new(&client, HealthConfig::default());
/// checker.health().await?; // /healthz
/// checker.readiness().await?; // /readyz
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct HealthChecker {
    client: EtcdClient,
    key: String,
    health: Probe,
    readiness: Probe,
}

impl HealthChecker {
    /// A checker of the etcd behind `client`.
    pub fn new(client: &EtcdClient, config: HealthConfig) -> Self {
        let or_default = |timeout: Duration, default| {
            if timeout.is_zero() { default } else { timeout }
        };
        Self {
            client: client.clone(),
            key: health_key(&config.prefix),
            health: Probe::new(or_default(
                config.healthcheck_timeout,
                DEFAULT_HEALTHCHECK_TIMEOUT,
            )),
            readiness: Probe::new(or_default(
                config.readiness_timeout,
                DEFAULT_READINESS_TIMEOUT,
            )),
        }
    }

    /// The key the probes read, e.g. `/registry/health`.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The timeouts of the liveness and of the readiness probe, once defaults applied.
    pub fn timeouts(&self) -> (Duration, Duration) {
        (self.health.timeout, self.readiness.timeout)
    }

    /// How many liveness and readiness probes have reached etcd so far: the rate limit
    /// at work (every other call is answered with the last probe's result).
    pub fn probes_sent(&self) -> (u64, u64) {
        (
            self.health.sent.load(Ordering::SeqCst),
            self.readiness.sent.load(Ordering::SeqCst),
        )
    }

    /// The liveness check (`/healthz`'s `etcd`).
    pub async fn health(&self) -> Result<(), HealthError> {
        self.health.check(self.read(self.health.timeout)).await
    }

    /// The readiness check (`/readyz`'s `etcd-readiness`), with its own timeout and
    /// rate limit.
    pub async fn readiness(&self) -> Result<(), HealthError> {
        self.readiness
            .check(self.read(self.readiness.timeout))
            .await
    }

    /// One probe: a read of the health key within `timeout`.
    async fn read(&self, timeout: Duration) -> Result<(), HealthError> {
        let mut kv = self.client.inner.kv_client();
        match tokio::time::timeout(timeout, kv.get(self.key.as_str(), None)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(err)) => Err(HealthError::Etcd {
                message: err.to_string(),
            }),
            Err(_) => Err(HealthError::Timeout { timeout }),
        }
    }
}

/// `path.Join("/", prefix, "health")`: slashes collapsed, `.` and `..` resolved.
fn health_key(prefix: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in prefix.split('/').chain(["health"]) {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    format!("/{}", segments.join("/"))
}

/// One kind of probe: its timeout, its rate limit and its last result.
#[derive(Debug)]
struct Probe {
    timeout: Duration,
    /// When the rate limit lets the next probe through (`None`: now).
    next_allowed: Mutex<Option<Instant>>,
    last: Mutex<LastResult>,
    /// Probes sent to etcd.
    sent: AtomicU64,
}

impl Probe {
    fn new(timeout: Duration) -> Self {
        Self {
            timeout,
            next_allowed: Mutex::new(None),
            last: Mutex::new(LastResult::default()),
            sent: AtomicU64::new(0),
        }
    }

    /// Runs `probe` if the rate limit allows, else answers with the last result.
    async fn check<F>(&self, probe: F) -> Result<(), HealthError>
    where
        F: Future<Output = Result<(), HealthError>>,
    {
        let sent_at = Instant::now();
        if !self.allow(sent_at) {
            return self
                .last
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .result
                .clone();
        }
        self.sent.fetch_add(1, Ordering::SeqCst);
        let result = probe.await;
        self.last
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .store(result.clone(), sent_at);
        result
    }

    /// A token bucket of one token, refilled every half timeout.
    fn allow(&self, now: Instant) -> bool {
        let mut next = self
            .next_allowed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if next.is_some_and(|at| now < at) {
            return false;
        }
        *next = Some(now + self.timeout / 2);
        true
    }
}

/// The result of the most recently *sent* probe that has finished.
#[derive(Debug, Clone)]
struct LastResult {
    sent_at: Option<Instant>,
    result: Result<(), HealthError>,
}

impl Default for LastResult {
    fn default() -> Self {
        Self {
            sent_at: None,
            result: Err(HealthError::NotEstablished),
        }
    }
}

impl LastResult {
    /// Keeps `result` unless a probe sent later has already stored its own.
    fn store(&mut self, result: Result<(), HealthError>, sent_at: Instant) {
        if self.sent_at.is_none_or(|stored| stored < sent_at) {
            self.sent_at = Some(sent_at);
            self.result = result;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn etcd_down() -> HealthError {
        HealthError::Etcd {
            message: "etcd down".to_owned(),
        }
    }

    /// factory/etcd3_test.go `Test_atomicLastError`.
    #[test]
    fn the_last_result_is_that_of_the_latest_probe_sent() {
        let mut last = LastResult::default();
        assert_eq!(last.result, Err(HealthError::NotEstablished));
        let earlier = Instant::now();
        let now = earlier + Duration::from_secs(5);
        last.store(Err(etcd_down()), earlier);
        assert_eq!(
            last.result,
            Err(etcd_down()),
            "no timestamp yet: always stored"
        );
        last.store(Ok(()), now);
        assert_eq!(last.result, Ok(()), "a newer probe's result is stored");
        last.store(Err(etcd_down()), earlier);
        assert_eq!(last.result, Ok(()), "an older probe's result is not");
    }

    #[test]
    fn the_health_key_is_path_joined_under_the_prefix() {
        for (prefix, key) in [
            ("/registry", "/registry/health"),
            ("registry", "/registry/health"),
            ("/registry/", "/registry/health"),
            ("", "/health"),
            ("/", "/health"),
            ("/a//b/./c/../d", "/a/b/d/health"),
        ] {
            assert_eq!(health_key(prefix), key, "prefix {prefix:?}");
        }
    }

    #[test]
    fn errors_read_as_the_reference_words_them() {
        assert_eq!(
            etcd_down().to_string(),
            "error getting data from etcd: etcd down"
        );
        assert_eq!(
            HealthError::NotEstablished.to_string(),
            "etcd client connection not yet established"
        );
        let timeout = HealthError::Timeout {
            timeout: Duration::from_secs(2),
        };
        assert!(timeout.is_timeout());
        assert!(
            timeout
                .to_string()
                .starts_with("error getting data from etcd: ")
        );
    }

    /// factory/etcd3_test.go `TestTimeTravelHealthcheck`, on the probe's rate limit and
    /// cache alone: a slow failing probe that ends after a newer successful one does
    /// not overwrite its result.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_probe_does_not_overwrite_a_newer_result() {
        let probe = Arc::new(Probe::new(Duration::from_millis(600)));
        let slow = {
            let probe = Arc::clone(&probe);
            tokio::spawn(async move {
                probe
                    .check(async {
                        tokio::time::sleep(Duration::from_millis(400)).await;
                        Err(etcd_down())
                    })
                    .await
            })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Limited while the first is out, and nothing stored yet.
        assert_eq!(
            probe.check(async { Ok(()) }).await,
            Err(HealthError::NotEstablished)
        );
        // After half the timeout, a new probe goes through and succeeds.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(probe.check(async { Ok(()) }).await, Ok(()));
        assert_eq!(
            slow.await.unwrap(),
            Err(etcd_down()),
            "the slow probe failed"
        );
        assert_eq!(probe.sent.load(Ordering::SeqCst), 2);
        // The limited answer is the newer probe's success.
        assert_eq!(probe.check(async { Err(etcd_down()) }).await, Ok(()));
        assert_eq!(probe.sent.load(Ordering::SeqCst), 2);
    }

    // The probes against etcd (timeouts, rate limit, a missing key) are tested from
    // tests/health.rs.
}
