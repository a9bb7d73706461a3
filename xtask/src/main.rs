//! Developer commands: `cargo xtask test | interop | demo | bench [--quick] | soak |
//! soak-tests`.
//!
//! Each command provisions what it needs (protoc, an etcd binary of the version asked
//! for, Go programs for `interop`), starts a real etcd on a free loopback port in a
//! temporary directory when the command needs one, runs cargo, and stops etcd
//! afterwards, on Ctrl-C too. CI runs `cargo xtask test` and then `cargo xtask interop`
//! (see `.ci/run`).

mod cli;
mod crate_docs;
mod error;
mod etcd_versions;
mod generated;
mod go;
mod kine;
mod kube_apiserver;
mod postgres;
mod provision;
mod run;
mod soak_tests;
mod test_build;
mod typed_gen;
mod watchdog;

use std::env;
use std::ffi::OsStr;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use apistore_testing::etcd::{ETCD_BIN_ENV, ETCD_ENDPOINTS_ENV, EtcdOptions, EtcdServer};

use crate::cli::USAGE;
use crate::error::{Result, XtaskError};
use crate::etcd_versions::EtcdVersion;
use crate::go::Go;
use crate::kube_apiserver::KubeApiServers;
use crate::run::{run_step, run_step_within};
use crate::soak_tests::{HOG_LIMIT, Hogs, Tally};
use crate::test_build::{Binary, SELECTION, WorkspaceBuild, run_all};

/// The etcd this command started, where the Ctrl-C handler can reach it.
static ETCD: Mutex<Option<EtcdServer>> = Mutex::new(None);

/// Environment variable the demo example reads its endpoints from.
const DEMO_ENDPOINTS_ENV: &str = "APISTORE_ENDPOINTS";

/// Environment variable the differential tests read the reference harness from.
const REFERENCE_BIN_ENV: &str = "APISTORE_REFERENCE_BIN";

/// Environment variable naming the kube version of that harness.
const REFERENCE_KUBE_VERSION_ENV: &str = "APISTORE_REFERENCE_KUBE_VERSION";

/// The reference harnesses: the kube version, the binary's name in target/tools, and
/// the `go build` flags (v0.31.1 from go.mod; v0.37 from its modfile, with the build tag
/// of its storage.Interface calls).
const REFERENCE_HARNESSES: [(&str, &str, &[&str]); 2] = [
    ("1.31", "apistore-reference", &[]),
    (
        "1.37",
        "apistore-reference-1.37",
        &["-modfile=go-1.37.mod", "-tags", "kube137"],
    ),
];

/// The differential tests' package: a workspace member outside `default-members`,
/// run by `cargo xtask interop` only (it needs Go), so `cargo xtask test` leaves it out.
const INTEROP_PACKAGE: &str = "apistore-interop";

/// The reference harness's Go module, relative to the workspace root.
const REFERENCE_MODULE: &str = "interop/reference";

/// The bench's Go arm (k8s.io/apiserver v0.37.2's etcd3 store), relative to the root.
const GOBENCH_MODULE: &str = "interop/gobench";

/// Its binary's name in target/tools.
const GOBENCH_BINARY: &str = "apistore-gobench";

/// Environment variable the bench harness reads the Go arm's binary from.
const GOBENCH_BIN_ENV: &str = "APISTORE_GOBENCH_BIN";

/// The bench's reference for reading snapshot files: etcd's `etcdutl snapshot`, built
/// from the Go module proxy (crates/apistore-bench/src/offline.rs).
const ETCDUTL_MODULE: &str = "interop/etcdutl";

/// Its binary, in target/tools.
const ETCDUTL_BINARY: &str = "etcdutl";

/// Where the bench finds it.
const ETCDUTL_BIN_ENV: &str = "APISTORE_ETCDUTL_BIN";

/// Where the bench finds the `apistore` command, built in release.
const CLI_BIN_ENV: &str = "APISTORE_CLI_BIN";

/// Environment variable the bench harness reads kine's binary from.
const KINE_BIN_ENV: &str = "APISTORE_KINE_BIN";

