//! Connecting and building stores: the facade's `ApiStore` from the global flags
//! (endpoints, TLS, credentials, encryption config, media type, metrics), the resource a
//! key belongs to, and the unconfined store `keys` reads with. The object types the
//! stores hold are `object.rs`'s.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use apistore::layers::etcd3::Etcd3Store;
use apistore::{ApiStore, DynamicObject, KubeVersion};

use crate::args::GlobalArgs;
use crate::error::CliError;

/// The facade over `global`'s endpoints and options, registering its metrics in
/// `registry` for `--metrics-out`; each KMS plugin that failed its first health check
/// is named on stderr.
pub(super) async fn connect(
    global: &GlobalArgs,
    registry: Option<&apistore::prometheus::Registry>,
) -> Result<ApiStore, CliError> {
    let mut builder = ApiStore::builder()
        .endpoints(global.endpoints.iter().cloned())
        .prefix(global.prefix.clone())
        .request_timeout(Some(Duration::from_secs(global.request_timeout.max(1))))
        .dial_timeout(Duration::from_secs(5)); // etcdctl's --dial-timeout
    if let Some(path) = &global.encryption_config {
        builder = builder.encryption_config_file(path);
    }
    let kube_version = kube_version(global)?;
    builder = builder
        .kube_version(kube_version)
        .observe_unknown_fields(warn_partial_reads(kube_version));
    if let Some(media_type) = storage_media_type(global)? {
        builder = builder.storage_media_type(media_type);
    }
    let tls = apistore::TlsConfig::from_files(
        global.cacert.as_deref(),
        global.client_cert.as_deref(),
        global.client_key.as_deref(),
    )
    .map_err(CliError::Tls)?;
    if let Some(tls) = tls {
        builder = builder.tls(tls);
    }
    match (&global.user, &global.password) {
        (Some(user), Some(password)) => {
            builder = builder.credentials(user.clone(), password.expose());
        }
        (None, None) => {}
        (Some(_), None) => {
            return Err(CliError::Usage(
                "--user needs a password: set APISTORE_PASSWORD (or --password)".to_owned(),
            ));
        }
        (None, Some(_)) => {
            return Err(CliError::Usage(
                "a password (APISTORE_PASSWORD or --password) needs --user".to_owned(),
            ));
        }
    }
    if let Some(registry) = registry {
        builder = builder
            .metrics_registry(registry)
            .map_err(CliError::Connect)?;
    }
    let api = builder.build().await.map_err(CliError::Connect)?;
    crate::kms::warn_unhealthy(&api);
    Ok(api)
}

/// `--kube-version`, the newest known when not given.
pub(crate) fn kube_version(global: &GlobalArgs) -> Result<KubeVersion, CliError> {
    match &global.kube_version {
        Some(text) => text
            .parse::<KubeVersion>()
            .map_err(|e| CliError::FlagValue {
                flag: "--kube-version",
                message: e.to_string(),
            }),
        None => Ok(KubeVersion::LATEST),
    }
}

/// `--storage-media-type`, when given.
pub(crate) fn storage_media_type(
    global: &GlobalArgs,
) -> Result<Option<apistore::MediaType>, CliError> {
    global
        .storage_media_type
        .as_deref()
        .map(|text| {
            text.parse::<apistore::MediaType>()
                .map_err(|e| CliError::FlagValue {
                    flag: "--storage-media-type",
                    message: e.to_string(),
                })
        })
        .transpose()
}

/// An observer that names on stderr, once per object, every value read without some
/// of its fields: what the output does not show, and that updates keep it.
pub(crate) fn warn_partial_reads(version: KubeVersion) -> apistore::UnknownFieldsObserver {
    let warned: Mutex<HashSet<String>> = Mutex::default();
    Arc::new(move |read: &apistore::PartialRead| {
        let object = read.object();
        let first = warned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(object);
        if first {
            eprintln!("warning: {}", partial_read_message(version, read));
        }
    })
}

/// The warning for a value read without some of its fields.
pub(crate) fn partial_read_message(version: KubeVersion, read: &apistore::PartialRead) -> String {
    let fields = read
        .fields
        .iter()
        .map(|f| format!("{} (from {})", f.display_path(), f.origin()))
        .collect::<Vec<_>>()
        .join(", ");
    let shows = read
        .fields
        .iter()
        .filter_map(|f| f.known_from.as_ref().map(|(v, _)| *v))
        .max();
    let fix = match shows {
        Some(v) => format!("; --kube-version {v} shows them"),
        None => String::new(),
    };
    format!(
        "{} holds fields the kube {version} schema does not know, not shown here: {fields}; updates keep them{fix}",
        read.object()
    )
}

/// The resource a key belongs to, as kube-apiserver's storage layout places it
/// (`deployments/default/d1` is `deployments.apps`, `example.com/widgets/default/w1` is
/// `widgets.example.com`), or `--resource` when given.
pub(crate) fn resource_of(
    api: &ApiStore,
    global: &GlobalArgs,
    key: &str,
) -> Result<String, CliError> {
    crate::keys::resource_of_key(api.layout(), global, key)
}

/// A store that reads any key under the prefix, for `keys` (which need not name a
/// resource): the resource of the prefix when the layout places it, for its metrics.
pub(crate) fn raw_store(
    api: &ApiStore,
    global: &GlobalArgs,
    prefix: Option<&str>,
) -> Etcd3Store<DynamicObject> {
    let resource = global.resource.clone().or_else(|| {
        prefix
            .and_then(|p| api.layout().resolve_key(p).ok())
            .map(|l| l.group_resource.to_string())
    });
    let mut config = api.store_config(resource.as_deref().unwrap_or("keys"));
    config.resource.confine_keys = false;
    Etcd3Store::new(api.client().clone(), config)
}
