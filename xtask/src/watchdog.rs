//! A server process that cannot outlive xtask: kine, and the PostgreSQL kine stores
//! its data in.
//!
//! The server runs under a `sh` watchdog that reads its standard input, held open
//! here: when xtask exits, however it exits (a panic, Ctrl-C, SIGKILL), the pipe closes
//! and the watchdog signals the server and waits for it, as `apistore-testing` does for
//! etcd. Stopping on purpose is the same: write a line, then wait for the watchdog.

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::Path;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};

use crate::error::{Result, XtaskError};

/// The watchdog: starts `"$0" "$@"` with its output appended to `$WATCHDOG_LOG`, waits
/// for a line (or the end) on its standard input, then sends `$WATCHDOG_SIGNAL`, waits
/// for the server to exit, and removes `$WATCHDOG_REMOVE` if set (so a server's
/// throwaway directory goes even when xtask is interrupted and never drops it).
const SCRIPT: &str = "\"$0\" \"$@\" </dev/null >>\"$WATCHDOG_LOG\" 2>&1 & server=$!\n\
                      read _ignored\n\
                      kill -s \"$WATCHDOG_SIGNAL\" \"$server\" 2>/dev/null; wait \"$server\"\n\
                      if [ -n \"$WATCHDOG_REMOVE\" ]; then rm -rf \"$WATCHDOG_REMOVE\"; fi";

/// A server under a watchdog; dropping it stops the server.
pub(crate) struct Watchdog {
    shell: Child,
    /// Closing it (or writing to it) tells the watchdog to stop the server.
    lifeline: Option<ChildStdin>,
}

impl Watchdog {
    /// Starts `program` with `args` in `dir`, its output appended to `log`; `signal`
    /// (`TERM`, `INT`) is what stops it: PostgreSQL takes `INT` as "fast shutdown",
    /// where `TERM` would wait for every client to leave. `remove`, if given, is removed
    /// once the server has exited.
    pub(crate) fn spawn<I, S>(
        program: &Path,
        args: I,
        dir: &Path,
        log: &Path,
        signal: &str,
        remove: Option<&Path>,
    ) -> Result<Self>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut shell = Command::new("sh")
            .arg("-c")
            .arg(SCRIPT)
            .arg(program)
            .args(args)
            .current_dir(dir)
            .env("WATCHDOG_LOG", log)
            .env("WATCHDOG_SIGNAL", signal)
            // Always set, so that one inherited from xtask's environment is never used.
            .env(
                "WATCHDOG_REMOVE",
                remove.map_or_else(Default::default, Path::as_os_str),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| XtaskError::Spawn {
                command: format!("sh -c <watchdog> {}", program.display()),
                source,
            })?;
        let lifeline = shell.stdin.take();
        Ok(Self { shell, lifeline })
    }

    /// The watchdog's exit status if it has exited (it only does once told to stop, or
    /// when it could not start the server at all).
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.shell.try_wait().ok().flatten()
    }

    /// Stops the server and waits for it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut lifeline) = self.lifeline.take() {
            let _ = lifeline.write_all(b"stop\n");
        }
        let _ = self.shell.wait();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopping_signals_the_server_waits_for_it_and_removes_its_directory() {
        let dir = std::env::temp_dir().join(format!("xtask-watchdog-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("log");
        let throwaway = dir.join("throwaway");
        std::fs::create_dir_all(throwaway.join("inside")).unwrap();
        // The server traps the signal it is sent and says so, then exits. (TERM: a
        // background job of a non-interactive sh starts with INT ignored, and a shell
        // cannot trap what it started ignoring; PostgreSQL sets its own handlers.)
        let mut watchdog = Watchdog::spawn(
            Path::new("sh"),
            [
                "-c",
                "trap 'echo got TERM; exit 0' TERM; echo up; while :; do sleep 0.05; done",
            ],
            &dir,
            &log,
            "TERM",
            Some(&throwaway),
        )
        .unwrap();
        let started = std::time::Instant::now();
        while !std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains("up")
        {
            assert!(started.elapsed().as_secs() < 10, "the server never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(watchdog.exited().is_none());
        watchdog.stop();
        assert!(watchdog.exited().is_some());
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "up\ngot TERM\n");
        assert!(
            !throwaway.exists(),
            "the watchdog removes what it was given"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
