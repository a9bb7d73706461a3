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

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::{WatchOptions, WatchResponse};
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};

use crate::endpoints::Members;
use crate::error::{Failure, classify, describe, is_transient};
use crate::feature_support::FeatureSupportChecker;

/// A stream that served at least this long failed by accident, not by design: the next
/// opens at once.
const STABLE_STREAM: Duration = Duration::from_secs(1);

/// The first and the longest pause between attempts to open a stream.
const REOPEN_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(1));

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
        tokio::spawn(run_mux(
            Arc::clone(&self.members),
            receiver,
            Arc::clone(&self.overflows),
            self.unavailable_limit,
        ));
    }
}

/// Requests for the pump task.
enum Outbound {
    Create(WatchSpec),
    Cancel(i64),
    Progress,
}

struct Route {
    etcd_id: i64,
    deliver: mpsc::Sender<Delivery>,
    buffered: Arc<AtomicUsize>,
    end: oneshot::Sender<RouteEnd>,
}

impl Route {
    /// Queues a response for the watch unless it has no room: its channel is full, or it
    /// holds at least [`DELIVERY_MIN_RESPONSES`] responses and this one would take it
    /// past [`DELIVERY_BYTES`].
    fn offer(&self, response: WatchResponse) -> Result<(), mpsc::error::TrySendError<Delivery>> {
        let bytes = response_bytes(&response);
        let queued = DELIVERY_BUFFER - self.deliver.capacity();
        // Counted before sending, so that the watch never takes off more than was added.
        let before = self.buffered.fetch_add(bytes, Ordering::Relaxed);
        let over_budget =
            queued >= DELIVERY_MIN_RESPONSES && before.saturating_add(bytes) > DELIVERY_BYTES;
        let delivery = Delivery {
            response: Box::new(response),
            bytes,
        };
        let sent = if over_budget {
            Err(mpsc::error::TrySendError::Full(delivery))
        } else {
            self.deliver.try_send(delivery)
        };
        if sent.is_err() {
            self.buffered.fetch_sub(bytes, Ordering::Relaxed);
        }
        sent
    }
}

/// The multiplexer's state for one open stream.
#[derive(Default)]
struct Routes {
    /// Creates sent, in order; etcd answers them in the order it received them.
    pending: VecDeque<PendingCreate>,
    routes: HashMap<u64, Route>,
    by_etcd_id: HashMap<i64, u64>,
    overflows: Arc<AtomicU64>,
}

/// How the multiplexer left a stream.
enum StreamEnd {
    /// The store is gone.
    Closed,
    /// Transient: the watches are to come back for a new stream.
    Transient(String),
    /// Permanent: the watches were ended.
    Failed,
}

