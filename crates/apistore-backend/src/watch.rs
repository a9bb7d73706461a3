//! Watch: where a watch starts and what it sends first, the checks before its initial
//! events, the channel between its task and its consumer, and how a failure becomes its
//! last event.
//!
//! Follows `etcd3/watcher.go` and `Watch` of `etcd3/store.go` in k8s.io/apiserver
//! v0.31.1: `getStartWatchResourceVersion`, `areInitialEventsRequired` and
//! `isInitialEventsEndBookmarkRequired` ([`StartPlan`], with the reference's quirks when
//! the `WatchList` gate is off, its default in v0.31.1), `GetCurrentResourceVersionFromStorage`
//! ([`current_revision_list`], [`revision_of_list`]), the 504 for a resourceVersion
//! in the future and the 410 for one compacted away, `outgoingBufSize`
//! ([`OUTGOING_BUFFER`]) and `transformErrorToEvent` ([`watch_error_status`]).
//! How a backend follows its changes (etcd's watch stream, the memory store's history)
//! stays with the backend.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use apistore_storage::{
    ApiObject, ErrorKind, ListOptions, ObjectList, Result, SelectionPredicate, Status, StatusCause,
    StatusDetails, StatusReason, StorageError, Versioner, WatchEvent,
};
use futures_core::Stream;
use tokio::sync::mpsc;

use crate::event::RawEvent;
use crate::object::{DecodeErrors, ObjectLayers};

/// Events buffered between a watch's task and its consumer (the reference's
/// `outgoingBufSize`).
pub const OUTGOING_BUFFER: usize = 100;

/// The message of the 410 for a watch whose revision was compacted away.
pub const WATCH_EXPIRED: &str = "The resourceVersion for the provided watch is too old.";

/// Where a watch starts and what it sends first, decided from the request alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartPlan {
    /// The revision the watch has seen up to: changes after it are sent.
    pub start: Start,
    /// Whether the current state is sent first, as Added events. The revision it was
    /// read at then replaces the start.
    pub initial_events: bool,
    /// Whether a bookmark marks the end of the initial events.
    pub end_bookmark: bool,
}

/// The starting revision of a [`StartPlan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// This revision (0: none, so the watch starts at revision 1 unless an initial
    /// sync replaces it).
    At(i64),
    /// The current revision of the storage, read before the watch starts.
    CurrentStorage,
}

impl StartPlan {
    /// The plan for a watch from `rev` (0: unset) with the request's
    /// `sendInitialEvents` and `allowWatchBookmarks`, under the `WatchList` gate.
    pub fn new(
        rev: i64,
        send_initial_events: Option<bool>,
        allow_watch_bookmarks: bool,
        watch_list: bool,
    ) -> Self {
        let start = if rev > 0 || !watch_list || send_initial_events != Some(false) {
            Start::At(rev.max(0))
        } else {
            Start::CurrentStorage
        };
        // Legacy: RV unset or 0 without sendInitialEvents sends the current state. With
        // the gate off, sendInitialEvents set either way turns it off (and, at RV 0,
        // leaves the watch to start at revision 1).
        let initial_events = (send_initial_events.is_none() && rev == 0)
            || (watch_list && send_initial_events == Some(true));
        let end_bookmark = watch_list && send_initial_events == Some(true) && allow_watch_bookmarks;
        Self {
            start,
            initial_events,
            end_bookmark,
        }
    }

    /// The plan of a watch of `key` (prepared) with `options`: its resourceVersion
    /// parsed (an error names the key) and within etcd's revisions.
    pub fn for_request(
        versioner: &impl Versioner,
        key: &str,
        options: &ListOptions,
        watch_list: bool,
    ) -> Result<Self> {
        let rev = versioner
            .parse_resource_version(&options.resource_version)
            .map_err(|err| err.with_key(key.to_owned()))?;
        let rev = i64::try_from(rev).map_err(|_| StorageError::Invalid {
            key: key.to_owned(),
            field: "resourceVersion".to_owned(),
            value: options.resource_version.clone(),
            message: "must not exceed etcd's largest revision".to_owned(),
        })?;
        Ok(Self::new(
            rev,
            options.send_initial_events,
            options.predicate.allow_watch_bookmarks,
            watch_list,
        ))
    }
}

/// The options of the one-item list of the resource prefix whose resourceVersion is
/// the storage's current revision.
pub fn current_revision_list() -> ListOptions {
    let mut options = ListOptions::default();
    options.predicate.limit = 1;
    options
}

/// The revision a list answered at (the storage's current revision for a
/// [`current_revision_list`]); an error names `key`.
pub fn revision_of_list<T>(
    versioner: &impl Versioner,
    list: &ObjectList<T>,
    key: &str,
) -> Result<i64> {
    let rv = versioner
        .parse_resource_version(&list.metadata.resource_version)
        .map_err(|err| err.with_key(key.to_owned()))?;
    Ok(i64::try_from(rv).unwrap_or(i64::MAX))
}

