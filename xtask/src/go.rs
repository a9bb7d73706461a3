//! Go: finding the toolchain and building the Go programs under `interop/` (the etcd
//! servers of `interop/etcd/<line>/` and the reference harness of `interop/reference/`).
//!
//! Builds use a module cache and a build cache under `target/go/`, so a clean clone's
//! first run downloads from the Go module proxy into `target/` and later runs reuse it
//! (`cargo clean` removes it: the cache is kept writable for that).

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, XtaskError};
use crate::run::run_step;

/// Where Go is looked for after `PATH`: the official tarball's install location.
const WELL_KNOWN_GO: &str = "/usr/local/go/bin/go";

/// The module cache, relative to the workspace root.
pub(crate) const MOD_CACHE_DIR: &str = "target/go/mod";
/// The build cache, relative to the workspace root.
pub(crate) const BUILD_CACHE_DIR: &str = "target/go/cache";

/// A Go toolchain, set up to build in this workspace.
#[derive(Debug, Clone)]
pub(crate) struct Go {
    binary: PathBuf,
    root: PathBuf,
}

impl Go {
    /// `go` on `PATH`, else [`WELL_KNOWN_GO`]; the error is one line saying what
    /// `needed_by` needs.
    pub(crate) fn find(root: &Path, needed_by: &str) -> Result<Self> {
        let on_path = env::var_os("PATH").and_then(|paths| {
            env::split_paths(&paths)
                .map(|dir| dir.join("go"))
                .find(|candidate| candidate.is_file())
        });
        let binary = on_path
            .or_else(|| Some(PathBuf::from(WELL_KNOWN_GO)).filter(|path| path.is_file()))
            .ok_or_else(|| {
                XtaskError::GoMissing(format!(
                    "{needed_by} needs Go 1.26 or newer (`go` on PATH or {WELL_KNOWN_GO}, \
                     from https://go.dev/dl/) and access to the Go module proxy"
                ))
            })?;
        let go = Self {
            binary,
            root: root.to_path_buf(),
        };
        println!("xtask: go: {} ({})", go.binary.display(), go.version());
        Ok(go)
    }

    /// `go version`'s answer, for the log.
    fn version(&self) -> String {
        Command::new(&self.binary)
            .arg("version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .filter(|version| !version.is_empty())
            .unwrap_or_else(|| "version unknown".to_owned())
    }

    /// A `go` command in `module_dir` with the workspace's caches.
    ///
    /// `-mod=mod` lets a module whose `go.sum` lacks a line fetch it rather than fail;
    /// `-modcacherw` keeps the module cache writable so `cargo clean` can remove it.
    pub(crate) fn command(&self, module_dir: &Path) -> Command {
        let mut command = Command::new(&self.binary);
        command
            .current_dir(module_dir)
            .env("GOFLAGS", "-mod=mod -modcacherw")
            .env("GOMODCACHE", self.root.join(MOD_CACHE_DIR))
            .env("GOCACHE", self.root.join(BUILD_CACHE_DIR))
            .stdin(Stdio::null());
        command
    }

    /// `go build <flags> -o <output> .` in `module_dir`, with `env` set.
    ///
    /// The binary is written next to `output` first and renamed into place, so a run
    /// that is interrupted never leaves half a binary where a later run would trust it.
    pub(crate) fn build(
        &self,
        module_dir: &Path,
        output: &Path,
        env: &[(&str, &str)],
        flags: &[&str],
    ) -> Result<()> {
        let partial = output.with_extension("partial");
        let mut build = self.command(module_dir);
        build.envs(env.iter().copied()).arg("build").args(flags);
        build.arg("-o").arg(&partial).arg(".");
        run_step(&mut build)?;
        std::fs::rename(&partial, output)
            .map_err(|e| XtaskError::io(format!("move {} into place", output.display()), e))
    }
}
