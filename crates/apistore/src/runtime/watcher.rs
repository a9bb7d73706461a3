//! List-then-watch as a stream of [`Event`]s, in kube-rs's `watcher` shape.
//!
//! The stream never ends by itself: a watch that ends is started again from the last
//! resourceVersion seen; a watch or list that fails yields the error and is retried
//! after a backoff (800 ms doubling to 30 s, reset by the next success, as kube-rs's
//! default); a 410 (the resourceVersion was compacted away) yields the error and starts
//! over with a fresh list, announced by [`Event::Init`]. Bookmarks move the
//! resourceVersion on and are not passed up. Selectors that do not parse end the stream
//! after their error: no retry can fix them.

use std::collections::VecDeque;
use std::time::Duration;

use apistore_storage::{
    ApiObject, FieldSelector, LabelSelector, ListOptions, SelectionPredicate, Storage,
    StorageError, WatchEvent, WatchStream,
};
use futures::{Stream, StreamExt};

/// What the watcher saw.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<T> {
    /// An object was created or modified (or started to match the selectors).
    Apply(T),
    /// An object was deleted (or stopped matching): its last state.
    Delete(T),
    /// A (re-)list starts: the objects that follow until [`Event::InitDone`] are the
    /// whole current state; anything held from before and not among them is gone.
    Init,
    /// One object of the current state, during a (re-)list.
    InitApply(T),
    /// The (re-)list is complete; changes follow as [`Event::Apply`] and [`Event::Delete`].
    InitDone,
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// A label selector (`app=web,tier!=db`); empty selects everything.
    pub label_selector: String,
    /// A field selector (`metadata.name=x`); empty selects everything.
    pub field_selector: String,
    /// Objects per list page (default 500, as kube-rs).
    pub page_size: i64,
    /// Ask for bookmarks, so that a resumed watch starts from a recent revision.
    pub bookmarks: bool,
    /// The first backoff after an error (default 800 ms); it doubles up to `max_backoff`.
    pub initial_backoff: Duration,
    /// The longest backoff (default 30 s).
    pub max_backoff: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            label_selector: String::new(),
            field_selector: String::new(),
            page_size: 500,
            bookmarks: true,
            initial_backoff: Duration::from_millis(800),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl Config {
    /// Only objects with these labels (builder style).
    pub fn labels(mut self, selector: &str) -> Self {
        self.label_selector = selector.to_owned();
        self
    }

    /// Only objects with these fields (builder style).
    pub fn fields(mut self, selector: &str) -> Self {
        self.field_selector = selector.to_owned();
        self
    }

    /// Objects per list page (builder style); 0 lists in one call.
    pub fn page_size(mut self, page_size: i64) -> Self {
        self.page_size = page_size;
        self
    }

    /// The backoff range after errors (builder style).
    pub fn backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }
}

/// Watches the objects under `key` (a prefix, listed and watched recursively).
pub fn watcher<S>(
    store: S,
    key: impl Into<String>,
    config: Config,
) -> impl Stream<Item = Result<Event<S::Object>, StorageError>> + Send
where
    S: Storage + Send + 'static,
{
    let machine = Machine {
        key: key.into(),
        predicate: None,
        store,
        state: State::Listing {
            continue_token: String::new(),
        },
        pending: VecDeque::new(),
        resource_version: String::new(),
        backoff: None,
        config,
        failed_for_good: false,
    };
    futures::stream::unfold(machine, |mut machine| async move {
        let item = machine.step().await?;
        Some((item, machine))
    })
}

enum State<T> {
    /// Announce a (re-)list with [`Event::Init`], then read its first page.
    Starting,
    /// Reading pages; `continue_token` is empty for the first one.
    Listing { continue_token: String },
    /// Watching from `resource_version`; `None` until the watch is open.
    Watching(Option<WatchStream<T>>),
}

struct Machine<S: Storage> {
    store: S,
    key: String,
    config: Config,
    predicate: Option<SelectionPredicate>,
    state: State<S::Object>,
    /// Objects of the listed pages still to hand out, then whether `InitDone` follows.
    pending: VecDeque<Event<S::Object>>,
    resource_version: String,
    /// The backoff to wait before the next request, after an error.
    backoff: Option<Duration>,
    failed_for_good: bool,
}

