//! kube-apiserver, built from the Go module proxy for the differential tests against a
//! real API server (`interop/tests/tests/kube_apiserver.rs`).
//!
//! `interop/kube-apiserver/go-<minor>.mod` requires `k8s.io/kubernetes` at one release
//! and replaces each staging module (`k8s.io/api`, `k8s.io/apiserver`...) with its
//! published `v0.<minor>.<patch>`; `go build -modfile=go-<minor>.mod
//! k8s.io/kubernetes/cmd/kube-apiserver` builds it. That takes about 14 minutes on two
//! cores for 1.37 (6 for 1.31), so the binary is kept outside `target/`, in
//! `${XDG_CACHE_HOME:-$HOME/.cache}/apistore/`, named by the release and a hash of the
//! modfile, its go.sum and the build flags: a later run on the same machine (a CI run
//! after `cargo clean` too) reuses it, and a changed pin builds again.

use std::env;
use std::ffi::OsStr;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use apistore_testing::etcd::ETCD_BIN_ENV;

use crate::error::{Result, XtaskError};
use crate::etcd_versions::{self, EtcdVersion};
use crate::go::Go;
use crate::run::run_step;
use crate::test_build::{WorkspaceBuild, run_all};

/// The Go module that builds kube-apiserver, relative to the workspace root.
const MODULE_DIR: &str = "interop/kube-apiserver";

/// The test binary (a target of `apistore-interop`) that runs kube-apiserver; it runs
/// once, on etcd 3.6, not once per etcd version as the other differential tests do.
pub(crate) const TEST_TARGET: &str = "kube_apiserver";

/// The package the built binary comes from.
const PACKAGE: &str = "k8s.io/kubernetes/cmd/kube-apiserver";

/// The module whose version a modfile pins.
const KUBERNETES_MODULE: &str = "k8s.io/kubernetes";

/// The kube minors built, newest first (the newer one takes longer: built first, so a
/// broken pin shows early).
const MINORS: [u32; 2] = [37, 31];

/// How long a cold build took here, for the one line said before building.
fn cold_build_estimate(minor: u32) -> &'static str {
    if minor >= 37 {
        "~14 min cold"
    } else {
        "~6 min cold"
    }
}

/// The environment variable naming kube `1.<minor>`'s binary, for the tests (the same
/// name `apistore_interop::kube_apiserver::kube_apiserver_bin_env` reads); set in
/// xtask's own environment, it names a binary to use instead of building one.
fn bin_env(minor: u32) -> String {
    format!("APISTORE_KUBE_APISERVER_1_{minor}_BIN")
}

/// Every minor's kube-apiserver, provisioned before anything runs.
#[derive(Debug, Default)]
pub(crate) struct KubeApiServers {
    /// `(APISTORE_KUBE_APISERVER_1_<minor>_BIN, binary)` for each minor provisioned.
    env: Vec<(String, PathBuf)>,
    /// The builds that failed: what, how long it took, why.
    pub(crate) failures: Vec<(String, Duration, XtaskError)>,
}

impl KubeApiServers {
    /// Builds (or finds cached) each of [`MINORS`]; a failure is kept for the report,
    /// and the tests of that minor then fail saying its binary is missing.
    pub(crate) fn provision(root: &Path, go: &Go) -> Self {
        let mut servers = Self::default();
        for minor in MINORS {
            let started = Instant::now();
            match provision(root, go, minor) {
                Ok(binary) => servers.env.push((bin_env(minor), binary)),
                Err(error) => servers.failures.push((
                    format!("build kube-apiserver 1.{minor} ({MODULE_DIR})"),
                    started.elapsed(),
                    error,
                )),
            }
        }
        servers
    }

