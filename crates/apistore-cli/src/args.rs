//! The command line, as clap sees it.

use std::path::PathBuf;

use clap::builder::TypedValueParser as _;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Read, write, list and watch Kubernetes-style API objects in etcd, exactly as
/// kube-apiserver stores them.
///
/// Keys are relative to the prefix: `configmaps/default/cm1` is stored at
/// `/registry/configmaps/default/cm1`. Exit codes: 0 success, 1 a storage error (one
/// line on stderr starting with kube-apiserver's reason), 2 a usage error.
#[derive(Debug, Parser)]
#[command(name = "apistore", version, propagate_version = true)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes, before or after the subcommand. Listed under their
/// own heading, after a subcommand's own options, in every `--help`.
#[derive(Debug, Args)]
#[command(next_help_heading = "Global options")]
pub(crate) struct GlobalArgs {
    /// etcd endpoints, comma-separated.
    #[arg(
        long,
        global = true,
        env = "APISTORE_ENDPOINTS",
        default_value = "http://127.0.0.1:2379",
        value_delimiter = ','
    )]
    pub(crate) endpoints: Vec<String>,
    /// Read an etcd snapshot file (`etcdctl snapshot save`, `etcdutl`) or a member's
    /// data directory or `member/snap/db` instead of etcd: no etcd process, nothing
    /// written. For `get` (`--rv N` reads the object as of revision N), `list`, `keys`,
    /// `count`, `history` and `analyze`; `--endpoints` is then not used.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) snapshot: Option<PathBuf>,
    /// The namespace of the keys given, as kubectl's -n: `get cm/cm1 -n kube-system` is
    /// `configmaps/kube-system/cm1`, `list cm -n kube-system` lists that namespace. Keys
    /// of cluster-scoped resources are left as they are (as kubectl ignores -n for
    /// them); a key naming another namespace is refused. Not for `keys` and `analyze`,
    /// which take raw prefixes.
    #[arg(short = 'n', long, global = true, value_name = "NAMESPACE")]
    pub(crate) namespace: Option<String>,
    /// The key prefix (kube-apiserver's --etcd-prefix).
    #[arg(long, global = true, default_value = "/registry")]
    pub(crate) prefix: String,
    /// Output format. Without -o: YAML for get, list, create, update, delete and
    /// decode; one JSON line per event for watch; the bare number for count; a table
    /// for keys, history and analyze; a `name: value` summary for restore and
    /// encryption rewrite (json or yaml: one object).
    #[arg(short = 'o', long = "output", global = true, value_enum)]
    pub(crate) output: Option<OutputFormat>,
    /// Seconds one etcd request may take.
    #[arg(long, global = true, default_value_t = 30)]
    pub(crate) request_timeout: u64,
    /// An EncryptionConfiguration file (kube-apiserver's --encryption-provider-config).
    /// A key's resource comes from kube's storage layout: `secrets/default/s1` is a
    /// `secrets` object, `deployments/default/d1` a `deployments.apps` one,
    /// `example.com/widgets/default/w1` a `widgets.example.com` one; resources the file
    /// does not cover are stored unencrypted.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) encryption_config: Option<PathBuf>,
    /// The resource of the keys given (`deployments.apps`, `widgets.example.com`), for
    /// keys kube's storage layout cannot place. Chooses the encryption configuration's
    /// providers and the encoding.
    #[arg(long, global = true, value_name = "GROUP_RESOURCE")]
    pub(crate) resource: Option<String>,
    /// The encoding of writes (kube-apiserver's --storage-media-type). Default: what
    /// kube-apiserver writes for the resource (protobuf for built-ins, JSON for custom
    /// resources). Reads take either.
    #[arg(long, global = true, value_name = "TYPE", value_parser = ["json", "protobuf", "application/json", "application/vnd.kubernetes.protobuf"])]
    pub(crate) storage_media_type: Option<String>,
    /// The kube version of the cluster (MAJOR.MINOR, 1.31 to 1.37; default the newest):
    /// its storage layout and protobuf schema. Fields of a newer kube are named on
    /// stderr when a read cannot show them, and kept by updates.
    #[arg(
        long,
        global = true,
        env = "APISTORE_KUBE_VERSION",
        value_name = "VERSION"
    )]
    pub(crate) kube_version: Option<String>,
    /// Write the Prometheus text exposition of what this command did to FILE when it
    /// ends: failed or not, and when stopped with Ctrl-C (SIGINT, exit code 130).
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) metrics_out: Option<PathBuf>,
    /// The CA certificate (PEM) etcd's certificate must be signed by. Turns TLS on: the
    /// endpoints must be `https://`.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) cacert: Option<PathBuf>,
    /// A client certificate (PEM) for mutual TLS, with --key.
    #[arg(long = "cert", global = true, value_name = "FILE")]
    pub(crate) client_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM), with --cert.
    #[arg(long = "key", global = true, value_name = "FILE")]
    pub(crate) client_key: Option<PathBuf>,
    /// The etcd user, when etcd has authentication on (with a password).
    #[arg(long, global = true, env = "APISTORE_USER")]
    pub(crate) user: Option<String>,
    /// The etcd user's password. Prefer the environment variable: a command line is
    /// visible to other users of the machine.
    #[arg(long, global = true, env = "APISTORE_PASSWORD", hide_env_values = true)]
    pub(crate) password: Option<Password>,
}

