//! `hevo`: search for better LLM harnesses at a fraction of the usual evaluation cost.
//!
//! The binary only parses arguments, renders output and maps errors to exit codes; the work
//! happens in `hevo-search`, `hevo-runtime`, `hevo-strategy`, `hevo-llm` and `hevo-stats`. stdout carries data (tables, or one
//! JSON document with `--json`); progress and logs go to stderr.

mod cli_error;
mod eval_cmd;
mod eval_progress;
mod model_cmd;
mod model_setup;
mod replay_cmd;
mod run_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hevo_runtime::cancel::Cancel;

pub use cli_error::CliError;

/// Command-line arguments.
#[derive(Parser, Debug)]
#[command(
    name = "hevo",
    version,
    about = "Automated harness optimization, cheap and trustworthy",
    long_about = "hevo searches for better LLM harnesses (the code around a frozen model) and \
                  evaluates them on task suites, spending the evaluation budget only where \
                  candidates disagree and counting every token and dollar.\n\n\
                  Exit codes: 0 success, 1 internal failure, 2 a mistake in your input \
                  (the message names the file, line and fix)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
enum Command {
    /// Search for a better harness: the proposer writes candidates, hevo evaluates them.
    Run(run_cmd::Args),
    /// Evaluate a finished run's pick, seeds and frontier on the test split, once.
    Finalize(run_cmd::FinalizeArgs),
    /// Evaluate one harness on a task suite and print its pass rate with a 95% interval.
    Eval(eval_cmd::Args),
    /// Replay evaluation strategies offline on a logged candidate x task outcome matrix.
    Replay(replay_cmd::Args),
    /// Manage and try the local model (pull, list, run).
    Model(model_cmd::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    // One cancellation token for the process: signals become its reasons, and every
    // trial, `prepare`, proposer and the gateway wait on it.
    let cancel = Cancel::new();
    if matches!(
        cli.command,
        Command::Run(_) | Command::Finalize(_) | Command::Eval(_)
    ) {
        cancel.listen_for_signals(|reason| {
            eprintln!(
                "hevo: {reason} received: stopping every running process (send it again to \
                 kill them now); finished trials are kept, and the same command resumes"
            )
        });
    }
    let result = match cli.command {
        Command::Run(args) => run_cmd::run(args, &cancel),
        Command::Finalize(args) => run_cmd::run_finalize(args, &cancel),
        Command::Eval(args) => eval_cmd::run(args, &cancel),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Model(args) => model_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}

/// Sends `tracing` warnings (e.g. a ledger row that could not be written) to stderr, so
/// they reach the user; `HEVO_LOG` sets the filter (default `warn`). stdout stays data.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HEVO_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .without_time()
        .with_ansi(std::env::var_os("NO_COLOR").is_none())
        .try_init();
}
