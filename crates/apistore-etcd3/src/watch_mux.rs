//! One etcd gRPC watch stream per store, shared by all of the store's watches.
//!
//! etcd multiplexes watches over one bidirectional stream: a create request answers
//! with a watch id, and every response names the watch it is for. kube-apiserver's Go
//! client shares one stream between all watches of a client in the same way. Sharing
//! keeps an idle watch cheap (a route in a map and two small channels here, one
//! watcher in etcd) instead of an HTTP/2 stream and its buffers each.
//!
//! The [`WatchHub`] owns a multiplexer task that reads the stream and routes each
//! response to its watch through a bounded channel (at most 1,024 responses, and at
//! most 4 MiB of keys and values once it holds 16), and a pump task that writes
//! requests. Responses are never awaited on a watch's behalf: a watch whose channel is
//! full (its consumer is slow) is *overflowed*: its etcd watch is cancelled, and the
//! watch re-creates it from the revision after the last response it received once it
//! has drained what it has. A slow consumer thus costs its own watch a re-watch, never
//! blocks the others, and memory stays bounded; no event is lost or repeated, because
//! etcd never splits one revision over two responses.
//!
//! When the stream fails with a transient error (a broken connection, a member's
//! death, `Unavailable` or `Internal` from etcd, `no leader`), or its member is found
//! not answering ([`crate::endpoints`]), every watch on it is *interrupted*: as after
//! an overflow, it re-creates its etcd watch from the revision after the last event
//! it delivered, and the multiplexer opens a new stream on another member for them,
//! as Go's clientv3 does (no event is lost or repeated, for the reason above). While
//! no member can be reached the multiplexer keeps trying, backing off from 100 ms to
//! 1 s; once that has lasted longer than the store's
//! [`StoreConfig::watch_unavailable_limit`](crate::StoreConfig::watch_unavailable_limit)
//! the waiting watches end with a 503 ServiceUnavailable error. A permanent refusal
//! (permission denied, an invalid request) ends them with an internal error.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use etcd_client::{WatchOptions, WatchResponse};
use tokio::sync::{mpsc, oneshot};

use crate::endpoints::Members;
use crate::feature_support::FeatureSupportChecker;

mod task;

/// Responses buffered per watch at most: past this a watch counts as overflowed.
/// Live responses are small (a write or a few each), so a consumer stalled for a moment
/// by a busy runtime catches up from here instead of re-watching; a re-watch replays
/// from etcd's history and costs the consumer tens of milliseconds of lag.
const DELIVERY_BUFFER: usize = 1024;

/// Bytes of keys and values buffered per watch past which, once it holds at least
/// [`DELIVERY_MIN_RESPONSES`], it counts as overflowed: a catching-up watch receives
/// responses of up to a thousand revisions each, and a thousand of those would be far
/// too much memory for one slow consumer.
const DELIVERY_BYTES: usize = 4 << 20;

/// Responses a watch may always buffer, whatever their size.
const DELIVERY_MIN_RESPONSES: usize = 16;

/// Why a watch's route ended without a response saying so.
#[derive(Debug)]
pub(crate) enum RouteEnd {
    /// The watch fell behind; it should watch again from where it is.
    Overflowed,
    /// The shared stream failed, or its member stopped answering; the watch should
    /// watch again from where it is, on the new stream.
    Interrupted,
    /// No member could be reached for longer than the store's limit.
    Unavailable(String),
    /// etcd refused the stream for good.
    Failed(String),
}

/// What a watch asks etcd for.
#[derive(Debug, Clone)]
pub(crate) struct WatchSpec {
    pub(crate) key: Vec<u8>,
    pub(crate) options: WatchOptions,
}

/// The shared watch stream of one store, started on first use.
pub(crate) struct WatchHub {
    members: Arc<Members>,
    unavailable_limit: Duration,
    commands: Mutex<Option<mpsc::UnboundedSender<Command>>>,
    next_id: AtomicU64,
    active: AtomicUsize,
    /// How many times a watch fell behind and re-watched.
    overflows: Arc<AtomicU64>,
    /// How many times a watch was resumed on a new stream.
    resumptions: AtomicU64,
    pub(crate) features: FeatureSupportChecker,
}

impl std::fmt::Debug for WatchHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchHub")
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

enum Command {
    /// Boxed: far larger than the other commands, and one per watch started.
    Create(Box<PendingCreate>),
    Cancel(u64),
    Progress,
}

struct PendingCreate {
    id: u64,
    spec: WatchSpec,
    deliver: mpsc::Sender<Delivery>,
    buffered: Arc<AtomicUsize>,
    end: oneshot::Sender<RouteEnd>,
    cancelled: bool,
}

