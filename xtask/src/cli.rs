//! The command line: `cargo xtask test [--backend B] [--etcd V] | interop [--etcd V]... | demo |
//! bench [--quick] [--only NAME]... [--arm A] [--report PATH|--no-report] [--no-go] | soak | soak-tests [--runs N] [--package P]... [--test T]... [--no-load]
//! | help`.
//!
//! Hand-rolled: a few subcommands do not need an argument-parsing dependency.

use crate::etcd_versions::EtcdVersion;
use crate::kine::Datastore;

/// What `cargo xtask --help` prints.
pub(crate) const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [--backend etcd] [--etcd 3.4|3.5|3.6|3.7] [-- <cargo test args>]
                                cargo fmt --check, clippy -D warnings, then one build
                                of every test binary (cargo test --workspace
                                --all-features --no-run) run, all but apistore-interop's,
                                against a fresh etcd of that version (3.4, Debian's, by
                                default), then the doc tests and the examples; with
                                arguments after --, plain cargo test with them instead
                                (with -p/--package, they replace --workspace)
  test --backend kine-sqlite|kine-postgres
                                needs Go and a C compiler: builds kine (k3s-io/kine,
                                interop/kine) into target/tools/kine-<release>/, the
                                build `test` makes, and runs the etcd3 backend's and
                                the command's test binaries (apistore-etcd3,
                                apistore-cli) against a fresh kine over a new SQLite
                                file, or over a throwaway PostgreSQL cluster (Debian's
                                postgresql: initdb in a temporary directory, served on
                                127.0.0.1 only, removed after; as root, run as the
                                `postgres` account); the tests that do not apply to
                                kine skipped by name and printed with why. No fmt or
                                clippy (they do not depend on the server)
  interop [--etcd 3.4|3.5|3.6|3.7]...
                                needs Go: builds the reference harness
                                (interop/reference) and runs the differential tests
                                (apistore-interop) against each etcd version given (all
                                four by default), and on 3.5, 3.6 and 3.7 also the
                                etcd3 backend's and the fixture's suites
                                (apistore-etcd3, apistore-testing); then, once, on etcd
                                3.6, the tests against kube-apiserver 1.37 and 1.31
                                themselves, built from the Go module proxy the first
                                time (about 20 min) and cached in ~/.cache/apistore/;
                                with all four (the default), also what `test --backend
                                kine-sqlite` and `--backend kine-postgres` run
  demo [-- <demo args>]         run the demo example (crates/apistore/examples/demo.rs)
                                against a fresh etcd
  bench [--quick] [--only NAME]... [--arm apistore|raw|kube] [--report PATH]
        [--no-report] [--no-go] [--allocator system|mimalloc]
                                run the benchmarks (crates/apistore-bench) in release;
                                --quick: shorter runs, docs/benchmarks.md left alone;
                                --only NAME: only the workloads whose names contain
                                NAME (repeatable: `create`, `list whole`, `pods`,
                                `kube`, `kube store-list`...); --arm: one arm only,
                                for profiling (no report); --report PATH: write the
                                report there instead of docs/benchmarks.md;
                                --no-report: write none. The kube section runs the
                                same workloads through k8s.io/apiserver v0.37.2's
                                etcd3 store (interop/gobench, Go, built from the
                                module proxy with Go's caches the first time), and
                                the CRUD workloads again on kine over SQLite (`kine`;
                                kine built as `test --backend kine-sqlite` builds
                                it), and a list of 100,000 objects with and without
                                RangeStream on etcd 3.7 (`range stream`; etcd built
                                as `test --etcd 3.7` builds it); without Go, or with
                                --no-go, the three are left out; --allocator
                                mimalloc: the harness built with mimalloc under its
                                counting allocator instead of the system's (glibc
                                malloc), named in the report's notes
  soak [-- <soak args>]         60 s of mixed load on a three-member etcd cluster with a
                                member restarted midway, then check every write and
                                watch (crates/apistore-etcd3/examples/soak.rs, release;
                                args: --seconds N, --tasks N)
  soak-tests [--runs N] [--package P]... [--test T]... [--no-load]
                                the build `test` makes, then every test binary (all
                                but apistore-interop's, or those of the packages
                                given, or those with the target names given) run N
                                times (default 10), each round against a
                                fresh etcd as `test` runs them, while one busy loop per
                                core loads the machine (threads of xtask, ended when it
                                ends, after 3 hours at most; --no-load: none); a run
                                over 15 minutes is killed and failed. Prints runs and
                                failures per binary and `N passed, M failed` (runs);
                                failed runs' output stays in target/soak-tests/
  kine                          the same as `test --backend kine-sqlite`
  gen-typed                     write apistore-protobuf's typed decoders
                                (src/typed/generated/v1_3X.rs) from its schemas and
                                k8s-openapi's source; `test` fails when they are stale
  help                          print this