    /// Runs [`TEST_TARGET`] of `package` once, with every binary provisioned and an etcd
    /// 3.6 (the one `etcds` holds, else built) for the tests to start their own from.
    pub(crate) fn run_tests(
        &self,
        root: &Path,
        go: &Go,
        build: &WorkspaceBuild,
        package: &str,
        etcds: &[(EtcdVersion, PathBuf)],
    ) -> Result<()> {
        let etcd = match etcds
            .iter()
            .find(|(version, _)| *version == EtcdVersion::V3_6)
        {
            Some((_, binary)) => binary.clone(),
            None => etcd_versions::provision_etcd(root, EtcdVersion::V3_6, Some(go))?,
        };
        let mut env: Vec<(&str, &OsStr)> = vec![(ETCD_BIN_ENV, etcd.as_os_str())];
        env.extend(
            self.env
                .iter()
                .map(|(name, binary)| (name.as_str(), binary.as_os_str())),
        );
        run_all(
            build
                .tests_of(&[package])
                .filter(|binary| binary.target == TEST_TARGET),
            &env,
            &[],
        )
    }
}

/// kube-apiserver of kube `1.<minor>`: `$APISTORE_KUBE_APISERVER_1_<minor>_BIN` if set,
/// else the cached build for the modfile's pin, else a fresh build into the cache.
fn provision(root: &Path, go: &Go, minor: u32) -> Result<PathBuf> {
    if let Some(path) = env::var_os(bin_env(minor)).filter(|p| !p.is_empty()) {
        let path = PathBuf::from(path);
        if !path.is_file() {
            return Err(XtaskError::io(
                format!("find {}={}", bin_env(minor), path.display()),
                std::io::ErrorKind::NotFound.into(),
            ));
        }
        println!(
            "xtask: kube-apiserver 1.{minor}: {} (from {})",
            path.display(),
            bin_env(minor)
        );
        return Ok(path);
    }
    let module = root.join(MODULE_DIR);
    let modfile_name = format!("go-1.{minor}.mod");
    let modfile = module.join(&modfile_name);
    let text = read(&modfile)?;
    let release = pinned_release(&text).ok_or_else(|| {
        XtaskError::InteropIncomplete(format!(
            "{} pins no `{KUBERNETES_MODULE} v1.{minor}.x`",
            modfile.display()
        ))
    })?;
    let ldflags = version_ldflags(release);
    let sum = read(&modfile.with_extension("sum")).unwrap_or_default();
    let key = cache_key(&[&text, &sum, &ldflags, PACKAGE]);
    let dir = cache_dir()?;
    let name = format!("kube-apiserver-{release}-{key}");
    let binary = dir.join(&name);
    if binary.is_file() {
        println!(
            "xtask: kube-apiserver {release}: {} (built before)",
            binary.display()
        );
        return Ok(binary);
    }
    println!(
        "xtask: building kube-apiserver {release} from the Go module proxy ({})...",
        cold_build_estimate(minor)
    );
    fs::create_dir_all(&dir).map_err(|e| XtaskError::io(format!("create {}", dir.display()), e))?;
    let started = Instant::now();
    let partial = dir.join(format!("{name}.partial"));
    // As kube's release builds: static, no cgo, paths trimmed, the version stamped.
    // `-mod=readonly`: the committed modfile and go.sum are complete, and a build never
    // rewrites them.
    run_step(
        go.command(&module)
            .env("CGO_ENABLED", "0")
            .arg("build")
            .arg(format!("-modfile={modfile_name}"))
            .args(["-mod=readonly", "-trimpath"])
            .arg(format!("-ldflags={ldflags}"))
            .arg("-o")
            .arg(&partial)
            .arg(PACKAGE),
    )?;
    let reported = reported_version(&partial);
    if reported != format!("Kubernetes {release}") {
        return Err(XtaskError::InteropIncomplete(format!(
            "{} was built from {} pinning {release} but says `{reported}`",
            partial.display(),
            modfile.display()
        )));
    }
    fs::rename(&partial, &binary)
        .map_err(|e| XtaskError::io(format!("move {} into place", binary.display()), e))?;
    remove_stale(&dir, release, &binary);
    println!(
        "xtask: built kube-apiserver {release} in {:.0} s: {}",
        started.elapsed().as_secs_f64(),
        binary.display()
    );
    Ok(binary)
}