/// Environment variable the bench harness reads the etcd 3.7 binary of its RangeStream
/// section from (crates/apistore-bench/src/range_stream.rs).
const ETCD37_BIN_ENV: &str = "APISTORE_ETCD37_BIN";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let command = match cli::Command::parse(&args) {
        Ok(cli::Command::Help) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Ok(command) => command,
        Err(message) => {
            eprintln!("xtask: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if let Err(error) = ctrlc::set_handler(on_interrupt) {
        eprintln!("xtask: could not install the Ctrl-C handler ({error}); continuing");
    }
    let result = run(command);
    stop_etcd();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("xtask: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Ctrl-C: stop etcd, remove its directory, and exit as an interrupted process does.
///
/// The children (cargo, the tests) got the same SIGINT from the terminal. If Ctrl-C
/// comes while etcd is still starting, before it is in [`ETCD`], exiting closes its
/// watchdog's pipe and the watchdog kills it and removes its directory.
fn on_interrupt() {
    eprintln!("\nxtask: interrupted");
    stop_etcd();
    std::process::exit(130);
}

/// Stops etcd and removes its directory, holding the lock throughout, so that the
/// main thread and the Ctrl-C handler never race: whichever comes second waits for
/// the first to finish before it can exit the process.
fn stop_etcd() {
    let mut slot = ETCD.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(mut server) = slot.take() {
        println!("xtask: stopping etcd at {}", server.endpoint());
        server.stop();
        // Dropping removes the temporary directory.
        drop(server);
    }
}

/// Starts this etcd binary for the rest of this command (or until [`stop_etcd`]);
/// returns its client URL.
fn start_etcd(binary: &Path) -> Result<String> {
    let server = EtcdServer::start_binary(
        binary.to_path_buf(),
        EtcdOptions {
            name: "apistore-xtask".to_owned(),
            ..EtcdOptions::default()
        },
    )?;
    let endpoint = server.endpoint();
    println!(
        "xtask: etcd is up at {endpoint} (its log: {})",
        server.log_path().display()
    );
    *ETCD.lock().unwrap_or_else(PoisonError::into_inner) = Some(server);
    Ok(endpoint)
}

fn run(command: cli::Command) -> Result<()> {
    let root = workspace_root();
    match command {
        cli::Command::Test {
            etcd,
            cargo_test_args,
        } => test(&root, etcd, &cargo_test_args),
        cli::Command::Interop { etcd } => interop(&root, &etcd),
        cli::Command::Demo { demo_args } => demo(&root, &demo_args),
        cli::Command::Bench {
            bench_args,
            go,
            mimalloc,
        } => bench(&root, &bench_args, go, mimalloc),
        cli::Command::Soak { soak_args } => soak(&root, &soak_args),
        cli::Command::SoakTests {
            runs,
            packages,
            tests,
            load,
        } => soak_tests(&root, runs, &packages, &tests, load),
        cli::Command::Kine { datastore } => kine::command(&root, datastore),
        cli::Command::GenTyped => typed_gen::write(&root),
        cli::Command::Help => Ok(()),
    }
}

fn test(root: &Path, etcd: Option<EtcdVersion>, cargo_test_args: &[String]) -> Result<()> {
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = match etcd {
        None => provision::etcd()?,
        Some(version) => {
            let go = if version.needs_go() {
                Some(Go::find(&format!("cargo xtask test --etcd {version}"))?)
            } else {
                None
            };
            etcd_versions::provision_etcd(root, version, go.as_ref())?
        }
    };
    provision::cargo_components(&cargo)?;

    crate_docs::check(root)?;
    run_step(
        Command::new(&cargo)
            .current_dir(root)
            .args(["fmt", "--all", "--", "--check"]),
    )?;
    // The differential tests' package is linted and built here too (it needs Go only
    // to run), so `cargo xtask interop` reuses this build.
    run_step(
        cargo_command(&cargo, root, &protoc)
            .arg("clippy")
            .args(SELECTION)
            .args(["--all-targets", "--", "-D", "warnings"]),
    )?;
    // After clippy: its build unpacked k8s-openapi's source, one of the inputs.
    if let Some(path) = typed_gen::stale(root)? {
        return Err(XtaskError::GeneratedDiffers(format!(
            "the typed decoders ({}) differ from what the schema and k8s-openapi give \
             now: run `cargo xtask gen-typed` and commit the result",
            path.display()
        )));
    }
    // The decoders of the k8s-openapi versions the workspace does not enable (it
    // enables the latest) must compile too: each names its version's fields.
    for minor in typed_gen::MINORS
        .iter()
        .filter(|&&m| m != typed_gen::LATEST)
    {
        run_step(
            cargo_command(&cargo, root, &protoc)
                .args(["check", "-q", "-p", "apistore-protobuf", "--features"])
                .arg(format!("k8s-openapi,k8s-openapi/v1_{minor}"))
                .arg("--target-dir")
                .arg(root.join("target/k8s-openapi-versions")),
        )?;
    }

    let endpoint = start_etcd(&etcd_bin)?;
    let etcd_env = [
        (ETCD_ENDPOINTS_ENV, OsStr::new(&endpoint)),
        (ETCD_BIN_ENV, etcd_bin.as_os_str()),
    ];
    if !cargo_test_args.is_empty() {
        // The developer chose what to run: plain `cargo test`, over the workspace
        // unless they picked packages.
        let mut cargo_test = cargo_command(&cargo, root, &protoc);
        cargo_test.envs(etcd_env).arg("test");
        if !cli::selects_packages(cargo_test_args) {
            cargo_test
                .args(SELECTION)
                .args(["--exclude", INTEROP_PACKAGE]);
        }
        cargo_test.args(cargo_test_args);
        run_step(&mut cargo_test)?;
        println!("xtask: fmt, clippy and the tests asked for passed");
        return Ok(());
    }
    let build = WorkspaceBuild::build(cargo_command(&cargo, root, &protoc))?;
    run_all(build.tests_except(&[INTEROP_PACKAGE]), &etcd_env, &[])?;
    // Doc tests compile against the same build of the dependencies.
    run_step_within(
        cargo_command(&cargo, root, &protoc)
            .args(["test", "--doc"])
            .args(SELECTION),
        DOC_TESTS_LIMIT,
    )?;
    // The facade's examples are documentation that must keep working: run each
    // against the test etcd.
    for example in EXAMPLES {
        let binary = build.example(example).ok_or_else(|| {
            XtaskError::StepsFailed(vec![format!("the build made no example `{example}`")])
        })?;
        run_step_within(
            Command::new(&binary.executable)
                .current_dir(&binary.package_dir)
                .env(DEMO_ENDPOINTS_ENV, &endpoint),
            EXAMPLE_LIMIT,
        )?;
    }
    println!("xtask: fmt, clippy, tests and examples passed");
    Ok(())
}

/// How long the doc tests may take, their compilation included (minutes here):
/// past it they have hung, and are killed with a diagnosis.
const DOC_TESTS_LIMIT: Duration = Duration::from_secs(20 * 60);
/// How long one example may run (each takes seconds).
const EXAMPLE_LIMIT: Duration = Duration::from_secs(5 * 60);

/// The facade's examples `cargo xtask test` runs (the demo has its own command).
const EXAMPLES: [&str; 6] = [
    "tour",
    "typed_configmap",
    "paging",
    "rotation",
    "controller",
    "controller_test",
];

/// `cargo xtask interop`: the differential tests against each etcd version, and on the
/// built versions (3.5, 3.6, 3.7) the etcd3 backend's and the fixture's own suites, which
/// `cargo xtask test` runs on 3.4. Every step runs even if an earlier one failed; the
/// end lists each step with its time.
fn interop(root: &Path, versions: &[EtcdVersion]) -> Result<()> {
    let go = Go::find("cargo xtask interop")?;
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    // Everything is built before anything runs: a broken build fails in minutes, not
    // after the first version's suites.
    let mut etcds = Vec::new();
    for &version in versions {
        let binary = etcd_versions::provision_etcd(root, version, Some(&go))?;
        etcds.push((version, binary));
    }
    // kube-apiserver for the tests against a real API server: built from the Go module
    // proxy once, then cached outside target/ (xtask/src/kube_apiserver.rs).
    let mut kube_apiservers = KubeApiServers::provision(root, &go);
    // kine over SQLite and over PostgreSQL (xtask/src/kine.rs), in a run of every etcd
    // line, as CI's is: the PostgreSQL run adds about 40 s to a warm run.
    let kine = (versions == EtcdVersion::ALL).then(|| kine::provision_kine(root, &go));
    // One build of every test binary, the same `cargo xtask test` makes, so that
    // running it first costs nothing here.
    let build = WorkspaceBuild::build(cargo_command(&cargo, root, &protoc))?;
    let mut report = Report::default();
    for (label, took, error) in kube_apiservers.failures.drain(..) {
        eprintln!("xtask: {error}");
        report.record(label, took, false);
    }
    check_generated(root, &go, &build, &mut report);
    // Without the harness the differential tests cannot run; the other suites can.
    let started = Instant::now();
    let reference = reference_harness(root, &cargo, &go).unwrap_or_else(|error| {
        eprintln!("xtask: {error}");
        report.record(
            format!("build the reference harness ({REFERENCE_MODULE})"),
            started.elapsed(),
            false,
        );
        None
    });
    if reference.is_some() {
        // Costs nothing after `cargo xtask test`, whose clippy run this is.
        report.run(
            format!("clippy -D warnings (the workspace, {INTEROP_PACKAGE} with it)"),
            cargo_command(&cargo, root, &protoc)
                .arg("clippy")
                .args(SELECTION)
                .args(["--all-targets", "--", "-D", "warnings"]),
        );
    }
    for (version, etcd_bin) in &etcds {
        let release = provision::etcd_version(etcd_bin);
        let endpoint = start_etcd(etcd_bin)?;
        let etcd_env = [
            (ETCD_ENDPOINTS_ENV, OsStr::new(&endpoint)),
            (ETCD_BIN_ENV, etcd_bin.as_os_str()),
        ];
        for (kube, harness) in reference.iter().flatten() {
            // kube 1.34+ supports etcd 3.5 and later only.
            if *kube != "1.31" && *version == EtcdVersion::V3_4 {
                continue;
            }
            let started = Instant::now();
            let mut env = etcd_env.to_vec();
            env.push((REFERENCE_BIN_ENV, harness.as_os_str()));
            env.push((REFERENCE_KUBE_VERSION_ENV, OsStr::new(kube)));
            report.outcome(
                format!(
                    "differential tests ({INTEROP_PACKAGE}) against the kube {kube} harness on {release}"
                ),
                started,
                // Not the tests against kube-apiserver: they run once, below.
                run_all(
                    build
                        .tests_of(&[INTEROP_PACKAGE])
                        .filter(|binary| binary.target != kube_apiserver::TEST_TARGET),
                    &env,
                    &[],
                ),
            );
        }
        if *version != EtcdVersion::V3_4 {
            let started = Instant::now();
            report.outcome(
                format!(
                    "etcd3, fixture and snapshot suites (apistore-etcd3, apistore-testing, \
                     apistore-snapshot, apistore-cli's snapshot) on {release}"
                ),
                started,
                run_all(
                    // The snapshot suites save snapshots from this etcd's binary and read
                    // them back, the command's offline forensics among them.
                    build
                        .tests_of(&["apistore-etcd3", "apistore-testing", "apistore-snapshot"])
                        .chain(
                            build
                                .tests_of(&["apistore-cli"])
                                .filter(|binary| binary.target == "snapshot"),
                        ),
                    &etcd_env,
                    &[],
                ),
            );
        }
        stop_etcd();
    }
    match kine {
        None => {}
        Some(Err(error)) => report.outcome(
            format!("build kine ({})", kine::MODULE_DIR),
            Instant::now(),
            Err(error),
        ),
        // The same binary over each datastore.
        Some(Ok(binary)) => {
            for datastore in [kine::Datastore::Sqlite, kine::Datastore::Postgres] {
                let started = Instant::now();
                report.outcome(
                    format!(
                        "etcd3 and command suites ({}) on kine over {datastore}",
                        kine::PACKAGES.join(", ")
                    ),
                    started,
                    kine::run_suites(root, &binary, &build, datastore),
                );
            }
        }
    }
    // kube-apiserver 1.37 and 1.31, each on an etcd 3.6 of its own the tests start.
    let started = Instant::now();
    report.outcome(
        format!(
            "differential tests against kube-apiserver 1.37 and 1.31 ({INTEROP_PACKAGE} {}) \
             on etcd 3.6",
            kube_apiserver::TEST_TARGET
        ),
        started,
        kube_apiservers.run_tests(root, &go, &build, INTEROP_PACKAGE, &etcds),
    );
    report.finish("interop")
}

/// The files generated from the Go reference and committed (the protobuf schema, the
/// golden fixtures) are what it generates today, and a larger fuzzed set passes the
/// protobuf crate's golden tests.
fn check_generated(root: &Path, go: &Go, build: &WorkspaceBuild, report: &mut Report) {
    let started = Instant::now();
    let outcome = generated::schema_is_current(root, go);
    report.outcome(
        "protobuf schema equals what interop/schema generates".to_owned(),
        started,
        outcome,
    );
    // Each committed golden set against its minor's generator, and a larger fuzzed set
    // of the oldest and the newest minor through the protobuf crate's tests.
    let newest = generated::GOLDEN_SETS[generated::GOLDEN_SETS.len() - 1].0;
    for (minor, golden) in generated::GOLDEN_SETS {
        let started = Instant::now();
        let program = match generated::golden_program(root, go, minor) {
            Ok(program) => program,
            Err(error) => {
                eprintln!("xtask: {error}");
                report.record(
                    format!("build interop/golden for kube 1.{minor}"),
                    started.elapsed(),
                    false,
                );
                continue;
            }
        };
        let outcome = generated::golden_is_current(root, &program, minor, golden);
        report.outcome(
            format!("{golden} equals what interop/golden generates for kube 1.{minor}"),
            started,
            outcome,
        );
        if minor != 31 && minor != newest {
            continue;
        }
        let started = Instant::now();
        let minor_text = format!("1.{minor}");
        match generated::large_golden_set(root, &program, minor) {
            Ok(dir) => report.outcome(
                format!(
                    "apistore-protobuf tests on interop/golden {} for kube 1.{minor}",
                    generated::LARGE_GOLDEN_ARGS.join(" ")
                ),
                started,
                run_all(
                    build.tests_of(&["apistore-protobuf"]),
                    &[
                        (generated::GOLDEN_DIR_ENV, dir.as_os_str()),
                        (generated::GOLDEN_KUBE_ENV, OsStr::new(&minor_text)),
                    ],
                    &[],
                ),
            ),
            Err(error) => report.outcome(
                format!("generate the larger golden set for kube 1.{minor}"),
                started,
                Err(error),
            ),
        }
    }
}

/// The steps of a command that goes on after a failure: each one's time and outcome,
/// listed at the end.
#[derive(Debug, Default)]
struct Report {
    steps: Vec<(String, Duration, bool)>,
}

impl Report {
    /// Runs one step (as [`run_step`]) and records how it went.
    fn run(&mut self, label: String, command: &mut Command) {
        let started = Instant::now();
        let result = run_step(command);
        if let Err(error) = &result {
            eprintln!("xtask: {error}");
        }
        self.record(label, started.elapsed(), result.is_ok());
    }

    /// Records a step that ran in this process.
    fn outcome(&mut self, label: String, started: Instant, outcome: Result<()>) {
        if let Err(error) = &outcome {
            eprintln!("xtask: {error}");
        }
        self.record(label, started.elapsed(), outcome.is_ok());
    }

    fn record(&mut self, label: String, took: Duration, ok: bool) {
        self.steps.push((label, took, ok));
    }

    /// Prints every step with its time; fails if any step failed.
    fn finish(self, command: &str) -> Result<()> {
        println!("xtask: {command} summary:");
        for (label, took, ok) in &self.steps {
            let outcome = if *ok { "passed" } else { "FAILED" };
            println!("  {outcome:6} {:>6.1} s  {label}", took.as_secs_f64());
        }
        let failed: Vec<String> = self
            .steps
            .into_iter()
            .filter(|(_, _, ok)| !ok)
            .map(|(label, _, _)| label)
            .collect();
        if failed.is_empty() {
            println!("xtask: {command} passed");
            Ok(())
        } else {
            Err(XtaskError::StepsFailed(failed))
        }
    }
}

/// Builds the reference harnesses (`interop/reference`, Go, for kube 1.31 and 1.37) into
/// `target/tools/`; returns them with their kube versions if the differential tests
/// that drive them are in the workspace too. Before either exists there is nothing to
/// build or run.
fn reference_harness(
    root: &Path,
    cargo: &Path,
    go: &Go,
) -> Result<Option<Vec<(&'static str, PathBuf)>>> {
    let module = root.join(REFERENCE_MODULE);
    let has_module = module.join("go.mod").is_file();
    let has_tests = workspace_has_package(cargo, root, INTEROP_PACKAGE)?;
    if !has_module {
        if has_tests {
            return Err(XtaskError::InteropIncomplete(format!(
                "the {INTEROP_PACKAGE} package is in the workspace but the reference \
                 harness it drives ({REFERENCE_MODULE}/go.mod) is not"
            )));
        }
        println!(
            "xtask: neither {REFERENCE_MODULE} nor the {INTEROP_PACKAGE} package is in this \
             tree yet: no differential tests to run"
        );
        return Ok(None);
    }
    let tools = root.join(provision::TOOLS_DIR);
    fs::create_dir_all(&tools)
        .map_err(|e| XtaskError::io(format!("create {}", tools.display()), e))?;
    let mut harnesses = Vec::new();
    for (kube, name, flags) in REFERENCE_HARNESSES {
        let binary = tools.join(name);
        go.build(&module, &binary, &[], flags)?;
        harnesses.push((kube, binary));
    }
    if !has_tests {
        println!(
            "xtask: built the reference harnesses in {}; the {INTEROP_PACKAGE} package is not \
             in the workspace yet, so no differential tests run",
            tools.display()
        );
        return Ok(None);
    }
    Ok(Some(harnesses))
}

fn demo(root: &Path, demo_args: &[String]) -> Result<()> {
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = provision::etcd()?;
    let endpoint = start_etcd(&etcd_bin)?;
    let mut demo = cargo_command(&cargo, root, &protoc);
    demo.env(DEMO_ENDPOINTS_ENV, &endpoint)
        .env(ETCD_ENDPOINTS_ENV, &endpoint)
        .env(ETCD_BIN_ENV, &etcd_bin)
        .args(["run", "--quiet", "-p", "apistore", "--example", "demo"]);
    if !demo_args.is_empty() {
        demo.arg("--").args(demo_args);
    }
    run_step(&mut demo)
}

fn bench(root: &Path, bench_args: &[String], go: bool, mimalloc: bool) -> Result<()> {
    if !root.join("crates").join("apistore-bench").is_dir() {
        return Err(XtaskError::NoBenchCrate);
    }
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let gobench = if go {
        go_tool(root, GOBENCH_MODULE, GOBENCH_BINARY, "its kube section")
    } else {
        None
    };
    let etcdutl = if go {
        go_tool(root, ETCDUTL_MODULE, ETCDUTL_BINARY, "its offline section")
    } else {
        None
    };
    let kine = if go { bench_kine(root) } else { None };
    let etcd37 = if go { bench_etcd37(root) } else { None };
    // The bench's own etcd: the one APISTORE_ETCD_BIN names; else etcd 3.7 when it was
    // built. kube 1.34-1.37 run on etcd 3.5 and 3.6, and an etcd before 3.4.31 and
    // 3.5.13 (Debian's package is 3.4.23) answers no progress requests, so on it
    // neither side's watch cache serves a consistent list, kube 1.37's default.
    let etcd_bin = match &etcd37 {
        Some(etcd37) if std::env::var_os(ETCD_BIN_ENV).is_none() => {
            println!("xtask: the bench's etcd: {}", etcd37.display());
            etcd37.clone()
        }
        _ => provision::etcd()?,
    };
    // The offline section times the command as an operator runs it: in release.
    run_step(cargo_command(&cargo, root, &protoc).args([
        "build",
        "--release",
        "-p",
        "apistore-cli",
    ]))?;
    let cli = root.join("target").join("release").join("apistore");
    // The bench harness starts (and times) its own etcd, and its own kine.
    let mut bench = cargo_command(&cargo, root, &protoc);
    bench.env(ETCD_BIN_ENV, &etcd_bin).env(CLI_BIN_ENV, &cli);
    for (variable, binary) in [
        (GOBENCH_BIN_ENV, &gobench),
        (ETCDUTL_BIN_ENV, &etcdutl),
        (KINE_BIN_ENV, &kine),
        (ETCD37_BIN_ENV, &etcd37),
    ] {
        match binary {
            Some(binary) => bench.env(variable, binary),
            None => bench.env_remove(variable),
        };
    }
    bench.args(["run", "--release", "-p", "apistore-bench"]);
    if mimalloc {
        bench.args(["--features", "mimalloc"]);
    }
    bench.arg("--").args(bench_args);
    run_step(&mut bench)
}

/// Builds one of the bench's Go programs (`module`) into target/tools (Go's own caches
/// make later builds a link at most); `None`, said on the terminal, when there is no Go
/// or the build fails, so the rest of the bench runs without `section`.
fn go_tool(root: &Path, module: &str, binary: &str, section: &str) -> Option<PathBuf> {
    let module_dir = root.join(module);
    if !module_dir.join("go.mod").is_file() {
        return None;
    }
    let go = match Go::find(&format!("the bench's {section}")) {
        Ok(go) => go,
        Err(error) => {
            println!("xtask: {error}; the bench runs without {section}");
            return None;
        }
    };
    let tools = root.join(provision::TOOLS_DIR);
    let binary = tools.join(binary);
    let built = fs::create_dir_all(&tools)
        .map_err(|e| XtaskError::io(format!("create {}", tools.display()), e))
        .and_then(|()| go.build(&module_dir, &binary, &[], &[]));
    match built {
        Ok(()) => Some(binary),
        Err(error) => {
            println!("xtask: building {module} failed ({error}); the bench runs without {section}");
            None
        }
    }
}

/// kine for the bench's kine-sqlite CRUD section (built once, as `cargo xtask test
/// --backend kine-sqlite` builds it); `None`, said on the terminal, without Go or when
/// the build fails, so the rest of the bench still runs.
fn bench_kine(root: &Path) -> Option<PathBuf> {
    let built =
        Go::find("the bench's kine-sqlite section").and_then(|go| kine::provision_kine(root, &go));
    match built {
        Ok(binary) => Some(binary),
        Err(error) => {
            println!("xtask: {error}; the bench runs without its kine-sqlite section");
            None
        }
    }
}

/// etcd 3.7 for the bench's RangeStream section (built once, as `cargo xtask test
/// --etcd 3.7` builds it); `None`, said on the terminal, without Go or when the build
/// fails, so the rest of the bench still runs.
fn bench_etcd37(root: &Path) -> Option<PathBuf> {
    let built = Go::find("the bench's RangeStream section")
        .and_then(|go| etcd_versions::provision_etcd(root, EtcdVersion::V3_7, Some(&go)));
    match built {
        Ok(binary) => Some(binary),
        Err(error) => {
            println!("xtask: {error}; the bench runs without its RangeStream section");
            None
        }
    }
}

fn soak(root: &Path, soak_args: &[String]) -> Result<()> {
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = provision::etcd()?;
    // The soak starts (and restarts) its own three-member cluster.
    let mut soak = cargo_command(&cargo, root, &protoc);
    soak.env(ETCD_BIN_ENV, &etcd_bin).args([
        "run",
        "--release",
        "--quiet",
        "-p",
        "apistore-bench",
        "--bin",
        "soak",
    ]);
    if !soak_args.is_empty() {
        soak.arg("--").args(soak_args);
    }
    run_step(&mut soak)
}

/// `cargo xtask soak-tests`: the build `cargo xtask test` makes, then each of its test
/// binaries (all but the differential tests', or those of `packages` and with the
/// target names in `tests`) run `runs` times,
/// round after round, each round against a fresh etcd as `cargo xtask test` provides,
/// with one busy loop per core running throughout (unless `load` is false). Every run
/// runs, failed or not; the end is a table of runs and failures per binary and
/// `N passed, M failed` counting runs.
fn soak_tests(
    root: &Path,
    runs: u32,
    packages: &[String],
    tests: &[String],
    load: bool,
) -> Result<()> {
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = provision::etcd()?;
    let build = WorkspaceBuild::build(cargo_command(&cargo, root, &protoc))?;
    let names: Vec<&str> = packages.iter().map(String::as_str).collect();
    let binaries: Vec<&Binary> = if names.is_empty() {
        build.tests_except(&[INTEROP_PACKAGE]).collect()
    } else {
        let missing: Vec<String> = names
            .iter()
            .filter(|name| build.tests_of(&[**name]).next().is_none())
            .map(|name| format!("package `{name}` has no test binaries in the workspace"))
            .collect();
        if !missing.is_empty() {
            return Err(XtaskError::StepsFailed(missing));
        }
        build.tests_of(&names).collect()
    };
    let binaries: Vec<&Binary> = binaries
        .into_iter()
        .filter(|binary| tests.is_empty() || tests.contains(&binary.target))
        .collect();
    if binaries.is_empty() {
        return Err(XtaskError::StepsFailed(vec![format!(
            "no test binary is called {}",
            tests.join(" or ")
        )]));
    }
    let log_dir = root.join(soak_tests::LOG_DIR);
    // Dropped on every way out of this function (and gone with the process on Ctrl-C).
    let hogs = load.then(|| Hogs::start(HOG_LIMIT));
    let load_line = hogs.as_ref().map_or_else(
        || "no load".to_owned(),
        |hogs| format!("{} busy loops", hogs.count()),
    );
    println!(
        "xtask: soak-tests: {} test binaries, {runs} runs each, {load_line}",
        binaries.len()
    );
    let mut tally = Tally::new(binaries.iter().copied());
    let started = Instant::now();
    for round in 1..=runs {
        println!("\nxtask: soak-tests round {round} of {runs}");
        let endpoint = start_etcd(&etcd_bin)?;
        let etcd_env = [
            (ETCD_ENDPOINTS_ENV, OsStr::new(&endpoint)),
            (ETCD_BIN_ENV, etcd_bin.as_os_str()),
        ];
        for (index, binary) in binaries.iter().enumerate() {
            let (outcome, took) = soak_tests::run_once(binary, &etcd_env, &log_dir, round)?;
            let verdict = match &outcome {
                soak_tests::Outcome::Passed => "ok",
                soak_tests::Outcome::Failed(_) => "FAILED",
            };
            println!(
                "  {verdict:6} {:>6.1} s  {} ({})",
                took.as_secs_f64(),
                binary.target,
                binary.package
            );
            tally.record(index, outcome, took);
        }
        stop_etcd();
    }
    drop(hogs);
    println!(
        "\nxtask: soak-tests summary ({runs} runs of each binary, {load_line}, {:.0} s):\n{}",
        started.elapsed().as_secs_f64(),
        tally.summary()
    );
    let failures = tally.failures();
    if failures.is_empty() {
        Ok(())
    } else {
        Err(XtaskError::StepsFailed(failures))
    }
}

/// Whether `package` is a member of the workspace, as `cargo metadata` says.
fn workspace_has_package(cargo: &Path, root: &Path, package: &str) -> Result<bool> {
    let mut metadata = Command::new(cargo);
    metadata
        .current_dir(root)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit());
    let line = run::command_line(&metadata);
    let output = metadata.output().map_err(|source| XtaskError::Spawn {
        command: line.clone(),
        source,
    })?;
    if !output.status.success() {
        return Err(XtaskError::StepFailed {
            command: line,
            status: output.status,
        });
    }
    Ok(metadata_names_package(&output.stdout, package))
}

/// Whether `cargo metadata --no-deps` output lists a package called `package`.
fn metadata_names_package(metadata: &[u8], package: &str) -> bool {
    serde_json::from_slice::<serde_json::Value>(metadata)
        .ok()
        .and_then(|value| value.get("packages")?.as_array().cloned())
        .is_some_and(|packages| {
            packages
                .iter()
                .any(|p| p.get("name").and_then(serde_json::Value::as_str) == Some(package))
        })
}

/// A cargo command in the workspace root that builds with the provisioned protoc.
fn cargo_command(cargo: &Path, root: &Path, protoc: &Path) -> Command {
    let mut command = Command::new(cargo);
    command.current_dir(root).env("PROTOC", protoc);
    command
}

/// The cargo that runs us (same toolchain), else `cargo` on PATH.
fn cargo() -> PathBuf {
    env::var_os("CARGO").map_or_else(|| PathBuf::from("cargo"), PathBuf::from)
}

/// The workspace root: xtask's manifest lives one level below it.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interop_package_is_found_in_metadata() {
        let metadata = br#"{"packages":[{"name":"xtask"},{"name":"apistore-interop"}],
            "workspace_members":[]}"#;
        assert!(metadata_names_package(metadata, INTEROP_PACKAGE));
        let without = br#"{"packages":[{"name":"xtask"},{"name":"apistore-interop-x"}]}"#;
        assert!(!metadata_names_package(without, INTEROP_PACKAGE));
        assert!(!metadata_names_package(b"not json", INTEROP_PACKAGE));
    }
}
