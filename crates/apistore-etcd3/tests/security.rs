//! TLS, mutual TLS and user/password authentication against real etcd processes
//! (each test starts its own, since these are etcd flags), with certificates made here.
//!
//! Each misconfiguration must be an error at connect, saying which part is wrong, well
//! within the dial timeout; secrets never show in `Debug` output or error messages.

// Helpers outside #[test] functions unwrap too: a panic there is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use apistore_etcd3::{
    ClientConfig, ConnectError, Etcd3Store, EtcdClient, ResourceConfig, StoreConfig, TlsConfig,
};
use apistore_storage::{DynamicObject, GetOptions, ListOptions, Storage};
use apistore_testing::etcd::{EtcdOptions, EtcdServer, unique_prefix};
use etcd_client::{Client, Permission};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

/// Long enough for a loaded machine, short enough that a hang shows as a failure.
const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

/// A certificate authority made for one test.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A certificate and its key, PEM.
struct Leaf {
    cert_pem: String,
    key_pem: String,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        Self { issuer }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A certificate for `name`, valid for loopback, usable as server and client (etcd
    /// with `--client-cert-auth` dials its own gateway with its serving certificate).
    fn leaf(&self, name: &str) -> Leaf {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        }
    }
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

/// An etcd serving clients over TLS with a certificate from `ca`; with `client_ca`, it
/// also requires client certificates signed by that CA.
fn tls_etcd(dir: &TempDir, ca: &Ca, client_ca: Option<&Ca>) -> EtcdServer {
    let server = ca.leaf("etcd");
    let cert = write(dir.path(), "server.pem", &server.cert_pem);
    let key = write(dir.path(), "server-key.pem", &server.key_pem);
    let mut extra_args = vec![
        format!("--cert-file={}", cert.display()),
        format!("--key-file={}", key.display()),
    ];
    if let Some(client_ca) = client_ca {
        let trusted = write(dir.path(), "client-ca.pem", &client_ca.pem());
        extra_args.push(format!("--trusted-ca-file={}", trusted.display()));
        extra_args.push("--client-cert-auth".to_owned());
    }
    EtcdServer::start(EtcdOptions {
        name: "apistore-tls".to_owned(),
        client_tls: true,
        extra_args,
        ..EtcdOptions::default()
    })
    .unwrap_or_else(|err| panic!("{err}"))
}

fn config(endpoint: String, tls: Option<TlsConfig>) -> ClientConfig {
    ClientConfig {
        dial_timeout: DIAL_TIMEOUT,
        tls,
        ..ClientConfig::new([endpoint])
    }
}

/// Connects, and says how long it took.
async fn connect(config: &ClientConfig) -> (Result<EtcdClient, ConnectError>, Duration) {
    let started = Instant::now();
    let result = EtcdClient::connect(config).await;
    (result, started.elapsed())
}

/// Creates and reads back one object through a store on `client`, and lists it: the
/// store follows the newest kube, so on etcd 3.7+ the list is a `RangeStream`, which
/// must go with the same TLS and token as every other request (on older etcds, the
/// refused stream and the paged `Range` after it).
async fn round_trip(client: EtcdClient, test: &str) {
    let store: Etcd3Store<DynamicObject> = Etcd3Store::new(
        client,
        StoreConfig {
            resource: ResourceConfig {
                prefix: unique_prefix(test),
                ..ResourceConfig::for_resource("configmaps")
            },
            ..StoreConfig::default()
        },
    );
    let cm = DynamicObject::new("v1", "ConfigMap", "cm1").within("default");
    let created = store
        .create("configmaps/default/cm1", cm, 0)
        .await
        .unwrap_or_else(|err| panic!("{test}: create: {err}"));
    let read = store
        .get("configmaps/default/cm1", &GetOptions::default())
        .await
        .unwrap_or_else(|err| panic!("{test}: get: {err}"));
    assert_eq!(created, read, "{test}");
    let everything = ListOptions {
        recursive: true,
        ..ListOptions::default()
    };
    let listed = store
        .list("configmaps", &everything)
        .await
        .unwrap_or_else(|err| panic!("{test}: list: {err}"));
    assert_eq!(listed.items, [created], "{test}");
}

/// The error, and that it came well before the dial timeout (not a hang).
fn quick_error(case: &str, outcome: (Result<EtcdClient, ConnectError>, Duration)) -> ConnectError {
    let (result, took) = outcome;
    let err = match result {
        Ok(client) => panic!("{case}: connected: {client:?}"),
        Err(err) => err,
    };
    eprintln!("{case}: {err} ({took:?})");
    assert!(
        took < DIAL_TIMEOUT / 2,
        "{case}: took {took:?} to fail ({err}), as if it hung"
    );
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_right_ca_creates_and_gets() {
    let dir = TempDir::new().unwrap();
    let ca = Ca::new("etcd-ca");
    let etcd = tls_etcd(&dir, &ca, None);
    assert!(etcd.endpoint().starts_with("https://127.0.0.1:"));
    let ca_file = write(dir.path(), "ca.pem", &ca.pem());
    let tls = TlsConfig::from_files(Some(&ca_file), None, None)
        .unwrap()
        .unwrap();
    let (client, _) = connect(&config(etcd.endpoint(), Some(tls))).await;
    let client = client.unwrap_or_else(|err| panic!("{err}"));
    round_trip(client, "tls-right-ca").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_wrong_ca_fails_at_connect_saying_the_server_is_not_trusted() {
    let dir = TempDir::new().unwrap();
    let etcd = tls_etcd(&dir, &Ca::new("etcd-ca"), None);
    let stranger = Ca::new("someone-else");
    let tls = TlsConfig::with_ca_pem(stranger.pem());
    let err = quick_error(
        "wrong CA",
        connect(&config(etcd.endpoint(), Some(tls))).await,
    );
    assert!(
        matches!(err, ConnectError::ServerCertificateRejected { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(message.contains("not trusted"), "{message}");
    assert!(message.contains(&etcd.endpoint()), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_name_the_certificate_lacks_is_refused() {
    let dir = TempDir::new().unwrap();
    let ca = Ca::new("etcd-ca");
    let etcd = tls_etcd(&dir, &ca, None);
    let tls = TlsConfig {
        server_name: Some("etcd.example".to_owned()),
        ..TlsConfig::with_ca_pem(ca.pem())
    };
    let err = quick_error(
        "wrong name",
        connect(&config(etcd.endpoint(), Some(tls))).await,
    );
    assert!(
        matches!(err, ConnectError::ServerCertificateRejected { .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_a_client_certificate_etcd_trusts() {
    let dir = TempDir::new().unwrap();
    let ca = Ca::new("etcd-ca");
    let clients = Ca::new("client-ca");
    let etcd = tls_etcd(&dir, &ca, Some(&clients));

    // No client certificate.
    let err = quick_error(
        "no client certificate",
        connect(&config(
            etcd.endpoint(),
            Some(TlsConfig::with_ca_pem(ca.pem())),
        ))
        .await,
    );
    assert!(
        matches!(err, ConnectError::ClientCertificateRejected { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("client certificate"), "{err}");

    // A client certificate from a CA etcd does not trust.
    let untrusted = Ca::new("untrusted").leaf("intruder");
    let err = quick_error(
        "untrusted client certificate",
        connect(&config(
            etcd.endpoint(),
            Some(
                TlsConfig::with_ca_pem(ca.pem())
                    .client_identity(untrusted.cert_pem, untrusted.key_pem),
            ),
        ))
        .await,
    );
    assert!(
        matches!(err, ConnectError::ClientCertificateRejected { .. }),
        "{err:?}"
    );

    // The right one, from files as the command reads them.
    let leaf = clients.leaf("apistore");
    let ca_file = write(dir.path(), "ca.pem", &ca.pem());
    let cert_file = write(dir.path(), "client.pem", &leaf.cert_pem);
    let key_file = write(dir.path(), "client-key.pem", &leaf.key_pem);
    let tls = TlsConfig::from_files(Some(&ca_file), Some(&cert_file), Some(&key_file))
        .unwrap()
        .unwrap();
    let debug = format!("{tls:?}");
    assert!(!debug.contains("PRIVATE KEY"), "{debug}");
    let (client, _) = connect(&config(etcd.endpoint(), Some(tls))).await;
    let client = client.unwrap_or_else(|err| panic!("{err}"));
    round_trip(client, "mtls").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_etcd_behind_an_https_endpoint_is_a_tls_error() {
    let etcd = EtcdServer::start(EtcdOptions::default()).unwrap_or_else(|err| panic!("{err}"));
    let endpoint = etcd.endpoint().replacen("http://", "https://", 1);
    let tls = TlsConfig::with_ca_pem(Ca::new("ca").pem());
    let err = quick_error("plain etcd", connect(&config(endpoint, Some(tls))).await);
    assert!(matches!(err, ConnectError::Tls { .. }), "{err:?}");
}

const ROOT_PASSWORD: &str = "root-Pa55-secret";
const APP_PASSWORD: &str = "app-Pa55-secret";

/// Turns authentication on: `root` (with the root role), and `app`, who may read and
/// write everything under `/apistore-test/` (where [`unique_prefix`] puts keys).
async fn enable_auth(endpoint: &str, options: Option<etcd_client::ConnectOptions>) {
    let mut admin = Client::connect([endpoint], options).await.unwrap();
    admin.user_add("root", ROOT_PASSWORD, None).await.unwrap();
    // etcd 3.4 creates the root role on first grant; add it when it does not.
    let _ = admin.role_add("root").await;
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("app").await.unwrap();
    admin
        .role_grant_permission(
            "app",
            Permission::read_write("/apistore-test/").with_prefix(),
        )
        .await
        .unwrap();
    admin.user_add("app", APP_PASSWORD, None).await.unwrap();
    admin.user_grant_role("app", "app").await.unwrap();
    admin.auth_enable().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_users_authenticate_at_connect_and_secrets_stay_hidden() {
    let etcd = EtcdServer::start(EtcdOptions {
        name: "apistore-auth".to_owned(),
        ..EtcdOptions::default()
    })
    .unwrap_or_else(|err| panic!("{err}"));
    enable_auth(&etcd.endpoint(), None).await;

    // The right password: a store works under the user's prefix.
    let good = ClientConfig {
        credentials: Some(("app".to_owned(), APP_PASSWORD.to_owned())),
        ..config(etcd.endpoint(), None)
    };
    let (client, _) = connect(&good).await;
    let client = client.unwrap_or_else(|err| panic!("{err}"));
    let debug = format!("{good:?} {good:#?} {client:?}");
    assert!(!debug.contains(APP_PASSWORD), "{debug}");
    assert!(debug.contains("app"), "{debug}");
    round_trip(client, "auth-right-password").await;

    // root, too.
    let root = ClientConfig {
        credentials: Some(("root".to_owned(), ROOT_PASSWORD.to_owned())),
        ..config(etcd.endpoint(), None)
    };
    let (client, _) = connect(&root).await;
    client.unwrap_or_else(|err| panic!("{err}"));

    // A wrong password: refused at connect, naming the user, never a password.
    let wrong_password = "wrong-Pa55-secret";
    let bad = ClientConfig {
        credentials: Some(("app".to_owned(), wrong_password.to_owned())),
        ..config(etcd.endpoint(), None)
    };
    let err = quick_error("wrong password", connect(&bad).await);
    assert!(
        matches!(&err, ConnectError::AuthenticationFailed { user, .. } if user == "app"),
        "{err:?}"
    );
    let shown = format!("{err} {err:?}");
    for secret in [wrong_password, APP_PASSWORD, ROOT_PASSWORD] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("\"app\""), "{shown}");

    // An unknown user is refused the same way.
    let nobody = ClientConfig {
        credentials: Some(("nobody".to_owned(), APP_PASSWORD.to_owned())),
        ..config(etcd.endpoint(), None)
    };
    let err = quick_error("unknown user", connect(&nobody).await);
    assert!(
        matches!(err, ConnectError::AuthenticationFailed { .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_a_password_together() {
    let dir = TempDir::new().unwrap();
    let ca = Ca::new("etcd-ca");
    let etcd = tls_etcd(&dir, &ca, None);
    let raw_tls =
        etcd_client::TlsOptions::new().ca_certificate(etcd_client::Certificate::from_pem(ca.pem()));
    enable_auth(
        &etcd.endpoint(),
        Some(etcd_client::ConnectOptions::new().with_tls(raw_tls)),
    )
    .await;
    let tls = TlsConfig::with_ca_pem(ca.pem());
    let good = ClientConfig {
        credentials: Some(("app".to_owned(), APP_PASSWORD.to_owned())),
        ..config(etcd.endpoint(), Some(tls.clone()))
    };
    let (client, _) = connect(&good).await;
    round_trip(client.unwrap_or_else(|err| panic!("{err}")), "tls-password").await;
    let bad = ClientConfig {
        credentials: Some(("app".to_owned(), ROOT_PASSWORD.to_owned())),
        ..config(etcd.endpoint(), Some(tls))
    };
    let err = quick_error("wrong password over TLS", connect(&bad).await);
    assert!(
        matches!(err, ConnectError::AuthenticationFailed { .. }),
        "{err:?}"
    );
}
