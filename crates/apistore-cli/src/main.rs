//! The `apistore` command: objects in etcd, read and written the way kube-apiserver does.

mod analyze;
mod args;
mod commands;
mod decode;
mod diff;
mod error;
mod explain;
mod fields;
mod history;
mod keys;
mod kms;
mod layers;
mod object;
mod offline;
mod output;
mod raw;
mod rewrite;
mod watch;

use std::process::ExitCode;

use clap::Parser;

use crate::args::Cli;
use crate::error::CliError;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("InternalError: cannot start the async runtime: {err}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{}", one_line(&err));
            ExitCode::from(err.exit_code())
        }
    }
}

/// The error as one line: kube-apiserver's reason, then the message.
fn one_line(err: &CliError) -> String {
    let text = format!("{}: {}", err.reason(), err);
    text.replace('\n', " ")
}