/// A response on its way to its watch, with the bytes it counts against the watch's
/// budget (measured once, by the multiplexer).
struct Delivery {
    response: Box<WatchResponse>,
    bytes: usize,
}

/// A watch's place on the shared stream; dropping it cancels the etcd watch.
pub(crate) struct Registration {
    id: u64,
    hub: Arc<WatchHub>,
    responses: mpsc::Receiver<Delivery>,
    /// Bytes of the responses in `responses`, shared with the multiplexer.
    buffered: Arc<AtomicUsize>,
    pub(crate) end: oneshot::Receiver<RouteEnd>,
}

impl Registration {
    /// The next response routed to this watch; `None` once its route has ended (see
    /// `end`).
    pub(crate) async fn recv(&mut self) -> Option<Box<WatchResponse>> {
        let delivery = self.responses.recv().await?;
        self.buffered.fetch_sub(delivery.bytes, Ordering::Relaxed);
        Some(delivery.response)
    }
}

/// The bytes of keys and values a response carries: what it holds in memory, near
/// enough, while it waits for its watch.
fn response_bytes(response: &WatchResponse) -> usize {
    response
        .events()
        .iter()
        .map(|event| {
            let kv = |kv: Option<&etcd_client::KeyValue>| {
                kv.map_or(0, |kv| kv.key().len() + kv.value().len())
            };
            kv(event.kv()) + kv(event.prev_kv())
        })
        .sum()
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub.send_existing(Command::Cancel(self.id));
    }
}

/// Counts a running watch task for as long as it lives.
pub(crate) struct ActiveWatch(Arc<WatchHub>);

impl Drop for ActiveWatch {
    fn drop(&mut self) {
        self.0.active.fetch_sub(1, Ordering::SeqCst);
    }
}

impl WatchHub {
    pub(crate) fn new(members: Arc<Members>, unavailable_limit: Duration) -> Self {
        Self {
            members,
            unavailable_limit,
            commands: Mutex::new(None),
            next_id: AtomicU64::new(1),
            active: AtomicUsize::new(0),
            overflows: Arc::default(),
            resumptions: AtomicU64::new(0),
            features: FeatureSupportChecker::default(),
        }
    }

    /// How many watch tasks are running.
    pub(crate) fn active(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// How many times a watch fell behind its consumer's pace and re-watched.
    pub(crate) fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// How many times a watch was resumed on a new stream after its stream failed.
    pub(crate) fn resumptions(&self) -> u64 {
        self.resumptions.load(Ordering::Relaxed)
    }

    /// Counts one resumption.
    pub(crate) fn record_resumption(&self) {
        self.resumptions.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a new watch task.
    pub(crate) fn track(self: &Arc<Self>) -> ActiveWatch {
        self.active.fetch_add(1, Ordering::SeqCst);
        ActiveWatch(Arc::clone(self))
    }

    /// Registers a watch on the shared stream, starting the stream if needed. Must run
    /// inside a tokio runtime.
    pub(crate) fn register(self: &Arc<Self>, spec: WatchSpec) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (deliver, responses) = mpsc::channel(DELIVERY_BUFFER);
        let buffered = Arc::new(AtomicUsize::new(0));
        let (end_tx, end) = oneshot::channel();
        self.send_or_start(Command::Create(Box::new(PendingCreate {
            id,
            spec,
            deliver,
            buffered: Arc::clone(&buffered),
            end: end_tx,
            cancelled: false,
        })));
        Registration {
            id,
            hub: Arc::clone(self),
            responses,
            buffered,
            end,
        }
    }

    /// Asks etcd for a progress notification on the shared stream: every watch on it
    /// gets a bookmark. Without a stream there is no watch to tell.
    pub(crate) fn request_progress(&self) {
        self.send_existing(Command::Progress);
    }

    fn send_existing(&self, command: Command) {
        let Ok(commands) = self.commands.lock() else {
            return;
        };
        if let Some(sender) = commands.as_ref() {
            let _ = sender.send(command);
        }
    }

    fn send_or_start(&self, command: Command) {
        let Ok(mut commands) = self.commands.lock() else {
            return;
        };
        let command = match commands.as_ref() {
            Some(sender) => match sender.send(command) {
                Ok(()) => return,
                Err(mpsc::error::SendError(command)) => command,
            },
            None => command,
        };
        // No multiplexer, or its runtime is gone: start one in the current runtime.
        let (sender, receiver) = mpsc::unbounded_channel();
        let _ = sender.send(command);
        *commands = Some(sender);
        tokio::spawn(task::run_mux(
            Arc::clone(&self.members),
            receiver,
            Arc::clone(&self.overflows),
            self.unavailable_limit,
        ));
    }
}