/// `${XDG_CACHE_HOME:-$HOME/.cache}/apistore`.
fn cache_dir() -> Result<PathBuf> {
    let base = env::var_os("XDG_CACHE_HOME")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            env::var_os("HOME")
                .filter(|p| !p.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })
        .ok_or_else(|| {
            XtaskError::InteropIncomplete(
                "neither XDG_CACHE_HOME nor HOME is set: nowhere to cache kube-apiserver"
                    .to_owned(),
            )
        })?;
    Ok(base.join("apistore"))
}

fn read(path: &Path) -> Result<String> {
    fs::read_to_string(path).map_err(|e| XtaskError::io(format!("read {}", path.display()), e))
}

/// `-X` flags stamping the release into the binary, as kube's `hack/lib/version.sh`
/// does (without them it says `v0.0.0-master+$Format:%H$`).
fn version_ldflags(release: &str) -> String {
    [
        "k8s.io/component-base/version",
        "k8s.io/client-go/pkg/version",
    ]
    .iter()
    .map(|package| format!("-X {package}.gitVersion={release}"))
    .collect::<Vec<_>>()
    .join(" ")
}

/// `kube-apiserver --version`'s answer (`Kubernetes v1.37.2`).
fn reported_version(binary: &Path) -> String {
    Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Earlier builds of the same release (another modfile or flags): about 100 MB each.
fn remove_stale(dir: &Path, release: &str, keep: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("kube-apiserver-{release}-");
    for entry in entries.flatten() {
        let path = entry.path();
        let stale = path != keep
            && entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with(&prefix));
        if stale && fs::remove_file(&path).is_ok() {
            println!("xtask: removed the earlier build {}", path.display());
        }
    }
}

/// The release a modfile pins for [`KUBERNETES_MODULE`], with its `v`: `v1.37.2` from
/// `require k8s.io/kubernetes v1.37.2` (or the same line inside a `require ( ... )`).
fn pinned_release(modfile: &str) -> Option<&str> {
    modfile.lines().find_map(|line| {
        let line = line.split("//").next().unwrap_or_default().trim();
        let line = line.strip_prefix("require").map_or(line, str::trim_start);
        let mut words = line.split_whitespace();
        if words.next() != Some(KUBERNETES_MODULE) {
            return None;
        }
        let release = words.next()?;
        let numbers = release.strip_prefix('v')?;
        let numeric = numbers.split('.').count() == 3
            && numbers
                .split('.')
                .all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        numeric.then_some(release)
    })
}

/// 16 hex digits naming these inputs: FNV-1a over each, with a separator between. A
/// cache key, not a checksum anyone relies on for integrity; stable across Rust
/// releases, unlike `DefaultHasher`.
fn cache_key(parts: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let mut key = String::with_capacity(16);
    let _ = write!(key, "{hash:016x}");
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_is_read_from_the_modfile() {
        let modfile = "module x\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes v1.37.2\n\n\
                       replace (\n\tk8s.io/api => k8s.io/api v0.37.2\n)\n";
        assert_eq!(pinned_release(modfile), Some("v1.37.2"));
        let block = "require (\n\tk8s.io/api v0.31.14 // indirect\n\
                     \tk8s.io/kubernetes v1.31.14\n)\n";
        assert_eq!(pinned_release(block), Some("v1.31.14"));
        assert_eq!(
            pinned_release("require k8s.io/kubernetes v1.38.0-alpha.1\n"),
            None
        );
        assert_eq!(pinned_release("module x\n"), None);
    }

    #[test]
    fn the_cache_key_follows_every_input() {
        let key = cache_key(&["a", "b"]);
        assert_eq!(key.len(), 16);
        assert_eq!(key, cache_key(&["a", "b"]));
        assert_ne!(key, cache_key(&["ab", ""]));
        assert_ne!(key, cache_key(&["a", "c"]));
    }

    #[test]
    fn the_release_is_stamped() {
        assert_eq!(
            version_ldflags("v1.31.14"),
            "-X k8s.io/component-base/version.gitVersion=v1.31.14 \
             -X k8s.io/client-go/pkg/version.gitVersion=v1.31.14"
        );
    }
}