async fn run_mux(
    members: Arc<Members>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    overflows: Arc<AtomicU64>,
    unavailable_limit: Duration,
) {
    let open_timeout = (members.settings().probe_timeout * 2).max(Duration::from_secs(1));
    // Creates waiting for a stream, in order.
    let mut waiting: VecDeque<PendingCreate> = VecDeque::new();
    // Since when no stream has worked, and the member that failed last.
    let mut unavailable_since: Option<Instant> = None;
    let mut failed_member: Option<usize> = None;
    let mut pause = REOPEN_BACKOFF.0;
    // Whether the next stream waits first: the last one failed soon after it opened.
    let mut pause_first = false;
    loop {
        if pause_first && !waiting.is_empty() {
            pause_first = false;
            if !pause_taking_commands(&mut commands, &mut waiting, pause).await {
                return;
            }
            pause = (pause * 2).min(REOPEN_BACKOFF.1);
        }
        if waiting.is_empty() {
            // Wait for a watch to open a stream with.
            let Some(command) = commands.recv().await else {
                return;
            };
            idle_command(&mut waiting, command);
            continue;
        }
        while let Ok(command) = commands.try_recv() {
            idle_command(&mut waiting, command);
        }
        let Some(first) = waiting.front() else {
            continue;
        };
        let (index, member) = members.pick(failed_member.as_slice());
        let watch_member = !member.is_suspect();
        let mut client = member.watch();
        let opened = tokio::time::timeout(
            open_timeout,
            client.watch(first.spec.key.clone(), Some(first.spec.options.clone())),
        )
        .await;
        let problem = match opened {
            Ok(Ok(stream)) => {
                let mut state = Routes {
                    overflows: Arc::clone(&overflows),
                    ..Routes::default()
                };
                let opened_at = Instant::now();
                let (requests, responses) = stream.split();
                let (outbound, outbound_rx) = mpsc::unbounded_channel();
                tokio::spawn(pump(requests, outbound_rx));
                for (i, create) in waiting.drain(..).enumerate() {
                    if i > 0 {
                        let _ = outbound.send(Outbound::Create(create.spec.clone()));
                    }
                    state.pending.push_back(create);
                }
                let served = serve(
                    &mut state,
                    &mut commands,
                    &outbound,
                    responses,
                    &member,
                    watch_member,
                    &mut unavailable_since,
                )
                .await;
                match served {
                    StreamEnd::Closed => return,
                    StreamEnd::Failed => continue,
                    StreamEnd::Transient(reason) => {
                        tracing::info!(endpoint = %member.endpoint, %reason, "etcd watch stream interrupted; watches resume on a new one");
                        state.interrupt_all();
                        failed_member = Some(index);
                        unavailable_since.get_or_insert_with(Instant::now);
                        // A stream that fails as soon as it opens must not be reopened
                        // in a tight loop.
                        if opened_at.elapsed() < STABLE_STREAM {
                            pause_first = true;
                        } else {
                            pause = REOPEN_BACKOFF.0;
                        }
                        continue;
                    }
                }
            }
            Ok(Err(err)) if !is_transient(&err) => {
                let reason = format!("cannot open an etcd watch stream: {}", describe(&err));
                for create in waiting.drain(..) {
                    let _ = create.end.send(RouteEnd::Failed(reason.clone()));
                }
                continue;
            }
            Ok(Err(err)) => {
                if matches!(
                    classify(&err),
                    Failure::NotSent | Failure::Transport { .. } | Failure::TimedOut
                ) {
                    members.mark_suspect(index, "a watch stream could not be opened");
                }
                format!(
                    "cannot open an etcd watch stream at {}: {}",
                    member.endpoint,
                    describe(&err)
                )
            }
            Err(_) => {
                members.mark_suspect(index, "a watch stream did not open in time");
                format!(
                    "etcd at {} did not open a watch stream within {open_timeout:?}",
                    member.endpoint
                )
            }
        };
        failed_member = Some(index);
        let since = *unavailable_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= unavailable_limit {
            let reason = format!(
                "no etcd member has served a watch stream for {:?} (limit {unavailable_limit:?}); last: {problem}",
                since.elapsed()
            );
            for create in waiting.drain(..) {
                let _ = create.end.send(RouteEnd::Unavailable(reason.clone()));
            }
            unavailable_since = None;
            continue;
        }
        // Back off, still taking commands (cancellations, new watches).
        if !pause_taking_commands(&mut commands, &mut waiting, pause).await {
            return;
        }
        pause = (pause * 2).min(REOPEN_BACKOFF.1);
    }
}

/// Waits `pause`, taking commands meanwhile; false once the store is gone.
async fn pause_taking_commands(
    commands: &mut mpsc::UnboundedReceiver<Command>,
    waiting: &mut VecDeque<PendingCreate>,
    pause: Duration,
) -> bool {
    let sleep = tokio::time::sleep(pause);
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            () = &mut sleep => return true,
            command = commands.recv() => match command {
                None => return false,
                Some(command) => idle_command(waiting, command),
            },
        }
    }
}

/// A command while no stream is open.
fn idle_command(waiting: &mut VecDeque<PendingCreate>, command: Command) {
    match command {
        Command::Create(create) if !create.cancelled => waiting.push_back(*create),
        Command::Create(_) | Command::Progress => {}
        // Nothing registered in etcd yet: dropping the create is the cancellation.
        Command::Cancel(id) => waiting.retain(|create| create.id != id),
    }
}

/// Serves one open stream until it fails or the store goes away.
async fn serve(
    state: &mut Routes,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    outbound: &mpsc::UnboundedSender<Outbound>,
    mut responses: etcd_client::WatchResponseStream,
    member: &crate::endpoints::Member,
    watch_member: bool,
    unavailable_since: &mut Option<Instant>,
) -> StreamEnd {
    let suspected = async {
        if watch_member {
            member.suspected().await;
        } else {
            std::future::pending::<()>().await;
        }
    };
    tokio::pin!(suspected);
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return StreamEnd::Closed,
                Some(command) => state.command(command, outbound),
            },
            response = responses.next() => match response {
                Some(Ok(response)) => {
                    // The stream works: etcd answered on it.
                    *unavailable_since = None;
                    state.dispatch(response, outbound);
                }
                Some(Err(err)) if !is_transient(&err) => {
                    state.fail_all(&format!("the etcd watch stream failed: {}", describe(&err)));
                    return StreamEnd::Failed;
                }
                Some(Err(err)) => return StreamEnd::Transient(describe(&err)),
                None => return StreamEnd::Transient("etcd closed the watch stream".to_owned()),
            },
            () = &mut suspected => {
                return StreamEnd::Transient("the member stopped answering".to_owned());
            }
        }
    }
}