/// The 504 for initial events asked for at a revision past the storage's `current`
/// one, with a retry after one to three seconds; `None` when it is not past.
pub fn check_initial_revision(key: &str, initial_rev: i64, current: i64) -> Result<()> {
    if initial_rev > current {
        return Err(StorageError::ResourceVersionTooLarge {
            key: key.to_owned(),
            requested: initial_rev.unsigned_abs(),
            current: current.max(0).unsigned_abs(),
            retry_after_seconds: jittered_retry_seconds(),
        });
    }
    Ok(())
}

/// The 410 of a watch whose next revision was compacted away.
pub fn watch_expired(key: &str) -> StorageError {
    StorageError::Expired {
        key: key.to_owned(),
        message: WATCH_EXPIRED.to_owned(),
        continue_token: None,
    }
}

/// Why a watch task stops.
#[derive(Debug)]
pub enum Ending {
    /// The stream was dropped: nothing more to say.
    ConsumerGone,
    /// The watch failed: the consumer gets this error event last.
    Failed(Box<Status>),
}

impl From<StorageError> for Ending {
    fn from(err: StorageError) -> Self {
        Self::Failed(Box::new(watch_error_status(&err)))
    }
}

/// The status of an Error event for a failure: statuses the API defines for the case
/// (410 for a compacted revision, 504 for a too-large resourceVersion) pass through;
/// anything else is a 500 internal error, as kube-apiserver's `transformErrorToEvent`.
///
/// **Difference from the reference:** a store that stayed unreachable past its limit
/// is a 503 ServiceUnavailable, which a client can tell from a bug (kube's watch has no
/// such end: it waits for etcd for as long as the request lives).
pub fn watch_error_status(err: &StorageError) -> Status {
    match err.kind() {
        ErrorKind::Expired
        | ErrorKind::Unreachable
        | ErrorKind::ResourceVersionTooLarge
        | ErrorKind::Api
        | ErrorKind::Invalid
        | ErrorKind::BadRequest => err.status(),
        _ => {
            let message = err.to_string();
            let mut status = Status::failure(
                500,
                StatusReason::InternalError,
                format!("Internal error occurred: {message}"),
            );
            status.details = Some(StatusDetails {
                causes: vec![StatusCause {
                    message,
                    ..StatusCause::default()
                }],
                ..StatusDetails::default()
            });
            status
        }
    }
}

/// kube-apiserver's `wait.Jitter(1s, 3)` in whole seconds: 1, 2 or 3.
fn jittered_retry_seconds() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    1 + u32::try_from(random % 3).unwrap_or(0)
}

/// What a watch's channel carries: an event ready to hand over (bookmarks, the final
/// error; boxed, so a slot stays small whatever the object's size), or a change still
/// to be decoded.
#[derive(Debug)]
enum Message<T> {
    Ready(Box<WatchEvent<T>>),
    Raw(RawEvent),
}

/// The channel of one watch, of [`OUTGOING_BUFFER`] messages: its task's side and its
/// consumer's. Changes are decoded (transformed back, decoded, filtered by
/// `predicate`) on the consumer's side, as it takes them, with `layers`: the objects
/// are then allocated and freed by the same thread. Decoded in the task, every object's
/// allocations were freed by another thread, which glibc's allocator serves through its
/// slow, locked paths; it doubled the watch's CPU per event.
pub fn channel<T, E>(
    layers: ObjectLayers<T, E>,
    predicate: SelectionPredicate,
) -> (Outgoing<T>, EventStream<T, E>) {
    let (out, events) = mpsc::channel(OUTGOING_BUFFER);
    (
        Outgoing { out },
        EventStream {
            events,
            layers,
            predicate,
            failed: false,
        },
    )
}

/// The consumer's side of a watch.
pub struct EventStream<T, E> {
    events: mpsc::Receiver<Message<T>>,
    layers: ObjectLayers<T, E>,
    predicate: SelectionPredicate,
    /// A change could not be decoded: its error event was the last.
    failed: bool,
}

impl<T, E> std::fmt::Debug for EventStream<T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

// Nothing of the stream is ever pinned in place: its fields move freely.
impl<T, E> Unpin for EventStream<T, E> {}

