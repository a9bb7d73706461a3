//! Developer commands: `cargo xtask test | demo | bench [--quick] | soak`.
//!
//! Each command provisions what it needs (protoc, an etcd binary), starts a real etcd
//! on a free loopback port in a temporary directory when the command needs one, runs
//! cargo, and stops etcd afterwards, on Ctrl-C too. CI runs `cargo xtask test` (see
//! `.ci/run`).

mod cli;
mod error;
mod provision;
mod run;

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::{Mutex, PoisonError};

use apistore_testing::etcd::{ETCD_BIN_ENV, ETCD_ENDPOINTS_ENV, EtcdOptions, EtcdServer};

use crate::cli::USAGE;
use crate::error::{Result, XtaskError};
use crate::run::run_step;

/// The etcd this command started, where the Ctrl-C handler can reach it.
static ETCD: Mutex<Option<EtcdServer>> = Mutex::new(None);

/// Environment variable the demo example reads its endpoints from.
const DEMO_ENDPOINTS_ENV: &str = "APISTORE_ENDPOINTS";

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

/// Starts etcd for the rest of this command; returns its client URL.
fn start_etcd() -> Result<String> {
    let server = EtcdServer::start(EtcdOptions {
        name: "apistore-xtask".to_owned(),
        ..EtcdOptions::default()
    })?;
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
        cli::Command::Test { cargo_test_args } => test(&root, &cargo_test_args),
        cli::Command::Demo { demo_args } => demo(&root, &demo_args),
        cli::Command::Bench { quick } => bench(&root, quick),
        cli::Command::Soak { soak_args } => soak(&root, &soak_args),
        cli::Command::Help => Ok(()),
    }
}

fn test(root: &Path, cargo_test_args: &[String]) -> Result<()> {
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = provision::etcd()?;
    provision::cargo_components(&cargo)?;

    run_step(
        Command::new(&cargo)
            .current_dir(root)
            .args(["fmt", "--all", "--", "--check"]),
    )?;
    run_step(cargo_command(&cargo, root, &protoc).args([
        "clippy",
        "--workspace",
        "--all-targets",
        "--all-features",
        "--",
        "-D",
        "warnings",
    ]))?;

    let endpoint = start_etcd()?;
    let mut cargo_test = cargo_command(&cargo, root, &protoc);
    cargo_test
        .env(ETCD_ENDPOINTS_ENV, &endpoint)
        .env(ETCD_BIN_ENV, &etcd_bin)
        .arg("test");
    let whole_suite = !cli::selects_packages(cargo_test_args);
    if whole_suite {
        cargo_test.args(["--workspace", "--all-features"]);
    }
    cargo_test.args(cargo_test_args);
    run_step(&mut cargo_test)?;
    if whole_suite {
        // The facade's examples are documentation that must keep working: run each
        // against the test etcd.
        for example in EXAMPLES {
            run_step(
                cargo_command(&cargo, root, &protoc)
                    .env(DEMO_ENDPOINTS_ENV, &endpoint)
                    .args([
                        "run",
                        "--quiet",
                        "-p",
                        "apistore",
                        "--all-features",
                        "--example",
                    ])
                    .arg(example),
            )?;
        }
    }
    println!("xtask: fmt, clippy, tests and examples passed");
    Ok(())
}

/// The facade's examples `cargo xtask test` runs (the demo has its own command).
const EXAMPLES: [&str; 4] = ["typed_configmap", "paging", "rotation", "controller"];

fn demo(root: &Path, demo_args: &[String]) -> Result<()> {
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = provision::etcd()?;
    let endpoint = start_etcd()?;
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

fn bench(root: &Path, quick: bool) -> Result<()> {
    if !root.join("crates").join("apistore-bench").is_dir() {
        return Err(XtaskError::NoBenchCrate);
    }
    let cargo = cargo();
    let protoc = provision::protoc(root)?;
    let etcd_bin = provision::etcd()?;
    // The bench harness starts (and times) its own etcd.
    let mut bench = cargo_command(&cargo, root, &protoc);
    bench
        .env(ETCD_BIN_ENV, &etcd_bin)
        .args(["run", "--release", "-p", "apistore-bench", "--"]);
    if quick {
        bench.arg("--quick");
    }
    run_step(&mut bench)
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
        "apistore-etcd3",
        "--example",
        "soak",
    ]);
    if !soak_args.is_empty() {
        soak.arg("--").args(soak_args);
    }
    run_step(&mut soak)
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
