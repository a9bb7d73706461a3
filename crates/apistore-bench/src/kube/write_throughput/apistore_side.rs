//! apistore's side of a run: the same writers, watchers and lister as
//! interop/gobench's `writeThroughput`, over apistore's cache of `LazyObject`s.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apistore_protobuf::LazyObject;
use apistore_storage::{
    ApiObject, DeleteOptions, INITIAL_EVENTS_END_ANNOTATION, ListOptions, ResourceVersionMatch,
    Shared, Storage, UpdateOptions, WatchEvent,
};
use futures::StreamExt as _;
use tokio::time::{Instant, MissedTickBehavior};

use super::super::RESOURCE;
use super::super::cache::PodCache;
use super::{
    Background, CALLERS, LIST_EVERY, ListAt, Measured, PATCHED, SETTLE, STAMP, Traffic,
    delay_since, unix_nanos,
};
use crate::bench::Bench;
use crate::driver::{self, Plan};
use crate::error::{BenchError, Result};

impl Bench {
    /// One run on apistore's side, as interop/gobench's `writeThroughput` runs it on
    /// kube's.
    pub(super) async fn apistore_writes(
        &self,
        cache: &PodCache<LazyObject>,
        traffic: Traffic,
        background: Background,
        run: Duration,
    ) -> Result<Measured> {
        let watchers = background.watchers();
        let list = cache
            .list(
                RESOURCE,
                &ListOptions::prefix().at("0", ResourceVersionMatch::NotOlderThan),
            )
            .await?;
        if list.items.is_empty() {
            return Err(BenchError::Invalid("no Pods in the cache".to_owned()));
        }
        let since = ListOptions::prefix().at(
            list.metadata.resource_version.clone(),
            ResourceVersionMatch::Unset,
        );
        let pods = Arc::new(list.items);
        let events = Arc::new(AtomicU64::new(0));
        let latencies = Arc::new(Mutex::new(Vec::new()));
        let cut = Arc::new(WatchersCut::default());
        let mut readers = Vec::with_capacity(watchers + 1);
        for watcher in 0..=watchers {
            let mut stream = cache.watch(RESOURCE, &since).await?;
            let (events, latencies) = (Arc::clone(&events), Arc::clone(&latencies));
            let cut = Arc::clone(&cut);
            // Watcher 0 tracks latency; the others are the background load.
            readers.push(tokio::spawn(async move {
                while let Some(event) = stream.next().await {
                    if watcher > 0 {
                        events.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    if let WatchEvent::Added(pod) | WatchEvent::Modified(pod) = event
                        && let Some(delay) = pod
                            .metadata()
                            .annotations
                            .get(STAMP)
                            .and_then(|s| delay_since(s))
                        && let Ok(mut latencies) = latencies.lock()
                    {
                        latencies.push(delay);
                    }
                }
                // Readers are aborted at the end of the run: a stream that ends before
                // was ended by the cache.
                cut.watchers.fetch_add(1, Ordering::Relaxed);
                if watcher == 0 {
                    cut.tracker.store(true, Ordering::Relaxed);
                }
            }));
        }
        // The newest write's revision (0 until the first write), for the listers at it.
        let latest = Arc::new(AtomicU64::new(0));
        let listed = Arc::new(Listed::default());
        match background {
            Background::Lister(at) => readers.push(tokio::spawn(list_every_tick(
                cache.clone(),
                at,
                Arc::clone(&latest),
                Arc::clone(&listed),
            ))),
            Background::WatchList => readers.push(tokio::spawn(watch_list_every_pod(
                cache.clone(),
                Arc::clone(&listed),
            ))),
            Background::None | Background::Watcher => {}
        }
        let writes = Arc::new(AtomicU64::new(0));
        let index = Arc::new(AtomicU64::new(0));
        let op = {
            let (cache, writes, latest) = (cache.clone(), Arc::clone(&writes), Arc::clone(&latest));
            driver::op(move |_, _| {
                let (cache, pods, writes) = (cache.clone(), Arc::clone(&pods), Arc::clone(&writes));
                let latest = Arc::clone(&latest);
                let i = ((index.fetch_add(1, Ordering::Relaxed) + 1) % pods.len() as u64) as usize;
                async move {
                    let pod = &pods[i];
                    let key = format!("{RESOURCE}/{}/{}", pod.namespace(), pod.name());
                    match traffic {
                        Traffic::Patch => {
                            let written = cache
                                .guaranteed_update(&key, UpdateOptions::default(), |mut pod, _| {
                                    let annotations = pod.annotations_mut();
                                    annotations.insert(PATCHED.to_owned(), i.to_string());
                                    annotations.insert(STAMP.to_owned(), unix_nanos().to_string());
                                    Ok(pod.into())
                                })
                                .await?;
                            writes.fetch_add(1, Ordering::Relaxed);
                            note_revision(&latest, written.resource_version());
                        }
                        Traffic::DeleteCreate => {
                            match cache.delete(&key, DeleteOptions::default()).await {
                                Ok(_) => {
                                    writes.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(error) if error.is_not_found() => {}
                                Err(error) => return Err(error.into()),
                            }
                            let mut pod: Shared<LazyObject> = pod.clone();
                            pod.set_resource_version(String::new());
                            pod.annotations_mut()
                                .insert(STAMP.to_owned(), unix_nanos().to_string());
                            match cache.create(&key, pod, 0).await {
                                Ok(created) => {
                                    writes.fetch_add(1, Ordering::Relaxed);
                                    note_revision(&latest, created.resource_version());
                                }
                                Err(error) if error.is_exists() => {}
                                Err(error) => return Err(error.into()),
                            }
                        }
                    }
                    Ok(())
                }
            })
        };
        let sample = driver::drive(&self.cpu, CALLERS, Plan::For(run), &op, None).await?;
        tokio::time::sleep(SETTLE).await;
        for reader in &readers {
            reader.abort();
        }
        let latencies = latencies
            .lock()
            .map(|mut held| std::mem::take(&mut *held))
            .map_err(|_| BenchError::Invalid("a latency watcher panicked".to_owned()))?;
        Ok(Measured {
            writes: writes.load(Ordering::Relaxed),
            events: events.load(Ordering::Relaxed),
            list_calls: listed.calls.load(Ordering::Relaxed),
            list_objects: listed.objects.load(Ordering::Relaxed),
            seconds: sample.elapsed.as_secs_f64(),
            latencies,
            cpu_seconds: sample.client_cpu.as_secs_f64(),
            watch_lists_cut: listed.cut.load(Ordering::Relaxed),
            watchers_cut: cut.watchers.load(Ordering::Relaxed),
            tracker_cut: cut.tracker.load(Ordering::Relaxed),
        })
    }
}

/// What the background lister or watch-lister counted.
#[derive(Default)]
struct Listed {
    /// Lists (or watch-lists) made.
    calls: AtomicU64,
    /// Their items (or initial events).
    objects: AtomicU64,
    /// Watch-lists the cache ended before the end of their initial events.
    cut: AtomicU64,
}

/// Watchers whose stream the cache ended before the run did, and whether the latency
/// tracker was one of them.
#[derive(Default)]
struct WatchersCut {
    watchers: AtomicU64,
    tracker: AtomicBool,
}

/// Records a write's revision as the newest, as kube's writers store theirs: the last
/// writer to store wins, even when a slower writer's revision is the lower one.
fn note_revision(latest: &AtomicU64, resource_version: &str) {
    if let Ok(revision) = resource_version.parse::<u64>() {
        latest.store(revision, Ordering::Relaxed);
    }
}

/// kube's background lister: every [`LIST_EVERY`] (missed ticks dropped, as a Go
/// ticker drops them), a list of every Pod from the cache, counting the lists that
/// succeed and their items in `listed`; at `Exact` and `NotOlderThan`
/// not before the first write. Runs until aborted.
async fn list_every_tick(
    cache: PodCache<LazyObject>,
    at: ListAt,
    latest: Arc<AtomicU64>,
    listed: Arc<Listed>,
) {
    let mut ticks = tokio::time::interval_at(Instant::now() + LIST_EVERY, LIST_EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    loop {
        ticks.tick().await;
        let options = match at {
            ListAt::Unset => ListOptions::prefix(),
            ListAt::Exact | ListAt::NotOlderThan => {
                let revision = latest.load(Ordering::Relaxed);
                if revision == 0 {
                    continue;
                }
                let rv_match = if at == ListAt::Exact {
                    ResourceVersionMatch::Exact
                } else {
                    ResourceVersionMatch::NotOlderThan
                };
                ListOptions::prefix().at(revision.to_string(), rv_match)
            }
        };
        if let Ok(list) = cache.list(RESOURCE, &options).await {
            listed.calls.fetch_add(1, Ordering::Relaxed);
            listed
                .objects
                .fetch_add(list.items.len() as u64, Ordering::Relaxed);
        }
    }
}

/// kube's background `WatchList` load: over and over, a watch of every Pod with
/// `sendInitialEvents` and bookmarks and no resourceVersion (the cache first brings
/// itself to etcd's current revision), read to the bookmark that ends its initial
/// events, then dropped; each such watch counted in `listed` with its initial events
/// (a watch the cache ends early counts with what it sent, as kube's does, and as cut). A refused watch is asked again after 10 ms, as kube's
/// is. Runs until aborted; the watch under way then is not counted, as kube's is not.
async fn watch_list_every_pod(cache: PodCache<LazyObject>, listed: Arc<Listed>) {
    let mut options = ListOptions::prefix().bookmarks();
    options.send_initial_events = Some(true);
    loop {
        let Ok(mut stream) = cache.watch(RESOURCE, &options).await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let mut objects = 0;
        let mut cut = true;
        while let Some(event) = stream.next().await {
            match event {
                WatchEvent::Bookmark(pod)
                    if pod
                        .metadata()
                        .annotations
                        .get(INITIAL_EVENTS_END_ANNOTATION)
                        .is_some_and(|value| value == "true") =>
                {
                    cut = false;
                    break;
                }
                WatchEvent::Bookmark(_) => {}
                _ => objects += 1,
            }
        }
        listed.calls.fetch_add(1, Ordering::Relaxed);
        listed.objects.fetch_add(objects, Ordering::Relaxed);
        listed.cut.fetch_add(u64::from(cut), Ordering::Relaxed);
    }
}