impl<T, E> Stream for EventStream<T, E>
where
    T: ApiObject + Default + 'static,
    E: DecodeErrors,
{
    type Item = WatchEvent<T>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            // A run of changes the predicate filters out ends at tokio's cooperative
            // budget: the receiver then answers Pending and the task yields.
            let message = match this.events.poll_recv(cx) {
                Poll::Ready(Some(message)) => message,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            };
            match message {
                Message::Ready(event) => return Poll::Ready(Some(*event)),
                Message::Raw(raw) => match this.layers.watch_event(raw, &this.predicate) {
                    Ok(Some(event)) => return Poll::Ready(Some(event)),
                    Ok(None) => {}
                    Err(err) => {
                        // The watch ends here, as the reference's does on a value it
                        // cannot decode: closing the channel stops the task.
                        this.failed = true;
                        this.events.close();
                        return Poll::Ready(Some(WatchEvent::error(watch_error_status(&err))));
                    }
                },
            }
        }
    }
}

/// The task's side of a watch.
#[derive(Debug)]
pub struct Outgoing<T> {
    out: mpsc::Sender<Message<T>>,
}

impl<T> Outgoing<T> {
    /// Sends one event as it is (a bookmark); the consumer's going away ends the watch.
    pub async fn emit(&self, event: WatchEvent<T>) -> Result<(), Ending> {
        self.send(Message::Ready(Box::new(event))).await
    }

    /// Sends one change, for the consumer to decode.
    pub async fn emit_raw(&self, raw: RawEvent) -> Result<(), Ending> {
        self.send(Message::Raw(raw)).await
    }

    async fn send(&self, message: Message<T>) -> Result<(), Ending> {
        self.out
            .send(message)
            .await
            .map_err(|_| Ending::ConsumerGone)
    }

    /// Sends changes that are ready together (one etcd watch response, one stretch of
    /// history), taking room for up to [`OUTGOING_BUFFER`] of them at a time. The
    /// consumer is woken once per stretch, not once per change. `changes` is left
    /// empty.
    pub async fn emit_all(&self, changes: &mut Vec<RawEvent>) -> Result<(), Ending> {
        let mut changes = changes.drain(..);
        while changes.len() > 0 {
            let room = changes.len().min(OUTGOING_BUFFER);
            let permits = self
                .out
                .reserve_many(room)
                .await
                .map_err(|_| Ending::ConsumerGone)?;
            for (permit, raw) in permits.zip(changes.by_ref()) {
                permit.send(Message::Raw(raw));
            }
        }
        Ok(())
    }

    /// Resolves once the consumer has gone.
    pub async fn closed(&self) {
        self.out.closed().await;
    }

    /// Runs `work` unless the consumer goes away first.
    pub async fn until_closed<F: Future>(&self, work: F) -> Result<F::Output, Ending> {
        tokio::select! {
            biased;
            () = self.out.closed() => Err(Ending::ConsumerGone),
            output = work => Ok(output),
        }
    }

    /// Ends the watch: a failure is its last event, delivered unless the consumer has
    /// gone meanwhile.
    pub async fn end(&self, ending: Ending) {
        if let Ending::Failed(status) = ending {
            let _ = self
                .send(Message::Ready(Box::new(WatchEvent::error(*status))))
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rev: i64, sie: Option<bool>, bookmarks: bool, gate: bool) -> (Start, bool, bool) {
        let plan = StartPlan::new(rev, sie, bookmarks, gate);
        (plan.start, plan.initial_events, plan.end_bookmark)
    }

    // The matrix of RunWatchSemantics (gate on) as start plans: the revision is the
    // request's (or the storage's, read later), initial events and end bookmark as the
    // reference decides them.
    #[test]
    fn watch_list_gate_on_matrix() {
        use Start::{At, CurrentStorage};
        let cases = [
            // (rv, sendInitialEvents, allowWatchBookmarks) => plan
            ((0, Some(true), true), (At(0), true, true)),
            ((0, Some(true), false), (At(0), true, false)),
            ((0, Some(false), true), (CurrentStorage, false, false)),
            ((0, Some(false), false), (CurrentStorage, false, false)),
            ((0, None, false), (At(0), true, false)),
            ((0, None, true), (At(0), true, false)),
            ((1, Some(true), true), (At(1), true, true)),
            ((1, Some(true), false), (At(1), true, false)),
            ((1, Some(false), true), (At(1), false, false)),
            ((1, Some(false), false), (At(1), false, false)),
            ((1, None, true), (At(1), false, false)),
        ];
        for ((rv, sie, bookmarks), want) in cases {
            assert_eq!(
                plan(rv, sie, bookmarks, true),
                want,
                "rv={rv} sie={sie:?} awb={bookmarks}"
            );
        }
    }

    // With the gate off (v0.31.1's default), sendInitialEvents set either way turns the
    // initial events off, and at RV 0 the watch starts at revision 1; no end bookmark.
    #[test]
    fn watch_list_gate_off_quirks() {
        use Start::At;
        let cases = [
            ((0, Some(true), true), (At(0), false, false)),
            ((0, Some(false), true), (At(0), false, false)),
            ((0, None, true), (At(0), true, false)),
            ((5, Some(true), true), (At(5), false, false)),
            ((5, None, false), (At(5), false, false)),
        ];
        for ((rv, sie, bookmarks), want) in cases {
            assert_eq!(
                plan(rv, sie, bookmarks, false),
                want,
                "rv={rv} sie={sie:?} awb={bookmarks}"
            );
        }
    }

    #[test]
    fn error_events_keep_api_statuses_and_wrap_the_rest() {
        let expired = StorageError::Expired {
            key: "/k".into(),
            message: WATCH_EXPIRED.into(),
            continue_token: None,
        };
        let status = watch_error_status(&expired);
        assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
        assert_eq!(status.message, WATCH_EXPIRED);

        let too_large = StorageError::ResourceVersionTooLarge {
            key: "/k".into(),
            requested: 102,
            current: 1,
            retry_after_seconds: 2,
        };
        let status = watch_error_status(&too_large);
        assert_eq!(status.code, 504);
        assert_eq!(
            status.message,
            "Timeout: Too large resource version: 102, current: 1"
        );

        let unreachable = StorageError::Unreachable {
            key: "/k".into(),
            source: "connection refused".into(),
        };
        let status = watch_error_status(&unreachable);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (503, "ServiceUnavailable")
        );
        assert!(status.message.contains("\"/k\""), "{}", status.message);

        let internal = StorageError::Internal {
            key: "/k".into(),
            message: "etcd cancelled the watch: permission denied".into(),
            source: None,
        };
        let status = watch_error_status(&internal);
        assert_eq!(
            (status.code, status.reason.as_str()),
            (500, "InternalError")
        );
        assert!(
            status.message.starts_with("Internal error occurred: "),
            "{}",
            status.message
        );
        assert!(status.message.contains("\"/k\""), "{}", status.message);
        let causes = status.details.map(|d| d.causes).unwrap_or_default();
        assert_eq!(causes.len(), 1);
        assert_eq!(causes[0].message, internal.to_string());
    }

