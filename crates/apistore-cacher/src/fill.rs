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
//! ignore `sendInitialEvents`; kube's one gate covers both). When the backend refuses the streaming watch (an error, or an error event before the end
//! of the initial events), or answers with something a watch-list never sends before
//! its end (a change, a plain bookmark: a backend that ignored `sendInitialEvents`
//! after all), or the stream ends early, the round falls back to the paged list, as
//! client-go's `ListAndWatchWithContext` does.
//!
//! Unlike client-go, the streaming watch always asks for the latest state (an empty
//! resourceVersion) rather than first retrying the reflector's last revision: the
//! latest state is never older than what the cache had, and after a 410 client-go's
//! first attempt at the old revision only earns another 410.
//!
//! [`CacherConfig::list_page_size`]: crate::CacherConfig::list_page_size
//! [`CacherConfig::fill_with_watch_list`]: crate::CacherConfig::fill_with_watch_list
//! [`CacherConfig::watch_list`]: crate::CacherConfig::watch_list

use std::future::poll_fn;

use apistore_storage::{
    ApiObject as _, INITIAL_EVENTS_END_ANNOTATION, ListOptions, ResourceVersionMatch,
    SelectionPredicate, Storage, StorageError, WatchEvent, WatchStream,
};

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
/// it or did not stream as a watch-list does.
async fn stream_all<S: Storage>(shared: &Shared<S>) -> Result<Filled<S::Object>, StorageError> {
    let prefix = shared.settings.resource_prefix.as_str();
    let mut stream = shared.storage.watch(prefix, &watch_list_options()).await?;
    let mut objects = Vec::new();
    loop {
        let event = poll_fn(|cx| stream.as_mut().poll_next(cx)).await;
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
