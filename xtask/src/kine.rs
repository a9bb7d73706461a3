//! `cargo xtask kine`: the etcd3 backend's suites and the command's tests against kine
//! (k3s-io/kine), the etcd shim k3s runs kube-apiserver on, over SQLite.
//!
//! kine is built like the etcd lines of [`crate::etcd_versions`]: a Go module of a few
//! lines over kine's own `pkg/app`, in `interop/kine/`, whose `go.mod` pins the release.
//! The binary goes to `target/tools/kine-<release>/kine` with the release recorded
//! beside it, and is built again only when the pin moves. Its SQLite driver
//! (mattn/go-sqlite3) is C, so the build needs cgo and a C compiler.
//!
//! kine answers only what kube-apiserver sends (its four transaction shapes, ranges
//! without sorts or `Serializable`, no `DeleteRange`, no lease keep-alive through the
//! lease API, ...). The tests that need what kine does not have are skipped by name
//! ([`NOT_APPLICABLE`]), each printed with its reason before the run; every other test
//! of the selected binaries runs and must pass.

use std::fs;
use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use apistore_testing::etcd::ETCD_ENDPOINTS_ENV;

use crate::error::{Result, XtaskError};
use crate::go::Go;
use crate::provision;
use crate::test_build::{WorkspaceBuild, run_all};

/// kine's Go module, relative to the workspace root.
pub(crate) const MODULE_DIR: &str = "interop/kine";
/// The module whose version `interop/kine/go.mod` pins.
const KINE_MODULE: &str = "github.com/k3s-io/kine";
/// Where kine's databases and logs go, relative to the workspace root; emptied at the
/// start of each run.
const RUN_DIR: &str = "target/kine";
/// How long kine may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The packages whose test binaries run against kine: the etcd3 backend's suites (its
/// own and `apistore-testing`'s conformance suite, run from its `tests/`) and the
/// command's.
pub(crate) const PACKAGES: [&str; 2] = ["apistore-etcd3", "apistore-cli"];

/// A test that does not apply to kine: the binary (cargo target name), the test's full
/// name, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotApplicable {
    /// The test binary's target name (`watch_conformance`, `command`).
    pub(crate) target: &'static str,
    /// The test's name as the binary lists it (`--list`), matched exactly.
    pub(crate) test: &'static str,
    /// What kine lacks, or why the test cannot be about kine.
    pub(crate) reason: &'static str,
}

/// Starts an etcd of its own (to stop, kill or restart it, to give it flags, or to
/// build a cluster): whatever it shows is about that etcd, not kine.
const OWN_ETCD: &str = "starts an etcd process of its own (stops, kills or restarts it, or \
                        passes it flags): not about kine; runs on etcd in `cargo xtask test`";
/// Talks to a fake server (a port that never answers, one that is not etcd).
const FAKE_SERVER: &str = "talks to a fake server (a silent port, a server that is not etcd), \
                           never to the endpoint under test";
/// kine keeps no per-key version counter.
const NO_KEY_VERSION: &str = "kine keeps no per-key version counter: every key-value's \
                              `version` is 0 (the command prints what the server says; etcd \
                              says 1 after a create)";
/// kine refuses DeleteRange.
const NO_DELETE_RANGE: &str = "the test tidies up with a raw DeleteRange, which kine refuses \
                               (`delete is not implemented by kine`); apistore itself sends \
                               only kube-apiserver's conditional delete transaction";
/// kine's leases are not etcd's.
const LEASE_ID_IS_TTL: &str = "kine's LeaseGrant answers the TTL as the lease ID, so two grants \
                               of one TTL share an ID; the lease manager's reuse limit cannot \
                               be seen (objects still expire by their TTL)";
/// kine has no request size limit.
const NO_REQUEST_LIMIT: &str = "kine has no request size limit (etcd's --max-request-bytes, \
                                1.5 MiB), so the oversized create the test expects refused \
                                succeeds";