/// A password, shown nowhere: its `Debug` output is `<redacted>`.
#[derive(Clone)]
pub(crate) struct Password(String);

impl Password {
    /// The password itself, to hand to the etcd client.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Password {
    fn from(password: String) -> Self {
        Self(password)
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// How objects are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OutputFormat {
    /// JSON, pretty-printed.
    Json,
    /// YAML.
    Yaml,
    /// A table: name, namespace, resourceVersion, creation time, kind, age.
    Table,
    /// `<resource>/<name>` per object, as `kubectl get -o name`.
    Name,
}

impl GlobalArgs {
    /// The output format asked for, YAML when none was.
    pub(crate) fn format(&self) -> OutputFormat {
        self.output.unwrap_or(OutputFormat::Yaml)
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create an object from a JSON or YAML file and print it with its resourceVersion.
    #[command(after_help = "Example:\n  apistore create configmaps/default/cm1 -f cm.yaml")]
    Create {
        /// The key, relative to the prefix.
        key: String,
        /// The file to read (`-` for stdin).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        /// Check and print the object that would be written; write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print the object under a key.
    #[command(
        after_help = "Examples:\n  apistore get configmaps/default/cm1 -o json\n  apistore get secrets/default/s1 --raw\n  apistore get configmaps/default/cm1 --rv 1234 --exact"
    )]
    Get {
        /// The key, relative to the prefix.
        key: String,
        /// The minimum resourceVersion the answer must reflect (with --exact: the
        /// revision to read the object at).
        #[arg(long = "rv")]
        resource_version: Option<String>,
        /// Read the object as it was at exactly --rv (it must not be compacted yet).
        #[arg(long, requires = "resource_version")]
        exact: bool,
        /// Print the stored bytes, neither decrypted nor decoded: a value that is
        /// printable UTF-8 text (a JSON value) as it is, so that `| jq` reads it; any
        /// other escaped on one line (printable ASCII as is, other bytes as `\xNN`).
        #[arg(long)]
        raw: bool,
        /// Write the stored bytes, as they are, to FILE (`-o` does not apply).
        #[arg(long, value_name = "FILE")]
        raw_out: Option<PathBuf>,
    },
    /// List the keys under a prefix (every key when none is given) with etcd's metadata:
    /// mod and create revision, version, lease, size and encoding (`json`, `protobuf`,
    /// or `<provider>:<key>` when encrypted, read from the value's prefix without
    /// decrypting). A table by default; `-o json`/`yaml` a list of objects, `-o name` the
    /// keys.
    #[command(after_help = "Examples:\n  apistore keys secrets/default\n  apistore keys -o json")]
    Keys {
        /// The prefix, relative to the store prefix.
        #[arg(value_name = "PREFIX")]
        key_prefix: Option<String>,
        /// The revision to read at (0: the latest).
        #[arg(long = "rv", default_value_t = 0)]
        revision: i64,
    },
    /// Replace an object by guaranteed update. A resourceVersion in the file must match
    /// the stored one (as with `kubectl replace`); without one the update is
    /// unconditional.
    #[command(
        after_help = "Example:\n  apistore update configmaps/default/cm1 -f cm.yaml --precondition-uid 1234"
    )]
    Update {
        /// The key, relative to the prefix.
        key: String,
        /// The file to read (`-` for stdin).
        #[arg(short = 'f', long = "filename")]
        file: PathBuf,
        #[command(flatten)]
        preconditions: PreconditionArgs,
        /// Check the preconditions and print the object that would be written; write
        /// nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Delete the object under a key and print its last state.
    #[command(
        after_help = "Example:\n  apistore delete configmaps/default/cm1 --precondition-rv 42"
    )]
    Delete {
        /// The key, relative to the prefix.
        key: String,
        #[command(flatten)]
        preconditions: PreconditionArgs,
        /// Check the preconditions and print the object that would be deleted; delete
        /// nothing.
        #[arg(long)]
        dry_run: bool,
        /// Delete the stored value without reading it, for a value that cannot be
        /// decrypted or decoded (kube's `unsafe-delete-ignore-read-errors`); prints the
        /// key and the revision of the deletion on stderr.
        #[arg(long, conflicts_with_all = ["uid", "resource_version"])]
        force: bool,
    },
    /// Print how many objects are under a prefix.
    #[command(after_help = "Example:\n  apistore count configmaps/default")]
    Count {
        /// The prefix, relative to the store prefix.
        #[arg(value_name = "PREFIX")]
        key_prefix: String,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(
        after_help = "Example:\n  apistore completions bash > /etc/bash_completion.d/apistore"
    )]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print a stored value read from a file or stdin (what `get --raw-out` or
    /// `etcdctl get --print-value-only` wrote) as the object, with no etcd: kube
    /// protobuf, JSON, or a `k8s:enc:` ciphertext, decrypted with --encryption-config
    /// and --etcd-key (the key it was stored at: its resource picks the providers, the
    /// full key is the authenticated data). `--key` is the TLS client key, hence
    /// `--etcd-key`.
    #[command(
        after_help = "Examples:\n  apistore get configmaps/default/cm1 --raw-out cm1.bin && apistore decode cm1.bin -o json\n  etcdctl get /registry/secrets/default/s1 --print-value-only | apistore --encryption-config enc.yaml decode --etcd-key /registry/secrets/default/s1"
    )]
    Decode {
        /// The file to read (`-` or none: stdin).
        file: Option<PathBuf>,
        /// The etcd key the value was stored at, with or without the prefix.
        #[arg(long = "etcd-key", value_name = "KEY")]
        etcd_key: Option<String>,
    },
    /// Encryption at rest: re-encrypt stale values after a key rotation.
    #[command(subcommand)]
    Encryption(EncryptionCommand),
    /// Every revision of an object etcd (or the --snapshot file) still holds, oldest
    /// first: its revision, event (ADDED, MODIFIED, DELETED), the manager and operation
    /// of the managedFields entry that changed, and a unified diff of the YAML against
    /// the previous revision. `-o json`: an array of `{revision, type, object, diff}`.
    /// History before the compacted revision is gone, and says so. Online, the object's
    /// current life is read revision by revision (a deleted object needs --snapshot).
    #[command(
        after_help = "Examples:\n  apistore history configmaps/default/cm1\n  apistore --snapshot backup.db history secrets/default/s1 -o json"
    )]
    History {
        /// The key, relative to the prefix.
        key: String,
    },
    /// Where the bytes go: per resource (or per namespace with --by namespace) the
    /// object count, bytes of current values, bytes of every revision held (with
    /// --snapshot), the share of managedFields and of the last-applied annotation,
    /// encodings and encryption providers and keys; the largest objects; values stored
    /// in plaintext under a resource the --encryption-config encrypts (a finding).
    /// A table by default; `-o json` one object.
    #[command(
        after_help = "Examples:\n  apistore --snapshot backup.db analyze\n  apistore analyze secrets --by namespace -o json"
    )]
    Analyze(AnalyzeArgs),
    /// Restore objects from a snapshot into the etcd of --endpoints: each as the file
    /// holds it (uid, creationTimestamp and every field kept), encoded and encrypted as
    /// the cluster writes it today (the current write key). Create-only (AlreadyExists
    /// unless --overwrite, which replaces by compare-and-swap); a prefix restores every
    /// object under it; each object is written whole or not at all. Prints a summary
    /// (restored, skipped, failed); exits 1 if any failed.
    #[command(
        after_help = "Examples:\n  apistore restore configmaps/default/cm1 --from-snapshot backup.db\n  apistore restore secrets/kube-system --from-snapshot backup.db --rv 1234 --dry-run"
    )]
    Restore(RestoreArgs),
    /// List the objects under a prefix as a `List`.
    #[command(
        after_help = "Examples:\n  apistore list configmaps --limit 500\n  apistore list pods/default -l app=web --all"
    )]
    List(ListArgs),
    /// Watch the objects under a prefix: one JSON line per event,
    /// `{"type":"ADDED","object":{...}}`, printed as it arrives; `-o table` one line
    /// per event (type, name, namespace, resourceVersion, kind), `-o name`
    /// `<resource>/<name>`, `-o yaml` a YAML document per event.
    /// Exits 0 after --max-events events or --timeout seconds; an ERROR event is printed,
    /// then the command exits 1.
    #[command(
        after_help = "Examples:\n  apistore watch configmaps/default --rv 1234\n  apistore watch pods --send-initial-events --bookmarks --max-events 10"
    )]
    Watch(WatchArgs),
}

