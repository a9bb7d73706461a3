//! Go: finding the toolchain and building the Go programs under `interop/` (the etcd
//! servers of `interop/etcd/<line>/` and the reference harness of `interop/reference/`).
//!
//! Builds use Go's own module and build caches (`GOMODCACHE` and `GOCACHE`: by default
//! `~/go/pkg/mod` and `~/.cache/go-build`), as any Go build does: a later run, a fresh
//! clone's CI on the same machine included, reuses what an earlier one downloaded and
//! compiled (the k8s.io modules of seven kube minors, k8s.io/kubernetes, etcd, kine),
//! which under `target/` it would download and compile again every time. The module
//! cache is kept writable (`-modcacherw`), so `go clean -modcache` can remove it.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Result, XtaskError};
use crate::run::run_step;

/// Where Go is looked for after `PATH`: the official tarball's install location.
const WELL_KNOWN_GO: &str = "/usr/local/go/bin/go";

/// A Go toolchain, set up to build in this workspace.
#[derive(Debug, Clone)]
pub(crate) struct Go {
    binary: PathBuf,
}

impl Go {
    /// `go` on `PATH`, else [`WELL_KNOWN_GO`]; the error is one line saying what
    /// `needed_by` needs.
    pub(crate) fn find(needed_by: &str) -> Result<Self> {
        let binary = find_go(env::var_os("PATH"), Path::new(WELL_KNOWN_GO))
            .ok_or_else(|| XtaskError::GoMissing(missing(needed_by)))?;
        let go = Self { binary };
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

/// `go` in one of `path`'s directories, else `well_known` if it is a file.
fn find_go(path: Option<OsString>, well_known: &Path) -> Option<PathBuf> {
    path.and_then(|paths| {
        env::split_paths(&paths)
            .map(|dir| dir.join("go"))
            .find(|candidate| candidate.is_file())
    })
    .or_else(|| Some(well_known.to_path_buf()).filter(|path| path.is_file()))
}

/// The one line said when Go is missing.
fn missing(needed_by: &str) -> String {
    format!(
        "{needed_by} needs Go 1.26 or newer (`go` on PATH or {WELL_KNOWN_GO}, from \
         https://go.dev/dl/) and access to the Go module proxy"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_is_found_on_path_then_at_the_well_known_place() {
        let dir = env::temp_dir().join(format!("xtask-go-test-{}", std::process::id()));
        let bin = dir.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let go = bin.join("go");
        std::fs::write(&go, "").unwrap();
        let nowhere = dir.join("nowhere");
        assert_eq!(
            find_go(Some(bin.into_os_string()), &nowhere),
            Some(go.clone())
        );
        assert_eq!(
            find_go(Some(dir.clone().into_os_string()), &go),
            Some(go.clone())
        );
        assert_eq!(find_go(None, &go), Some(go));
        assert_eq!(find_go(Some(dir.clone().into_os_string()), &nowhere), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_missing_go_message_is_one_line_naming_what_is_needed() {
        let message = missing("cargo xtask interop");
        assert!(!message.contains('\n'));
        assert!(message.starts_with("cargo xtask interop needs Go"));
        assert!(message.contains("module proxy"));
    }
}