Each command provisions what it needs first: protoc (vendored, copied to
target/tools/protoc) and an etcd binary. etcd 3.4 is $APISTORE_ETCD_BIN, `etcd` on
PATH, or `apt-get install etcd-server` when running as root. etcd 3.5, 3.6 and 3.7
are built with Go (`go` on PATH or /usr/local/go/bin/go) from interop/etcd/<version>/ into
target/tools/etcd-<release>/, with Go's own module and build caches (GOMODCACHE,
GOCACHE), which later runs and other clones on the machine reuse.";

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// fmt, clippy and the tests against one etcd version (`None`: the system's, as
    /// provisioned without `--etcd`); the arguments go to `cargo test`.
    Test {
        etcd: Option<EtcdVersion>,
        cargo_test_args: Vec<String>,
    },
    /// The differential tests (and the etcd3 suites on the built etcds) against each
    /// of these etcd versions, in this order, each once.
    Interop { etcd: Vec<EtcdVersion> },
    /// The demo example; the arguments go to it.
    Demo { demo_args: Vec<String> },
    /// The benchmarks: the arguments go to the harness as they are; `go` says
    /// whether to build the Go arm (interop/gobench) and hand it over, `mimalloc`
    /// whether the harness is built with mimalloc under its counting allocator instead
    /// of the system's.
    Bench {
        bench_args: Vec<String>,
        go: bool,
        mimalloc: bool,
    },
    /// The soak; the arguments go to it.
    Soak { soak_args: Vec<String> },
    /// Every test binary (of these packages and with these target names; none: all
    /// but the differential tests') run `runs` times, the machine loaded unless `load`
    /// is false.
    SoakTests {
        runs: u32,
        packages: Vec<String>,
        tests: Vec<String>,
        load: bool,
    },
    /// The etcd3 backend's and the command's tests against kine over this datastore
    /// (`test --backend kine-sqlite|kine-postgres`; `kine` is the first).
    Kine { datastore: Datastore },
    /// Write apistore-protobuf's typed decoders from the schema and k8s-openapi.
    GenTyped,
    /// Print [`USAGE`].
    Help,
}

impl Command {
    /// Parses the arguments after `cargo xtask`.
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let Some((command, rest)) = args.split_first() else {
            return Err("no command given".to_owned());
        };
        match command.as_str() {
            "test" => test(rest),
            "interop" => {
                let (mut etcd, rest) = etcd_flags("interop", rest)?;
                if !rest.is_empty() {
                    return Err(format!(
                        "`interop` takes only --etcd {}, not `{}`",
                        versions_text("|"),
                        rest.join(" ")
                    ));
                }
                if etcd.is_empty() {
                    etcd = EtcdVersion::ALL.to_vec();
                }
                let mut seen = Vec::new();
                etcd.retain(|version| {
                    let first = !seen.contains(version);
                    seen.push(*version);
                    first
                });
                Ok(Self::Interop { etcd })
            }
            "demo" => Ok(Self::Demo {
                demo_args: after_double_dash("demo", rest)?,
            }),
            "bench" => bench(rest),
            "soak" => Ok(Self::Soak {
                soak_args: after_double_dash("soak", rest)?,
            }),
            "soak-tests" => soak_tests(rest),
            // What it has always run: kine over SQLite.
            "kine" if rest.is_empty() => Ok(Self::Kine {
                datastore: Datastore::Sqlite,
            }),
            "kine" => Err(format!(
                "`kine` (`test --backend kine-sqlite`) takes no arguments, not `{}`",
                rest.join(" ")
            )),
            "gen-typed" if rest.is_empty() => Ok(Self::GenTyped),
            "gen-typed" => Err(format!(
                "`gen-typed` takes no arguments, not `{}`",
                rest.join(" ")
            )),
            "help" | "-h" | "--help" => Ok(Self::Help),
            other => Err(format!("unknown command `{other}`")),
        }
    }
}