/// The flags of `list`.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// The prefix, relative to the store prefix.
    #[arg(value_name = "PREFIX")]
    pub(crate) key_prefix: String,
    /// The most items per page (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub(crate) limit: i64,
    /// A continue token from a previous page.
    #[arg(long = "continue")]
    pub(crate) continue_token: Option<String>,
    /// The resourceVersion to list at.
    #[arg(long = "rv")]
    pub(crate) resource_version: Option<String>,
    /// How the resourceVersion is matched (in any case: `exact` is `Exact`).
    #[arg(
        long = "rv-match",
        ignore_case = true,
        value_parser = clap::builder::PossibleValuesParser::new(["Exact", "NotOlderThan"])
            .map(|text| rv_match_as_kube_spells_it(&text))
    )]
    pub(crate) resource_version_match: Option<String>,
    /// A label selector, e.g. `app=web,tier!=db`.
    #[arg(short = 'l', long = "selector")]
    pub(crate) selector: Option<String>,
    /// A field selector, e.g. `metadata.name=cm1`.
    #[arg(long = "field-selector")]
    pub(crate) field_selector: Option<String>,
    /// Follow continue tokens to the end and print every item.
    #[arg(long)]
    pub(crate) all: bool,
    /// Leave out the values that cannot be decrypted or decoded, each named on
    /// stderr, instead of failing (selectors apply; paging does not).
    #[arg(long)]
    pub(crate) skip_undecodable: bool,
}

