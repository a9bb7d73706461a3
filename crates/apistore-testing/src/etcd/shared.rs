//! One etcd per test process, shared by every test that does not need its own, and
//! per-test key prefixes that keep those tests apart.

use std::env;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::error::{FixtureError, Result};
use super::{ETCD_ENDPOINTS_ENV, EtcdOptions, EtcdServer};

/// The shared server, started on first use. Never dropped: its watchdog kills it and
/// removes its directory when the process exits.
static SHARED: OnceLock<Result<EtcdServer, String>> = OnceLock::new();

/// The client URL(s) of the etcd that tests of this process share.
///
/// If `APISTORE_ETCD_ENDPOINTS` is set (as `cargo xtask test` does), its value is
/// returned as it is (comma-separated URLs). Otherwise the first call starts one etcd
/// for the whole process and every call returns its endpoint; that etcd dies with the
/// process. Tests sharing it must keep to their own keys: see [`unique_prefix`].
///
/// If the first start fails, every call returns that failure.
pub fn shared_endpoint() -> Result<String> {
    if let Some(endpoints) = env::var(ETCD_ENDPOINTS_ENV)
        .ok()
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
    {
        return Ok(endpoints);
    }
    shared_server().map(EtcdServer::endpoint)
}

/// The process-wide server behind [`shared_endpoint`], started on first use.
pub(crate) fn shared_server() -> Result<&'static EtcdServer> {
    let started = SHARED.get_or_init(|| {
        EtcdServer::start(EtcdOptions {
            name: "apistore-shared".to_owned(),
            ..EtcdOptions::default()
        })
        .map_err(|error| error.to_string())
    });
    match started {
        Ok(server) => Ok(server),
        Err(message) => Err(FixtureError::SharedUnavailable {
            message: message.clone(),
        }),
    }
}

/// A key prefix of its own for one test: `/apistore-test/<name>-<nanos>-<counter>`.
///
/// `test_name` is kept to ASCII letters, digits, `-` and `_` (anything else becomes
/// `-`), so the prefix is one clean key segment; the time and a process-wide counter
/// make it unique across runs and calls, so tests that share an etcd (and reruns against
/// the same etcd) never see each other's keys.
pub fn unique_prefix(test_name: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name: String = test_name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let name = if name.is_empty() { "test" } else { &name };
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("/apistore-test/{name}-{nanos}-{count}")
}
