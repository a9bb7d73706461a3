//! Arbitrary bytes found in etcd, as property tests against the shared real etcd.
//!
//! Whatever another writer (or a disk fault) left under a key, the store's get, list,
//! guaranteed update and delete answer with an internal error naming that key, never a
//! panic and never a guess; and a read that failed writes nothing: the bytes and their
//! revision are still there afterwards, for an operator to look at.

// Helpers outside #[test] functions unwrap too: a panic there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use apistore_etcd3::{ClientConfig, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig};
use apistore_storage::{
    Codec, DeleteOptions, DynamicObject, ErrorKind, GetOptions, JsonCodec, ListOptions,
    SelectionPredicate, Storage, StorageError, Update, UpdateOptions,
};
use apistore_testing::etcd::{shared_endpoint, unique_prefix};
use apistore_value::EncryptionConfig;
use etcd_client::{Client, DeleteOptions as RawDelete};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

/// Few enough to stay fast against a real etcd, enough to vary lengths and prefixes.
const CASES: u32 = 64;

/// AES-GCM first (so it would be the writer), identity as a fallback reader.
const ENCRYPTION: &str = r#"
kind: EncryptionConfiguration
apiVersion: apiserver.config.k8s.io/v1
resources:
  - resources: [configmaps]
    providers:
      - aesgcm:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZQ==
      - identity: {}
"#;

