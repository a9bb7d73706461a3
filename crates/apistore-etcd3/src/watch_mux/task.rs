//! The multiplexer task behind a [`WatchHub`](super::WatchHub): it opens the shared
//! stream on a member, routes each response to its watch, sends the pump's creates and
//! cancels, and when the stream ends tells each watch why (module docs of
//! [`super`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcd_client::WatchResponse;
use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};

use super::{
    Command, DELIVERY_BUFFER, DELIVERY_BYTES, DELIVERY_MIN_RESPONSES, Delivery, PendingCreate,
    RouteEnd, WatchSpec, response_bytes,
};
use crate::endpoints::Members;
use crate::error::{Failure, classify, describe, is_transient};

/// A stream that served at least this long failed by accident, not by design: the next
/// opens at once.
const STABLE_STREAM: Duration = Duration::from_secs(1);

/// The first and the longest pause between attempts to open a stream.
const REOPEN_BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(1));

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

pub(super) async fn run_mux(
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
