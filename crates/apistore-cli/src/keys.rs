//! Keys as people paste them: a full etcd key as `etcdctl get --prefix --keys-only`
//! prints it (`/registry/configmaps/default/cm1`, the store prefix stripped), and a
//! first segment in kubectl's words (`cm`, `configmap`, `deploy`, `nodes` for kube's
//! `minions`) put where kube's storage layout keeps the resource. A first segment the
//! layout does not know gets the closest resource it does as a suggestion. The names
//! themselves are the layout crate's (`StorageLayout::canonical_name`, `closest`).

use apistore::{LayoutError, StorageLayout};

use crate::args::{Command, EncryptionCommand, GlobalArgs};
use crate::error::CliError;

/// `key` relative to the store prefix: `prefix/rest` is `rest`, the prefix itself is
/// the empty key (everything); any other key is already relative.
pub(crate) fn strip_store_prefix(prefix: &str, key: &str) -> String {
    let prefix = prefix.trim_end_matches('/');
    if prefix.is_empty() {
        return key.to_owned();
    }
    if key.trim_end_matches('/') == prefix {
        return String::new();
    }
    match key
        .strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('/'))
    {
        Some(rest) => rest.to_owned(),
        None => key.to_owned(),
    }
}

/// A key naming a resource, as the store takes it: the prefix stripped and, unless
/// `--resource` places the key, a first segment in kubectl's words replaced by the
/// resource's key prefix (`cm/default/cm1` is `configmaps/default/cm1`). A key the
/// layout places as a built-in is left as it is (`services/endpoints/...` is
/// endpoints); so is one nothing better is known for (the store's error names it).
pub(crate) fn resource_key(layout: StorageLayout, global: &GlobalArgs, key: &str) -> String {
    let key = strip_store_prefix(&global.prefix, key);
    if global.resource.is_some() {
        return key;
    }
    let placed = layout.resolve_key(&key);
    if placed.as_ref().is_ok_and(|l| l.built_in.is_some()) {
        return key;
    }
    // Either unknown or laid out as a custom resource: `deployment.apps/default/d1`
    // looks like a custom resource of the group `deployment.apps`, but is a singular.
    let (first, rest) = key.split_once('/').unwrap_or((key.as_str(), ""));
    let Some(canonical) = layout
        .canonical_name(first)
        .or_else(|| by_plural(layout, first))
    else {
        return key;
    };
    let key_prefix = layout.resource(&canonical).key_prefix;
    if rest.is_empty() {
        key_prefix
    } else {
        format!("{key_prefix}/{rest}")
    }
}

/// A resource key with `-n NAMESPACE` put in: after the resource's key prefix, before
/// the name (`configmaps/cm1` is `configmaps/NS/cm1`, `configmaps` is `configmaps/NS`).
/// A key that names the namespace already is kept; one naming another is a mistake. A
/// cluster-scoped resource's key, one `--resource` places, or one the layout cannot
/// place (the store's error names it) is left as it is.
fn in_namespace(
    layout: StorageLayout,
    global: &GlobalArgs,
    key: String,
) -> Result<String, CliError> {
    let Some(namespace) = &global.namespace else {
        return Ok(key);
    };
    if global.resource.is_some() {
        return Ok(key);
    }
    let Ok(placed) = layout.resolve_key(&key) else {
        return Ok(key);
    };
    // A custom resource may be either: -n says it is namespaced.
    if placed.built_in.is_some_and(|built_in| !built_in.namespaced) {
        return Ok(key);
    }
    let prefix = placed.key_prefix;
    let rest = key
        .strip_prefix(prefix.as_str())
        .unwrap_or_default()
        .trim_start_matches('/');
    match rest.split_once('/') {
        None if rest.is_empty() => Ok(format!("{prefix}/{namespace}")),
        None => Ok(format!("{prefix}/{namespace}/{rest}")),
        Some((named, _)) if named == namespace => Ok(key),
        Some((named, _)) => Err(CliError::Usage(format!(
            "key {key:?} is in namespace {named:?} and -n says {namespace:?}: give the key \
             without its namespace, or drop -n"
        ))),
    }
}

/// The one built-in resource, in any group, whose plural `name` is or is the singular
/// of, as kubectl takes `deployment` for `deployments.apps`; none when several groups
/// have it (`events`), so that nothing is guessed.
fn by_plural(layout: StorageLayout, name: &str) -> Option<String> {
    let plurals = [
        name.to_owned(),
        format!("{name}s"),
        format!("{name}es"),
        name.strip_suffix('y')
            .map_or_else(String::new, |stem| format!("{stem}ies")),
    ];
    let mut found = layout
        .built_ins()
        .filter(|l| !name.is_empty() && plurals.contains(&l.group_resource.resource))
        .map(|l| l.group_resource.to_string());
    let first = found.next()?;
    found.all(|other| other == first).then_some(first)
}

