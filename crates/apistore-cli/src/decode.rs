//! `apistore decode`: a stored value from a file or stdin, with no etcd, printed as the
//! object (auger's `decode`). The value is what `get --raw-out` or `etcdctl get
//! --print-value-only` wrote: kube protobuf, JSON, or a `k8s:enc:` ciphertext, which
//! `--encryption-config` decrypts with the etcd key it was stored at as authenticated
//! data. The codecs and transformers are the facade's, as `offline.rs` builds them.

use std::io::Read;
use std::path::Path;

use apistore::{Codec, DynamicObject, MediaType, StorageCodec, StorageLayout};
use bytes::Bytes;

use crate::args::GlobalArgs;
use crate::error::CliError;

/// `decode [FILE|-] [--etcd-key KEY]`.
pub(crate) fn decode(
    global: &GlobalArgs,
    file: Option<&Path>,
    etcd_key: Option<&str>,
) -> Result<(), CliError> {
    let value = read_value(file)?;
    let kube_version = crate::commands::kube_version(global)?;
    let layout = StorageLayout::for_kube(kube_version);
    let plain = if value.starts_with(b"k8s:enc:") {
        decrypt(global, layout, value, etcd_key)?
    } else {
        value
    };
    // Either encoding is read whatever the codec writes; protobuf's reads both.
    let media_type = crate::commands::storage_media_type(global)?.unwrap_or(MediaType::Protobuf);
    let codec = StorageCodec::<DynamicObject>::for_kube(media_type, kube_version)
        .observe_unknown_fields(crate::commands::warn_partial_reads(kube_version));
    let object = codec.decode(&plain).map_err(|e| {
        CliError::Usage(format!(
            "cannot decode the value ({}) as a kube object: {e}; decode takes kube protobuf, \
             JSON, or a k8s:enc: ciphertext with --encryption-config and --etcd-key",
            crate::raw::encoding(&plain)
        ))
    })?;
    crate::output::print(global.format(), &object)
}

/// The bytes of `file`, or of stdin for none or `-`.
fn read_value(file: Option<&Path>) -> Result<Bytes, CliError> {
    let path = file.unwrap_or_else(|| Path::new("-"));
    let read = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    } else {
        std::fs::read(path)
    };
    read.map(Bytes::from).map_err(|source| CliError::ReadFile {
        path: path.to_owned(),
        source,
    })
}

/// The plaintext of a `k8s:enc:` value: the key's resource picks the configuration's
/// providers, and the full etcd key is the authenticated data the value was sealed
/// with.
fn decrypt(
    global: &GlobalArgs,
    layout: StorageLayout,
    value: Bytes,
    etcd_key: Option<&str>,
) -> Result<Bytes, CliError> {
    let encoding = crate::raw::encoding(&value);
    let Some(config_path) = &global.encryption_config else {
        return Err(CliError::Usage(format!(
            "the value is encrypted ({encoding}): pass --encryption-config FILE with its key \
             and --etcd-key KEY (the key it was stored at)"
        )));
    };
    let Some(etcd_key) = etcd_key else {
        return Err(CliError::Usage(format!(
            "the value is encrypted ({encoding}): pass --etcd-key KEY, the key it was stored \
             at (its resource picks the providers; the full key is the authenticated data)"
        )));
    };
    let relative = crate::keys::resource_key(layout, global, etcd_key);
    let resource = crate::keys::resource_of_key(layout, global, &relative)?;
    let full_key = format!("{}/{relative}", global.prefix.trim_end_matches('/'));
    let config = crate::offline::read_encryption_config(config_path)?;
    let transformer = config.transformer_for(&resource);
    transformer
        .transform_from_storage(value, full_key.as_bytes())
        .map(|plain| plain.data)
        .map_err(|e| {
            CliError::Usage(format!(
                "cannot decrypt the value ({encoding}) as {full_key} ({resource}): {e}; check \
                 that --etcd-key is the key it was stored at and that --encryption-config \
                 holds its key"
            ))
        })
}
