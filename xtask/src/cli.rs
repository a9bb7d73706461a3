//! The command line: `cargo xtask test [--etcd V] | interop [--etcd V]... | demo |
//! bench [--quick] | soak | help`.
//!
//! Hand-rolled: a few subcommands do not need an argument-parsing dependency.

use crate::etcd_versions::EtcdVersion;

/// What `cargo xtask --help` prints.
pub(crate) const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [--etcd 3.4|3.5|3.6] [-- <cargo test args>]
                                cargo fmt --check, clippy -D warnings, then one build
                                of every test binary (cargo test --workspace
                                --all-features --no-run) run, all but apistore-interop's,
                                against a fresh etcd of that version (3.4, Debian's, by
                                default), then the doc tests and the examples; with
                                arguments after --, plain cargo test with them instead
                                (with -p/--package, they replace --workspace)
  interop [--etcd 3.4|3.5|3.6]...
                                needs Go: builds the reference harness
                                (interop/reference) and runs the differential tests
                                (apistore-interop) against each etcd version given (all
                                three by default), and on 3.5 and 3.6 also the etcd3
                                backend's and the fixture's suites (apistore-etcd3,
                                apistore-testing); then, once, on etcd 3.6, the tests
                                against kube-apiserver 1.37 and 1.31 themselves,
                                built from the Go module proxy the first time (about
                                20 min) and cached in ~/.cache/apistore/
  demo [-- <demo args>]         run the demo example (crates/apistore/examples/demo.rs)
                                against a fresh etcd
  bench [--quick]               run the benchmarks (crates/apistore-bench) in release
  soak [-- <soak args>]         60 s of mixed load on a three-member etcd cluster with a
                                member restarted midway, then check every write and
                                watch (crates/apistore-etcd3/examples/soak.rs, release;
                                args: --seconds N, --tasks N)
  help                          print this

Each command provisions what it needs first: protoc (vendored, copied to
target/tools/protoc) and an etcd binary. etcd 3.4 is $APISTORE_ETCD_BIN, `etcd` on
PATH, or `apt-get install etcd-server` when running as root. etcd 3.5 and 3.6 are
built with Go (`go` on PATH or /usr/local/go/bin/go) from interop/etcd/<version>/ into
target/tools/etcd-<release>/, with the Go module and build caches in target/go/.";

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
    /// The benchmarks.
    Bench { quick: bool },
    /// The soak; the arguments go to it.
    Soak { soak_args: Vec<String> },
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
            "test" => {
                let (etcd, rest) = etcd_flags("test", rest)?;
                if etcd.len() > 1 {
                    return Err("`test` takes one --etcd; `interop` takes several".to_owned());
                }
                Ok(Self::Test {
                    etcd: etcd.first().copied(),
                    cargo_test_args: after_double_dash("test", rest)?,
                })
            }
            "interop" => {
                let (mut etcd, rest) = etcd_flags("interop", rest)?;
                if !rest.is_empty() {
                    return Err(format!(
                        "`interop` takes only --etcd 3.4|3.5|3.6, not `{}`",
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
            "bench" => match rest {
                [] => Ok(Self::Bench { quick: false }),
                [flag] if flag == "--quick" => Ok(Self::Bench { quick: true }),
                _ => Err(format!(
                    "`bench` takes only --quick, not `{}`",
                    rest.join(" ")
                )),
            },
            "soak" => Ok(Self::Soak {
                soak_args: after_double_dash("soak", rest)?,
            }),
            "help" | "-h" | "--help" => Ok(Self::Help),
            other => Err(format!("unknown command `{other}`")),
        }
    }
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
                    "`{command} --etcd` needs a version: 3.4, 3.5 or 3.6"
                ));
            }
            [flag, after @ ..] if flag.starts_with("--etcd=") => (&flag["--etcd=".len()..], after),
            _ => return Ok((versions, rest)),
        };
        let version = EtcdVersion::parse(value).ok_or_else(|| {
            format!("`--etcd {value}`: the etcd versions tested are 3.4, 3.5 and 3.6")
        })?;
        versions.push(version);
        rest = after;
    }
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
        assert_eq!(parse(&["demo"]), Ok(Command::Demo { demo_args: vec![] }));
        assert_eq!(parse(&["bench"]), Ok(Command::Bench { quick: false }));
        assert_eq!(
            parse(&["bench", "--quick"]),
            Ok(Command::Bench { quick: true })
        );
        assert_eq!(parse(&["soak"]), Ok(Command::Soak { soak_args: vec![] }));
        assert_eq!(
            parse(&["soak", "--", "--seconds", "10"]),
            Ok(Command::Soak {
                soak_args: vec!["--seconds".into(), "10".into()]
            })
        );
        assert_eq!(parse(&["--help"]), Ok(Command::Help));
    }

    #[test]
    fn mistakes_are_reported() {
        assert!(parse(&[]).is_err());
        assert!(parse(&["tset"]).unwrap_err().contains("tset"));
        assert!(parse(&["test", "-p", "x"]).unwrap_err().contains("--"));
        assert!(parse(&["bench", "--slow"]).is_err());
        assert!(parse(&["test", "--etcd"]).unwrap_err().contains("3.5"));
        assert!(
            parse(&["test", "--etcd", "3.7"])
                .unwrap_err()
                .contains("3.7")
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