/// `--rv-match` as kube spells it: clap has already checked it in any case, and
/// kube's parser takes only `Exact` and `NotOlderThan`.
fn rv_match_as_kube_spells_it(text: &str) -> String {
    if text.eq_ignore_ascii_case("exact") {
        "Exact".to_owned()
    } else if text.eq_ignore_ascii_case("notolderthan") {
        "NotOlderThan".to_owned()
    } else {
        text.to_owned()
    }
}

/// The flags of `analyze`.
#[derive(Debug, Args)]
pub(crate) struct AnalyzeArgs {
    /// The prefix, relative to the store prefix (every key when none is given).
    #[arg(value_name = "PREFIX")]
    pub(crate) key_prefix: Option<String>,
    /// Group by resource (the default) or by resource and namespace.
    #[arg(long, value_enum, default_value_t = AnalyzeBy::Resource)]
    pub(crate) by: AnalyzeBy,
    /// How many of the largest objects to name.
    #[arg(long, default_value_t = 10)]
    pub(crate) top: usize,
}

/// What `analyze` groups by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum AnalyzeBy {
    /// One row per resource.
    Resource,
    /// One row per resource and namespace.
    Namespace,
}

/// The flags of `restore`.
#[derive(Debug, Args)]
pub(crate) struct RestoreArgs {
    /// Keys or prefixes, relative to the store prefix.
    #[arg(value_name = "KEY", required = true)]
    pub(crate) keys: Vec<String>,
    /// The snapshot file (or data directory) to restore from.
    #[arg(long, value_name = "FILE")]
    pub(crate) from_snapshot: PathBuf,
    /// The revision of the snapshot to restore (0: its last).
    #[arg(long = "rv", default_value_t = 0)]
    pub(crate) revision: i64,
    /// Say what would be restored; write nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Replace objects that exist, each by compare-and-swap on the revision read.
    #[arg(long)]
    pub(crate) overwrite: bool,
}

