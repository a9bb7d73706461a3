//! The store's request plumbing: one etcd KV request with the store's deadline, sent
//! to a member that answers, repeated where that is safe, counted in
//! `etcd_request_*` metrics.
//!
//! Which requests are repeated, and where, follows what can be known about them:
//!
//! - a request that never left the client (the connection was refused, or etcd
//!   refused it before handling it: `no leader`) is sent again to another member,
//!   writes included: it cannot apply twice;
//! - a read is sent again to another member after a broken connection, an
//!   `Unavailable` answer (`leader changed`), or when its member is found not
//!   answering while it waits;
//! - a write that may have reached etcd is never repeated: its caller learns that its
//!   fate is unknown.
//!
//! Members that time out, refuse or break are marked suspect ([`crate::endpoints`]), so
//! the next requests go elsewhere. The decisions rest on gRPC codes and error types
//! ([`crate::error::classify`]), never on the text of a message.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apistore_storage::Result;
use etcd_client::KvClient;

use crate::endpoints::Members;
use crate::error::{Failure, classify, from_etcd_at, timed_out};
use crate::instrument::{Instrumentation, Operation};

/// The pause before a request goes again to a member it went to already, times the
/// attempts made.
const RETRY_PAUSE: Duration = Duration::from_millis(25);

/// A store's way to etcd's KV service.
#[derive(Debug, Clone)]
pub(crate) struct Kv {
    pub(crate) members: Arc<Members>,
    pub(crate) request_timeout: Option<Duration>,
    pub(crate) instrumentation: Instrumentation,
}

/// The member that answered a request.
#[derive(Debug, Clone)]
pub(crate) struct Answered {
    index: usize,
    /// Its client URL.
    pub(crate) endpoint: String,
}

/// How one attempt on one member ended.
enum Attempt<R> {
    Done(Result<R, etcd_client::Error>),
    /// The member was found not answering while a read waited on it.
    Abandoned,
    /// The store's deadline passed.
    Deadline,
}

/// Whether repeating the request can never apply it twice.
fn is_read(operation: Operation) -> bool {
    matches!(
        operation,
        Operation::Get
            | Operation::List
            | Operation::ListWithCount
            | Operation::ListStream
            | Operation::ListOnlyKeys
            | Operation::GetCurrentResourceVersion
    )
}