/// kine writes revisions of its own.
const OWN_REVISIONS: &str = "kine probably adds revisions of its own (compaction and \
                             gap-fill rows; not verified) when it chooses, so the current revision a \
                             watch-list bookmark carries can be past the test's last write, \
                             which the case expects exactly (failed 1 interop run of 2)";

/// Every test of [`PACKAGES`] that does not run on kine. docs/conformance.md's
/// "Backends" section lists the same, with the same reasons.
pub(crate) const NOT_APPLICABLE: &[NotApplicable] = &[
    // What kine does not have.
    NotApplicable {
        target: "command",
        test: "keys_lists_metadata_and_encoding_without_decrypting",
        reason: NO_KEY_VERSION,
    },
    NotApplicable {
        target: "hostile_input",
        test: "arbitrary_bytes_in_etcd_are_internal_errors_naming_the_key_and_stay_untouched",
        reason: NO_DELETE_RANGE,
    },
    NotApplicable {
        target: "lease_manager",
        test: "a_full_lease_is_not_reused",
        reason: LEASE_ID_IS_TTL,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_watch_semantic_initial_events_extended",
        reason: OWN_REVISIONS,
    },
    NotApplicable {
        target: "telemetry",
        test: "exposition_after_a_known_sequence_of_store_operations",
        reason: NO_REQUEST_LIMIT,
    },
    NotApplicable {
        target: "telemetry",
        test: "store_calls_under_a_callers_trace_export_the_reference_spans",
        reason: NO_REQUEST_LIMIT,
    },
    // Tests of etcd itself, on an etcd of their own.
    NotApplicable {
        target: "compactor",
        test: "a_compactor_compacts_to_the_revision_seen_one_interval_earlier",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "a_shared_compactor_starts_again_after_every_share_is_gone",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "a_smaller_interval_replaces_the_shared_compactor",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "a_zero_interval_compacts_nothing",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "dropping_a_compactor_stops_it",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "stopping_a_compactor_ends_its_task",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "compactor",
        test: "two_compactors_compact_once_per_interval_between_them",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_frozen_leader_slows_nobody_for_long",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_watch_across_the_leaders_death_goes_on_without_a_gap",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_watch_ends_with_service_unavailable_once_etcd_stays_away_past_the_limit",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "a_watch_whose_member_dies_resumes_on_another_member",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "five_leader_kills_under_sixteen_writers_end_no_watch",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "killing_and_restarting_a_single_etcd_under_load_loses_no_acknowledged_write",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "faults",
        test: "killing_the_leader_under_load_loses_no_acknowledged_write",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "health",
        test: "a_missing_health_key_is_healthy_and_ready",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "health",
        test: "probes_are_rate_limited_to_one_per_half_timeout",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "health",
        test: "probes_time_out_after_their_own_timeout",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "compacted_continue_token_is_gone_with_an_inconsistent_one",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::compacted_continue_token_is_gone_with_an_inconsistent_one",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::consistent_list_answers_the_current_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::continued_pages_keep_the_first_page_revision_and_read_once",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::filtered_pages_fetch_more_but_decode_only_what_they_need",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::list_table_over_multi_level_data",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "kube_1_37::non_recursive_list_reads_one_key_at_any_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "range_stream",
        test: "streamed_lists_at_a_future_or_compacted_revision_fail_as_paged_ones_do",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "consistent_list_answers_the_current_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "continued_pages_keep_the_first_page_revision_and_read_once",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "filtered_pages_fetch_more_but_decode_only_what_they_need",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "list_table_over_multi_level_data",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "list_conformance",
        test: "non_recursive_list_reads_one_key_at_any_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "polling",
        test: "the_storage_size_is_the_members_db_size_and_goes_when_etcd_does",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "a_plain_http_etcd_behind_an_https_endpoint_is_a_tls_error",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "a_server_name_the_certificate_lacks_is_refused",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "etcd_users_authenticate_at_connect_and_secrets_stay_hidden",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "mutual_tls_needs_a_client_certificate_etcd_trusts",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "tls_and_a_password_together",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "tls_with_a_wrong_ca_fails_at_connect_saying_the_server_is_not_trusted",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "security",
        test: "tls_with_the_right_ca_creates_and_gets",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "dropped_watches_cancel_their_etcd_watchers",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "lost_etcd_resumes_the_watch_once_it_is_back",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "missing_previous_value_is_internal_error",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "request_watch_progress_with_a_watch_at_a_future_revision",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_progress_notify",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_too_large_resource_version_error_for_watch_list",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_watch_dispatch_bookmark_events",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_test_watch_from_zero",
        reason: OWN_ETCD,
    },
    NotApplicable {
        target: "watch_conformance",
        test: "run_watch_semantics",
        reason: OWN_ETCD,
    },
    // Tests of no server at all.
    NotApplicable {
        target: "faults",
        test: "an_endpoint_that_is_not_etcd_is_service_unavailable_with_a_hint",
        reason: FAKE_SERVER,
    },
    NotApplicable {
        target: "faults",
        test: "an_etcd_that_never_answers_fails_calls_with_a_timeout_within_the_deadline",
        reason: FAKE_SERVER,
    },
];