    #[test]
    fn retry_after_is_one_to_three_seconds() {
        let mut seen = [false; 4];
        for _ in 0..300 {
            let seconds = jittered_retry_seconds();
            assert!((1..=3).contains(&seconds), "{seconds}");
            seen[seconds as usize] = true;
        }
        assert_eq!(seen, [false, true, true, true]);
    }

    /// The consumer's side decodes what the task sent raw: a change the predicate
    /// filters out is skipped, a value that does not decode is a 500 Error event that
    /// ends the stream, and nothing after it is delivered.
    #[tokio::test]
    async fn changes_are_decoded_filtered_and_a_bad_one_ends_the_stream() {
        use apistore_storage::{DynamicObject, JsonCodec, LabelSelector};
        use apistore_value::IdentityTransformer;
        use bytes::Bytes;
        use futures::StreamExt as _;
        use std::sync::Arc;

        let layers: ObjectLayers<DynamicObject> = ObjectLayers::new(
            Arc::new(JsonCodec::<DynamicObject>::default()),
            Arc::new(IdentityTransformer),
            (),
        );
        let predicate = SelectionPredicate {
            label: LabelSelector::parse("app=web").unwrap(),
            ..SelectionPredicate::default()
        };
        let (out, mut events) = channel(layers, predicate);
        let stored = |name: &str, app: &str| {
            let mut object = DynamicObject::new("v1", "ConfigMap", name).within("ns");
            object
                .metadata
                .labels
                .insert("app".to_owned(), app.to_owned());
            Bytes::from(serde_json::to_vec(&object).unwrap())
        };
        let created = |name: &str, value: Bytes, rev: i64| {
            RawEvent::initial(format!("/configmaps/ns/{name}"), value, rev)
        };
        let mut changes = vec![
            created("web", stored("web", "web"), 2),
            created("db", stored("db", "db"), 3),
            created("broken", Bytes::from_static(b"{not json"), 4),
            created("later", stored("later", "web"), 5),
        ];
        out.emit_all(&mut changes).await.unwrap();
        assert!(changes.is_empty());

        let Some(WatchEvent::Added(first)) = events.next().await else {
            panic!("the first change was not an Added event");
        };
        assert_eq!(first.metadata.name, "web");
        assert_eq!(first.metadata.resource_version, "2");
        let Some(WatchEvent::Error(status)) = events.next().await else {
            panic!("the undecodable value was not an Error event");
        };
        assert_eq!(status.code, 500);
        assert!(
            status.message.contains("/configmaps/ns/broken"),
            "{}",
            status.message
        );
        assert!(
            events.next().await.is_none(),
            "the stream goes on after its error"
        );
        // The task sees the consumer gone.
        assert!(matches!(
            out.emit(WatchEvent::Bookmark(DynamicObject::default()))
                .await,
            Err(Ending::ConsumerGone)
        ));
    }
}
