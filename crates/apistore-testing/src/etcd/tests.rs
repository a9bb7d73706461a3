//! Tests of the fixture against the real etcd binary. They fail, never skip, when
//! etcd is missing: the error says how to get it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use super::*;

/// A raw HTTP/1.0 request to etcd's JSON gateway; returns the response body.
fn http_post(endpoint: &str, path: &str, body: &str) -> String {
    let authority = endpoint
        .split(',')
        .next()
        .unwrap()
        .trim_start_matches("http://");
    let mut stream = TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "POST {path} HTTP/1.0\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.0 200"), "{response}");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn put(endpoint: &str, key: &str, value: &str) {
    http_post(
        endpoint,
        "/v3/kv/put",
        &format!(
            r#"{{"key":"{}","value":"{}"}}"#,
            BASE64.encode(key),
            BASE64.encode(value)
        ),
    );
}

/// The value at `key`, if any.
fn get(endpoint: &str, key: &str) -> Option<String> {
    let body = http_post(
        endpoint,
        "/v3/kv/range",
        &format!(r#"{{"key":"{}"}}"#, BASE64.encode(key)),
    );
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    let value = json["kvs"][0]["value"].as_str()?;
    Some(String::from_utf8(BASE64.decode(value).unwrap()).unwrap())
}

/// Whether a process with this pid is still running (a zombie counts as gone).
fn process_running(pid: u32) -> bool {
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    if Path::new("/proc/self/stat").exists() {
        // Field 3 is the state; the command name before it is in parentheses.
        return std::fs::read_to_string(stat).is_ok_and(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X'))
        });
    }
    Command::new("sh")
        .args(["-c", "kill -0 \"$1\" 2>/dev/null", "sh", &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success())
}

/// Waits up to `timeout` for `condition`.
fn eventually(timeout: Duration, condition: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn start_serves_and_drop_kills_and_cleans_up() -> Result<()> {
    let etcd = EtcdServer::start(EtcdOptions::default())?;
    assert!(etcd.is_healthy());
    assert!(etcd.endpoint().starts_with("http://127.0.0.1:"));
    assert!(etcd.data_dir().join("member").is_dir());
    assert!(
        std::fs::read_to_string(etcd.log_path())
            .unwrap()
            .contains("--name=apistore-test")
    );
    let pid = etcd.pid().unwrap();
    let dir = etcd.data_dir().parent().unwrap().to_path_buf();
    assert!(process_running(pid));

    put(&etcd.endpoint(), "/k", "v");
    assert_eq!(get(&etcd.endpoint(), "/k").as_deref(), Some("v"));

    drop(etcd);
    assert!(!process_running(pid), "etcd {pid} still runs after drop");
    assert!(!dir.exists(), "{} still exists after drop", dir.display());
    Ok(())
}

#[test]
fn restart_after_stop_keeps_data_and_endpoint() -> Result<()> {
    let mut etcd = EtcdServer::start(EtcdOptions::default())?;
    let endpoint = etcd.endpoint();
    put(&endpoint, "/kept", "across restarts");

    etcd.stop();
    assert_eq!(etcd.pid(), None);
    assert!(!etcd.is_healthy());
    etcd.restart()?;
    assert_eq!(etcd.endpoint(), endpoint);
    assert!(etcd.is_healthy());
    assert_eq!(get(&endpoint, "/kept").as_deref(), Some("across restarts"));

    // A running server restarts too.
    let before = etcd.pid();
    etcd.restart()?;
    assert_ne!(etcd.pid(), before);
    assert_eq!(get(&endpoint, "/kept").as_deref(), Some("across restarts"));
    Ok(())
}

#[test]
fn kill_is_a_crash_that_restart_recovers_from() -> Result<()> {
    let mut etcd = EtcdServer::start(EtcdOptions::default())?;
    put(&etcd.endpoint(), "/before-crash", "1");
    let pid = etcd.pid().unwrap();

    etcd.kill();
    assert!(!process_running(pid));
    assert!(!etcd.is_healthy());
    assert!(etcd.data_dir().is_dir(), "kill must keep the data");

    etcd.restart()?;
    assert_eq!(get(&etcd.endpoint(), "/before-crash").as_deref(), Some("1"));
    Ok(())
}

#[test]
fn servers_run_side_by_side_on_their_own_ports() -> Result<()> {
    let a = EtcdServer::start(EtcdOptions::default())?;
    let b = EtcdServer::start(EtcdOptions {
        name: "other".into(),
        progress_notify_interval: Some(Duration::from_millis(200)),
        ..EtcdOptions::default()
    })?;
    assert_ne!(a.endpoint(), b.endpoint());
    assert_ne!(a.peer_url(), b.peer_url());
    assert_ne!(a.data_dir(), b.data_dir());
    put(&a.endpoint(), "/only-in-a", "a");
    assert_eq!(get(&b.endpoint(), "/only-in-a"), None);
    let log = std::fs::read_to_string(b.log_path()).unwrap();
    // etcd 3.7 removed the experimental name; the lines before it know only that one.
    assert!(
        log.contains("--experimental-watch-progress-notify-interval=200ms")
            || log.contains(" --watch-progress-notify-interval=200ms"),
        "{log}"
    );
    Ok(())
}

#[test]
fn a_bad_flag_fails_with_the_tail_of_etcds_log() {
    let error = EtcdServer::start(EtcdOptions {
        extra_args: vec!["--no-such-flag".into()],
        ..EtcdOptions::default()
    })
    .unwrap_err();
    assert!(matches!(error, FixtureError::Exited { .. }), "{error}");
    let message = error.to_string();
    assert!(message.contains("no-such-flag"), "{message}");
}

#[test]
fn shared_endpoint_is_one_healthy_etcd() -> Result<()> {
    let first = shared_endpoint()?;
    assert_eq!(shared_endpoint()?, first);
    let key = format!("{}/k", unique_prefix("shared_endpoint_is_one_healthy_etcd"));
    put(&first, &key, "shared");
    assert_eq!(get(&first, &key).as_deref(), Some("shared"));
    Ok(())
}

/// Runs in a child process of [`shared_etcd_dies_with_the_test_process`], which sets
/// `APISTORE_FIXTURE_CHILD`; a no-op otherwise.
#[test]
fn helper_start_shared_etcd_and_exit() -> Result<()> {
    if std::env::var_os("APISTORE_FIXTURE_CHILD").is_none() {
        return Ok(());
    }
    let server = shared::shared_server()?;
    println!(
        "SHARED-ETCD pid={} dir={}",
        server.pid().unwrap(),
        server.data_dir().parent().unwrap().display()
    );
    Ok(())
}

#[test]
fn shared_etcd_dies_with_the_test_process() {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "etcd::tests::helper_start_shared_etcd_and_exit",
            "--nocapture",
        ])
        .env("APISTORE_FIXTURE_CHILD", "1")
        .env_remove(ETCD_ENDPOINTS_ENV)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "child failed: {stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SHARED-ETCD "))
        .unwrap_or_else(|| panic!("no SHARED-ETCD line in {stdout}"));
    let (pid, dir) = line.split_once(' ').unwrap();
    let pid: u32 = pid.strip_prefix("pid=").unwrap().parse().unwrap();
    let dir = Path::new(dir.strip_prefix("dir=").unwrap()).to_path_buf();

    // The watchdog gives etcd 10 s to go before it removes the folder; a loaded
    // machine can stretch both steps, so the bound is generous.
    assert!(
        eventually(Duration::from_secs(60), || !process_running(pid)),
        "the shared etcd (pid {pid}) outlived its test process"
    );
    assert!(
        eventually(Duration::from_secs(60), || !dir.exists()),
        "{} outlived its test process",
        dir.display()
    );
}

