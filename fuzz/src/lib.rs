//! What each fuzz target checks, as plain functions of the fuzzer's bytes.
//!
//! Every function takes arbitrary bytes, feeds them to one parser or decoder through
//! apistore's public API, and panics only when an invariant breaks (a panic inside
//! apistore counts too): that is what the fuzzer looks for. The unit tests below run
//! each over seeds and random inputs, so the checks build and run on stable without
//! cargo-fuzz.

use std::sync::{Arc, OnceLock};

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig};
use apistore_storage::{Codec, DynamicObject, FieldSelector, JsonCodec, LabelSelector};
use apistore_value::{EncryptionConfig, Transformer};
use apistore_versioning::continue_token;
use base64::Engine as _;
use bytes::Bytes;

/// The list prefix continue tokens are decoded against.
const KEY_PREFIX: &str = "/registry/pods/";

/// Continue tokens: as text, or as base64 of arbitrary bytes (to reach the JSON reader).
/// A token that decodes names a key under the prefix and a non-zero revision, and
/// encoding that again gives a token that decodes to the same.
pub fn continue_token(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let token = if mode % 2 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rest)
    };
    let Ok((key, rv)) = continue_token::decode(&token, KEY_PREFIX) else {
        return;
    };
    assert!(key.starts_with(KEY_PREFIX), "{token:?} -> {key:?}");
    assert_ne!(rv, 0, "{token:?}");
    let again = match continue_token::encode_start_key(&key, rv, KEY_PREFIX) {
        Ok(again) => again,
        Err(err) => panic!("{token:?} -> {key:?}, {rv} does not encode: {err}"),
    };
    match continue_token::decode(&again, KEY_PREFIX) {
        Ok(decoded) => assert_eq!(decoded, (key, rv), "{token:?} -> {again:?}"),
        Err(err) => panic!("{token:?} re-encoded as {again:?} does not decode: {err}"),
    }
}

/// Label selectors: one that parses shows as text that parses to the same selector,
/// and matching it against labels does not panic.
pub fn label_selector(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(selector) = LabelSelector::parse(&text) else {
        return;
    };
    let shown = selector.to_string();
    assert_eq!(
        LabelSelector::parse(&shown).as_ref(),
        Ok(&selector),
        "{text:?} shown as {shown:?}"
    );
    let labels = [("app", "web"), ("tier", "db"), ("", "")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let _ = selector.matches(&labels);
}

/// Field selectors, as label selectors.
pub fn field_selector(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Ok(selector) = FieldSelector::parse(&text) else {
        return;
    };
    let shown = selector.to_string();
    assert_eq!(
        FieldSelector::parse(&shown).as_ref(),
        Ok(&selector),
        "{text:?} shown as {shown:?}"
    );
    let fields = [("metadata.name", "a"), ("metadata.namespace", "b")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let _ = selector.matches(&fields);
}

/// A client that never connects (plaintext connections are made on first use), so
/// stores can be built to call their pure key preparation.
fn idle_client() -> &'static EtcdClient {
    static CLIENT: OnceLock<(tokio::runtime::Runtime, EtcdClient)> = OnceLock::new();
    let (_, client) = CLIENT.get_or_init(|| {
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(err) => panic!("tokio runtime: {err}"),
        };
        let config = ClientConfig::new(["http://127.0.0.1:1"]);
        let client = match runtime.block_on(EtcdClient::connect(&config)) {
            Ok(client) => client,
            Err(err) => panic!("an idle client: {err}"),
        };
        (runtime, client)
    });
    client
}

fn has_dot_segment(path: &str) -> bool {
    path.split('/')
        .any(|segment| segment == "." || segment == "..")
}

/// Keys, through a store's `prepare_key`, under a prefix also taken from the input
/// (the first byte says how long it is). An accepted key is the store's path prefix
/// followed by the key (one leading `/` dropped), with no `.` or `..` segment; a refused
/// key is empty, `/`, or has one, and the error names it as given.
pub fn prepare_key(data: &[u8]) {
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(len % 32).min(rest.len());
    let prefix = String::from_utf8_lossy(&rest[..split]).into_owned();
    let key = String::from_utf8_lossy(&rest[split..]).into_owned();
    let store: Etcd3Store<DynamicObject> = Etcd3Store::new(
        idle_client().clone(),
        StoreConfig {
            resource: ResourceConfig {
                prefix,
                ..ResourceConfig::for_resource("pods")
            },
            ..StoreConfig::default()
        },
    );
    let path_prefix = store.path_prefix();
    assert!(path_prefix.starts_with('/') && path_prefix.ends_with('/'));
    assert!(!has_dot_segment(path_prefix), "{path_prefix:?}");
    match store.prepare_key(&key) {
        Ok(prepared) => {
            let rest = key.strip_prefix('/').unwrap_or(&key);
            assert_eq!(prepared, format!("{path_prefix}{rest}"));
            assert!(!has_dot_segment(&prepared), "{prepared:?}");
        }
        Err(err) => {
            assert_eq!(err.key(), key);
            assert!(
                key.is_empty() || key == "/" || has_dot_segment(&key),
                "{key:?} refused: {err}"
            );
        }
    }
}