/// The servers `test --backend` runs the suites against.
const BACKENDS: &str = "etcd, kine-sqlite or kine-postgres";

/// `test [--backend etcd|kine-sqlite|kine-postgres] [--etcd V] [-- <cargo test args>]`,
/// the two flags in either order (`--flag=value` too). `--backend etcd` is the default;
/// the kine backends take neither `--etcd` (kine is the server) nor cargo test
/// arguments (they run fixed packages' binaries, with the tests that do not apply to
/// kine skipped by name).
fn test(mut rest: &[String]) -> Result<Command, String> {
    let mut backend: Option<Option<Datastore>> = None;
    let mut etcd = None;
    while let Some((flag, after)) = rest.split_first() {
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) if name == "--backend" || name == "--etcd" => (name, Some(value)),
            _ => (flag.as_str(), None),
        };
        if name != "--backend" && name != "--etcd" {
            break;
        }
        let (value, after) = match (inline, after.split_first()) {
            (Some(value), _) => (value, after),
            (None, Some((value, after))) => (value.as_str(), after),
            (None, None) if name == "--etcd" => {
                return Err(format!(
                    "`test --etcd` needs a version: {}",
                    versions_text(", ")
                ));
            }
            (None, None) => return Err(format!("`test --backend` needs one of {BACKENDS}")),
        };
        if name == "--etcd" {
            if etcd.is_some() {
                return Err("`test` takes one --etcd; `interop` takes several".to_owned());
            }
            etcd = Some(EtcdVersion::parse(value).ok_or_else(|| {
                format!(
                    "`--etcd {value}`: the etcd versions tested are {}",
                    versions_text(", ")
                )
            })?);
        } else {
            if backend.is_some() {
                return Err("`test` takes one --backend".to_owned());
            }
            backend = Some(match value {
                "etcd" => None,
                "kine-sqlite" => Some(Datastore::Sqlite),
                "kine-postgres" => Some(Datastore::Postgres),
                other => {
                    return Err(format!(
                        "`test --backend {other}`: the backends are {BACKENDS}"
                    ));
                }
            });
        }
        rest = after;
    }
    let cargo_test_args = after_double_dash("test", rest)?;
    let Some(Some(datastore)) = backend else {
        return Ok(Command::Test {
            etcd,
            cargo_test_args,
        });
    };
    let name = datastore.backend_name();
    if let Some(version) = etcd {
        return Err(format!(
            "`test --backend {name} --etcd {version}`: --etcd picks the etcd of \
             `--backend etcd`; on {name} kine is the server"
        ));
    }
    if !cargo_test_args.is_empty() {
        return Err(format!(
            "`test --backend {name}` runs the etcd3 backend's and the command's test \
             binaries whole (less the tests that do not apply to kine), so it takes no \
             cargo test arguments, not `{}`",
            cargo_test_args.join(" ")
        ));
    }
    Ok(Command::Kine { datastore })
}

/// The harness's flags that take a value, and the values `--arm` accepts.
const BENCH_VALUE_FLAGS: [&str; 3] = ["--only", "--arm", "--report"];
/// The arms `--arm` names (the harness also takes `a`, `b`, `go`).
const BENCH_ARMS: [&str; 3] = ["apistore", "raw", "kube"];
/// The allocators `--allocator` names: the system's (the default) and mimalloc.
const BENCH_ALLOCATORS: [&str; 2] = ["system", "mimalloc"];

