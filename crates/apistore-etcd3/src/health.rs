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
    /// Probes sent to etcd, for tests.
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
    use std::io::{Read, Write};
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::thread;

    use apistore_testing::etcd::{EtcdOptions, EtcdServer};

    use super::*;
    use crate::ClientConfig;

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

    /// A TCP proxy on loopback that can hold etcd's answers back, to make etcd slow
    /// without touching it.
    struct StallingProxy {
        port: u16,
        hold_until: Arc<Mutex<Option<Instant>>>,
        stop: Arc<AtomicBool>,
    }

    impl StallingProxy {
        fn start(upstream_port: u16) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            listener.set_nonblocking(true).unwrap();
            let port = listener.local_addr().unwrap().port();
            let hold_until = Arc::new(Mutex::new(None::<Instant>));
            let stop = Arc::new(AtomicBool::new(false));
            let (hold, stopped) = (Arc::clone(&hold_until), Arc::clone(&stop));
            thread::spawn(move || {
                while !stopped.load(Ordering::SeqCst) {
                    let Ok((client, _)) = listener.accept() else {
                        thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    client.set_nonblocking(false).unwrap();
                    let upstream = TcpStream::connect(("127.0.0.1", upstream_port)).unwrap();
                    let (client_in, upstream_out) =
                        (client.try_clone().unwrap(), upstream.try_clone().unwrap());
                    thread::spawn(move || pipe(client_in, upstream_out, None));
                    let hold = Arc::clone(&hold);
                    thread::spawn(move || pipe(upstream, client, Some(hold)));
                }
            });
            Self {
                port,
                hold_until,
                stop,
            }
        }

        /// Holds every answer that arrives until `delay` from now.
        fn delay_answers(&self, delay: Duration) {
            *self.hold_until.lock().unwrap() = Some(Instant::now() + delay);
        }
    }

    impl Drop for StallingProxy {
        fn drop(&mut self) {
            self.stop.store(true, Ordering::SeqCst);
        }
    }

    /// Copies `from` to `to`, waiting out any hold before forwarding each read.
    fn pipe(mut from: TcpStream, mut to: TcpStream, hold: Option<Arc<Mutex<Option<Instant>>>>) {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if let Some(hold) = &hold {
                let until = *hold.lock().unwrap();
                if let Some(until) = until {
                    let now = Instant::now();
                    if until > now {
                        thread::sleep(until - now);
                    }
                }
            }
            if to.write_all(&buffer[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    }

    fn port_of(endpoint: &str) -> u16 {
        endpoint.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// A client whose connection is up already (so a held answer delays the probe,
    /// not the connection).
    async fn warm_client(endpoint: &str) -> EtcdClient {
        let client = EtcdClient::connect(&ClientConfig::new([endpoint]))
            .await
            .unwrap();
        client.inner.kv_client().get("warm-up", None).await.unwrap();
        client
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_missing_health_key_is_healthy_and_ready() {
        let server = EtcdServer::start(EtcdOptions::default()).unwrap();
        let client = warm_client(&server.endpoint()).await;
        let checker = HealthChecker::new(&client, HealthConfig::default());
        assert_eq!(checker.key(), "/registry/health");
        assert_eq!(checker.health().await, Ok(()));
        assert_eq!(checker.readiness().await, Ok(()));
    }

    /// factory_test.go `TestCreateHealthcheck` and `TestCreateReadycheck`, with a proxy
    /// holding etcd's answers back instead of a mocked KV. The cases run side by side,
    /// each through a proxy and a connection of its own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn probes_time_out_after_their_own_timeout() {
        let server = EtcdServer::start(EtcdOptions::default()).unwrap();
        let etcd_port = port_of(&server.endpoint());
        let secs = Duration::from_secs;
        let millis = Duration::from_millis;
        let none = Duration::ZERO;
        // (case, health timeout, readiness timeout, answer delay, probe readiness?, healthy?)
        let cases = [
            (
                "ok if the answer comes before the default timeout",
                none,
                none,
                millis(1000),
                false,
                true,
            ),
            (
                "ok if the answer comes before a custom timeout",
                millis(1500),
                none,
                millis(700),
                false,
                true,
            ),
            (
                "times out after the default timeout",
                none,
                none,
                millis(3000),
                false,
                false,
            ),
            (
                "times out after a custom timeout",
                millis(1000),
                none,
                millis(2500),
                false,
                false,
            ),
            (
                "readiness ok before the default timeout",
                none,
                none,
                millis(1000),
                true,
                true,
            ),
            (
                "readiness ok before a custom timeout",
                none,
                millis(1500),
                millis(700),
                true,
                true,
            ),
            (
                "readiness times out after the default timeout",
                none,
                none,
                millis(3000),
                true,
                false,
            ),
            (
                "readiness times out after a custom timeout",
                none,
                millis(1000),
                millis(2500),
                true,
                false,
            ),
            (
                "readiness keeps its own timeout whatever the health timeout",
                secs(10),
                none,
                millis(3000),
                true,
                false,
            ),
        ];
        let runs = cases.map(
            |(case, health_timeout, readiness_timeout, delay, readiness, healthy)| async move {
                let proxy = StallingProxy::start(etcd_port);
                let client = warm_client(&format!("http://127.0.0.1:{}", proxy.port)).await;
                let checker = HealthChecker::new(
                    &client,
                    HealthConfig {
                        prefix: "/registry".to_owned(),
                        healthcheck_timeout: health_timeout,
                        readiness_timeout,
                    },
                );
                let timeout = if readiness {
                    checker.readiness.timeout
                } else {
                    checker.health.timeout
                };
                proxy.delay_answers(delay);
                let started = Instant::now();
                let result = if readiness {
                    checker.readiness().await
                } else {
                    checker.health().await
                };
                let took = started.elapsed();
                if healthy {
                    assert_eq!(result, Ok(()), "{case}");
                    assert!(
                        took >= delay,
                        "{case}: the answer was held {delay:?}, took {took:?}"
                    );
                } else {
                    assert_eq!(result, Err(HealthError::Timeout { timeout }), "{case}");
                    assert!(
                        took >= timeout && took < timeout + millis(500),
                        "{case}: timeout {timeout:?}, took {took:?}"
                    );
                }
            },
        );
        // Spawned, not joined in place: nine of these futures overflow a debug stack.
        let runs: Vec<_> = runs.into_iter().map(tokio::spawn).collect();
        for run in runs {
            run.await.unwrap();
        }
    }

    /// factory_test.go `TestRateLimitHealthcheck`: one probe per half timeout however
    /// many callers, each getting the last probe's result, for a healthy etcd and for
    /// one that is down.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn probes_are_rate_limited_to_one_per_half_timeout() {
        let server = EtcdServer::start(EtcdOptions::default()).unwrap();
        let nothing_there = {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            drop(listener);
            format!("http://127.0.0.1:{port}")
        };
        for (case, endpoint, healthy) in [
            ("etcd ok", server.endpoint(), true),
            ("etcd down", nothing_there, false),
        ] {
            let client = EtcdClient::connect(&ClientConfig::new([endpoint]))
                .await
                .unwrap();
            let checker = Arc::new(HealthChecker::new(
                &client,
                HealthConfig {
                    healthcheck_timeout: Duration::from_secs(1),
                    ..HealthConfig::default()
                },
            ));
            let first = checker.health().await;
            assert_eq!(first.is_ok(), healthy, "{case}: {first:?}");
            if let Err(err) = &first {
                assert!(
                    err.to_string()
                        .starts_with("error getting data from etcd: "),
                    "{case}: {err}"
                );
            }
            for round in 1..=2 {
                let calls: Vec<_> = (0..100)
                    .map(|_| {
                        let checker = Arc::clone(&checker);
                        tokio::spawn(async move { checker.health().await })
                    })
                    .collect();
                for call in calls {
                    assert_eq!(
                        call.await.unwrap(),
                        first,
                        "{case}: every caller gets the same answer"
                    );
                }
                assert_eq!(
                    checker.health.sent.load(Ordering::SeqCst),
                    round,
                    "{case}: probes sent"
                );
                // Wait until the rate limit lets one more through.
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            assert_eq!(checker.readiness.sent.load(Ordering::SeqCst), 0, "{case}");
        }
    }
}
