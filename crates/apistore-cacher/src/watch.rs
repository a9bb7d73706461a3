//! Setting up a watch served from the cache (kube's `Cacher.Watch`): which revision
//! the cache must reach first, which events the watcher starts with, and its
//! registration with the dispatcher, made while the cache is read-locked so that no
//! change falls between the two.

use std::sync::Arc;
use std::sync::atomic::AtomicU8;

use apistore_storage::{ListOptions, Result, Storage, StorageError, WatchStream};
use tokio::sync::mpsc;

use crate::cacher::{Shared, initializing};
use crate::dispatcher::{BOOKMARK_SENT, BOOKMARK_WAITING, NewWatcher};
use crate::event::canonical_key;
use crate::watch_cache::WatchCache;
use crate::watcher::{CacheWatcher, ErrorWatcher, WatchFilter};

impl<S: Storage> Shared<S> {
    pub(crate) async fn watch(
        &self,
        key: &str,
        options: &ListOptions,
    ) -> Result<WatchStream<S::Object>> {
        let Some(canonical) = canonical_key(key) else {
            return self.storage.watch(key, options).await;
        };
        let mut options = options.clone();
        if !self.settings.watch_list {
            options.send_initial_events = None;
        }
        let requested = self
            .storage
            .versioner()
            .parse_resource_version(&options.resource_version)?;
        let Some(generation) = self.ready.generation() else {
            return Err(initializing(key));
        };
        let send_initial_events = options.send_initial_events == Some(true);
        let list_watch = send_initial_events && options.predicate.allow_watch_bookmarks;
        if list_watch && !self.settings.consistent_reads_from_cache {
            return Ok(error_watcher(StorageError::Internal {
                key: key.to_owned(),
                message: "a watch stream was requested by the client but the required storage feature RequestWatchProgress is disabled".to_owned(),
                source: None,
            }));
        }
        let required = if !options.resource_version.is_empty() {
            requested
        } else if options.send_initial_events.is_none() {
            0
        } else {
            match self.current_revision().await {
                Ok(rv) => rv,
                Err(err) => return Ok(error_watcher(err)),
            }
        };
        if send_initial_events {
            let waited = if self.settings.consistent_reads_from_cache {
                self.wait_with_progress_requests(required, key).await
            } else {
                self.wait_for_cache(required, key).await
            };
            if let Err(err) = waited {
                return Ok(error_watcher(err));
            }
        }
        let (sender, live) = mpsc::channel(self.cache.suggested_watch_channel_size());
        let state = self.cache.read();
        let initial_state =
            send_initial_events || (required == 0 && options.send_initial_events.is_none());
        let interval = match WatchCache::interval(&state, required, &canonical, initial_state) {
            Ok(interval) => interval,
            Err(err) => return Ok(error_watcher(err.into_storage_error(key))),
        };
        let bookmark_after = match (list_watch, options.resource_version.is_empty(), requested) {
            (false, _, _) => 0,
            (true, true, _) => required,
            (true, false, 0) => state.resource_version,
            (true, false, rv) => rv,
        };
        let bookmark_state = Arc::new(AtomicU8::new(if bookmark_after == 0 {
            BOOKMARK_SENT
        } else {
            BOOKMARK_WAITING
        }));
        if self.ready.generation() != Some(generation) {
            // The cache went through a re-list meanwhile: the watch would be ended
            // at once anyway.
            return Ok(Box::pin(ErrorWatcher::new(None)));
        }
        let filter = WatchFilter {
            key: Arc::from(canonical.as_ref()),
            predicate: options.predicate.clone(),
        };
        let resource_version = required.max(state.resource_version);
        let guard = self.dispatcher.add(NewWatcher {
            sender,
            start_resource_version: resource_version,
            key: Arc::clone(&filter.key),
            allow_bookmarks: options.predicate.allow_watch_bookmarks,
            bookmark_after_resource_version: bookmark_after,
            bookmark_state: Arc::clone(&bookmark_state),
        });
        drop(state);
        // kube 1.32+: the bookmark that ends a watch-list's initial events follows them
        // at once, at the cache's revision when the watch was registered.
        let initial_events_end =
            (list_watch && self.settings.initial_events_end_at_once).then_some(resource_version);
        Ok(Box::pin(CacheWatcher {
            initial: interval,
            initial_sent: 0,
            initial_done: false,
            initial_events_end,
            resource_version,
            live,
            batch: None,
            filter,
            bookmark_state,
            metrics: self.metrics.clone(),
            _guard: guard,
        }))
    }
}

fn error_watcher<T: Send + 'static>(err: StorageError) -> WatchStream<T> {
    Box::pin(ErrorWatcher::new(Some(err.status())))
}