/// `bench [--quick] [--only NAME]... [--arm A] [--report PATH] [--no-report] [--no-go]
/// [--allocator system|mimalloc]`, in any order (`--flag=value` too): checked here so a
/// typo fails before the release build, then passed on to the harness as given, but for
/// `--no-go` and `--allocator`, which are xtask's (the allocator is the harness's build).
fn bench(mut rest: &[String]) -> Result<Command, String> {
    let mut bench_args = Vec::new();
    let mut go = true;
    let mut mimalloc = false;
    while let Some((flag, after)) = rest.split_first() {
        rest = after;
        match flag.as_str() {
            "--quick" | "--no-report" => {
                bench_args.push(flag.clone());
                continue;
            }
            "--no-go" => {
                go = false;
                continue;
            }
            _ => {}
        }
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) => (name, Some(value.to_owned())),
            None => (flag.as_str(), None),
        };
        if !BENCH_VALUE_FLAGS.contains(&name) && name != "--allocator" {
            return Err(format!(
                "`bench` takes --quick, --only NAME, --arm {}, --report PATH, --no-report, \
                 --no-go and --allocator {}, not `{flag}`",
                BENCH_ARMS.join("|"),
                BENCH_ALLOCATORS.join("|")
            ));
        }
        let value = match inline {
            Some(value) => value,
            None => {
                let (value, after) = rest
                    .split_first()
                    .ok_or_else(|| format!("`bench {name}` needs a value"))?;
                rest = after;
                value.clone()
            }
        };
        if value.is_empty() {
            return Err(format!("`bench {name}` needs a value"));
        }
        if name == "--allocator" {
            // xtask's own: the harness's build, not one of its options.
            mimalloc = match value.as_str() {
                "system" => false,
                "mimalloc" => true,
                _ => {
                    return Err(format!(
                        "`bench --allocator {value}`: the allocators are {}",
                        BENCH_ALLOCATORS.join(", ")
                    ));
                }
            };
            continue;
        }
        if name == "--arm" && !BENCH_ARMS.contains(&value.as_str()) {
            return Err(format!(
                "`bench --arm {value}`: the arms are {}",
                BENCH_ARMS.join(", ")
            ));
        }
        bench_args.push(name.to_owned());
        bench_args.push(value);
    }
    if !go
        && bench_args
            .windows(2)
            .any(|w| w[0] == "--arm" && w[1] == "kube")
    {
        return Err("`bench --arm kube` runs the Go arm, which --no-go leaves out".to_owned());
    }
    Ok(Command::Bench {
        bench_args,
        go,
        mimalloc,
    })
}

/// The default number of runs of each test binary in `soak-tests`.
pub(crate) const DEFAULT_SOAK_RUNS: u32 = 10;

/// `soak-tests [--runs N] [--package P]... [--test T]... [--no-load]`, the flags in any
/// order (`-p P`, `--runs=N`, `--package=P` and `--test=T` too).
fn soak_tests(mut rest: &[String]) -> Result<Command, String> {
    let mut runs = DEFAULT_SOAK_RUNS;
    let mut packages = Vec::new();
    let mut tests = Vec::new();
    let mut load = true;
    while let Some((flag, after)) = rest.split_first() {
        let (name, inline) = match flag.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value)),
            _ => (flag.as_str(), None),
        };
        if name == "--no-load" && inline.is_none() {
            load = false;
            rest = after;
            continue;
        }
        if !matches!(name, "--runs" | "--package" | "-p" | "--test") {
            return Err(format!(
                "`soak-tests` takes --runs N, --package P and --test T (both repeatable) \
                 and --no-load, not `{flag}`"
            ));
        }
        let (value, after) = match (inline, after.split_first()) {
            (Some(value), _) => (value, after),
            (None, Some((value, after))) => (value.as_str(), after),
            (None, None) => return Err(format!("`soak-tests {name}` needs a value")),
        };
        if name == "--runs" {
            runs = value
                .parse()
                .ok()
                .filter(|runs| *runs > 0)
                .ok_or_else(|| format!("`soak-tests --runs {value}`: give a number above 0"))?;
        } else if name == "--test" {
            tests.push(value.to_owned());
        } else {
            packages.push(value.to_owned());
        }
        rest = after;
    }
    Ok(Command::SoakTests {
        runs,
        packages,
        tests,
        load,
    })
}