impl<S> Machine<S>
where
    S: Storage,
{
    async fn step(&mut self) -> Option<Result<Event<S::Object>, StorageError>> {
        if self.failed_for_good {
            return None;
        }
        let predicate = match &self.predicate {
            Some(predicate) => predicate.clone(),
            None => match self.parse_predicate() {
                Ok(predicate) => {
                    self.predicate = Some(predicate.clone());
                    // A stream starts with a list, announced like every re-list.
                    self.state = State::Starting;
                    predicate
                }
                Err(err) => {
                    self.failed_for_good = true;
                    return Some(Err(err));
                }
            },
        };
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(Ok(event));
            }
            match &mut self.state {
                State::Starting => {
                    self.state = State::Listing {
                        continue_token: String::new(),
                    };
                    return Some(Ok(Event::Init));
                }
                State::Listing { continue_token } => {
                    let continue_token = std::mem::take(continue_token);
                    Self::wait_out(self.backoff).await;
                    let mut options = ListOptions {
                        recursive: true,
                        predicate: predicate.clone(),
                        ..ListOptions::default()
                    };
                    options.predicate.limit = self.config.page_size;
                    options.predicate.continue_token = continue_token.clone();
                    match self.store.list(&self.key, &options).await {
                        Ok(list) => {
                            self.backoff = None;
                            self.pending
                                .extend(list.items.into_iter().map(Event::InitApply));
                            if list.metadata.continue_token.is_empty() {
                                self.resource_version = list.metadata.resource_version;
                                self.pending.push_back(Event::InitDone);
                                self.state = State::Watching(None);
                            } else {
                                self.state = State::Listing {
                                    continue_token: list.metadata.continue_token,
                                };
                            }
                        }
                        Err(err) => {
                            // An expired continue token can only be cured by listing
                            // again from the start; anything else retries the page.
                            self.state = if err.is_expired() {
                                State::Starting
                            } else {
                                State::Listing { continue_token }
                            };
                            self.back_off();
                            return Some(Err(err));
                        }
                    }
                }
                State::Watching(None) => {
                    Self::wait_out(self.backoff).await;
                    let mut options = ListOptions {
                        resource_version: self.resource_version.clone(),
                        recursive: true,
                        predicate: predicate.clone(),
                        ..ListOptions::default()
                    };
                    options.predicate.allow_watch_bookmarks = self.config.bookmarks;
                    match self.store.watch(&self.key, &options).await {
                        Ok(stream) => self.state = State::Watching(Some(stream)),
                        Err(err) => {
                            if err.is_expired() {
                                self.state = State::Starting;
                            } else {
                                self.back_off();
                            }
                            return Some(Err(err));
                        }
                    }
                }
                State::Watching(Some(stream)) => match stream.next().await {
                    Some(WatchEvent::Added(obj) | WatchEvent::Modified(obj)) => {
                        self.backoff = None;
                        self.resource_version = obj.resource_version().to_owned();
                        return Some(Ok(Event::Apply(obj)));
                    }
                    Some(WatchEvent::Deleted(obj)) => {
                        self.backoff = None;
                        self.resource_version = obj.resource_version().to_owned();
                        return Some(Ok(Event::Delete(obj)));
                    }
                    Some(WatchEvent::Bookmark(obj)) => {
                        self.resource_version = obj.resource_version().to_owned();
                    }
                    Some(WatchEvent::Error(status)) => {
                        if status.code == 410 {
                            self.state = State::Starting;
                        } else {
                            self.state = State::Watching(None);
                            self.back_off();
                        }
                        return Some(Err(StorageError::Api {
                            key: self.key.clone(),
                            status,
                        }));
                    }
                    // The watch ended without an error: start it again where it was.
                    None => self.state = State::Watching(None),
                },
            }
        }
    }

    fn parse_predicate(&self) -> Result<SelectionPredicate, StorageError> {
        let label = LabelSelector::parse(&self.config.label_selector)
            .map_err(|e| StorageError::bad_request(&self.key, e.to_string()))?;
        let field = FieldSelector::parse(&self.config.field_selector)
            .map_err(|e| StorageError::bad_request(&self.key, e.to_string()))?;
        Ok(SelectionPredicate {
            label,
            field,
            ..SelectionPredicate::default()
        })
    }

    fn back_off(&mut self) {
        let next = match self.backoff {
            None => self.config.initial_backoff,
            Some(last) => (last * 2).min(self.config.max_backoff),
        };
        self.backoff = Some(next);
    }

    /// Waits out the backoff of the last error, if any. Takes the delay rather than
    /// `&self`: the machine holds a watch stream that is `Send` but not `Sync`.
    async fn wait_out(backoff: Option<Duration>) {
        if let Some(delay) = backoff {
            tokio::time::sleep(delay).await;
        }
    }
}