const ENCRYPTION: &str = r#"
kind: EncryptionConfiguration
apiVersion: apiserver.config.k8s.io/v1
resources:
  - resources: [secrets]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
      - aescbc:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
      - secretbox:
          keys:
            - name: key1
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=
      - identity: {}
  - resources: [configmaps]
    providers:
      - identity: {}
      - secretbox:
          keys:
            - name: key1
              secret: YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXoxMjM0NTY=
"#;

/// What a stored value may start with, to steer the input at each provider.
const PREFIXES: &[&str] = &[
    "",
    "k8s:enc:",
    "k8s:enc:aesgcm:v1:key1:",
    "k8s:enc:aescbc:v1:key1:",
    "k8s:enc:secretbox:v1:key1:",
    "k8s:enc:aesgcm:v1:nokey:",
];

fn transformers() -> &'static [Arc<dyn Transformer>] {
    static TRANSFORMERS: OnceLock<Vec<Arc<dyn Transformer>>> = OnceLock::new();
    TRANSFORMERS.get_or_init(|| {
        let config = match EncryptionConfig::parse(ENCRYPTION) {
            Ok(config) => config,
            Err(err) => panic!("the fuzz configuration: {err}"),
        };
        vec![
            config.transformer_for("secrets"),
            config.transformer_for("configmaps"),
        ]
    })
}

/// Stored bytes read through the prefix transformers of an EncryptionConfiguration:
/// never a panic. And the bytes as plaintext (unless they look like ciphertext) written
/// then read back come back whole under the same key, and (when encrypted) do not
/// decrypt under another key.
pub fn transformer_read(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let prefix = PREFIXES[usize::from(mode) % PREFIXES.len()];
    let stored = Bytes::from([prefix.as_bytes(), rest].concat());
    let key = b"/registry/secrets/default/s1".as_slice();
    for transformer in transformers() {
        let _ = transformer.transform_from_storage(stored.clone(), key);

        let plain = Bytes::copy_from_slice(rest);
        if plain.starts_with(b"k8s:enc:") {
            // Written through identity, such plaintext reads as foreign ciphertext, as
            // in kube-apiserver; codec output (JSON, protobuf) never looks like it.
            continue;
        }
        let written = match transformer.transform_to_storage(plain.clone(), key) {
            Ok(written) => written,
            Err(err) => panic!("writing {} bytes: {err}", rest.len()),
        };
        match transformer.transform_from_storage(written.clone(), key) {
            Ok(read) => assert_eq!(read.data, plain),
            Err(err) => panic!("reading back {written:?} (from {plain:?}): {err}"),
        }
        if written.starts_with(b"k8s:enc:") {
            let elsewhere =
                transformer.transform_from_storage(written, b"/registry/secrets/default/other");
            assert!(elsewhere.is_err(), "ciphertext decrypted under another key");
        }
    }
}

/// JSON bytes into a [`DynamicObject`]: never a panic; an object that decodes encodes
/// to JSON that decodes to the same object.
pub fn json_decode(data: &[u8]) {
    let codec = JsonCodec::<DynamicObject>::new();
    let Ok(object) = codec.decode(data) else {
        return;
    };
    let encoded = match codec.encode(&object) {
        Ok(encoded) => encoded,
        Err(err) => panic!("a decoded object does not encode: {err}"),
    };
    match codec.decode(&encoded) {
        Ok(again) => assert_eq!(again, object),
        Err(err) => panic!("an encoded object does not decode: {err}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngCore, SeedableRng};

    type Target = fn(&[u8]);

    const TARGETS: &[(&str, Target)] = &[
        ("continue_token", continue_token),
        ("label_selector", label_selector),
        ("field_selector", field_selector),
        ("prepare_key", prepare_key),
        ("transformer_read", transformer_read),
        ("json_decode", json_decode),
    ];

    /// Inputs each target should see: the shapes its parser cares about.
    const SEEDS: &[&[u8]] = &[
        b"",
        b"\0",
        b"\x00eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJhIn0",
        b"\x01{\"v\":\"meta.k8s.io/v1\",\"rv\":5,\"start\":\"a/b\\u0000\"}",
        b"\x01{\"v\":\"meta.k8s.io/v1\",\"rv\":-1,\"start\":\"../x\"}",
        b"app=web,tier!=db",
        b"env in (prod, qa),!canary,x notin (a,b)",
        b"metadata.name=cm1,metadata.namespace!=kube-system",
        b"a\\,b=c\\=d",
        b"\x05/reg/pods/default/p1",
        b"\x03abc/./x",
        b"\x00..",
        b"\x02k8s:enc:aesgcm:v1:key1:0123456789abcdef0123456789abcdef",
        b"{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\",\"labels\":{\"x\":\"y\"}},\"data\":{\"k\":1e300}}",
        b"{\"metadata\":{\"name\":1}}",
        b"{\"a\":1,\"a\":2}",
        b"[]",
        b"null",
    ];

    #[test]
    fn every_target_survives_its_seeds_and_random_inputs() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        for (name, target) in TARGETS {
            for seed in SEEDS {
                target(seed);
            }
            for _ in 0..2000 {
                let len = rng.gen_range(0..96);
                let mut input = vec![0u8; len];
                rng.fill_bytes(&mut input);
                // Half the inputs keep to printable ASCII, where the parsers do most.
                if rng.gen_bool(0.5) {
                    for byte in &mut input[1.min(len)..] {
                        *byte = b' ' + *byte % 95;
                    }
                }
                target(&input);
            }
            eprintln!("{name}: ok");
        }
    }
}