/// The kine binary `interop/kine/go.mod` pins, built (with cgo) unless built before.
pub(crate) fn provision_kine(root: &Path, go: &Go) -> Result<PathBuf> {
    let module_dir = root.join(MODULE_DIR);
    let go_mod = module_dir.join("go.mod");
    let text = fs::read_to_string(&go_mod)
        .map_err(|e| XtaskError::io(format!("read {}", go_mod.display()), e))?;
    let release = pinned_release(&text).ok_or_else(|| {
        XtaskError::ToolMissing(format!(
            "{} pins no `{KINE_MODULE} v0.x.y`",
            go_mod.display()
        ))
    })?;
    let dir = root
        .join(provision::TOOLS_DIR)
        .join(format!("kine-{release}"));
    let binary = dir.join("kine");
    let record = dir.join("version");
    let recorded = fs::read_to_string(&record).unwrap_or_default();
    if binary.is_file() && recorded.trim() == release {
        println!("xtask: kine {release}: {} (built before)", binary.display());
        return Ok(binary);
    }
    println!(
        "xtask: building kine {release} from {} (cgo: SQLite is C; a few minutes the \
         first time)",
        module_dir.display()
    );
    fs::create_dir_all(&dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    // As kine's own release builds: paths trimmed, the version stamped in.
    let version_flag = format!("-X {KINE_MODULE}/pkg/version.Version=v{release}");
    go.build(
        &module_dir,
        &binary,
        &[("CGO_ENABLED", "1")],
        &["-trimpath", "-ldflags", &version_flag],
    )?;
    let reported = kine_version(&binary);
    if !reported.contains(&format!("v{release}")) {
        return Err(XtaskError::ToolMissing(format!(
            "{} was built from {} pinning {release} but says `{reported}`",
            binary.display(),
            go_mod.display()
        )));
    }
    fs::write(&record, format!("{release}\n"))
        .map_err(|e| XtaskError::io(format!("write {}", record.display()), e))?;
    println!("xtask: kine {release}: {}", binary.display());
    Ok(binary)
}

/// The release `go.mod` pins for [`KINE_MODULE`], without its `v`: `0.17.5` from
/// `require github.com/k3s-io/kine v0.17.5` (or the same line inside a block).
fn pinned_release(go_mod: &str) -> Option<&str> {
    go_mod.lines().find_map(|line| {
        let line = line.split("//").next().unwrap_or_default().trim();
        let line = line.strip_prefix("require").map_or(line, str::trim_start);
        let mut words = line.split_whitespace();
        if words.next() != Some(KINE_MODULE) {
            return None;
        }
        let release = words.next()?.strip_prefix('v')?;
        let numeric = release.split('.').count() == 3
            && release
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        numeric.then_some(release)
    })
}

/// `kine --version`'s first line, e.g. `kine version v0.17.5`.
pub(crate) fn kine_version(binary: &Path) -> String {
    Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .and_then(|out| {
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .next()
                .map(str::to_owned)
        })
        .unwrap_or_else(|| "version unknown".to_owned())
}

/// A running kine over SQLite on a free loopback port.
///
/// kine runs under a `sh` watchdog that reads its standard input, held open here:
/// when xtask exits, however it exits, the pipe closes and the watchdog kills kine, as
/// `apistore-testing` does for etcd.
pub(crate) struct KineServer {
    endpoint: String,
    log: PathBuf,
    watchdog: Child,
    /// Closing it tells the watchdog to stop kine.
    lifeline: Option<ChildStdin>,
}

impl KineServer {
    /// Starts `binary` with a new SQLite database in `dir` (created empty).
    pub(crate) fn start(binary: &Path, dir: &Path) -> Result<Self> {
        if dir.exists() {
            fs::remove_dir_all(dir)
                .map_err(|e| XtaskError::io(format!("empty {}", dir.display()), e))?;
        }
        fs::create_dir_all(dir)
            .map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
        let log = dir.join("kine.log");
        let mut last_error = String::new();
        // A port found free may be taken before kine binds it: try a few.
        for _ in 0..5 {
            let port = free_port()?;
            let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
            let database = dir.join("state.db");
            let _ = fs::remove_file(&database);
            let mut watchdog = Command::new("sh")
                .arg("-c")
                .arg(
                    "\"$0\" \"$@\" </dev/null >>\"$KINE_LOG\" 2>&1 & kine=$!\n\
                     read _ignored\n\
                     kill \"$kine\" 2>/dev/null; wait \"$kine\"",
                )
                .arg(binary)
                .arg(format!("--listen-address={address}"))
                .arg(format!(
                    "--endpoint=sqlite://{}?_journal=WAL&cache=shared&_busy_timeout=30000",
                    database.display()
                ))
                // No metrics server: its default :8080 may be taken.
                .arg("--metrics-bind-address=0")
                .env("KINE_LOG", &log)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|source| XtaskError::Spawn {
                    command: format!("sh -c <watchdog> {}", binary.display()),
                    source,
                })?;
            let lifeline = watchdog.stdin.take();
            let mut server = Self {
                endpoint: format!("http://{address}"),
                log: log.clone(),
                watchdog,
                lifeline,
            };
            match server.wait_listening(address) {
                Ok(()) => return Ok(server),
                Err(error) => {
                    last_error = error;
                    server.stop();
                }
            }
        }
        Err(XtaskError::ToolMissing(format!(
            "kine did not start: {last_error}; its log: {}",
            log.display()
        )))
    }

    fn wait_listening(&mut self, address: SocketAddr) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < START_TIMEOUT {
            if let Ok(Some(status)) = self.watchdog.try_wait() {
                return Err(format!("it exited ({status})"));
            }
            if TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            thread::sleep(Duration::from_millis(100));
        }
        Err(format!(
            "nothing listened on {address} after {START_TIMEOUT:?}"
        ))
    }

    /// The client URL, e.g. `http://127.0.0.1:41237`.
    pub(crate) fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// kine's log file.
    pub(crate) fn log_path(&self) -> &Path {
        &self.log
    }

    /// Stops kine and waits for it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut lifeline) = self.lifeline.take() {
            let _ = lifeline.write_all(b"stop\n");
        }
        let _ = self.watchdog.wait();
    }
}