impl Kv {
    /// Runs one etcd KV request with the store's timeout, metrics and error mapping.
    /// `request` makes the request from a KV client on one member; it is made again
    /// on another member where that is safe (see the module's documentation).
    pub(crate) async fn call<R, F, Fut>(
        &self,
        key: &str,
        operation: Operation,
        request: F,
    ) -> Result<R>
    where
        F: FnMut(KvClient) -> Fut,
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        self.call_raw(key, operation, request)
            .await?
            .map_err(|(endpoint, err)| from_etcd_at(key, Some(&endpoint), err))
    }

    /// Like [`Self::call`] but hands back the raw etcd error with the endpoint it came
    /// from, for callers that interpret some errors themselves (compaction on lists).
    /// The outer error is a timeout.
    pub(crate) async fn call_raw<R, F, Fut>(
        &self,
        key: &str,
        operation: Operation,
        request: F,
    ) -> Result<Result<R, (String, etcd_client::Error)>>
    where
        F: FnMut(KvClient) -> Fut,
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        let started = Instant::now();
        let outcome = self
            .send(key, operation, request)
            .await
            .map(|answered| answered.map(|(_, response)| response));
        self.record(operation, key, matches!(outcome, Ok(Ok(_))), started);
        outcome
    }

    /// [`Self::call_raw`] without recording the request in the metrics, and with the
    /// member that answered: for a request whose end is not its answer (a
    /// `RangeStream` goes on after its first chunk), which its caller records with
    /// [`Self::record`] once it is over, and whose later failures are that member's
    /// ([`Self::failed_after_answer`]).
    pub(crate) async fn send<R, F, Fut>(
        &self,
        key: &str,
        operation: Operation,
        mut request: F,
    ) -> Result<Result<(Answered, R), (String, etcd_client::Error)>>
    where
        F: FnMut(KvClient) -> Fut,
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        let started = Instant::now();
        let deadline = self.request_timeout.map(|limit| started + limit);
        let read = is_read(operation);
        // One more attempt than there are members: every member gets a chance, and a
        // member that was only briefly away a second one.
        let attempts = self.members.len() + 1;
        let mut tried = Vec::with_capacity(attempts);
        let mut made = 0;
        let outcome = loop {
            made += 1;
            let (index, member) = self.members.pick(&tried);
            if tried.contains(&index) {
                // Every member that answers has had its turn (they refused: no leader,
                // an election is under way): give them a moment before the next round.
                let pause = RETRY_PAUSE.saturating_mul(u32::try_from(made).unwrap_or(u32::MAX));
                match deadline {
                    Some(deadline) => {
                        tokio::time::sleep_until(deadline.min(Instant::now() + pause).into()).await;
                    }
                    None => tokio::time::sleep(pause).await,
                }
            } else {
                tried.push(index);
            }
            let attempt = self
                .attempt(index, &member, read, deadline, request(member.kv()))
                .await;
            let again = made < attempts && time_left(deadline);
            match attempt {
                Attempt::Done(Ok(response)) => {
                    let answered = Answered {
                        index,
                        endpoint: member.endpoint.clone(),
                    };
                    break Ok((answered, response));
                }
                Attempt::Done(Err(err)) => {
                    let failure = classify(&err);
                    match suspicion(failure) {
                        Some(why) => self.members.mark_suspect(index, why),
                        // Slow is not silent: a probe decides.
                        None if failure == Failure::TimedOut => self.members.check(index),
                        None => {}
                    }
                    let repeatable = match failure {
                        Failure::NotSent | Failure::Refused => true,
                        Failure::Transport { foreign } => read && !foreign,
                        Failure::Server(tonic::Code::Unavailable) => read,
                        // The client's own per-request timeout is a deadline too.
                        Failure::TimedOut | Failure::Server(_) | Failure::Client => false,
                    };
                    if repeatable && again {
                        continue;
                    }
                    break Err((member.endpoint.clone(), err));
                }
                Attempt::Abandoned if again => continue,
                Attempt::Abandoned | Attempt::Deadline => {
                    // A request can outlive the deadline on a member that answers (a
                    // proposal forwarded to a leader that froze is never answered): the
                    // probe, not the deadline, says whether the member is silent.
                    self.members.check(index);
                    let limit = self.request_timeout.unwrap_or_default();
                    return Err(timed_out(key, limit));
                }
            }
        };
        Ok(outcome)
    }

    /// One attempt on member `index`: the request, raced against the deadline, and for
    /// a read against the member being found silent. A request that waits long has its
    /// member probed.
    async fn attempt<R, Fut>(
        &self,
        index: usize,
        member: &crate::endpoints::Member,
        read: bool,
        deadline: Option<Instant>,
        request: Fut,
    ) -> Attempt<R>
    where
        Fut: Future<Output = Result<R, etcd_client::Error>>,
    {
        let settings = self.members.settings();
        let watch_member = read && self.members.len() > 1 && !member.is_suspect();
        let deadline = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
                None => std::future::pending().await,
            }
        };
        let abandoned = async {
            if watch_member {
                member.suspected().await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let probe_when_slow = self.members.len() > 1;
        let check = async {
            // With one member there is nowhere else to go: no timer, no probe.
            if probe_when_slow {
                tokio::time::sleep(settings.unresponsive_after).await;
                self.members.check(index);
            }
            std::future::pending::<std::convert::Infallible>().await
        };
        tokio::pin!(request, deadline, abandoned, check);
        tokio::select! {
            biased;
            result = &mut request => Attempt::Done(result),
            () = &mut deadline => Attempt::Deadline,
            () = &mut abandoned => Attempt::Abandoned,
            never = &mut check => match never {},
        }
    }

    /// A request that `answered` had begun to answer failed later (a stream broke):
    /// its member is marked suspect as a failed request's would be, so that the next
    /// requests go elsewhere, and the error names it.
    pub(crate) fn failed_after_answer(
        &self,
        key: &str,
        answered: &Answered,
        err: etcd_client::Error,
    ) -> apistore_storage::StorageError {
        if let Some(why) = suspicion(classify(&err)) {
            self.members.mark_suspect(answered.index, why);
        }
        from_etcd_at(key, Some(&answered.endpoint), err)
    }

    /// Runs a request that is not a KV call (a lease grant) once, with the timeout.
    pub(crate) async fn call_once<R, F>(&self, key: &str, request: F) -> Result<R>
    where
        F: Future<Output = Result<R, etcd_client::Error>>,
    {
        match self.request_timeout {
            Some(limit) => match tokio::time::timeout(limit, request).await {
                Ok(outcome) => outcome.map_err(|e| crate::error::from_etcd(key, e)),
                Err(_) => Err(timed_out(key, limit)),
            },
            None => request.await.map_err(|e| crate::error::from_etcd(key, e)),
        }
    }

    /// Records one request in `etcd_request_*`: `ok` or failed, and the time since
    /// `started`.
    pub(crate) fn record(&self, operation: Operation, key: &str, ok: bool, started: Instant) {
        self.instrumentation
            .record_etcd_request(operation, key, ok, started.elapsed());
    }
}

/// Whether there is time for another attempt before the deadline.
fn time_left(deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|deadline| Instant::now() < deadline)
}

/// Why a failure makes its member suspect at once, if it does: its connection could not
/// be made or broke. An answer from etcd, even `Unavailable`, shows the member is there;
/// a timeout only gets the member probed.
fn suspicion(failure: Failure) -> Option<&'static str> {
    match failure {
        Failure::NotSent => Some("the connection could not be made"),
        Failure::Transport { .. } => Some("the connection broke"),
        Failure::Refused | Failure::TimedOut | Failure::Server(_) | Failure::Client => None,
    }
}
