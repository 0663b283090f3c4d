//! `hevo eval`: evaluate one harness on a split of a task suite.
//!
//! Parses the flags into [`hevo_runtime::eval::EvalOptions`], validates (suite and harness
//! problems exit with code 2 before any trial runs), runs the evaluation with a progress
//! reporter on stderr, and prints the result on stdout: a short table, or one JSON document
//! with `--json`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::eval::{self, EvalError, EvalOptions};
use hevo_runtime::limits;
use hevo_runtime::report::EvalReport;
use hevo_runtime::task::Split;

use crate::eval_progress;
use crate::model_setup::ModelLayer;
use crate::num_args::count;
use crate::words::counted;
use crate::CliError;
use hevo_llm::ModelLayerConfig;
use hevo_search::config::RunConfig;

/// Arguments of `hevo eval`.
#[derive(clap::Args, Debug)]
#[command(
    allow_negative_numbers = true,
    after_help = "The run directory (default: runs/eval-<harness>-<hash of harness, \
    params, suite, split and trials>) holds hevo.db and the traces. Running the same command \
    again resumes: finished trials are kept, unfinished ones run, and so do trials stopped \
    by a shorter --timeout than the one in force.\n\nExamples:\n  \
    hevo eval examples/sentiment/harness-rules --suite examples/sentiment\n  \
    hevo eval examples/shell/harness-script --suite examples/shell --trials 3 --json"
)]
pub struct Args {
    /// The harness directory (with `harness.toml`).
    #[arg(value_name = "HARNESS_DIR")]
    pub harness: PathBuf,
    /// The task suite directory (with `suite.toml` and `tasks.jsonl`).
    #[arg(long, value_name = "SUITE_DIR")]
    pub suite: PathBuf,
    /// Which split to evaluate.
    #[arg(long, default_value = "val", value_parser = ["train", "val", "test"])]
    pub split: String,
    /// Trials per task (repetitions; their mean is the task's outcome).
    #[arg(long, default_value_t = 1, value_name = "R", value_parser = crate::num_args::trials)]
    pub trials: u32,
    /// Trials run at the same time [default: number of cores].
    #[arg(long, value_name = "N", value_parser = count::<usize>)]
    pub jobs: Option<usize>,
    /// Run directory (default: runs/eval-HARNESS-HASH, printed on stderr).
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// Print one JSON document on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Retries of a trial that failed for a reason of ours (`infra_error`).
    #[arg(long, default_value_t = 2, value_parser = count::<u32>)]
    pub retries: u32,
    /// Per-trial time limit in seconds [default: the harness's `timeout_s`, else 120].
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Seconds between SIGTERM and SIGKILL when a trial is stopped.
    #[arg(long, default_value_t = 2.0, value_name = "SECS")]
    pub kill_grace: f64,
    /// Bytes of stdout and of stderr kept per trial in the trace directory.
    #[arg(long, default_value_t = eval::DEFAULT_OUTPUT_CAP, value_name = "BYTES", value_parser = count::<u64>)]
    pub output_cap: u64,
    /// No progress bar or progress lines on stderr.
    #[arg(long)]
    pub no_progress: bool,
    /// Serve model calls as `[model]` in this hevo.toml says (backends, prices, caps)
    /// [default: the embedded local model if `hevo model pull` has fetched it, else none].
    #[arg(long, value_name = "HEVO_TOML", conflicts_with = "no_model")]
    pub model_config: Option<PathBuf>,
    /// Start no model gateway (for harnesses that call no model).
    #[arg(long)]
    pub no_model: bool,
    /// Per-trial cgroup limits.
    #[command(flatten)]
    pub limits: crate::limit_args::LimitArgs,
}