/// The leading `--etcd V` (or `--etcd=V`) flags, and the arguments after them.
fn etcd_flags<'a>(
    command: &str,
    mut rest: &'a [String],
) -> Result<(Vec<EtcdVersion>, &'a [String]), String> {
    let mut versions = Vec::new();
    loop {
        let (value, after) = match rest {
            [flag, value, after @ ..] if flag == "--etcd" => (value.as_str(), after),
            [flag] if flag == "--etcd" => {
                return Err(format!(
                    "`{command} --etcd` needs a version: {}",
                    versions_text(", ")
                ));
            }
            [flag, after @ ..] if flag.starts_with("--etcd=") => (&flag["--etcd=".len()..], after),
            _ => return Ok((versions, rest)),
        };
        let version = EtcdVersion::parse(value).ok_or_else(|| {
            format!(
                "`--etcd {value}`: the etcd versions tested are {}",
                versions_text(", ")
            )
        })?;
        versions.push(version);
        rest = after;
    }
}

/// Every etcd line `--etcd` takes, oldest first, joined with `separator`: error messages
/// name them from [`EtcdVersion::ALL`], so a new line cannot be left out of them.
fn versions_text(separator: &str) -> String {
    EtcdVersion::ALL.map(EtcdVersion::as_str).join(separator)
}

/// The arguments after a leading `--`; anything else is a mistake worth reporting.
fn after_double_dash(command: &str, rest: &[String]) -> Result<Vec<String>, String> {
    match rest.split_first() {
        None => Ok(Vec::new()),
        Some((dash, passed)) if dash == "--" => Ok(passed.to_vec()),
        Some(_) => Err(format!(
            "`{command}` passes arguments on only after `--`, as in \
             `cargo xtask {command} -- {}`",
            rest.join(" ")
        )),
    }
}

