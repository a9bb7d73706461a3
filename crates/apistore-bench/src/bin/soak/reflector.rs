//! The soak's reflectors: each follows the namespace as a client-go reflector does
//! (list, then watch from the list's revision; on an error, list again), and ends
//! with the state it built, which `main.rs` compares with etcd's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use apistore_etcd3::Etcd3Store;
use apistore_storage::{ListOptions, Storage, WatchEvent, WatchStream};
use apistore_testing::suite::Pod;
use futures::StreamExt;

use super::NAMESPACE;

/// What a reflector ended with.
#[derive(Debug, Default)]
pub(super) struct ReflectorReport {
    pub(super) state: BTreeMap<String, Pod>,
    pub(super) revision: i64,
    pub(super) events: u64,
    pub(super) watch_errors: u64,
    pub(super) relists: u64,
    pub(super) failed_relists: u64,
    pub(super) violations: Vec<String>,
}

/// Follows the namespace as a client-go reflector does, until `stop` is set and the
/// revision it has reached is at least `until`.
pub(super) async fn reflector(
    store: Etcd3Store<Pod>,
    stop: Arc<AtomicBool>,
    mut until: tokio::sync::watch::Receiver<i64>,
) -> ReflectorReport {
    let mut report = ReflectorReport::default();
    let key = format!("pods/{NAMESPACE}");
    let recursive = |rv: String| ListOptions {
        resource_version: rv,
        recursive: true,
        ..ListOptions::default()
    };
    'relist: loop {
        let done = |report: &ReflectorReport, until: &tokio::sync::watch::Receiver<i64>| {
            let target = *until.borrow();
            stop.load(Ordering::SeqCst) && target > 0 && report.revision >= target
        };
        if done(&report, &until) {
            return report;
        }
        let Ok(list) = store.list(&key, &recursive(String::new())).await else {
            report.failed_relists += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        report.relists += 1;
        report.revision = list.metadata.resource_version.parse().unwrap_or(0);
        report.state = list
            .items
            .into_iter()
            .map(|pod| (pod.metadata.name.clone(), pod))
            .collect();
        let Ok(mut watch) = store
            .watch(&key, &recursive(list.metadata.resource_version))
            .await
        else {
            report.watch_errors += 1;
            continue;
        };
        let watch: &mut WatchStream<Pod> = &mut watch;
        loop {
            if done(&report, &until) {
                return report;
            }
            let event = tokio::select! {
                event = watch.next() => event,
                _ = until.changed() => continue,
                () = tokio::time::sleep(Duration::from_millis(200)) => continue,
            };
            let Some(event) = event else {
                report.watch_errors += 1;
                continue 'relist;
            };
            let (pod, deleted) = match event {
                WatchEvent::Added(pod) | WatchEvent::Modified(pod) => (pod, false),
                WatchEvent::Deleted(pod) => (pod, true),
                WatchEvent::Bookmark(_) => continue,
                WatchEvent::Error(_) => {
                    report.watch_errors += 1;
                    continue 'relist;
                }
            };
            let rv: i64 = pod.metadata.resource_version.parse().unwrap_or(0);
            if rv <= report.revision {
                report.violations.push(format!(
                    "watch delivered revision {rv} after {} (a duplicate or out of order)",
                    report.revision
                ));
            }
            report.revision = rv;
            report.events += 1;
            if deleted {
                report.state.remove(&pod.metadata.name);
            } else {
                report.state.insert(pod.metadata.name.clone(), pod);
            }
        }
    }
}