/// Runs `hevo eval`.
pub fn run(args: Args, cancel: &Cancel) -> Result<ExitCode, CliError> {
    check_paths(&args)?;
    let mut opts = EvalOptions::new(&args.harness, &args.suite);
    opts.split = Split::parse(&args.split).unwrap_or(Split::Val);
    opts.trials = args.trials;
    opts.jobs = crate::num_args::jobs(args.jobs)?;
    opts.run_dir = args.run_dir.clone();
    opts.retries = args.retries;
    if let Some(t) = args.timeout {
        opts.timeout = Some(limits::time_limit("`--timeout`", t).map_err(CliError::user)?);
    }
    opts.grace = limits::seconds(args.kill_grace).ok_or_else(|| {
        CliError::user(limits::seconds_problem("`--kill-grace`", args.kill_grace))
    })?;
    opts.output_cap = args.output_cap;
    opts.cancel = cancel.clone();

    let mut plan = eval::plan(opts).map_err(to_cli)?;
    eprintln!("hevo: run dir {}", plan.run_dir.display());
    let launcher = crate::launcher(args.limits.limits())?;
    let layer = model_layer_config(&args)?;
    let mut log = |line: &str| eprintln!("hevo: {line}");
    let model = match &layer {
        Some(layer) => ModelLayer::start_layer(layer, &plan.run_dir, cancel, &mut log)?,
        None => {
            let none = ModelLayerConfig::default();
            ModelLayer::start_layer(&none, &plan.run_dir, cancel, &mut log)?
        }
    };
    plan.options.model_access = model.access();
    let (tx, rx) = mpsc::channel();
    let mode = eval_progress::Mode::choose(args.no_progress);
    let reporter = std::thread::spawn(move || eval_progress::render(rx, mode));
    let result = eval::run_with(&plan, launcher, Some(tx));
    let _ = reporter.join();
    model.shutdown();
    let report = match result {
        Ok(r) => r,
        Err(EvalError::Interrupted { done, reason }) => {
            eprintln!(
                "hevo: stopped by {reason} after {done} finished trial(s); they are stored in {}. \
                 Run the same command again to resume.",
                plan.run_dir.display()
            );
            if args.json {
                crate::cli_error::print_stopped_json(reason, &plan.run_dir);
            }
            return Ok(ExitCode::from(reason.exit_code()));
        }
        Err(e) => return Err(to_cli(e)),
    };
    let infra = report
        .status_counts
        .get("infra_error")
        .copied()
        .unwrap_or(0);
    if infra > 0 {
        let first = report
            .tasks
            .iter()
            .flat_map(|t| t.details.iter().map(move |d| (t, d)))
            .find(|(_, d)| d.status == "infra_error")
            .map(|(t, d)| {
                format!(
                    "{} #{}: {}",
                    t.id,
                    d.index,
                    d.error.as_deref().unwrap_or("?")
                )
            })
            .unwrap_or_default();
        eprintln!(
            "hevo: warning: {infra} trial(s) ended in infra_error and are not scored \
             (first: {first}); counted as failures the pass rate is {}; running the same \
             command again retries them",
            pct(report.pass_rate_floor.value)
        );
    }
    let answered = ["pass", "fail"]
        .iter()
        .map(|s| report.status_counts.get(*s).copied().unwrap_or(0))
        .sum::<usize>();
    let mut out = std::io::stdout().lock();
    let written = if args.json {
        serde_json::to_writer_pretty(&mut out, &report.to_json())
            .map_err(std::io::Error::from)
            .and_then(|_| writeln!(out))
    } else {
        write_table(&mut out, &report)
    };
    if report.trials > 0 && answered == 0 {
        eprintln!(
            "hevo: error: every trial of this evaluation errored (no pass or fail: {:?}); \
             see the traces in {}",
            report.status_counts,
            plan.run_dir.display()
        );
        return Ok(ExitCode::FAILURE);
    }
    match written {
        Ok(()) => Ok(ExitCode::SUCCESS),
        // A closed pipe (`| head`) is a clean stop.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(CliError::Internal(e.into())),
    }
}