impl Drop for KineServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A loopback port nothing listens on right now.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| XtaskError::io("find a free loopback port".to_owned(), e))?;
    listener
        .local_addr()
        .map(|address| address.port())
        .map_err(|e| XtaskError::io("find a free loopback port".to_owned(), e))
}

/// The arguments that skip `target`'s tests that do not apply to kine.
fn skip_args(target: &str) -> Vec<&'static str> {
    let mut args = Vec::new();
    for case in NOT_APPLICABLE.iter().filter(|case| case.target == target) {
        args.extend(["--skip", case.test]);
    }
    if !args.is_empty() {
        // `--skip` matches substrings unless told otherwise.
        args.push("--exact");
    }
    args
}

/// Prints every test that does not run on kine, with why.
fn print_not_applicable() {
    println!(
        "xtask: {} tests do not apply to kine and are skipped:",
        NOT_APPLICABLE.len()
    );
    for case in NOT_APPLICABLE {
        println!("  {} {}: {}", case.target, case.test, case.reason);
    }
}

/// `cargo xtask kine`: builds kine (unless built before) and every test binary (the
/// build `cargo xtask test` makes), then runs [`PACKAGES`]' binaries against a fresh
/// kine.
pub(crate) fn command(root: &Path) -> Result<()> {
    let go = Go::find("cargo xtask kine")?;
    let cargo = crate::cargo();
    let protoc = provision::protoc(root)?;
    let binary = provision_kine(root, &go)?;
    let build = WorkspaceBuild::build(crate::cargo_command(&cargo, root, &protoc))?;
    run_suites(root, &binary, &build)?;
    println!(
        "xtask: the etcd3 backend's and the command's tests passed on kine ({} not \
         applicable, listed above)",
        NOT_APPLICABLE.len()
    );
    Ok(())
}

