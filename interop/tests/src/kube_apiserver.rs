//! A real kube-apiserver on a test's etcd, run as controller-runtime's envtest runs it:
//! certificates made here, token authentication, every request allowed, an
//! EncryptionConfiguration, on a free port of 127.0.0.1 and talking to nothing else.
//!
//! The binaries come from the Go module proxy (`interop/kube-apiserver`), one per kube
//! minor; `cargo xtask interop` builds them and names them in
//! `APISTORE_KUBE_APISERVER_1_<minor>_BIN`. Without one the tests that need it fail,
//! saying how to get it, rather than skip.

mod client;

use std::fs;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use tempfile::TempDir;

pub use client::{HttpError, KubeClient};

/// How long kube-apiserver gets to answer `/readyz` with 200 (it takes 5–7 s on two
/// cores; more when the machine is busy building).
const READY_TIMEOUT: Duration = Duration::from_secs(90);

/// How many lines of kube-apiserver's log a failure shows.
const LOG_TAIL_LINES: usize = 60;

/// The environment variable naming the kube-apiserver binary of kube `1.<minor>`:
/// `APISTORE_KUBE_APISERVER_1_37_BIN`.
pub fn kube_apiserver_bin_env(minor: u32) -> String {
    format!("APISTORE_KUBE_APISERVER_1_{minor}_BIN")
}

/// The kube-apiserver binary of kube `1.<minor>`, from [`kube_apiserver_bin_env`].
///
/// # Panics
/// When the variable is unset or names no file: the tests never skip.
pub fn kube_apiserver_binary(minor: u32) -> PathBuf {
    let env = kube_apiserver_bin_env(minor);
    let Some(path) = std::env::var_os(&env).filter(|p| !p.is_empty()) else {
        panic!(
            "{env} is not set: run `cargo xtask interop`, which builds kube-apiserver 1.{minor} \
             from the Go module proxy (interop/kube-apiserver, cached under \
             ~/.cache/apistore/) and runs these tests with it"
        );
    };
    let path = PathBuf::from(path);
    assert!(
        path.is_file(),
        "{env}={} does not exist: run `cargo xtask interop`, which builds it",
        path.display()
    );
    path
}

/// A running kube-apiserver; stopped (and its directory removed) when dropped. If the
/// test is failing by then, the end of its log goes to stderr first.
#[derive(Debug)]
pub struct KubeApiServer {
    child: Option<Child>,
    client: KubeClient,
    log: PathBuf,
    // Dropped last: certificates, keys, token file and log.
    dir: TempDir,
}