/// Bytes as they might be found: anything; something behind the AES-GCM prefix; or
/// JSON that starts well and ends badly.
fn stored_bytes() -> impl Strategy<Value = Vec<u8>> {
    let tail = || proptest::collection::vec(any::<u8>(), 0..200);
    prop_oneof![
        tail(),
        tail().prop_map(|t| [b"k8s:enc:aesgcm:v1:key1:".as_slice(), &t].concat()),
        tail().prop_map(|t| [b"k8s:enc:".as_slice(), &t].concat()),
        tail().prop_map(|t| [br#"{"apiVersion":"v1","metadata":"#.as_slice(), &t].concat()),
        "[{}\\[\\]\":,0-9a-z ]{0,40}".prop_map(String::into_bytes),
    ]
}

struct Fixture {
    raw: Client,
    plain: Etcd3Store<DynamicObject>,
    encrypted: Etcd3Store<DynamicObject>,
    prefix: String,
}

impl Fixture {
    async fn new() -> Self {
        let endpoint = shared_endpoint().unwrap_or_else(|err| panic!("{err}"));
        let endpoint = endpoint.split(',').next().unwrap_or_default().to_owned();
        let client = EtcdClient::connect(&ClientConfig::new([endpoint.clone()]))
            .await
            .unwrap_or_else(|err| panic!("connect to {endpoint}: {err}"));
        let raw = Client::connect([endpoint.clone()], None)
            .await
            .unwrap_or_else(|err| panic!("raw connect to {endpoint}: {err}"));
        let prefix = unique_prefix("hostile-input");
        let config = |resource: &str| StoreConfig {
            resource: ResourceConfig {
                prefix: prefix.clone(),
                ..ResourceConfig::for_resource(resource)
            },
            ..StoreConfig::default()
        };
        let plain = Etcd3Store::new(client.clone(), config("configmaps"));
        let encryption = EncryptionConfig::parse(ENCRYPTION).unwrap();
        let encrypted = Etcd3Store::new(client, config("secrets"))
            .with_transformer(encryption.transformer_for("configmaps"));
        Self {
            raw,
            plain,
            encrypted,
            prefix,
        }
    }

    /// What etcd holds under `key`: the value and its mod revision.
    async fn raw_get(&self, key: &str) -> Option<(Vec<u8>, i64)> {
        let response = self.raw.kv_client().get(key, None).await.unwrap();
        response
            .kvs()
            .first()
            .map(|kv| (kv.value().to_vec(), kv.mod_revision()))
    }
}

/// The error of an operation on corrupt bytes under `key`, of `kind`; success, or an
/// error of another kind, fails the case.
fn failure_of(
    operation: &str,
    key: &str,
    kind: ErrorKind,
    result: Result<impl std::fmt::Debug, StorageError>,
) -> Result<StorageError, TestCaseError> {
    let err = result.map_or_else(Ok, |value| {
        Err(TestCaseError::fail(format!(
            "{operation} {key}: succeeded on corrupt bytes: {value:?}"
        )))
    })?;
    prop_assert_eq!(err.kind(), kind, "{} {}: {}", operation, key, err);
    Ok(err)
}

/// The error is an internal error about `key`, for a corrupt object.
fn internal_about(
    operation: &str,
    key: &str,
    result: Result<impl std::fmt::Debug, StorageError>,
) -> Result<(), TestCaseError> {
    let err = failure_of(operation, key, ErrorKind::Internal, result)?;
    prop_assert_eq!(err.key(), key, "{}: {}", operation, err);
    prop_assert!(err.to_string().contains(key), "{}: {}", operation, err);
    prop_assert!(err.is_corrupt_object(), "{}: {}", operation, err);
    Ok(())
}

/// The error is a list's store-read error (kube 1.37's default) naming `key` alone.
fn store_read_about(
    operation: &str,
    key: &str,
    result: Result<impl std::fmt::Debug, StorageError>,
) -> Result<(), TestCaseError> {
    let err = failure_of(operation, key, ErrorKind::StoreRead, result)?;
    let keys: Vec<&str> = err
        .store_read_errors()
        .map(|errors| errors.keys().collect())
        .unwrap_or_default();
    prop_assert_eq!(keys, vec![key], "{}: {}", operation, err);
    prop_assert_eq!(err.status().code, 500, "{}: {}", operation, err);
    Ok(())
}

/// Puts `bytes` under a key of this case's own, then runs every read path of `store`.
/// Says whether the bytes were corrupt (not a readable object).
async fn check(
    fixture: &Fixture,
    store: &Etcd3Store<DynamicObject>,
    case: usize,
    bytes: Vec<u8>,
) -> Result<bool, TestCaseError> {
    let dir = format!("{}/case-{case}", store.group_resource());
    let key = format!("{dir}/obj");
    let etcd_key = store.prepare_key(&key).unwrap();
    let mut kv = fixture.raw.kv_client();
    let put = kv
        .put(etcd_key.as_str(), bytes.clone(), None)
        .await
        .unwrap();
    let revision = put.header().map_or(0, |h| h.revision());

    // A plain store reads JSON that happens to be a valid object; that is not corrupt.
    let readable = store
        .transformer()
        .transform_from_storage(bytes.clone().into(), etcd_key.as_bytes())
        .is_ok_and(|plain| {
            JsonCodec::<DynamicObject>::new()
                .decode(&plain.data)
                .is_ok()
        });

    let get = store.get(&key, &GetOptions::default()).await;
    let list_options = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let list = store.list(&dir, &list_options).await;
    let paged = ListOptions {
        recursive: true,
        predicate: SelectionPredicate {
            limit: 1,
            ..SelectionPredicate::default()
        },
        ..ListOptions::default()
    };
    let list_paged = store.list(&dir, &paged).await;
    if readable {
        prop_assert!(get.is_ok(), "{:?}", get);
        prop_assert!(list.is_ok(), "{:?}", list);
    } else {
        internal_about("get", &etcd_key, get)?;
        store_read_about("list", &etcd_key, list)?;
        store_read_about("paged list", &etcd_key, list_paged)?;

        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let update = store
            .guaranteed_update(&key, UpdateOptions::default(), move |mut obj, _| {
                seen.fetch_add(1, Ordering::SeqCst);
                obj.metadata
                    .labels
                    .insert("touched".to_owned(), "yes".to_owned());
                Ok(Update::new(obj))
            })
            .await;
        internal_about("guaranteed_update", &etcd_key, update)?;
        prop_assert_eq!(calls.load(Ordering::SeqCst), 0, "the update saw an object");

        let delete = store.delete(&key, DeleteOptions::default()).await;
        internal_about("delete", &etcd_key, delete)?;

        // Nothing was written: same bytes, same revision.
        let after = fixture.raw_get(&etcd_key).await;
        prop_assert_eq!(after, Some((bytes, revision)));
    }
    kv.delete(etcd_key.as_str(), None).await.unwrap();
    Ok(!readable)
}

#[test]
fn arbitrary_bytes_in_etcd_are_internal_errors_naming_the_key_and_stay_untouched() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fixture = runtime.block_on(Fixture::new());
    let case = AtomicUsize::new(0);
    let corrupt = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&(stored_bytes(), any::<bool>()), |(bytes, encrypted)| {
        let store = if encrypted {
            &fixture.encrypted
        } else {
            &fixture.plain
        };
        let n = case.fetch_add(1, Ordering::SeqCst);
        if runtime.block_on(check(&fixture, store, n, bytes))? {
            corrupt.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    runtime.block_on(async {
        let mut kv = fixture.raw.kv_client();
        let _ = kv
            .delete(
                fixture.prefix.as_str(),
                Some(RawDelete::new().with_prefix()),
            )
            .await;
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
    // The strategy is meant to produce corrupt bytes; make sure it does.
    let corrupt = corrupt.load(Ordering::SeqCst);
    assert!(
        corrupt as u32 >= CASES / 2,
        "only {corrupt} of {CASES} cases were corrupt"
    );
}