/// The group-resource a key (relative to the prefix) belongs to: `--resource` when
/// given, as kube names it or by a short name or singular, else the layout's placing of
/// the key. Either failing is a command-line mistake naming the closest resource.
pub(crate) fn resource_of_key(
    layout: StorageLayout,
    global: &GlobalArgs,
    key: &str,
) -> Result<String, CliError> {
    if let Some(resource) = &global.resource {
        // A name the layout does not know would make a key prefix kube-apiserver never
        // reads, to which no EncryptionConfiguration entry applies.
        return layout
            .lookup(resource)
            .map(|known| known.group_resource.to_string())
            .map_err(|err| CliError::Key(format!("--resource {resource}: {err}")));
    }
    layout
        .resolve_key(key)
        .map(|known| known.group_resource.to_string())
        .map_err(|err| key_error(layout, key, &err))
}

/// The error for a key the layout cannot place: for a first segment close to a
/// resource the layout knows, which one was probably meant, with the key spelt so.
pub(crate) fn key_error(layout: StorageLayout, key: &str, err: &LayoutError) -> CliError {
    if let LayoutError::UnknownKey { .. } = err {
        let (first, rest) = key.split_once('/').unwrap_or((key, ""));
        if let Some(known) = layout.closest(first) {
            let key_prefix = layout.resource(&known).key_prefix;
            let spelt = if rest.is_empty() {
                key_prefix
            } else {
                format!("{key_prefix}/{rest}")
            };
            return CliError::Key(format!(
                "key {key:?}: {first:?} is no resource of kube's storage layout: did you mean \
                 {known:?} ({spelt})? For a resource kube does not know, name it with \
                 --resource GROUP_RESOURCE"
            ));
        }
    }
    CliError::Key(err.to_string())
}

