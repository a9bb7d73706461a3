//! The members of an etcd cluster as the store sees them: one connection each, and
//! whether each is answering.
//!
//! etcd-client balances every request of a [`Client`] over all its
//! endpoints and never says which one served a request, so it cannot route around a
//! member that stopped answering (a frozen process, a dead TCP peer): every request
//! that lands there holds its caller for the whole request timeout. The store's
//! requests and watch streams go instead through [`Members`]: one single-endpoint
//! client per member, picked in turn among those not *suspect*.
//!
//! A member becomes suspect when a request to it times out, its connection is refused
//! or breaks, or a request has waited on it longer than
//! [`ClientConfig::unresponsive_after`](crate::ClientConfig::unresponsive_after) and a
//! probe (a maintenance status request with a short deadline) then goes unanswered.
//! It stays suspect until a probe answers again; probes repeat every 250 ms, backing
//! off to 2 s. While every member is suspect, requests go to all of them in turn.
//!
//! kube-apiserver's Go client (grpc-go's round-robin balancer over clientv3's
//! endpoints) routes around members whose connection is down, but not around ones
//! that are connected and silent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use etcd_client::{Client, KvClient, LeaseClient, MaintenanceClient, WatchClient};
use tokio::sync::watch;

use crate::error::{Failure, classify};

/// The largest etcd response accepted, as kube-apiserver's `MaxCallRecvMsgSize`
/// (`math.MaxInt32`): a catching-up watch receives up to a thousand revisions in one
/// response, and a list of thousands of objects is one response.
pub(crate) const MAX_RESPONSE_BYTES: usize = i32::MAX as usize;

/// The first and the longest pause between probes of a suspect member.
const PROBE_BACKOFF: (Duration, Duration) = (Duration::from_millis(250), Duration::from_secs(2));

/// How quickly a silent member is found out.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ProbeSettings {
    /// A request outstanding this long on a member makes the store probe it.
    pub(crate) unresponsive_after: Duration,
    /// How long a probe may take before the member counts as not answering.
    pub(crate) probe_timeout: Duration,
}

/// One member: its endpoint, its connection, and whether it is suspect.
pub(crate) struct Member {
    pub(crate) endpoint: String,
    kv: KvClient,
    watch: WatchClient,
    lease: LeaseClient,
    maintenance: MaintenanceClient,
    suspect: watch::Sender<bool>,
    probing: AtomicBool,
}

impl Member {
    fn new(endpoint: String, client: &Client) -> Self {
        Self {
            endpoint,
            // gRPC's default 4 MiB receive limit would fail a list of a few thousand
            // objects; kube-apiserver's client allows responses up to 2 GiB.
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            watch: client
                .watch_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            lease: client.lease_client(),
            maintenance: client.maintenance_client(),
            suspect: watch::channel(false).0,
            probing: AtomicBool::new(false),
        }
    }

    /// A KV client on this member.
    pub(crate) fn kv(&self) -> KvClient {
        self.kv.clone()
    }

    /// A watch client on this member.
    pub(crate) fn watch(&self) -> WatchClient {
        self.watch.clone()
    }

    /// A lease client on this member.
    pub(crate) fn lease(&self) -> LeaseClient {
        self.lease.clone()
    }

    /// Whether the member is suspect now.
    pub(crate) fn is_suspect(&self) -> bool {
        *self.suspect.borrow()
    }

    /// Resolves once the member is (or already was) suspect.
    pub(crate) async fn suspected(&self) {
        let mut state = self.suspect.subscribe();
        // The sender lives as long as `self`: the wait ends only by a change.
        let _ = state.wait_for(|suspect| *suspect).await;
    }
}

/// The members of one client, shared by every store built on it.
pub(crate) struct Members {
    members: Vec<Arc<Member>>,
    next: AtomicUsize,
    settings: ProbeSettings,
}

impl std::fmt::Debug for Members {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let states: Vec<(&str, bool)> = self
            .members
            .iter()
            .map(|m| (m.endpoint.as_str(), m.is_suspect()))
            .collect();
        f.debug_struct("Members").field("suspect", &states).finish()
    }
}

impl Members {
    /// Members over `(endpoint, client)` pairs.
    pub(crate) fn new(members: Vec<(String, Client)>, settings: ProbeSettings) -> Self {
        Self {
            members: members
                .into_iter()
                .map(|(endpoint, client)| Arc::new(Member::new(endpoint, &client)))
                .collect(),
            next: AtomicUsize::new(0),
            settings,
        }
    }

    pub(crate) fn settings(&self) -> ProbeSettings {
        self.settings
    }

    /// How many members there are.
    pub(crate) fn len(&self) -> usize {
        self.members.len()
    }

