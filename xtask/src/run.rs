//! Running child commands: print each one, run it, and turn failure into an error
//! that names the command.

use std::path::Path;
use std::process::{Command, Stdio};

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
    if status.success() {
        Ok(())
    } else {
        Err(XtaskError::StepFailed {
            command: line,
            status,
        })
    }
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
