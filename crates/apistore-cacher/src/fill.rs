//! How the cache gets the state it starts from, at first and after every loss of its
//! watch of the backend: kube's reflector filling the cacher's store.
//!
//! - **Paged list** (kube 1.31–1.34, and whenever the streaming fill is not taken):
//!   every object in pages of [`CacherConfig::list_page_size`] read at one revision,
//!   after which the reflector opens its watch from that revision.
//! - **Streaming watch-list** (kube 1.35+, [`CacherConfig::fill_with_watch_list`];
//!   client-go's `Reflector.watchList` with its `WatchListClient` gate on, which kube
//!   1.35 turned on by default and kube's cacher stopped turning off in 1.34): one
//!   watch with `sendInitialEvents`, resourceVersionMatch NotOlderThan and bookmarks,
//!   whose ADDED events up to the bookmark annotated `k8s.io/initial-events-end` are
//!   the state at the bookmark's revision. The reflector then keeps watching on the
//!   same stream.
//!
//! kube's cacher refuses its own reflector's watch-list while the `WatchList` gate is
//! off ([`CacherConfig::watch_list`]; `listerWatcher.Watch` in `lister_watcher.go`),
//! and client-go then lists instead; so does this, without asking the backend; and
//! likewise when the backend does not say it serves watch-lists
//! ([`Storage::supports_watch_list`]: its own `WatchList` gate is off, and it would
//! ignore `sendInitialEvents`; kube's one gate covers both). When the backend refuses
//! the streaming watch (an error, or an error event before the end of the initial
//! events), or answers with something a watch-list never sends before its end (a
//! change, a plain bookmark: a backend that ignored `sendInitialEvents` after all), or
//! the stream ends early, the round falls back to the paged list, as client-go's
//! `ListAndWatchWithContext` does.
//!
//! So does it when the end of the initial events has not come within
//! [`CacherConfig::fill_watch_list_timeout`] (5 minutes by default) of asking for the
//! watch: the stalled stream is dropped and the round lists. client-go gets there by
//! another road: its reflector's watch asks for a timeout of 5 to 10 minutes, the
//! server ends the watch then, and the failed watch-list falls back to listing. A
//! limit of our own does not rely on the backend ending the watch, so a backend that
//! stalls (sends nothing, or some initial events and then nothing) cannot keep the
//! cache unready.
//!
//! Unlike client-go, the streaming watch always asks for the latest state (an empty
//! resourceVersion) rather than first retrying the reflector's last revision: the
//! latest state is never older than what the cache had, and after a 410 client-go's
//! first attempt at the old revision only earns another 410.
//!
//! [`CacherConfig::list_page_size`]: crate::CacherConfig::list_page_size
//! [`CacherConfig::fill_with_watch_list`]: crate::CacherConfig::fill_with_watch_list
//! [`CacherConfig::watch_list`]: crate::CacherConfig::watch_list
//! [`CacherConfig::fill_watch_list_timeout`]: crate::CacherConfig::fill_watch_list_timeout

use std::future::poll_fn;
use std::time::Duration;

use apistore_storage::{
    ApiObject as _, INITIAL_EVENTS_END_ANNOTATION, ListOptions, ResourceVersionMatch,
    SelectionPredicate, Storage, StorageError, WatchEvent, WatchStream,
};
use tokio::time::{Instant, timeout_at};

use crate::cacher::Shared;

/// The state the cache starts a round from.
pub(crate) struct Filled<T> {
    /// Every object of the resource at `revision`.
    pub(crate) objects: Vec<T>,
    /// The revision the objects were read at.
    pub(crate) revision: u64,
    /// The streaming watch-list's stream, already past its initial events: the round
    /// goes on watching on it. `None` after a paged list.
    pub(crate) stream: Option<WatchStream<T>>,
}

/// The state to start a round from: through a streaming watch-list when the cacher is
/// configured for one and the backend serves it, through a paged list otherwise.
pub(crate) async fn fill<S: Storage>(
    shared: &Shared<S>,
) -> Result<Filled<S::Object>, StorageError> {
    let settings = &shared.settings;
    if settings.fill_with_watch_list && settings.watch_list && shared.storage.supports_watch_list()
    {
        match stream_all(shared).await {
            Ok(filled) => return Ok(filled),
            Err(refused) => tracing::info!(
                resource = %settings.group_resource,
                reason = %refused,
                "the backend did not serve the watch cache's streaming watch-list; listing instead"
            ),
        }
    }
    let (objects, revision) = list_all(shared).await?;
    Ok(Filled {
        objects,
        revision,
        stream: None,
    })
}

/// The options of the streaming watch-list (client-go's `watchList`, over the cacher's
/// `listerWatcher.Watch`: recursive, with progress notifications).
fn watch_list_options() -> ListOptions {
    ListOptions {
        resource_version: String::new(),
        resource_version_match: ResourceVersionMatch::NotOlderThan,
        recursive: true,
        progress_notify: true,
        send_initial_events: Some(true),
        predicate: SelectionPredicate {
            allow_watch_bookmarks: true,
            ..SelectionPredicate::default()
        },
    }
}