/// The paths of the command line, checked before anything is loaded: a harness or suite
/// that does not exist is named by its argument, and a `--run-dir` that is a file is refused
/// (exit 2) instead of failing when the store is created.
fn check_paths(args: &Args) -> Result<(), CliError> {
    let missing = [
        (
            "HARNESS_DIR",
            &args.harness,
            "a harness directory (with harness.toml)",
        ),
        (
            "--suite",
            &args.suite,
            "a suite directory (with suite.toml and tasks.jsonl)",
        ),
    ]
    .into_iter()
    .filter(|(_, path, _)| !path.exists())
    .map(|(arg, path, what)| format!("{arg} `{}` does not exist: pass {what}", path.display()))
    .collect::<Vec<_>>();
    if !missing.is_empty() {
        return Err(CliError::user(missing.join("\n")));
    }
    match &args.run_dir {
        Some(dir) if dir.exists() && !dir.is_dir() => Err(CliError::user(format!(
            "--run-dir `{}` is a file, not a directory; pass a directory (new or a run \
             directory to resume)",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// Which model layer `hevo eval` starts: `--model-config`'s `[model]`, nothing with
/// `--no-model`, else the embedded model when it has been pulled.
fn model_layer_config(args: &Args) -> Result<Option<ModelLayerConfig>, CliError> {
    if args.no_model {
        return Ok(None);
    }
    if let Some(path) = &args.model_config {
        let (config, _) = RunConfig::load(path).map_err(|e| CliError::User(e.into()))?;
        return Ok(Some(
            config.model.unwrap_or_else(ModelLayerConfig::local_default),
        ));
    }
    let pulled = hevo_llm::model_file::default_model_path(&hevo_llm::model_file::hevo_home());
    if pulled.is_file() {
        Ok(Some(ModelLayerConfig::local_default()))
    } else {
        eprintln!(
            "hevo: no model configured (the local model is not pulled): harness model calls will \
             fail; run `hevo model pull` or pass `--model-config`"
        );
        Ok(None)
    }
}

fn to_cli(e: EvalError) -> CliError {
    if e.is_user_error() {
        CliError::User(e.into())
    } else {
        CliError::Internal(e.into())
    }
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1}%", 100.0 * x)
    } else {
        "n/a".into()
    }
}

fn write_table(out: &mut impl Write, r: &EvalReport) -> std::io::Result<()> {
    let tasks = r.tasks.len();
    writeln!(
        out,
        "{} on {} ({}, {} x {})",
        r.harness,
        r.suite,
        r.split,
        counted(tasks as u64, "task"),
        counted(r.trials_per_task.into(), "trial"),
    )?;
    writeln!(
        out,
        "pass rate   {}  95% CI [{}, {}]  ({} scored)",
        pct(r.pass_rate.value),
        pct(r.pass_rate.ci_low),
        pct(r.pass_rate.ci_high),
        counted(r.tasks_scored as u64, "task")
    )?;
    let unscored = r.unscored_trials();
    if unscored > 0 {
        writeln!(
            out,
            "            {} if the {} not scored had failed",
            pct(r.pass_rate_floor.value),
            counted(unscored as u64, "trial"),
        )?;
    }
    for (g, gr) in &r.groups {
        writeln!(
            out,
            "  {g:<10} {}  95% CI [{}, {}]  ({} tasks)",
            pct(gr.pass_rate.value),
            pct(gr.pass_rate.ci_low),
            pct(gr.pass_rate.ci_high),
            gr.tasks
        )?;
    }
    let counts = r
        .status_counts
        .iter()
        .filter(|(s, n)| **n > 0 || *s == "pass" || *s == "fail")
        .map(|(s, n)| format!("{s} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    writeln!(out, "trials      {} ({counts})", r.trials)?;
    if r.mean_wall_ms.is_finite() {
        writeln!(
            out,
            "wall time   {:.3} s mean per trial",
            r.mean_wall_ms / 1000.0
        )?;
    }
    writeln!(
        out,
        "tokens      {} input ({} cached), {} output in {} model calls; cost ${:.4}",
        r.spend.input_tokens,
        r.spend.cached_tokens,
        r.spend.output_tokens,
        r.spend.calls,
        r.spend.cost_usd
    )?;
    writeln!(
        out,
        "run         {} ({} trial(s) run now, {} reused)",
        r.run_dir.display(),
        r.ran_now,
        r.reused
    )?;
    // The first ten tasks that did not pass, and how many more there are (`--json` has all).
    const SHOWN: usize = 10;
    let not_passed: Vec<_> = r.tasks.iter().filter(|t| t.status != "pass").collect();
    if !not_passed.is_empty() {
        let mut line: Vec<String> = not_passed
            .iter()
            .take(SHOWN)
            .map(|t| format!("{} ({})", t.id, t.status))
            .collect();
        if not_passed.len() > SHOWN {
            line.push(format!(
                "and {} more (--json lists every task)",
                not_passed.len() - SHOWN
            ));
        }
        writeln!(out, "not passed  {}", line.join(", "))?;
    }
    let failures = r.failures(&r.harness);
    if !failures.is_empty() {
        writeln!(
            out,
            "failures    {} of {} trial(s), the first of each class:",
            failures.total(),
            r.trials
        )?;
        for line in failures.lines("  ") {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}
