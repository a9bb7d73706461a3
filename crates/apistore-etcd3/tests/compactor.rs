//! The compactor against a real etcd of each test's own (compaction changes etcd for
//! everyone on it, and the shared-compactor registry is keyed by endpoints), after
//! kube-apiserver's `etcd3/compact.go`: a compactor compacts to the revision it saw one
//! interval earlier, compactors on one etcd take turns through `compact_rev_key`, and a
//! shared compactor lives as long as its shares.

// Test helpers may unwrap: a failure is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use apistore_etcd3::{
    COMPACT_REV_KEY, ClientConfig, Compactor, CompactorStatus, EtcdClient, SharedCompactor,
};
use apistore_testing::etcd::{EtcdOptions, EtcdServer};

/// An etcd of the test's own, an apistore client and a raw client on it.
async fn etcd(name: &str) -> (EtcdServer, EtcdClient, etcd_client::Client) {
    let server = EtcdServer::start(EtcdOptions {
        name: name.to_owned(),
        ..EtcdOptions::default()
    })
    .unwrap();
    let client = EtcdClient::connect(&ClientConfig::new([server.endpoint()]))
        .await
        .unwrap();
    let raw = etcd_client::Client::connect([server.endpoint()], None)
        .await
        .unwrap();
    (server, client, raw)
}

/// The version of `compact_rev_key` (the compactors' logical time) and its value.
async fn clock(raw: &mut etcd_client::Client) -> (i64, i64) {
    let response = raw.get(COMPACT_REV_KEY, None).await.unwrap();
    response.kvs().first().map_or((0, 0), |kv| {
        let value = kv.value_str().unwrap().parse().unwrap();
        (kv.version(), value)
    })
}

/// Whether a raw read failed because its revision was compacted away (etcd's
/// `ErrGRPCCompacted`).
fn is_compacted(result: Result<etcd_client::GetResponse, etcd_client::Error>) -> bool {
    matches!(result, Err(etcd_client::Error::GRpcStatus(status))
        if status.code() == tonic::Code::OutOfRange
            && status.message() == "etcdserver: mvcc: required revision has been compacted")
}

async fn wait_until<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < limit,
            "{what} did not happen within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A running compactor compacts to the revision it saw one interval earlier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compactor_compacts_to_the_revision_seen_one_interval_earlier() {
    let (_server, client, mut raw) = etcd("compactor-runs").await;
    let before = raw
        .put("/somekey", "v0", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let interval = Duration::from_secs(1);
    let compactor = Compactor::start(&client, interval).unwrap();
    assert!(compactor.is_running());
    assert_eq!(compactor.interval(), interval);

    // First attempt (after one interval): a claim, no compaction.
    wait_until("the first claim", Duration::from_secs(5), || async {
        compactor.status().logical_time >= 1
    })
    .await;
    let status = compactor.status();
    assert_eq!((status.compactions, status.logical_time), (0, 1));
    let (version, claimed) = clock(&mut raw).await;
    assert_eq!((version, claimed), (1, 0));
    let seen = raw
        .get("/somekey", None)
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    for i in 0..5 {
        raw.put("/somekey", format!("v{}", i + 1), None)
            .await
            .unwrap();
    }

    // Second attempt: compacts to what it saw at the first.
    wait_until("the first compaction", Duration::from_secs(5), || async {
        compactor.status().compactions >= 1
    })
    .await;
    let status = compactor.status();
    assert_eq!(status.errors, 0);
    assert!(status.logical_time >= 2);
    let compacted = status.last_compacted_revision;
    assert_eq!(
        compacted, seen,
        "compacted to the revision seen one interval earlier"
    );
    let (version, claimed) = clock(&mut raw).await;
    assert!(version >= 2);
    assert!(claimed >= compacted);
    let old = raw
        .get(
            "/somekey",
            Some(etcd_client::GetOptions::new().with_revision(before)),
        )
        .await;
    assert!(
        is_compacted(old),
        "revision {before} is before the compaction at {compacted}"
    );
    let kept = raw
        .get(
            "/somekey",
            Some(etcd_client::GetOptions::new().with_revision(compacted)),
        )
        .await;
    assert!(
        kept.is_ok(),
        "revision {compacted} itself stays readable: {kept:?}"
    );
    let status = compactor.stop().await;
    assert_eq!(status.errors, 0);
}

