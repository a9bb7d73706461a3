//! Running child commands: print each one, run it, and turn failure into an error
//! that names the command.

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Result, XtaskError};

/// `cmd` as a shell-like line, with the environment it sets in front.
pub(crate) fn command_line(cmd: &Command) -> String {
    let mut parts: Vec<String> = cmd
        .get_envs()
        .filter_map(|(key, value)| {
            value.map(|value| format!("{}={}", key.to_string_lossy(), value.to_string_lossy()))
        })
        .collect();
    // `$CARGO` is a long toolchain path; the reader knows which cargo is meant.
    let program = Path::new(cmd.get_program());
    if program.file_name().is_some_and(|name| name == "cargo") {
        parts.push("cargo".to_owned());
    } else {
        parts.push(program.to_string_lossy().into_owned());
    }
    parts.extend(cmd.get_args().map(|arg| {
        let arg = arg.to_string_lossy();
        if arg.is_empty() || arg.contains(char::is_whitespace) {
            format!("'{arg}'")
        } else {
            arg.into_owned()
        }
    }));
    parts.join(" ")
}

/// Prints `cmd`, runs it with inherited stdio, and fails if it fails.
pub(crate) fn run_step(cmd: &mut Command) -> Result<()> {
    let line = command_line(cmd);
    println!("==> {line}");
    let status = cmd.status().map_err(|source| XtaskError::Spawn {
        command: line.clone(),
        source,
    })?;
    step_result(line, status)
}

/// [`run_step`] for a command that could hang (a test binary, `cargo test --doc`, an
/// example): killed, with its descendants (the doc tests `cargo` runs), and an error
/// naming it and what its threads were waiting in, once it has run for `limit`. A hang
/// then fails the one step instead of using up CI's whole time.
pub(crate) fn run_step_within(cmd: &mut Command, limit: Duration) -> Result<()> {
    let line = command_line(cmd);
    println!("==> {line}");
    let mut child = cmd.spawn().map_err(|source| XtaskError::Spawn {
        command: line.clone(),
        source,
    })?;
    let started = Instant::now();
    let status = loop {
        let waited = child.try_wait().map_err(|source| XtaskError::Spawn {
            command: line.clone(),
            source,
        })?;
        if let Some(status) = waited {
            break status;
        }
        if started.elapsed() >= limit {
            let threads = thread_states(child.id());
            // The descendants first, found while their parent still holds them: an
            // orphan left running would keep CI's output open. std kills only its own
            // children, so they go through `kill(1)`; without it they are left.
            let descendants = descendants(child.id());
            if !descendants.is_empty() {
                let _ = Command::new("kill")
                    .arg("-KILL")
                    .args(descendants.iter().map(u32::to_string))
                    .stderr(Stdio::null())
                    .status();
            }
            // Already gone is fine: the wait below reaps it either way.
            let _ = child.kill();
            let _ = child.wait();
            return Err(XtaskError::StepTimedOut {
                command: line,
                limit_secs: limit.as_secs(),
                threads,
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    step_result(line, status)
}

/// A finished step's exit status as a result naming the command.
fn step_result(line: String, status: ExitStatus) -> Result<()> {
    if status.success() {
        Ok(())
    } else {
        Err(XtaskError::StepFailed {
            command: line,
            status,
        })
    }
}

/// The processes under `pid`, children before grandchildren, from `/proc` (Linux; none
/// where it cannot be read).
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let children =
                std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                if !found.contains(&child) && child != pid {
                    found.push(child);
                    parents.push(child);
                }
            }
        }
    }
    found
}

/// Each thread of process `pid` as `name:wait-channel`, from `/proc` (Linux): enough to
/// tell a test stuck in a lock or a join from one stuck on a socket.
fn thread_states(pid: u32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return "its threads could not be read".to_owned();
    };
    let mut threads: Vec<String> = tasks
        .flatten()
        .map(|task| {
            let read = |file: &str| {
                std::fs::read_to_string(task.path().join(file))
                    .map(|text| text.trim().to_owned())
                    .unwrap_or_default()
            };
            format!("{}:{}", read("comm"), read("wchan"))
        })
        .collect();
    threads.sort();
    threads.join(", ")
}

/// The first line `program <args>` writes to its standard output (its `--version`,
/// say), if it runs at all.
pub(crate) fn first_output_line(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_past_its_limit_is_killed_and_named() {
        let started = Instant::now();
        let result = run_step_within(Command::new("sleep").arg("30"), Duration::from_millis(300));
        assert!(started.elapsed() < Duration::from_secs(10), "not killed");
        match result {
            Err(XtaskError::StepTimedOut {
                command, threads, ..
            }) => {
                assert_eq!(command, "sleep 30");
                assert!(threads.starts_with("sleep:"), "{threads}");
            }
            other => panic!("expected a time-out, got {other:?}"),
        }
    }

    /// Process `pid`'s state letter and start time (in clock ticks after boot), while
    /// it exists: the start time tells it from a later process given the same pid.
    fn state_and_start(pid: &str) -> Option<(char, String)> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name: state is the first, start time the 20th.
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
        Some((
            fields.first()?.chars().next()?,
            (*fields.get(19)?).to_owned(),
        ))
    }

    /// Whether the process `pid` that started at `started` still runs: not gone, not
    /// a zombie (killed, not yet reaped by whoever adopted it), not replaced.
    fn running(pid: &str, started: &str) -> bool {
        state_and_start(pid)
            .is_some_and(|(state, start)| state != 'Z' && state != 'X' && start == started)
    }

    #[test]
    fn a_step_past_its_limit_is_killed_with_its_descendants() {
        let dir = std::env::temp_dir().join(format!("xtask-orphan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pid_file = dir.join("child.pid");
        // A shell whose child would outlive it by minutes unless killed too; the
        // child's pid is written before the shell waits. A machine too loaded for the
        // shell to get that far within the limit is tried again with a longer one:
        // what the test waits on is the pid file, not a time.
        let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
        let mut child = None;
        for limit in [2, 10, 60] {
            let _ = std::fs::remove_file(&pid_file);
            let result = run_step_within(
                Command::new("sh").args(["-c", &script]),
                Duration::from_secs(limit),
            );
            assert!(
                matches!(result, Err(XtaskError::StepTimedOut { .. })),
                "{result:?}"
            );
            if let Ok(pid) = std::fs::read_to_string(&pid_file) {
                child = Some(pid.trim().to_owned());
                break;
            }
        }
        let child = child.expect("the shell wrote its child's pid within 60 s");
        // Gone already, the usual case: SIGKILL is delivered before `kill` returns. (A
        // zombie, killed but not yet reaped, counts as gone in `running`.)
        let Some((_, started)) = state_and_start(&child) else {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        };
        // The deadline only bounds a failure, where the child would sleep on for
        // minutes.
        let deadline = Instant::now() + Duration::from_secs(30);
        while running(&child, &started) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let outlived = running(&child, &started);
        if outlived {
            let _ = Command::new("kill").args(["-KILL", &child]).status();
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert!(!outlived, "the shell's child {child} outlived it");
    }

    #[test]
    fn a_step_within_its_limit_reports_its_own_result() {
        assert!(run_step_within(&mut Command::new("true"), Duration::from_secs(60)).is_ok());
        assert!(matches!(
            run_step_within(&mut Command::new("false"), Duration::from_secs(60)),
            Err(XtaskError::StepFailed { .. })
        ));
    }
}