async fn pump(
    mut requests: etcd_client::WatchRequestSender,
    mut outbound: mpsc::UnboundedReceiver<Outbound>,
) {
    while let Some(request) = outbound.recv().await {
        let sent = match request {
            Outbound::Create(spec) => requests.watch(spec.key, Some(spec.options)).await,
            Outbound::Cancel(id) => requests.cancel(id).await,
            Outbound::Progress => requests.request_progress().await,
        };
        if sent.is_err() {
            // The stream is gone; the multiplexer sees it on the response side.
            return;
        }
    }
}

impl Routes {
    fn command(&mut self, command: Command, outbound: &mpsc::UnboundedSender<Outbound>) {
        match command {
            Command::Create(create) => {
                if create.cancelled {
                    return;
                }
                let _ = outbound.send(Outbound::Create(create.spec.clone()));
                self.pending.push_back(*create);
            }
            Command::Cancel(id) => {
                if let Some(route) = self.routes.remove(&id) {
                    self.by_etcd_id.remove(&route.etcd_id);
                    let _ = outbound.send(Outbound::Cancel(route.etcd_id));
                } else if let Some(pending) = self.pending.iter_mut().find(|p| p.id == id) {
                    // Cancelled once etcd says which watch it is.
                    pending.cancelled = true;
                }
            }
            Command::Progress => {
                let _ = outbound.send(Outbound::Progress);
            }
        }
    }

    fn dispatch(&mut self, response: WatchResponse, outbound: &mpsc::UnboundedSender<Outbound>) {
        if response.created() {
            let Some(create) = self.pending.pop_front() else {
                return;
            };
            let etcd_id = response.watch_id();
            if response.canceled() || etcd_id < 0 {
                // etcd refused the watch: the response says why.
                let _ = create.deliver.try_send(Delivery {
                    response: Box::new(response),
                    // A refusal carries no events.
                    bytes: 0,
                });
                return;
            }
            if create.cancelled {
                let _ = outbound.send(Outbound::Cancel(etcd_id));
                return;
            }
            self.by_etcd_id.insert(etcd_id, create.id);
            self.routes.insert(
                create.id,
                Route {
                    etcd_id,
                    deliver: create.deliver,
                    buffered: create.buffered,
                    end: create.end,
                },
            );
            return;
        }
        if response.watch_id() < 0 {
            // A progress notification on request is for every watch of the stream.
            for route in self.routes.values() {
                // A bookmark is advice: a watch too busy to take it does without.
                let _ = route.offer(response.clone());
            }
            return;
        }
        let Some(&id) = self.by_etcd_id.get(&response.watch_id()) else {
            // A watch cancelled meanwhile.
            return;
        };
        let Some(route) = self.routes.get(&id) else {
            return;
        };
        let last = response.canceled() || response.compact_revision() != 0;
        let progress_only = response.events().is_empty() && !last;
        match route.offer(response) {
            Ok(()) => {
                if last {
                    self.remove(id);
                }
            }
            Err(mpsc::error::TrySendError::Full(_)) if progress_only => {}
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.overflows.fetch_add(1, Ordering::Relaxed);
                if let Some(route) = self.remove(id) {
                    if !last {
                        let _ = outbound.send(Outbound::Cancel(route.etcd_id));
                    }
                    let _ = route.end.send(RouteEnd::Overflowed);
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                if let Some(route) = self.remove(id) {
                    let _ = outbound.send(Outbound::Cancel(route.etcd_id));
                }
            }
        }
    }

    fn remove(&mut self, id: u64) -> Option<Route> {
        let route = self.routes.remove(&id)?;
        self.by_etcd_id.remove(&route.etcd_id);
        Some(route)
    }

    /// Ends every watch of the stream for good.
    fn fail_all(&mut self, reason: &str) {
        self.by_etcd_id.clear();
        for (_, route) in self.routes.drain() {
            let _ = route.end.send(RouteEnd::Failed(reason.to_owned()));
        }
        for create in self.pending.drain(..) {
            let _ = create.end.send(RouteEnd::Failed(reason.to_owned()));
        }
    }

    /// Tells every watch of the stream to come back for a new one. Dropping the routes
    /// closes their channels once their consumers have drained them.
    fn interrupt_all(&mut self) {
        self.by_etcd_id.clear();
        for (_, route) in self.routes.drain() {
            let _ = route.end.send(RouteEnd::Interrupted);
        }
        for create in self.pending.drain(..) {
            if !create.cancelled {
                let _ = create.end.send(RouteEnd::Interrupted);
            }
        }
    }
}