impl KubeApiServer {
    /// Starts `binary` on the etcd at `etcd_endpoint` (objects under `/registry`, kube's
    /// default) with `encryption_config`, and waits until `/readyz` answers 200.
    ///
    /// # Panics
    /// When it cannot start or is not ready within `READY_TIMEOUT`; the message ends
    /// with its log's last lines.
    pub async fn start(binary: &Path, etcd_endpoint: &str, encryption_config: &Path) -> Self {
        let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("tempdir: {err}"));
        let files = Files::write(dir.path());
        let port = free_port();
        let log = dir.path().join("kube-apiserver.log");
        let log_file = fs::File::create(&log).unwrap_or_else(|err| panic!("create log: {err}"));
        let log_err = log_file
            .try_clone()
            .unwrap_or_else(|err| panic!("clone log: {err}"));
        let path = |p: &Path| p.display().to_string();
        let args = [
            format!("--etcd-servers={etcd_endpoint}"),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            // envtest's loopback setup: no endpoints reconciler writing the `kubernetes`
            // Service's endpoints, services from a small range.
            "--endpoint-reconciler-type=none".to_owned(),
            "--service-cluster-ip-range=127.96.0.0/24".to_owned(),
            format!("--cert-dir={}", path(dir.path())),
            format!("--tls-cert-file={}", path(&files.serving_cert)),
            format!("--tls-private-key-file={}", path(&files.serving_key)),
            format!("--token-auth-file={}", path(&files.tokens)),
            "--authorization-mode=AlwaysAllow".to_owned(),
            format!("--service-account-issuer=https://127.0.0.1:{port}"),
            format!(
                "--service-account-key-file={}",
                path(&files.service_account_public)
            ),
            format!(
                "--service-account-signing-key-file={}",
                path(&files.service_account_private)
            ),
            format!("--encryption-provider-config={}", path(encryption_config)),
            "--allow-privileged=true".to_owned(),
            // No controller manager creates the `default` ServiceAccount a Pod would need.
            "--disable-admission-plugins=ServiceAccount".to_owned(),
            "--profiling=false".to_owned(),
        ];
        let child = Command::new(binary)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", binary.display()));
        let mut server = Self {
            child: Some(child),
            client: KubeClient::new(port, files.ca_der, &files.token),
            log,
            dir,
        };
        server.wait_ready(binary).await;
        server
    }

    /// Polls `/readyz` until it answers 200.
    async fn wait_ready(&mut self, binary: &Path) {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                self.child = None;
                panic!(
                    "{} exited ({status}) before it was ready; its log ends:\n{}",
                    binary.display(),
                    self.log_tail(LOG_TAIL_LINES)
                );
            }
            let last = match self.client.request("GET", "/readyz", None).await {
                Ok(_) => {
                    eprintln!(
                        "kube-apiserver ({}) ready on 127.0.0.1:{} in {:.1} s",
                        binary.display(),
                        self.client.port(),
                        started.elapsed().as_secs_f64()
                    );
                    return;
                }
                Err(err) => err.to_string(),
            };
            assert!(
                started.elapsed() < READY_TIMEOUT,
                "{} was not ready within {READY_TIMEOUT:?} (last answer: {last}); its log ends:\n{}",
                binary.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The REST client, authenticated as a member of `system:masters`.
    pub fn client(&self) -> &KubeClient {
        &self.client
    }

    /// The last `lines` lines of its log (stdout and stderr).
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log, lines)
    }

    /// Its temporary directory (certificates, token file, log).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Stops it (SIGKILL: nothing of its state outlives the test) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "kube-apiserver's log ({}) ends:\n{}",
                self.log.display(),
                self.log_tail(LOG_TAIL_LINES)
            );
        }
        self.stop();
    }
}

/// The files kube-apiserver is started with.
struct Files {
    ca_der: Vec<u8>,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    service_account_private: PathBuf,
    service_account_public: PathBuf,
    tokens: PathBuf,
    token: String,
}

impl Files {
    /// A CA, a serving certificate for 127.0.0.1 and localhost signed by it, a
    /// service-account signing key, and a token file with one token in
    /// `system:masters`.
    fn write(dir: &Path) -> Self {
        let write = |name: &str, contents: &str| {
            let path = dir.join(name);
            fs::write(&path, contents).unwrap_or_else(|err| panic!("write {name}: {err}"));
            path
        };
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        ca.distinguished_name
            .push(DnType::CommonName, "apistore-interop-ca");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca, new_key()).unwrap_or_else(|e| panic!("{e}"));
        let mut serving =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
                .unwrap_or_else(|e| panic!("{e}"));
        serving
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_key = new_key();
        let serving_cert = serving
            .signed_by(&serving_key, &ca)
            .unwrap_or_else(|e| panic!("{e}"));
        let service_account = new_key();
        let token = format!("apistore-interop-{}", std::process::id());
        Self {
            ca_der: ca.der().to_vec(),
            serving_cert: write("serving.crt", &serving_cert.pem()),
            serving_key: write("serving.key", &serving_key.serialize_pem()),
            service_account_private: write("service-account.key", &service_account.serialize_pem()),
            service_account_public: write("service-account.pub", &service_account.public_key_pem()),
            tokens: write(
                "tokens.csv",
                &format!("{token},apistore-interop,apistore-interop,\"system:masters\"\n"),
            ),
            token,
        }
    }
}

fn new_key() -> KeyPair {
    KeyPair::generate().unwrap_or_else(|err| panic!("generate a key: {err}"))
}

/// A port on 127.0.0.1 nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .unwrap_or_else(|err| panic!("find a free port: {err}"))
}

/// The last `lines` lines of a file (its last 64 KiB at most).
fn log_tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = fs::File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or_default();
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(64 * 1024)));
    let mut bytes = Vec::new();
    let _ = file.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