/// Two compactors (two processes' worth of clients) on one etcd compact once per
/// interval between them: the clock key's version counts the claims.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_compactors_compact_once_per_interval_between_them() {
    let (server, first_client, mut raw) = etcd("compactor-pair").await;
    let second_client = EtcdClient::connect(&ClientConfig::new([server.endpoint()]))
        .await
        .unwrap();
    let interval = Duration::from_secs(1);
    let first = Compactor::start(&first_client, interval).unwrap();
    let second = Compactor::start(&second_client, interval).unwrap();
    let writer = {
        let mut raw = raw.clone();
        tokio::spawn(async move {
            for i in 0..60 {
                raw.put("/busy", format!("{i}"), None).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    wait_until("five attempts each", Duration::from_secs(10), || async {
        first.status().attempts >= 5 && second.status().attempts >= 5
    })
    .await;
    let a = first.stop().await;
    let b = second.stop().await;
    writer.abort();
    let (claims, _) = clock(&mut raw).await;

    assert_eq!(a.errors + b.errors, 0, "{a:?} {b:?}");
    let intervals = a.attempts.max(b.attempts);
    // One claim per interval, not one per compactor per interval (that would be
    // about twice as many).
    assert!(
        (intervals - 1..=intervals + 1).contains(&claims.unsigned_abs()),
        "{claims} claims in {intervals} intervals ({a:?}, {b:?})"
    );
    // Every claim but the first (and one an attempt abandoned by `stop` may have
    // made) compacted, and only a claim compacts.
    let compactions = a.compactions + b.compactions;
    assert!(
        compactions <= claims.unsigned_abs(),
        "{compactions} compactions, {claims} claims"
    );
    assert!(
        compactions + 2 >= claims.unsigned_abs(),
        "{compactions} compactions, {claims} claims"
    );
    let known = a.logical_time.max(b.logical_time);
    assert!(
        claims == known || claims == known + 1,
        "clock {claims}, compactors at {known}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stopping_a_compactor_ends_its_task() {
    let (_server, client, mut raw) = etcd("compactor-stop").await;
    let compactor = Compactor::start(&client, Duration::from_secs(1)).unwrap();
    wait_until("a claim", Duration::from_secs(5), || async {
        compactor.status().attempts >= 1
    })
    .await;
    let started = Instant::now();
    let status = compactor.stop().await;
    assert!(status.attempts >= 1);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "stop took {:?}",
        started.elapsed()
    );
    // An attempt is counted before its claim is sent, and `stop` abandons one under
    // way, whose claim may still reach etcd after `stop` returned (it failed a CI run
    // once when read at once). So every claim etcd ever sees is one of the attempts
    // counted by now: a compactor still running would claim twice more in these
    // seconds and pass that count.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (claims, _) = clock(&mut raw).await;
    assert!(
        claims.unsigned_abs() <= status.attempts,
        "a stopped compactor claimed again: {claims} claims, {} attempts before it stopped",
        status.attempts
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_a_compactor_stops_it() {
    let (_server, client, mut raw) = etcd("compactor-drop").await;
    let compactor = Compactor::start(&client, Duration::from_secs(1)).unwrap();
    wait_until("a claim", Duration::from_secs(5), || async {
        compactor.status().logical_time >= 1
    })
    .await;
    let before = compactor.status();
    drop(compactor);
    // Dropping only signals the task: one more attempt may start before the signal
    // is seen, and its claim may land. A compactor still running would claim at
    // least three more times in these seconds.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let (claims, _) = clock(&mut raw).await;
    assert!(
        (1..=before.attempts + 1).contains(&claims.unsigned_abs()),
        "a dropped compactor claimed again: {claims} claims, {} attempts before the drop",
        before.attempts
    );
}

#[tokio::test]
async fn a_zero_interval_compacts_nothing() {
    let client = EtcdClient::connect(&ClientConfig {
        dial_timeout: Duration::from_secs(1),
        ..ClientConfig::new(["http://127.0.0.1:1"])
    })
    .await;
    // The client connects lazily, so this works without an etcd; if it did not,
    // there would be nothing to test.
    let Ok(client) = client else {
        panic!("lazy connect failed: {client:?}")
    };
    let compactor = Compactor::start(&client, Duration::ZERO).unwrap();
    assert!(!compactor.is_running());
    assert_eq!(compactor.interval(), Duration::ZERO);
    assert_eq!(compactor.status(), CompactorStatus::default());
    compactor.stop().await;
}

/// factory/etcd3.go `startCompactorOnce`: one compactor per endpoint set, replaced
/// by a smaller interval, kept for a larger one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_smaller_interval_replaces_the_shared_compactor() {
    let (_server, client, mut raw) = etcd("shared-replace").await;
    let slow = SharedCompactor::acquire(&client, Duration::from_secs(600)).unwrap();
    assert!(slow.is_running());
    assert_eq!(slow.interval(), Duration::from_secs(600));
    let fast = SharedCompactor::acquire(&client, Duration::from_secs(1)).unwrap();
    let medium = SharedCompactor::acquire(&client, Duration::from_secs(5)).unwrap();
    for share in [&slow, &fast, &medium] {
        assert_eq!(share.interval(), Duration::from_secs(1));
        assert_eq!(share.replacements(), 1);
        assert_eq!(share.shares(), 3);
    }
    // Only a 1 s compactor claims twice, and so compacts, within a few seconds.
    wait_until("a compaction", Duration::from_secs(5), || async {
        fast.status().compactions >= 1
    })
    .await;
    assert!(clock(&mut raw).await.0 >= 2);
    drop(slow);
    drop(medium);
    assert!(fast.is_running());
    assert_eq!(fast.shares(), 1);
    drop(fast);
    let (claims, _) = clock(&mut raw).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        clock(&mut raw).await.0,
        claims,
        "the last share stopped the compactor"
    );
}

/// The reference never clears its endpoint registry, so a compactor started again
/// after all its users left never runs. Ours does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_compactor_starts_again_after_every_share_is_gone() {
    let (_server, client, mut raw) = etcd("shared-restart").await;
    let share = SharedCompactor::acquire(&client, Duration::from_secs(1)).unwrap();
    wait_until("a claim", Duration::from_secs(5), || {
        let mut raw = raw.clone();
        async move { clock(&mut raw).await.0 >= 1 }
    })
    .await;
    drop(share);
    let (claims, _) = clock(&mut raw).await;

    let again = SharedCompactor::acquire(&client, Duration::from_secs(1)).unwrap();
    assert!(again.is_running());
    assert_eq!((again.shares(), again.replacements()), (1, 0));
    wait_until(
        "a claim by the new compactor",
        Duration::from_secs(5),
        || {
            let mut raw = raw.clone();
            async move { clock(&mut raw).await.0 > claims }
        },
    )
    .await;
}

/// etcd's compacted revision is asked of etcd itself, so a compaction no kube
/// compactor recorded (`etcdctl compact`) is seen too; none is `None`.
#[tokio::test]
async fn etcds_compacted_revision_is_what_etcd_says_whoever_compacted() {
    let (_server, client, mut raw) = etcd("compacted-revision").await;
    // Nothing compacted: etcd only confirms the watch, and the call waits its time out.
    let short = Duration::from_millis(500);
    assert_eq!(client.etcd_compacted_revision(short).await.unwrap(), None);
    let mut last = 0;
    for i in 0..5 {
        last = raw
            .put(format!("/k{i}"), "v", None)
            .await
            .unwrap()
            .header()
            .unwrap()
            .revision();
    }
    raw.compact(last - 2, None).await.unwrap();
    // Compacted: etcd answers at once; the long limit is for a loaded machine only.
    let long = Duration::from_secs(30);
    assert_eq!(
        client.etcd_compacted_revision(long).await.unwrap(),
        Some(last - 2)
    );
    // kube's compactor key was never written: only etcd knew.
    assert_eq!(clock(&mut raw).await, (0, 0));
}
