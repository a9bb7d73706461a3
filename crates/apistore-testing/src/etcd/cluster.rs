//! A multi-member etcd cluster on loopback, for tests that lose members: kill the
//! leader, restart a follower, watch a new leader get elected.
//!
//! Each member is a real etcd process with its own ports, data directory and log, all
//! under one temporary directory that goes away with the [`EtcdCluster`]. Members are
//! launched together (a member is not healthy until a quorum has elected a leader, so
//! they cannot be started one after another) and each runs under the same watchdog as
//! a single [`EtcdServer`](super::EtcdServer), so none outlives the test process.
//!
//! Who leads is asked of etcd itself: etcd-client's maintenance `Status` on each
//! member's client port.
//!
//! ```no_run
//! use apistore_testing::etcd::{ClusterError, EtcdCluster, EtcdOptions};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), ClusterError> {
//! let mut cluster = EtcdCluster::start(3, EtcdOptions::default())?;
//! let endpoints = cluster.endpoints(); // give all of them to the store
//! let leader = cluster.wait_for_leader(Duration::from_secs(10))?;
//! cluster.kill_member(leader)?; // SIGKILL, data kept
//! let new_leader = cluster.wait_for_new_leader(leader, Duration::from_secs(10))?;
//! cluster.restart_member(leader)?; // same ports, same data; rejoins as a follower
//! # let _ = (endpoints, new_leader);
//! # Ok(())
//! # }
//! ```

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;

use super::error::FixtureError;
use super::process::{self, LaunchError, LaunchSpec, MemberSpec, Running};
use super::{EtcdOptions, etcd_binary};

/// How many sets of ports [`EtcdCluster::start`] tries before giving up.
const PORT_ATTEMPTS: usize = 3;
/// How long one status request may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the leader waits poll.
const LEADER_POLL: Duration = Duration::from_millis(50);

/// Why a cluster could not be started, or did not do what a test waited for.
///
/// `Debug` prints the same text as `Display`, as [`FixtureError`] does, so a test that
/// unwraps one fails with a readable message.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum ClusterError {
    /// Finding, starting or restarting an etcd process failed (this includes a missing
    /// etcd binary, whose message says how to get one).
    #[error(transparent)]
    Fixture(#[from] FixtureError),

    /// A cluster of no members was asked for.
    #[error("an etcd cluster needs at least one member")]
    Empty,

    /// A member index out of range.
    #[error("the cluster has {size} members (0 to {last}); there is no member {index}", last = size.saturating_sub(1))]
    NoSuchMember {
        /// The index asked for.
        index: usize,
        /// How many members the cluster has.
        size: usize,
    },

    /// A member did not answer `POST /v3/maintenance/status` sensibly.
    #[error("could not read the status of etcd member {name} at {endpoint}: {message}")]
    Status {
        /// The member's `--name`.
        name: String,
        /// Its client URL.
        endpoint: String,
        /// What went wrong.
        message: String,
    },

    /// The running members did not agree on a (new) leader in time.
    #[error("{wanted} within {waited:?}; last seen: {seen}")]
    NoLeader {
        /// What was waited for ("no leader", "no leader other than member 1").
        wanted: String,
        /// How long the fixture waited.
        waited: Duration,
        /// What each member last reported.
        seen: String,
    },
}

impl fmt::Debug for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// `Result` with [`ClusterError`] as its error.
pub type ClusterResult<T> = std::result::Result<T, ClusterError>;

/// What one member says about itself and the cluster (from etcd's status call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberStatus {
    /// The member's own id.
    pub member_id: u64,
    /// The id of the member it follows as leader; 0 when it knows of none.
    pub leader: u64,
    /// The raft term it is in.
    pub raft_term: u64,
    /// The store revision it has applied.
    pub revision: i64,
}

/// One member: how to run it and, while it runs, its process.
#[derive(Debug)]
struct Member {
    spec: MemberSpec,
    args: Vec<OsString>,
    log: PathBuf,
    /// etcd's id for the member, learnt once the cluster is up.
    id: u64,
    process: Option<Running>,
}