/// The flags of `watch`.
#[derive(Debug, Args)]
pub(crate) struct WatchArgs {
    /// The prefix, relative to the store prefix.
    #[arg(value_name = "PREFIX")]
    pub(crate) key_prefix: String,
    /// Send the changes after this resourceVersion. Unset or 0: the current objects
    /// first, as ADDED events, then the changes.
    #[arg(long = "rv")]
    pub(crate) resource_version: Option<String>,
    /// Start at the current revision: only the changes from now on, none of the
    /// existing objects replayed (what `etcdctl watch` does by default).
    #[arg(long, conflicts_with_all = ["resource_version", "send_initial_events"])]
    pub(crate) from_now: bool,
    /// Accept BOOKMARK events.
    #[arg(long)]
    pub(crate) bookmarks: bool,
    /// Ask for the current objects first (kube-apiserver's `sendInitialEvents`, with
    /// its WatchList feature on); with --bookmarks a BOOKMARK annotated
    /// `k8s.io/initial-events-end` follows them.
    #[arg(long)]
    pub(crate) send_initial_events: bool,
    /// A label selector, e.g. `app=web,tier!=db`.
    #[arg(short = 'l', long = "selector")]
    pub(crate) selector: Option<String>,
    /// A field selector, e.g. `metadata.name=cm1`.
    #[arg(long = "field-selector")]
    pub(crate) field_selector: Option<String>,
    /// Exit after this many events.
    #[arg(long)]
    pub(crate) max_events: Option<u64>,
    /// Exit after this many seconds.
    #[arg(long)]
    pub(crate) timeout: Option<u64>,
    /// Go past the values that cannot be decrypted or decoded, each named on stderr
    /// (`skipped KEY: REASON`), instead of ending the watch with an ERROR event.
    #[arg(long)]
    pub(crate) skip_undecodable: bool,
}

/// Encryption at rest.
#[derive(Debug, Subcommand)]
pub(crate) enum EncryptionCommand {
    /// Re-encrypt every stale value under a prefix with the current write key, each by
    /// compare-and-swap so that a concurrent writer is never overwritten. Run it after
    /// rotating keys. Works on the stored bytes without decoding them; a value already
    /// under the write key is never written. Needs --encryption-config. Prints a summary
    /// (scanned, rewritten, skipped, failed; `would rewrite` for rewritten in a dry run;
    /// `-o json`: one JSON object, with `"dryRun": true` and `wouldRewrite` in a dry
    /// run); exits 1 if any value failed.
    #[command(
        after_help = "Example:\n  apistore --encryption-config enc.yaml encryption rewrite secrets"
    )]
    Rewrite {
        /// The prefix, relative to the store prefix.
        #[arg(value_name = "PREFIX")]
        key_prefix: String,
        /// How many objects to rewrite at once.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Report the stale values (one `would rewrite KEY` line each on stderr); write
        /// nothing.
        #[arg(long)]
        dry_run: bool,
        /// Go past the values that cannot be decrypted (named on stderr, counted as
        /// `skipped`) instead of counting them as failed; other failures still fail.
        #[arg(long)]
        skip_undecodable: bool,
    },
}

/// Conditions the stored object must meet.
#[derive(Debug, Args)]
pub(crate) struct PreconditionArgs {
    /// The object's uid must be this.
    #[arg(long = "precondition-uid")]
    pub(crate) uid: Option<String>,
    /// The object's resourceVersion must be this.
    #[arg(long = "precondition-rv")]
    pub(crate) resource_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// A subcommand's help shows its own options first, the global ones after, under
    /// their own heading.
    #[test]
    fn subcommand_help_lists_its_own_options_before_the_global_ones() {
        let mut command = Cli::command();
        // Global options reach subcommands when the command is built, as on a run.
        command.build();
        let help = command
            .find_subcommand_mut("get")
            .map(|get| get.render_long_help().to_string())
            .unwrap_or_default();
        let own = help.find("--exact").unwrap_or(usize::MAX);
        let heading = help.find("Global options:").unwrap_or(0);
        let global = help.find("--endpoints").unwrap_or(0);
        assert!(own < heading && heading < global, "{help}");
    }

    /// `-o`'s help says what each command prints without it.
    #[test]
    fn output_help_names_each_commands_default() {
        let help = Cli::command().render_long_help().to_string();
        for default in [
            "one JSON line per event for watch",
            "the bare number for count",
            "a table for keys",
        ] {
            assert!(help.contains(default), "{default:?} missing: {help}");
        }
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