#[test]
fn unique_prefixes_are_distinct_single_segments() {
    let a = unique_prefix("etcd::tests::some test/with slashes");
    let b = unique_prefix("etcd::tests::some test/with slashes");
    assert_ne!(a, b);
    let rest = a.strip_prefix("/apistore-test/").unwrap();
    assert!(
        rest.starts_with("etcd--tests--some-test-with-slashes-"),
        "{a}"
    );
    assert!(!rest.contains('/'));
    assert!(unique_prefix("").starts_with("/apistore-test/test-"));
}

#[test]
fn lookup_prefers_the_env_then_path_then_well_known_places() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("etcd");
    std::fs::write(&fake, "#!/bin/sh\n").unwrap();
    let not_executable = dir.path().join("etcd.txt");
    std::fs::write(&not_executable, "").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    let found = find_etcd(Some(fake.clone().into()), None, &[]).unwrap();
    assert_eq!(found, fake);
    let found = find_etcd(None, Some(dir.path().into()), &[]).unwrap();
    assert_eq!(found, fake);
    let found = find_etcd(None, None, &["/nonexistent/etcd", fake.to_str().unwrap()]).unwrap();
    assert_eq!(found, fake);

    let error = find_etcd(Some(not_executable.clone().into()), None, &[]).unwrap_err();
    assert!(matches!(error, FixtureError::BadEtcdBin { ref path } if *path == not_executable));

    let message = find_etcd(None, Some("/nonexistent".into()), &[])
        .unwrap_err()
        .to_string();
    for hint in [
        "apt-get install etcd-server",
        ETCD_BIN_ENV,
        "cargo xtask test",
    ] {
        assert!(message.contains(hint), "{message}");
    }
}

#[test]
fn the_etcd_binary_is_there() {
    // Fails (with instructions) where etcd is missing rather than letting the
    // etcd-backed tests look skipped.
    let binary = etcd_binary().unwrap();
    assert!(binary.is_file());
}
