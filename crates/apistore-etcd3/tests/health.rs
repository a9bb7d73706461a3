//! The health and readiness checks against a real etcd, after kube-apiserver's
//! `storage/storagebackend/factory/etcd3.go` and its tests: a missing health key is
//! healthy, each probe keeps its own timeout (etcd's answers held back by a proxy), and
//! probes are rate limited to one per half timeout whatever the number of callers.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use apistore_etcd3::{ClientConfig, EtcdClient, HealthChecker, HealthConfig, HealthError};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};

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
    // A probe of a checker of its own makes the connection.
    let warm_up = HealthChecker::new(&client, HealthConfig::default());
    warm_up.health().await.unwrap();
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
            let (health_timeout, readiness_timeout) = checker.timeouts();
            let timeout = if readiness {
                readiness_timeout
            } else {
                health_timeout
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
            assert_eq!(checker.probes_sent().0, round, "{case}: probes sent");
            // Wait until the rate limit lets one more through.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        assert_eq!(checker.probes_sent().1, 0, "{case}");
    }
}
