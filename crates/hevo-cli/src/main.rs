//! `hevo`: search for better LLM harnesses at a fraction of the usual evaluation cost.
//!
//! The binary only parses arguments, renders output and maps errors to exit codes; the work
//! happens in `hevo-engine`, `hevo-llm` and `hevo-stats`. stdout carries data (tables, or one
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
    let result = match cli.command {
        Command::Run(args) => run_cmd::run(args),
        Command::Finalize(args) => run_cmd::run_finalize(args),
        Command::Eval(args) => eval_cmd::run(args),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Model(args) => model_cmd::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}