/// A cluster of etcd members on loopback, owned by a test.
///
/// Members are numbered from 0. Dropping the cluster kills every member and removes
/// their data and logs.
#[derive(Debug)]
pub struct EtcdCluster {
    binary: PathBuf,
    members: Vec<Member>,
    startup_timeout: Duration,
    // Declared last: dropped after the processes are gone.
    dir: TempDir,
}

impl EtcdCluster {
    /// Starts a cluster of `size` members and waits until every member is healthy (which
    /// means a leader has been elected).
    ///
    /// Member `i` is named `<options.name>-<i>`; the other options apply to every
    /// member. Ports are picked free on 127.0.0.1 and picked again if another process
    /// takes one first. Fails if etcd is missing (saying how to get it) or if the
    /// members do not become healthy within [`EtcdOptions::startup_timeout`].
    pub fn start(size: usize, options: EtcdOptions) -> ClusterResult<Self> {
        if size == 0 {
            return Err(ClusterError::Empty);
        }
        let binary = etcd_binary()?;
        let dir = tempfile::Builder::new()
            .prefix("apistore-etcd-cluster-")
            .tempdir()
            .map_err(|e| FixtureError::io("create a temporary directory for an etcd cluster", e))?;
        let token = cluster_token();

        let mut last_port_failure = None;
        for _ in 0..PORT_ATTEMPTS {
            let ports = process::free_loopback_ports(2 * size)?;
            let mut members: Vec<Member> = (0..size)
                .map(|i| {
                    let member_dir = dir.path().join(format!("member-{i}"));
                    Member {
                        spec: MemberSpec {
                            name: format!("{}-{i}", options.name),
                            client_port: ports[2 * i],
                            peer_port: ports[2 * i + 1],
                            data_dir: member_dir.join("data"),
                        },
                        args: Vec::new(),
                        log: dir.path().join(format!("member-{i}.log")),
                        id: 0,
                        process: None,
                    }
                })
                .collect();
            let initial_cluster = members
                .iter()
                .map(|m| m.spec.initial_cluster_entry())
                .collect::<Vec<_>>()
                .join(",");
            for member in &mut members {
                member.args = member
                    .spec
                    .args(&binary, &initial_cluster, &token, &options);
                // A failed attempt may have left a data directory naming other ports.
                if member.spec.data_dir.exists() {
                    fs::remove_dir_all(&member.spec.data_dir).map_err(|e| {
                        FixtureError::io(format!("remove {}", member.spec.data_dir.display()), e)
                    })?;
                }
            }

            let outcomes = launch_together(&binary, &members, dir.path(), options.startup_timeout);
            let mut fatal = None;
            let mut port_taken = None;
            for (member, outcome) in members.iter_mut().zip(outcomes) {
                match outcome {
                    Ok(running) => member.process = Some(running),
                    Err(LaunchError::PortTaken { log_tail }) => {
                        port_taken = Some((member.log.clone(), log_tail));
                    }
                    Err(LaunchError::Fatal(error)) => fatal = fatal.or(Some(error)),
                }
            }
            // A member that lost a port leaves the others without a quorum: they fail
            // too, by timing out, and the whole cluster is tried again on new ports.
            if let Some(failure) = port_taken {
                last_port_failure = Some(failure);
                drop(members);
                continue;
            }
            if let Some(error) = fatal {
                // Dropping `members` kills the ones that did start.
                return Err(error.into());
            }

            let mut cluster = Self {
                binary,
                members,
                startup_timeout: options.startup_timeout,
                dir,
            };
            for index in 0..size {
                cluster.members[index].id = cluster.status(index)?.member_id;
            }
            return Ok(cluster);
        }
        let (log, log_tail) = last_port_failure.unwrap_or_default();
        Err(FixtureError::PortsTaken {
            attempts: PORT_ATTEMPTS,
            log,
            log_tail,
        }
        .into())
    }