/// `command` with every key and prefix it takes as the store takes them: resource keys
/// through [`resource_key`], the raw prefixes of `keys` and `analyze` (any key, not
/// only a resource's) with the store prefix stripped only.
///
/// # Errors
///
/// A key naming another namespace than `-n`.
pub(crate) fn normalize(
    command: Command,
    layout: StorageLayout,
    global: &GlobalArgs,
) -> Result<Command, CliError> {
    let key = |key: String| in_namespace(layout, global, resource_key(layout, global, &key));
    let raw = |key: Option<String>| key.map(|k| strip_store_prefix(&global.prefix, &k));
    Ok(match command {
        Command::Create {
            key: k,
            file,
            dry_run,
        } => Command::Create {
            key: key(k)?,
            file,
            dry_run,
        },
        Command::Get {
            key: k,
            resource_version,
            exact,
            raw,
            raw_out,
        } => Command::Get {
            key: key(k)?,
            resource_version,
            exact,
            raw,
            raw_out,
        },
        Command::Keys {
            key_prefix,
            revision,
        } => Command::Keys {
            key_prefix: raw(key_prefix),
            revision,
        },
        Command::Update {
            key: k,
            file,
            preconditions,
            dry_run,
        } => Command::Update {
            key: key(k)?,
            file,
            preconditions,
            dry_run,
        },
        Command::Delete {
            key: k,
            preconditions,
            dry_run,
            force,
        } => Command::Delete {
            key: key(k)?,
            preconditions,
            dry_run,
            force,
        },
        Command::Count { key_prefix } => Command::Count {
            key_prefix: key(key_prefix)?,
        },
        Command::History { key: k } => Command::History { key: key(k)? },
        Command::Analyze(mut args) => {
            args.key_prefix = raw(args.key_prefix);
            Command::Analyze(args)
        }
        Command::Restore(mut args) => {
            args.keys = args.keys.into_iter().map(key).collect::<Result<_, _>>()?;
            Command::Restore(args)
        }
        Command::List(mut args) => {
            args.key_prefix = key(args.key_prefix)?;
            Command::List(args)
        }
        Command::Watch(mut args) => {
            args.key_prefix = key(args.key_prefix)?;
            Command::Watch(args)
        }
        Command::Encryption(EncryptionCommand::Rewrite {
            key_prefix,
            concurrency,
            dry_run,
            skip_undecodable,
        }) => Command::Encryption(EncryptionCommand::Rewrite {
            key_prefix: key(key_prefix)?,
            concurrency,
            dry_run,
            skip_undecodable,
        }),
        Command::Completions { shell } => Command::Completions { shell },
        // Its key is the authenticated data as well: decode places it itself.
        Command::Decode { file, etcd_key } => Command::Decode { file, etcd_key },
    })
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::Cli;

    fn resolved(flags: &[&str], key: &str) -> String {
        let cli = Cli::try_parse_from([&["apistore"], flags, &["get", key]].concat())
            .unwrap_or_else(|err| panic!("{err}"));
        let layout = StorageLayout::for_kube(apistore::KubeVersion::LATEST);
        resource_key(layout, &cli.global, key)
    }

    /// The key a `get` with `flags` reads, through the whole normalisation.
    fn normalized(flags: &[&str], key: &str) -> Result<String, String> {
        let cli = Cli::try_parse_from([&["apistore"], flags, &["get", key]].concat())
            .unwrap_or_else(|err| panic!("{err}"));
        let layout = StorageLayout::for_kube(apistore::KubeVersion::LATEST);
        match normalize(cli.command, layout, &cli.global) {
            Ok(Command::Get { key, .. }) => Ok(key),
            Ok(other) => panic!("not a get: {other:?}"),
            Err(err) => Err(err.to_string()),
        }
    }

    #[test]
    fn a_namespace_flag_goes_into_namespaced_keys_only() {
        for (flags, key, want) in [
            (
                &["-n", "kube-system"][..],
                "cm/cm1",
                "configmaps/kube-system/cm1",
            ),
            (
                &["-n", "kube-system"],
                "configmaps",
                "configmaps/kube-system",
            ),
            (&["--namespace", "ns1"], "svc/s1", "services/specs/ns1/s1"),
            (&["-n", "ns1"], "configmaps/ns1/cm1", "configmaps/ns1/cm1"),
            (
                &["-n", "ns1"],
                "example.com/widgets/w1",
                "example.com/widgets/ns1/w1",
            ),
            // Cluster-scoped: -n does not apply, as in kubectl.
            (&["-n", "ns1"], "nodes/n1", "minions/n1"),
            (&[], "cm/cm1", "configmaps/cm1"),
        ] {
            assert_eq!(
                normalized(flags, key).as_deref(),
                Ok(want),
                "{flags:?} {key}"
            );
        }
        let err = normalized(&["-n", "ns1"], "configmaps/ns2/cm1").unwrap_err();
        assert!(err.contains("\"ns2\"") && err.contains("\"ns1\""), "{err}");
    }

    #[test]
    fn kubectl_names_are_put_where_the_layout_keeps_the_resource() {
        for (key, want) in [
            ("cm/default/cm1", "configmaps/default/cm1"),
            ("configmap/default/cm1", "configmaps/default/cm1"),
            ("/registry/cm/default/cm1", "configmaps/default/cm1"),
            ("deploy/default/d1", "deployments/default/d1"),
            ("deployment.apps/default/d1", "deployments/default/d1"),
            // kube keeps services under services/specs.
            ("svc", "services/specs"),
            ("services/default/s1", "services/specs/default/s1"),
            ("services/specs/default/s1", "services/specs/default/s1"),
            ("nodes/n1", "minions/n1"),
            // A plural or singular without its group, when one group has it.
            ("deployment/default/d1", "deployments/default/d1"),
            ("statefulsets/default/s1", "statefulsets/default/s1"),
            ("networkpolicy/default/n1", "networkpolicies/default/n1"),
            // Placed as they are: a built-in, a custom resource, nothing better known.
            (
                "services/endpoints/default/e1",
                "services/endpoints/default/e1",
            ),
            (
                "example.com/widgets/default/w1",
                "example.com/widgets/default/w1",
            ),
            ("configmapz/default/cm1", "configmapz/default/cm1"),
        ] {
            assert_eq!(resolved(&[], key), want, "{key}");
        }
        // --resource places the key: only the prefix goes.
        assert_eq!(
            resolved(&["--resource", "widgets.example.com"], "/registry/cm/x"),
            "cm/x"
        );
        assert_eq!(
            resolved(&["--prefix", "/p"], "/p/cm/default/a"),
            "configmaps/default/a"
        );
    }

    #[test]
    fn the_command_line_is_consistent() {
        <Cli as clap::CommandFactory>::command().debug_assert();
    }

    #[test]
    fn the_store_prefix_is_stripped() {
        for (prefix, key, want) in [
            (
                "/registry",
                "/registry/configmaps/default/cm1",
                "configmaps/default/cm1",
            ),
            ("/registry/", "/registry/secrets", "secrets"),
            ("/registry", "/registry", ""),
            ("/registry", "/registry/", ""),
            (
                "/registry",
                "configmaps/default/cm1",
                "configmaps/default/cm1",
            ),
            ("/registry", "/registryx/a", "/registryx/a"),
            ("/other", "/registry/secrets", "/registry/secrets"),
        ] {
            assert_eq!(strip_store_prefix(prefix, key), want, "{prefix} {key}");
        }
    }
}