    /// The next member to send to, in turn: one not suspect and not in `tried`; else
    /// one not suspect again (a member that refused, `no leader`, may have one by now;
    /// a suspect one would hold the request); only when every member is suspect, one
    /// not in `tried`.
    pub(crate) fn pick(&self, tried: &[usize]) -> (usize, Arc<Member>) {
        let n = self.members.len().max(1);
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let order = (0..n).map(|i| (start + i) % n);
        let healthy = |i: &usize| !self.members[*i].is_suspect();
        let index = order
            .clone()
            .find(|i| !tried.contains(i) && healthy(i))
            .or_else(|| order.clone().find(healthy))
            .or_else(|| order.clone().find(|i| !tried.contains(i)))
            .unwrap_or(start % n);
        (index, Arc::clone(&self.members[index]))
    }

    /// Marks member `index` suspect (if it is not already) and probes it until it
    /// answers again. Must run inside a tokio runtime.
    pub(crate) fn mark_suspect(&self, index: usize, why: &str) {
        let Some(member) = self.members.get(index) else {
            return;
        };
        if self.members.len() < 2 {
            // Nowhere else to go: routing cannot avoid it.
            return;
        }
        let was = member.suspect.send_replace(true);
        if !was {
            tracing::warn!(endpoint = %member.endpoint, why, "etcd member marked suspect");
        }
        self.start_probing(member, true);
    }

    /// A request has waited long on member `index`: probe it once, and mark it suspect
    /// if the probe goes unanswered.
    pub(crate) fn check(&self, index: usize) {
        if self.members.len() < 2 {
            return;
        }
        if let Some(member) = self.members.get(index) {
            if !member.is_suspect() {
                self.start_probing(member, false);
            }
        }
    }

    /// Starts a probe task for `member` unless one runs: with `until_healthy`, it
    /// probes until an answer and then clears the suspicion; otherwise it probes once
    /// and marks the member suspect (then probing on) when there is no answer.
    fn start_probing(&self, member: &Arc<Member>, until_healthy: bool) {
        if member.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            member.probing.store(false, Ordering::Release);
            return;
        };
        let member = Arc::clone(member);
        let settings = self.settings;
        runtime.spawn(async move {
            let mut pause = PROBE_BACKOFF.0;
            let mut suspect = until_healthy;
            loop {
                if suspect {
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(PROBE_BACKOFF.1);
                }
                let answered = probe(&member, settings.probe_timeout).await;
                if answered {
                    if member.suspect.send_replace(false) {
                        tracing::info!(endpoint = %member.endpoint, "etcd member answers again");
                    }
                    break;
                }
                if !suspect {
                    suspect = true;
                    if !member.suspect.send_replace(true) {
                        tracing::warn!(
                            endpoint = %member.endpoint,
                            "etcd member marked suspect: a request waited long and a probe went unanswered"
                        );
                    }
                }
            }
            member.probing.store(false, Ordering::Release);
        });
    }
}

/// One maintenance status request with a short deadline: does the member answer? Any
/// answer from etcd counts, `no leader` included: a member between leaders is there,
/// and refuses requests at once rather than holding them.
async fn probe(member: &Member, timeout: Duration) -> bool {
    let mut maintenance = member.maintenance.clone();
    match tokio::time::timeout(timeout, maintenance.status()).await {
        Ok(Ok(_)) => true,
        Ok(Err(err)) => matches!(classify(&err), Failure::Server(_) | Failure::Refused),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn members(n: usize) -> Members {
        let mut clients = Vec::new();
        for i in 0..n {
            // Plaintext clients connect lazily: nothing listens there, nothing is asked.
            let endpoint = format!("http://127.0.0.1:{}", 1 + i);
            let client = Client::connect([endpoint.as_str()], None).await.unwrap();
            clients.push((endpoint, client));
        }
        Members::new(
            clients,
            ProbeSettings {
                unresponsive_after: Duration::from_millis(500),
                probe_timeout: Duration::from_millis(100),
            },
        )
    }

    #[tokio::test]
    async fn picks_go_round_the_members_that_answer() {
        let members = members(3).await;
        let mut seen = [0; 3];
        for _ in 0..30 {
            seen[members.pick(&[]).0] += 1;
        }
        assert_eq!(seen, [10, 10, 10]);

        members.mark_suspect(0, "test");
        for _ in 0..30 {
            assert_ne!(members.pick(&[]).0, 0, "a suspect member is skipped");
            // Every member that answers was tried: they are tried again, not the
            // suspect one.
            assert_ne!(members.pick(&[1, 2]).0, 0);
        }
        assert_eq!(members.pick(&[1]).0, 2);

        members.mark_suspect(1, "test");
        members.mark_suspect(2, "test");
        // All suspect: one not tried yet, then any.
        assert_eq!(members.pick(&[0, 1]).0, 2);
        let _ = members.pick(&[0, 1, 2]);
    }

    #[tokio::test]
    async fn one_member_is_never_suspect() {
        let members = members(1).await;
        members.mark_suspect(0, "test");
        members.check(0);
        assert!(!members.members[0].is_suspect());
        assert_eq!(members.pick(&[0]).0, 0);
    }
}
