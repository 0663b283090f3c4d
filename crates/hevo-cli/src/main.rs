//! `hevo`: search for better LLM harnesses at a fraction of the usual evaluation cost.
//!
//! The binary only parses arguments, renders output and maps errors to exit codes; the work
//! happens in `hevo-search`, `hevo-runtime`, `hevo-strategy`, `hevo-llm` and `hevo-stats`. stdout carries data (tables, or one
//! JSON document with `--json`); progress and logs go to stderr.

mod calls_on_signal;
mod cli_error;
mod eval_cmd;
mod eval_progress;
mod finalize_cmd;
mod limit_args;
mod model_cmd;
mod model_setup;
mod num_args;
mod replay_cmd;
mod replay_progress;
mod report_cmd;
mod run_checks;
mod run_cmd;
mod status_cmd;
mod tests_cmd;
mod words;

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
                  (the message names the file, line and fix).",
    after_help = "Examples:\n  \
    hevo run examples/threshold --finalize     a search in seconds, no model needed\n  \
    hevo eval examples/sentiment/harness-rules --suite examples/sentiment --no-model\n  \
    hevo status examples/threshold/runs/threshold   where a run stands, also while it runs\n  \
    hevo report examples/threshold/runs/threshold\n  \
    hevo replay --synth 60x200 --rho 0.2,0.07  compare strategies offline, at no cost\n\n\
    Every command takes --help; most take --json. The walkthrough: docs/guide.md"
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
    /// Evaluate a finished run's pick and seeds (with --frontier, its frontier too) on the
    /// test split, once.
    Finalize(finalize_cmd::FinalizeArgs),
    /// Evaluate one harness on a task suite and print its pass rate with a 95% interval.
    Eval(eval_cmd::Args),
    /// Replay evaluation strategies offline on a logged candidate x task outcome matrix.
    #[command(long_about = replay_cmd::LONG_ABOUT)]
    Replay(replay_cmd::Args),
    /// Manage and try the local model (pull, list, run).
    Model(model_cmd::Args),
    /// Write a run's self-contained HTML report (RUN/report.html).
    Report(report_cmd::Args),
    /// Summarize a run in the terminal, also while its search is running.
    Status(status_cmd::StatusArgs),
    /// Show one candidate of a run: scores, interval, per-task outcomes, cost, diff.
    Show(status_cmd::ShowArgs),
    /// List the runs under a directory (default: runs/).
    Ls(status_cmd::LsArgs),
    /// Generated tests: an agent writes them per task, hevo freezes the ones that run.
    Tests(tests_cmd::Args),
}

fn main() -> ExitCode {
    // Inside a sandbox this binary is the init; outside, provider keys leave the
    // environment `/proc` shows before anything else runs, no descriptor hevo inherited
    // passes on to what it starts, and hevo may hold as many descriptors as it is allowed.
    hevo_runtime::sandbox_init::run_if_asked();
    hevo_runtime::custody::protect_keys();
    hevo_runtime::descriptors::close_inherited_on_exec();
    hevo_runtime::descriptors::raise_open_file_limit();
    let cli = Cli::parse();
    init_logging();
    // One cancellation token for the process: signals become its reasons, and every
    // trial, `prepare`, proposer and the gateway wait on it.
    let cancel = Cancel::new();
    if matches!(
        cli.command,
        Command::Run(_) | Command::Finalize(_) | Command::Eval(_) | Command::Tests(_)
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
        Command::Finalize(args) => finalize_cmd::run_finalize(args, &cancel),
        Command::Eval(args) => eval_cmd::run(args, &cancel),
        Command::Replay(args) => replay_cmd::run(args),
        Command::Model(args) => model_cmd::run(args),
        Command::Report(args) => report_cmd::run(args),
        Command::Status(args) => status_cmd::status(args),
        Command::Show(args) => status_cmd::show(args),
        Command::Ls(args) => status_cmd::ls(args),
        Command::Tests(args) => tests_cmd::run(args, &cancel),
    };
    match result {
        Ok(code) => code,
        Err(err) => err.report(),
    }
}

/// The launcher every trial-side process goes through: the sandbox where bwrap can make
/// one (probed once), else the local launcher with a loud warning; either puts each launch
/// in a cgroup with `limits` where it can, else warns as loudly.
pub(crate) fn launcher(
    limits: hevo_runtime::cgroup::TrialLimits,
) -> Result<std::sync::Arc<dyn hevo_runtime::launch::Launcher>, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError::Internal(e.into()))?;
    let choice = hevo_runtime::sandbox::default_launcher(&exe, limits)
        .map_err(|e| CliError::User(anyhow::anyhow!(e)))?;
    if let Some(reason) = &choice.unsandboxed_reason {
        eprintln!(
            "hevo: WARNING: trials run UNSANDBOXED ({reason}): harness code can read this \
             user's files and hevo's processes; install bubblewrap (docs/security.md)"
        );
    }
    if let Some(reason) = &choice.uncontained_reason {
        eprintln!(
            "hevo: WARNING: trials get NO CGROUP ({reason}): a trial's memory, processes and \
             CPU are not limited as a whole{}; run as root or in a delegated cgroup \
             (docs/security.md)",
            if choice.unsandboxed_reason.is_some() {
                ", and processes it detaches (setsid) outlive it"
            } else {
                ""
            }
        );
    }
    Ok(choice.launcher)
}

/// The launcher of `[executor]`: on this machine (`local`) the sandbox where bwrap works
/// (see [`launcher`]); a Slurm cluster's jobs are not sandboxed by hevo, the cluster is
/// checked first (a refusal names a line of `config_file`), and with `progress` what the
/// jobs do is printed while they wait. Made before any work.
pub(crate) fn executor_launcher(
    config: &hevo_search::config::RunConfig,
    config_file: &std::path::Path,
    run_dir: &std::path::Path,
    progress: bool,
) -> Result<std::sync::Arc<dyn hevo_runtime::launch::Launcher>, CliError> {
    match config.executor.kind {
        hevo_search::config::ExecutorKind::Local => launcher(config.executor.limits()),
        _ => {
            let queue =
                progress.then(|| hevo_search::runner::queue_lines(finalize_cmd::stderr_progress()));
            config
                .executor
                .launcher(run_dir, config_file, queue)
                .map_err(CliError::user)
        }
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