/// Whether `cargo test` arguments pick packages themselves (before any `--` meant for
/// the test binaries), so `--workspace` must not be added.
pub(crate) fn selects_packages(cargo_test_args: &[String]) -> bool {
    cargo_test_args
        .iter()
        .take_while(|arg| *arg != "--")
        .any(|arg| {
            arg == "-p"
                || arg == "--package"
                || arg.starts_with("--package=")
                || (arg.starts_with("-p") && arg.len() > 2)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Command, String> {
        Command::parse(&args.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn commands_parse() {
        assert_eq!(
            parse(&["test"]),
            Ok(Command::Test {
                etcd: None,
                cargo_test_args: vec![]
            })
        );
        assert_eq!(
            parse(&["test", "--", "-p", "x", "--", "--nocapture"]),
            Ok(Command::Test {
                etcd: None,
                cargo_test_args: vec!["-p".into(), "x".into(), "--".into(), "--nocapture".into()]
            })
        );
        assert_eq!(
            parse(&["test", "--etcd", "3.6", "--", "-p", "x"]),
            Ok(Command::Test {
                etcd: Some(EtcdVersion::V3_6),
                cargo_test_args: vec!["-p".into(), "x".into()]
            })
        );
        assert_eq!(
            parse(&["test", "--etcd", "3.7"]),
            Ok(Command::Test {
                etcd: Some(EtcdVersion::V3_7),
                cargo_test_args: vec![]
            })
        );
        assert_eq!(
            parse(&["test", "--etcd=3.4"]),
            Ok(Command::Test {
                etcd: Some(EtcdVersion::V3_4),
                cargo_test_args: vec![]
            })
        );
        assert_eq!(
            parse(&["interop"]),
            Ok(Command::Interop {
                etcd: EtcdVersion::ALL.to_vec()
            })
        );
        assert_eq!(
            parse(&["interop", "--etcd", "3.6", "--etcd=3.5", "--etcd", "3.6"]),
            Ok(Command::Interop {
                etcd: vec![EtcdVersion::V3_6, EtcdVersion::V3_5]
            })
        );
        assert_eq!(
            parse(&["interop", "--etcd=3.7", "--etcd", "3.4"]),
            Ok(Command::Interop {
                etcd: vec![EtcdVersion::V3_7, EtcdVersion::V3_4]
            })
        );
        assert_eq!(parse(&["demo"]), Ok(Command::Demo { demo_args: vec![] }));
        assert_eq!(parse(&["soak"]), Ok(Command::Soak { soak_args: vec![] }));
        assert_eq!(
            parse(&["soak", "--", "--seconds", "10"]),
            Ok(Command::Soak {
                soak_args: vec!["--seconds".into(), "10".into()]
            })
        );
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
        assert_eq!(
            parse(&["soak-tests"]),
            Ok(Command::SoakTests {
                runs: DEFAULT_SOAK_RUNS,
                packages: vec![],
                tests: vec![],
                load: true
            })
        );
        assert_eq!(
            parse(&[
                "soak-tests",
                "--package",
                "a",
                "--runs=3",
                "-p",
                "b",
                "--no-load",
                "--test",
                "t",
                "--package=c"
            ]),
            Ok(Command::SoakTests {
                runs: 3,
                packages: vec!["a".into(), "b".into(), "c".into()],
                tests: vec!["t".into()],
                load: false
            })
        );
    }

    #[test]
    fn mistakes_are_reported() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["tset"]).unwrap_err().contains("tset"));
        assert!(parse(&["test", "-p", "x"]).unwrap_err().contains("--"));
        assert!(parse(&["bench", "--slow"]).is_err());
        assert!(parse(&["test", "--etcd"]).unwrap_err().contains("3.5"));
        assert!(parse(&["test", "--etcd"]).unwrap_err().contains("3.7"));
        assert!(
            parse(&["test", "--etcd", "3.8"])
                .unwrap_err()
                .contains("3.4, 3.5, 3.6, 3.7")
        );
        assert!(
            parse(&["interop", "x"])
                .unwrap_err()
                .contains("--etcd 3.4|3.5|3.6|3.7")
        );
        assert!(parse(&["test", "--etcd", "3.5", "--etcd", "3.6"]).is_err());
        assert!(
            parse(&["test", "--etcd", "3.5", "-p", "x"])
                .unwrap_err()
                .contains("--")
        );
        assert!(parse(&["interop", "--etcd", "3.3"]).is_err());
        assert!(parse(&["interop", "--", "x"]).is_err());
        assert!(
            parse(&["soak", "--seconds", "10"])
                .unwrap_err()
                .contains("--")
        );
        assert!(parse(&["soak-tests", "--runs", "0"]).is_err());
        assert!(parse(&["soak-tests", "--runs", "x"]).is_err());
        assert!(parse(&["soak-tests", "--runs"]).is_err());
        assert!(
            parse(&["soak-tests", "--bins", "x"])
                .unwrap_err()
                .contains("--bins")
        );
    }

    #[test]
    fn bench_passes_the_harness_options_on() {
        let built = |args: &[&str], go, mimalloc| {
            Ok(Command::Bench {
                bench_args: args.iter().map(|s| (*s).to_owned()).collect(),
                go,
                mimalloc,
            })
        };
        let bench = |args: &[&str], go| built(args, go, false);
        assert_eq!(parse(&["bench"]), bench(&[], true));
        assert_eq!(parse(&["bench", "--quick"]), bench(&["--quick"], true));
        assert_eq!(
            parse(&[
                "bench",
                "--only",
                "get, 16",
                "--quick",
                "--only=kube",
                "--arm",
                "kube",
                "--report=/tmp/r.md"
            ]),
            bench(
                &[
                    "--only",
                    "get, 16",
                    "--quick",
                    "--only",
                    "kube",
                    "--arm",
                    "kube",
                    "--report",
                    "/tmp/r.md"
                ],
                true
            )
        );
        assert_eq!(
            parse(&["bench", "--no-go", "--no-report", "--arm=raw"]),
            bench(&["--no-report", "--arm", "raw"], false)
        );
        // The allocator is the harness's build, not one of its options.
        let with_mimalloc = |args: &[&str]| built(args, true, true);
        assert_eq!(
            parse(&["bench", "--allocator", "mimalloc", "--only", "kube"]),
            with_mimalloc(&["--only", "kube"])
        );
        assert_eq!(
            parse(&["bench", "--quick", "--allocator=mimalloc"]),
            with_mimalloc(&["--quick"])
        );
        assert_eq!(
            parse(&["bench", "--allocator=mimalloc", "--allocator", "system"]),
            bench(&[], true)
        );
    }

    #[test]
    fn bench_mistakes_are_reported() {
        assert!(
            parse(&["bench", "--allocator", "jemalloc"])
                .unwrap_err()
                .contains("the allocators are system, mimalloc")
        );
        for missing in [&["bench", "--allocator"][..], &["bench", "--allocator="]] {
            assert!(parse(missing).unwrap_err().contains("needs a value"));
        }
        assert!(parse(&["bench", "--slow"]).unwrap_err().contains("--slow"));
        assert!(
            parse(&["bench", "--only"])
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse(&["bench", "--only="])
                .unwrap_err()
                .contains("needs a value")
        );
        assert!(
            parse(&["bench", "--arm", "go2"])
                .unwrap_err()
                .contains("go2")
        );
        assert!(parse(&["bench", "--quick=yes"]).is_err());
        assert!(
            parse(&["bench", "--no-go", "--arm", "kube"])
                .unwrap_err()
                .contains("--no-go")
        );
    }

    #[test]
    fn kine_takes_no_arguments() {
        assert_eq!(
            parse(&["kine"]),
            Ok(Command::Kine {
                datastore: Datastore::Sqlite
            })
        );
        assert!(
            parse(&["kine", "--etcd", "3.6"])
                .unwrap_err()
                .contains("--etcd")
        );
    }

    #[test]
    fn the_backend_picks_the_server() {
        let kine = |datastore| Ok(Command::Kine { datastore });
        assert_eq!(
            parse(&["test", "--backend", "kine-sqlite"]),
            kine(Datastore::Sqlite)
        );
        assert_eq!(
            parse(&["test", "--backend", "kine-sqlite"]),
            parse(&["kine"])
        );
        assert_eq!(
            parse(&["test", "--backend=kine-postgres"]),
            kine(Datastore::Postgres)
        );
        assert_eq!(
            parse(&["test", "--backend", "etcd"]),
            Ok(Command::Test {
                etcd: None,
                cargo_test_args: vec![]
            })
        );
        // Either order, and the cargo test arguments after.
        for args in [
            [
                "test",
                "--backend",
                "etcd",
                "--etcd",
                "3.5",
                "--",
                "-p",
                "x",
            ],
            [
                "test",
                "--etcd",
                "3.5",
                "--backend",
                "etcd",
                "--",
                "-p",
                "x",
            ],
        ] {
            assert_eq!(
                parse(&args),
                Ok(Command::Test {
                    etcd: Some(EtcdVersion::V3_5),
                    cargo_test_args: vec!["-p".into(), "x".into()]
                }),
                "{args:?}"
            );
        }
    }

    #[test]
    fn backend_mistakes_are_reported() {
        let error = |args: &[&str]| parse(args).unwrap_err();
        assert!(error(&["test", "--backend"]).contains("kine-postgres"));
        assert!(error(&["test", "--backend", "kine"]).contains("kine-sqlite"));
        assert!(error(&["test", "--backend", "kine-mysql"]).contains("kine-mysql"));
        assert!(error(&["test", "--backend", "etcd", "--backend", "etcd"]).contains("one"));
        assert!(error(&["test", "--backend", "kine-postgres", "--etcd", "3.6"]).contains("--etcd"));
        assert!(error(&["test", "--etcd=3.6", "--backend=kine-sqlite"]).contains("--etcd"));
        assert!(error(&["test", "--backend", "kine-sqlite", "--", "-p", "x"]).contains("-p x"));
        assert!(error(&["test", "--backend", "kine-sqlite", "-p", "x"]).contains("--"));
    }

    #[test]
    fn package_selection_is_detected() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(selects_packages(&args(&["-p", "x"])));
        assert!(selects_packages(&args(&["-px"])));
        assert!(selects_packages(&args(&["--package=x"])));
        assert!(!selects_packages(&args(&["some_test_name"])));
        assert!(!selects_packages(&args(&["--", "-p"])));
    }
}