/// Runs [`PACKAGES`]' test binaries of `build` against a fresh kine from `binary`,
/// each without its [`NOT_APPLICABLE`] tests.
pub(crate) fn run_suites(root: &Path, binary: &Path, build: &WorkspaceBuild) -> Result<()> {
    let server = KineServer::start(binary, &root.join(RUN_DIR))?;
    println!(
        "xtask: {} is up at {} (its log: {})",
        kine_version(binary),
        server.endpoint(),
        server.log_path().display()
    );
    print_not_applicable();
    let env = [(ETCD_ENDPOINTS_ENV, std::ffi::OsStr::new(server.endpoint()))];
    let mut failed = Vec::new();
    for test in build.tests_of(&PACKAGES) {
        let args = skip_args(&test.target);
        if let Err(error) = run_all([test], &env, &args) {
            eprintln!("xtask: {error}");
            failed.push(format!("{} ({})", test.target, test.package));
        }
    }
    drop(server);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(XtaskError::StepsFailed(failed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_is_read_from_go_mod() {
        let block = "module x\n\ngo 1.26.5\n\nrequire (\n\tgithub.com/k3s-io/kine v0.17.5\n\
                     \tgithub.com/sirupsen/logrus v1.10.2\n)\n";
        assert_eq!(pinned_release(block), Some("0.17.5"));
        assert_eq!(
            pinned_release("require github.com/k3s-io/kine v0.17.4 // pinned\n"),
            Some("0.17.4")
        );
        assert_eq!(pinned_release("module x\n"), None);
        assert_eq!(
            pinned_release("require github.com/k3s-io/kine v0.18.0-rc1\n"),
            None
        );
    }

    #[test]
    fn skips_are_exact_and_explained() {
        for case in NOT_APPLICABLE {
            assert!(!case.reason.is_empty(), "{case:?}");
            assert!(!case.test.is_empty() && !case.target.is_empty(), "{case:?}");
            let same = NOT_APPLICABLE
                .iter()
                .filter(|other| other.target == case.target && other.test == case.test)
                .count();
            assert_eq!(same, 1, "listed twice: {case:?}");
        }
        assert!(skip_args("no_such_binary").is_empty());
    }
}
