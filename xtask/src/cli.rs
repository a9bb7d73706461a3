//! The command line: `cargo xtask test | demo | bench [--quick] | soak | help`.
//!
//! Hand-rolled: three subcommands do not need an argument-parsing dependency.

/// What `cargo xtask --help` prints.
pub(crate) const USAGE: &str = "\
usage: cargo xtask <command>

commands:
  test [-- <cargo test args>]   cargo fmt --check, clippy -D warnings, then cargo test
                                --workspace against a fresh etcd; arguments after --
                                go to cargo test (with -p/--package, they replace
                                --workspace)
  demo [-- <demo args>]         run the demo example (crates/apistore/examples/demo.rs)
                                against a fresh etcd
  bench [--quick]               run the benchmarks (crates/apistore-bench) in release
  soak [-- <soak args>]         60 s of mixed load on a three-member etcd cluster with a
                                member restarted midway, then check every write and
                                watch (crates/apistore-etcd3/examples/soak.rs, release;
                                args: --seconds N, --tasks N)
  help                          print this

Each command provisions what it needs first: protoc (vendored, copied to
target/tools/protoc) and an etcd binary ($APISTORE_ETCD_BIN, `etcd` on PATH, or
`apt-get install etcd-server` when running as root).";

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// fmt, clippy and the tests; the arguments go to `cargo test`.
    Test { cargo_test_args: Vec<String> },
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
            "test" => Ok(Self::Test {
                cargo_test_args: after_double_dash("test", rest)?,
            }),
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
                cargo_test_args: vec![]
            })
        );
        assert_eq!(
            parse(&["test", "--", "-p", "x", "--", "--nocapture"]),
            Ok(Command::Test {
                cargo_test_args: vec!["-p".into(), "x".into(), "--".into(), "--nocapture".into()]
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