    /// How many members the cluster has (running or not).
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The client URLs of every member, running or not, in member order: what a store
    /// that should survive the loss of members is given.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.spec.client_url()).collect()
    }

    /// The client URLs of the members that run now.
    pub fn running_endpoints(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.process.is_some())
            .map(|m| m.spec.client_url())
            .collect()
    }

    /// The client URL of member `index`.
    pub fn endpoint(&self, index: usize) -> ClusterResult<String> {
        Ok(self.member(index)?.spec.client_url())
    }

    /// The `--name` of member `index`.
    pub fn member_name(&self, index: usize) -> ClusterResult<&str> {
        Ok(&self.member(index)?.spec.name)
    }

    /// etcd's id of member `index` (as in [`MemberStatus::member_id`]).
    pub fn member_id(&self, index: usize) -> ClusterResult<u64> {
        Ok(self.member(index)?.id)
    }

    /// The `--data-dir` of member `index`; it survives stops, kills and restarts.
    pub fn data_dir(&self, index: usize) -> ClusterResult<&Path> {
        Ok(&self.member(index)?.spec.data_dir)
    }

    /// The file member `index` logs to.
    pub fn log_path(&self, index: usize) -> ClusterResult<&Path> {
        Ok(&self.member(index)?.log)
    }

    /// Whether member `index` runs (was not stopped or killed through the fixture).
    pub fn is_running(&self, index: usize) -> ClusterResult<bool> {
        Ok(self.member(index)?.process.is_some())
    }

    /// Whether member `index` answers `/health` with `"health":"true"` right now (it
    /// runs and knows a leader).
    pub fn is_healthy(&self, index: usize) -> ClusterResult<bool> {
        Ok(process::probe_health(self.member(index)?.spec.client_port))
    }

    /// Stops member `index` gracefully (SIGTERM, then SIGKILL after 10 seconds),
    /// keeping its data. A leader stopped this way hands leadership over first.
    pub fn stop_member(&mut self, index: usize) -> ClusterResult<()> {
        if let Some(running) = self.member_mut(index)?.process.take() {
            running.stop();
        }
        Ok(())
    }

    /// Kills member `index` at once (SIGKILL), as a crash would, keeping its data.
    pub fn kill_member(&mut self, index: usize) -> ClusterResult<()> {
        if let Some(running) = self.member_mut(index)?.process.take() {
            running.kill();
        }
        Ok(())
    }

    /// Stops member `index` if it runs, starts it again on the same ports and data
    /// directory, and waits until it is healthy (it has rejoined and knows a leader; a
    /// cluster that has lost its quorum therefore has to get it back within the
    /// startup timeout).
    pub fn restart_member(&mut self, index: usize) -> ClusterResult<()> {
        self.stop_member(index)?;
        let member = &self.members[index];
        let spec = LaunchSpec {
            binary: &self.binary,
            args: &member.args,
            member: &member.spec,
            log: &member.log,
            cleanup_dir: self.dir.path(),
            startup_timeout: self.startup_timeout,
        };
        let running = match process::launch(&spec) {
            Ok(running) => running,
            Err(LaunchError::PortTaken { log_tail }) => {
                return Err(FixtureError::PortsTaken {
                    attempts: 1,
                    log: member.log.clone(),
                    log_tail,
                }
                .into());
            }
            Err(LaunchError::Fatal(error)) => return Err(error.into()),
        };
        self.members[index].process = Some(running);
        Ok(())
    }

    /// What member `index` says about itself and its leader, asked over its client port.
    pub fn status(&self, index: usize) -> ClusterResult<MemberStatus> {
        let member = self.member(index)?;
        fetch_status(member.spec.client_port).map_err(|message| ClusterError::Status {
            name: member.spec.name.clone(),
            endpoint: member.spec.client_url(),
            message,
        })
    }

    /// The index of the leader, if every running member that answers names the same
    /// running member as leader right now.
    ///
    /// Fails with [`ClusterError::NoLeader`] while an election is under way, while
    /// members still name a leader that is gone, or when no member answers.
    pub fn leader(&self) -> ClusterResult<usize> {
        self.agreed_leader().map_err(|seen| ClusterError::NoLeader {
            wanted: "no leader that the running members agree on".to_owned(),
            waited: Duration::ZERO,
            seen,
        })
    }

    /// Waits up to `timeout` until the running members agree on a leader; returns its
    /// index.
    pub fn wait_for_leader(&self, timeout: Duration) -> ClusterResult<usize> {
        self.wait_for(
            timeout,
            "no leader that the running members agree on",
            |_| true,
        )
    }

    /// Waits up to `timeout` until the running members agree on a leader other than
    /// member `old` (typically one the test just killed); returns its index.
    pub fn wait_for_new_leader(&self, old: usize, timeout: Duration) -> ClusterResult<usize> {
        self.member(old)?;
        self.wait_for(
            timeout,
            &format!("no leader other than member {old} that the running members agree on"),
            |leader| leader != old,
        )
    }

    fn wait_for(
        &self,
        timeout: Duration,
        wanted: &str,
        accept: impl Fn(usize) -> bool,
    ) -> ClusterResult<usize> {
        let started = Instant::now();
        loop {
            let seen = match self.agreed_leader() {
                Ok(leader) if accept(leader) => return Ok(leader),
                Ok(leader) => format!("member {leader} leads"),
                Err(seen) => seen,
            };
            if started.elapsed() >= timeout {
                return Err(ClusterError::NoLeader {
                    wanted: wanted.to_owned(),
                    waited: timeout,
                    seen,
                });
            }
            thread::sleep(LEADER_POLL);
        }
    }

    /// The leader every answering running member names, if it is a running member of
    /// ours; otherwise a description of what each member said.
    fn agreed_leader(&self) -> Result<usize, String> {
        let mut leaders = Vec::new();
        let mut seen = Vec::new();
        for (index, member) in self.members.iter().enumerate() {
            if member.process.is_none() {
                seen.push(format!("{index}: not running"));
                continue;
            }
            match fetch_status(member.spec.client_port) {
                Ok(status) => {
                    seen.push(format!("{index}: leader {:x}", status.leader));
                    leaders.push(status.leader);
                }
                Err(message) => seen.push(format!("{index}: {message}")),
            }
        }
        let seen = seen.join("; ");
        let Some(&first) = leaders.first() else {
            return Err(seen);
        };
        if first == 0 || leaders.iter().any(|&l| l != first) {
            return Err(seen);
        }
        self.members
            .iter()
            .position(|m| m.id == first && m.process.is_some())
            .ok_or(seen)
    }

    fn member(&self, index: usize) -> ClusterResult<&Member> {
        let size = self.members.len();
        self.members
            .get(index)
            .ok_or(ClusterError::NoSuchMember { index, size })
    }

    fn member_mut(&mut self, index: usize) -> ClusterResult<&mut Member> {
        let size = self.members.len();
        self.members
            .get_mut(index)
            .ok_or(ClusterError::NoSuchMember { index, size })
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for member in &mut self.members {
            if let Some(running) = member.process.take() {
                running.kill();
            }
        }
    }
}