/// Every object of the resource from one streaming watch-list, up to its
/// initial-events-end bookmark; an error (naming the prefix) when the backend refused
/// it, did not stream as a watch-list does, or did not end the initial events within
/// the configured limit (the stream is dropped then).
async fn stream_all<S: Storage>(shared: &Shared<S>) -> Result<Filled<S::Object>, StorageError> {
    let prefix = shared.settings.resource_prefix.as_str();
    let limit = shared.settings.fill_watch_list_timeout;
    // One deadline for the whole fill, opening the watch included: a backend that
    // trickles events must not keep it going by resetting a per-event timer. A limit
    // too far off to be an instant is no limit.
    let deadline = Instant::now().checked_add(limit);
    let options = watch_list_options();
    let Some(opened) = before(deadline, shared.storage.watch(prefix, &options)).await else {
        return Err(initial_events_timed_out(prefix, 0, limit));
    };
    let mut stream = opened?;
    let mut objects = Vec::new();
    loop {
        let next = poll_fn(|cx| stream.as_mut().poll_next(cx));
        let Some(event) = before(deadline, next).await else {
            // Returning drops the stream, and with it the backend's watch.
            return Err(initial_events_timed_out(prefix, objects.len(), limit));
        };
        match event {
            Some(WatchEvent::Added(object)) => objects.push(object),
            Some(WatchEvent::Bookmark(mut bookmark)) => {
                let end = bookmark
                    .annotations_mut()
                    .get(INITIAL_EVENTS_END_ANNOTATION)
                    .is_some_and(|value| value == "true");
                if !end {
                    return Err(not_a_watch_list(
                        prefix,
                        "a bookmark without the initial-events-end annotation came first"
                            .to_owned(),
                    ));
                }
                let revision = shared
                    .storage
                    .versioner()
                    .object_resource_version(&bookmark)
                    .map_err(|err| err.with_key(prefix.to_owned()))?;
                return Ok(Filled {
                    objects,
                    revision,
                    stream: Some(stream),
                });
            }
            Some(WatchEvent::Error(status)) => {
                return Err(StorageError::Api {
                    key: prefix.to_owned(),
                    status,
                });
            }
            Some(other) => {
                return Err(not_a_watch_list(
                    prefix,
                    format!(
                        "a {} event came before the end of the initial events",
                        other.type_name()
                    ),
                ));
            }
            None => {
                return Err(not_a_watch_list(
                    prefix,
                    format!(
                        "the stream ended after {} initial events, before their end",
                        objects.len()
                    ),
                ));
            }
        }
    }
}

/// What `future` gives, unless `deadline` passes first (`None`: it never does).
async fn before<F: Future>(deadline: Option<Instant>, future: F) -> Option<F::Output> {
    match deadline {
        Some(deadline) => timeout_at(deadline, future).await.ok(),
        None => Some(future.await),
    }
}

/// The error of a watch-list whose initial events did not end within `limit`, after
/// `count` of them.
fn initial_events_timed_out(prefix: &str, count: usize, limit: Duration) -> StorageError {
    StorageError::Timeout {
        key: prefix.to_owned(),
        message: format!(
            "the streaming watch-list sent {count} initial events but not their end within {limit:?}"
        ),
    }
}

/// The error of a watch-list the backend did not serve as one.
fn not_a_watch_list(prefix: &str, what: String) -> StorageError {
    StorageError::Internal {
        key: prefix.to_owned(),
        message: format!("not a streaming watch-list: {what}"),
        source: None,
    }
}

/// Every object of the resource, in pages read at one revision, and that revision.
async fn list_all<S: Storage>(shared: &Shared<S>) -> Result<(Vec<S::Object>, u64), StorageError> {
    let prefix = shared.settings.resource_prefix.as_str();
    let mut options = ListOptions::prefix().limit(shared.settings.list_page_size);
    let page = shared.storage.list(prefix, &options).await?;
    let revision = shared
        .storage
        .versioner()
        .parse_resource_version(&page.metadata.resource_version)?;
    let mut objects = page.items;
    let mut token = page.metadata.continue_token;
    while !token.is_empty() {
        options.predicate.continue_token = token;
        let page = shared.storage.list(prefix, &options).await?;
        objects.extend(page.items);
        token = page.metadata.continue_token;
    }
    Ok((objects, revision))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use apistore_storage::{ErrorKind, StorageError};

    use super::initial_events_timed_out;

    /// The log line of a fallback says which resource, how far the stream got and how
    /// long it was given.
    #[test]
    fn a_timed_out_fill_names_the_prefix_the_events_and_the_limit() {
        let err = initial_events_timed_out("/pods", 2, Duration::from_millis(200));
        assert!(matches!(&err, StorageError::Timeout { key, .. } if key == "/pods"));
        assert_eq!(err.kind(), ErrorKind::Timeout);
        let text = err.to_string();
        for part in ["\"/pods\"", "sent 2 initial events", "within 200ms"] {
            assert!(text.contains(part), "{part} in {text}");
        }
    }
}
