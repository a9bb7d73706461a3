//! Provisioning: what the build and the tests need and a fresh machine lacks.
//!
//! - protoc, for etcd-client's build script: the `protoc-bin-vendored` binary and its
//!   include files, copied to `target/tools/protoc/` so that `.cargo/config.toml` can
//!   point plain `cargo build`s at it too;
//! - an etcd binary: found like the test fixture finds it, else installed with
//!   `apt-get install etcd-server` when running as root (the 3.5 and 3.6 that
//!   `--etcd` selects are built by [`crate::etcd_versions`]);
//! - rustfmt and clippy, through rustup, when they are missing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use apistore_testing::etcd::{self, FixtureError};

use crate::error::{Result, XtaskError};
use crate::run::{command_line, first_output_line, run_step};

/// Where provisioned tools go, relative to the workspace root.
pub(crate) const TOOLS_DIR: &str = "target/tools";

/// Where protoc is copied, relative to the workspace root. `.cargo/config.toml`
/// names the binary inside it.
pub(crate) const PROTOC_DIR: &str = "target/tools/protoc";

/// Copies the vendored protoc (and the well-known `.proto` includes it finds through
/// `../include`) to [`PROTOC_DIR`]; returns the binary's path.
pub(crate) fn protoc(root: &Path) -> Result<PathBuf> {
    let vendored =
        protoc_bin_vendored::protoc_bin_path().map_err(|e| XtaskError::Protoc(e.to_string()))?;
    let include =
        protoc_bin_vendored::include_path().map_err(|e| XtaskError::Protoc(e.to_string()))?;
    let dir = root.join(PROTOC_DIR);
    let binary = dir.join("bin").join("protoc");
    copy_if_changed(&vendored, &binary)?;
    make_executable(&binary)?;
    copy_tree(&include, &dir.join("include"))?;
    println!("xtask: protoc: {}", binary.display());
    Ok(binary)
}

/// Copies `from` to `to` unless `to` already has the same bytes, through a temporary
/// file and a rename, so a build running the old copy never sees half a file.
fn copy_if_changed(from: &Path, to: &Path) -> Result<()> {
    let wanted =
        fs::read(from).map_err(|e| XtaskError::io(format!("read {}", from.display()), e))?;
    if fs::read(to).is_ok_and(|have| have == wanted) {
        return Ok(());
    }
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| XtaskError::io(format!("create {}", parent.display()), e))?;
    }
    let partial = to.with_extension("partial");
    fs::write(&partial, &wanted)
        .map_err(|e| XtaskError::io(format!("write {}", partial.display()), e))?;
    fs::rename(&partial, to)
        .map_err(|e| XtaskError::io(format!("move {} into place", to.display()), e))
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    let entries =
        fs::read_dir(from).map_err(|e| XtaskError::io(format!("list {}", from.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| XtaskError::io(format!("list {}", from.display()), e))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        if source.is_dir() {
            copy_tree(&source, &target)?;
        } else {
            copy_if_changed(&source, &target)?;
        }
    }
    Ok(())
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .map_err(|e| XtaskError::io(format!("make {} executable", path.display()), e))
}

#[cfg(not(unix))]
fn make_executable(_path: &Path) -> Result<()> {
    Ok(())
}

/// The etcd binary, installed through apt if it is missing and we are root.
pub(crate) fn etcd() -> Result<PathBuf> {
    let binary = match etcd::etcd_binary() {
        Ok(binary) => binary,
        // An explicit APISTORE_ETCD_BIN that is wrong is the user's to fix.
        Err(error @ FixtureError::BadEtcdBin { .. }) => return Err(error.into()),
        Err(_) => install_etcd()?,
    };
    println!(
        "xtask: etcd: {} ({})",
        binary.display(),
        etcd_version(&binary)
    );
    Ok(binary)
}

fn install_etcd() -> Result<PathBuf> {
    if !is_root() {
        return Err(XtaskError::EtcdMissing(
            "no etcd binary found, and installing one needs root. Run \
             `sudo apt-get install etcd-server` (Debian or Ubuntu), or download an etcd \
             release (v3.4 or newer) and set APISTORE_ETCD_BIN to its `etcd` binary"
                .to_owned(),
        ));
    }
    if !on_path("apt-get") {
        return Err(XtaskError::EtcdMissing(
            "no etcd binary found and no apt-get to install one with. Install etcd \
             (v3.4 or newer) with your package manager, or set APISTORE_ETCD_BIN to an \
             etcd binary"
                .to_owned(),
        ));
    }
    println!("xtask: no etcd binary found; installing Debian's etcd-server package");
    let apt = |args: &[&str]| {
        let mut command = Command::new("apt-get");
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdin(Stdio::null());
        command
    };
    run_step(&mut apt(&["update"]))?;
    run_step(&mut apt(&[
        "install",
        "-y",
        "--no-install-recommends",
        "etcd-server",
    ]))?;
    // The package may also start a system etcd on 2379; the fixture never uses it.
    etcd::etcd_binary().map_err(|e| {
        XtaskError::EtcdMissing(format!(
            "`apt-get install etcd-server` succeeded but etcd is still not found: {e}"
        ))
    })
}

/// The first line of `etcd --version`, e.g. `etcd Version: 3.4.23`.
pub(crate) fn etcd_version(binary: &Path) -> String {
    first_output_line(binary, &["--version"]).unwrap_or_else(|| "version unknown".to_owned())
}

/// Whether this process runs as root (`id -u` says 0).
pub(crate) fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// Makes sure `cargo fmt` and `cargo clippy` exist, adding them through rustup if not.
pub(crate) fn cargo_components(cargo: &Path) -> Result<()> {
    for (subcommand, component) in [("fmt", "rustfmt"), ("clippy", "clippy")] {
        let mut probe = Command::new(cargo);
        probe.args([subcommand, "--version"]);
        let present = probe
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if present {
            continue;
        }
        if !on_path("rustup") {
            return Err(XtaskError::ToolMissing(format!(
                "`{}` failed and there is no rustup to add {component} with; install \
                 the {component} component of your Rust toolchain",
                command_line(&probe)
            )));
        }
        println!("xtask: `cargo {subcommand}` is missing; adding the {component} component");
        run_step(Command::new("rustup").args(["component", "add", component]))?;
    }
    Ok(())
}