/// Launches every member at once, each waiting for its own `/health` on a thread of
/// its own: no member is healthy before a quorum has elected a leader.
fn launch_together(
    binary: &Path,
    members: &[Member],
    cleanup_dir: &Path,
    startup_timeout: Duration,
) -> Vec<Result<Running, LaunchError>> {
    thread::scope(|scope| {
        // Every member must be spawned before any is joined: joining as we spawn would
        // wait for the first member to be healthy, which it cannot be alone.
        #[allow(clippy::needless_collect)]
        let handles: Vec<_> = members
            .iter()
            .map(|member| {
                scope.spawn(move || {
                    process::launch(&LaunchSpec {
                        binary,
                        args: &member.args,
                        member: &member.spec,
                        log: &member.log,
                        cleanup_dir,
                        startup_timeout,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| {
                handle.join().unwrap_or_else(|_| {
                    Err(LaunchError::Fatal(FixtureError::io(
                        "launch an etcd member",
                        std::io::Error::other("the launching thread panicked"),
                    )))
                })
            })
            .collect()
    })
}

/// A token no other cluster on this machine uses, so members of different clusters
/// never mistake each other for peers if ports are reused.
fn cluster_token() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_nanos());
    format!("apistore-cluster-{}-{nanos}", std::process::id())
}

/// etcd's maintenance `Status` on a member's client port.
///
/// The fixture's API is blocking and may be called from inside a tokio runtime (a test
/// that kills members under load), where blocking on another runtime is refused: the
/// request runs on a thread of its own, with a runtime of its own.
fn fetch_status(client_port: u16) -> Result<MemberStatus, String> {
    let endpoint = format!("http://127.0.0.1:{client_port}");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        runtime.block_on(async {
            let options = etcd_client::ConnectOptions::new()
                .with_connect_timeout(STATUS_TIMEOUT)
                .with_timeout(STATUS_TIMEOUT);
            let mut client = etcd_client::Client::connect([endpoint.as_str()], Some(options))
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let status = client.status().await.map_err(|e| format!("status: {e}"))?;
            member_status(&status)
        })
    })
    .join()
    .map_err(|_| "the status request panicked".to_owned())?
}

/// The fields of a status answer the fixture uses.
fn member_status(status: &etcd_client::StatusResponse) -> Result<MemberStatus, String> {
    let header = status
        .header()
        .ok_or_else(|| "a status answer without a header".to_owned())?;
    if header.member_id() == 0 {
        return Err("a status answer without a member id".to_owned());
    }
    Ok(MemberStatus {
        member_id: header.member_id(),
        leader: status.leader(),
        raft_term: header.raft_term(),
        revision: header.revision(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_members_elect_a_leader_and_a_new_one_after_the_leader_dies() {
        let started = Instant::now();
        let mut cluster = EtcdCluster::start(
            3,
            EtcdOptions {
                name: "fixture-cluster".to_owned(),
                ..EtcdOptions::default()
            },
        )
        .unwrap();
        assert_eq!(cluster.size(), 3);
        let endpoints = cluster.endpoints();
        assert_eq!(endpoints.len(), 3);
        assert!(endpoints.iter().all(|e| e.starts_with("http://127.0.0.1:")));
        let ids: Vec<u64> = (0..3).map(|i| cluster.member_id(i).unwrap()).collect();
        assert!(ids[0] != ids[1] && ids[1] != ids[2] && ids[0] != ids[2]);
        for i in 0..3 {
            assert!(cluster.is_healthy(i).unwrap(), "member {i} is not healthy");
            assert!(cluster.data_dir(i).unwrap().exists());
        }

        let leader = cluster.wait_for_leader(Duration::from_secs(10)).unwrap();
        let status = cluster.status(leader).unwrap();
        assert_eq!(status.member_id, ids[leader]);
        assert_eq!(status.leader, ids[leader]);

        cluster.kill_member(leader).unwrap();
        assert!(!cluster.is_running(leader).unwrap());
        assert_eq!(cluster.running_endpoints().len(), 2);
        let new_leader = cluster
            .wait_for_new_leader(leader, Duration::from_secs(15))
            .unwrap();
        assert_ne!(new_leader, leader);
        assert!(cluster.status(new_leader).unwrap().raft_term > status.raft_term);

        cluster.restart_member(leader).unwrap();
        assert!(cluster.is_healthy(leader).unwrap());
        assert_eq!(cluster.status(leader).unwrap().member_id, ids[leader]);
        assert_eq!(
            cluster.wait_for_leader(Duration::from_secs(10)).unwrap(),
            new_leader
        );
        assert!(matches!(
            cluster.kill_member(3),
            Err(ClusterError::NoSuchMember { index: 3, size: 3 })
        ));
        eprintln!("cluster fixture test took {:?}", started.elapsed());
    }

    #[test]
    fn an_empty_cluster_is_refused() {
        assert!(matches!(
            EtcdCluster::start(0, EtcdOptions::default()),
            Err(ClusterError::Empty)
        ));
    }
}
