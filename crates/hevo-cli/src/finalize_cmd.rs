//! `hevo finalize`: the one final test evaluation of a finished run's pick and seeds (and
//! its frontier with `--frontier`), and its output (the test table, `test` and `paired` in JSON, the failures),
//! which `hevo run --finalize` prints too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::failures::Failures;
use hevo_search::config::{ConfigError, RunConfig};
use hevo_search::finalize::{
    finalize, FinalizeError, FinalizeOptions, FinalizeReport, SearchRecord, RECORD_FILE,
};
use serde_json::json;

use crate::model_setup::ModelLayer;
use crate::num_args::count;
use crate::CliError;

/// Arguments of `hevo finalize`.
#[derive(clap::Args, Debug)]
#[command(
    allow_negative_numbers = true,
    after_help = "Evaluates the pick and the seeds of a finished run (and its pareto tiers; \
    with --frontier, its frontier too) on the test split, once, into RUN/test/ (outside the \
    archive: no test outcome ever reaches a proposer). Running it again reuses the stored \
    test trials.\n\nExamples:\n  \
    hevo finalize examples/classify/runs/classify\n  \
    hevo finalize examples/threshold/runs/threshold --frontier --json"
)]
pub struct FinalizeArgs {
    /// The run directory of a finished `hevo run`.
    #[arg(value_name = "RUN")]
    pub run: PathBuf,
    /// Trials per test task.
    #[arg(long, default_value_t = 1, value_parser = crate::num_args::trials)]
    pub trials: u32,
    /// Concurrent trials [default: number of cores].
    #[arg(long, value_parser = count::<usize>)]
    pub jobs: Option<usize>,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also evaluate the frontier (the best few candidates) on test, not only the pick, the
    /// seeds and the pareto tiers.
    #[arg(long)]
    pub frontier: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub no_progress: bool,
}

/// Progress lines on stderr, each prefixed `hevo: `.
pub(crate) fn stderr_progress() -> hevo_search::runner::ProgressFn {
    Arc::new(|line: &str| eprintln!("hevo: {line}"))
}

/// The failed validation and test trials of a run, by class, read back from its stores.
pub(crate) fn run_failures(run_dir: &Path) -> Result<(Failures, Failures), CliError> {
    let view = run_view(run_dir)?;
    Ok((view.failures, view.test_failures))
}

/// What `report`, `status` and `show` read of a run directory, for a command that has just
/// written it.
pub(crate) fn run_view(run_dir: &Path) -> Result<hevo_search::view::RunView, CliError> {
    hevo_search::view::RunView::open(run_dir).map_err(|e| {
        if e.is_user_error() {
            CliError::user(e)
        } else {
            CliError::Internal(e.into())
        }
    })
}

/// The human lines of a run's failures: a heading, then per class its count and first
/// trial; nothing when no trial failed.
pub(crate) fn failure_lines(what: &str, failures: &Failures) -> String {
    if failures.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "failures in {what}: {} trial(s), the first of each class:\n",
        failures.total()
    );
    for line in failures.lines("  ") {
        text += &line;
        text.push('\n');
    }
    text
}

/// A cost in its unit: dollars to 6 decimals, tokens to 1.
pub(crate) fn cost(unit: hevo_search::objective::CostUnit, x: f64) -> String {
    match unit {
        hevo_search::objective::CostUnit::Usd => format!("{x:.6}"),
        hevo_search::objective::CostUnit::Tokens => format!("{x:.1}"),
    }
}

/// The `test` object of `--json`: per harness its pass rate, role, and (pareto) cost.
pub(crate) fn test_json(f: &FinalizeReport) -> serde_json::Map<String, serde_json::Value> {
    let num = |x: f64| {
        if x.is_finite() {
            json!(x)
        } else {
            serde_json::Value::Null
        }
    };
    f.test
        .iter()
        .map(|(k, v)| {
            let c = &v.cost;
            (
                k.clone(),
                json!({"pass_rate": v.pass_rate, "ci_low": v.ci_low, "ci_high": v.ci_high,
                       "role": v.role, "val_estimate": v.val_estimate, "tiers": v.tiers,
                       "trials": v.trials, "cost_unit": c.unit,
                       "cost_per_task": num(c.per_task.value), "cost_ci_low": num(c.per_task.ci_low),
                       "cost_ci_high": num(c.per_task.ci_high), "time_per_task_ms": num(c.wall_ms_per_task),
                       "cost_total": c.total, "successes": c.successes,
                       "cost_of_pass": num(c.cost_of_pass())}),
            )
        })
        .collect()
}

pub(crate) fn finalize_table(f: &FinalizeReport) -> String {
    let mut text = String::from("\ntest split (evaluated once, after the search):\n");
    text += &format!(
        "  {:<28} {:<9} {:>8} {:>18} {:>8}\n",
        "harness", "role", "test", "95% interval", "val est"
    );
    for (name, t) in &f.test {
        text += &format!(
            "  {:<28} {:<9} {:>8.3} {:>18} {:>8.3}\n",
            name,
            t.role,
            t.pass_rate,
            format!("[{:.3}, {:.3}]", t.ci_low, t.ci_high),
            t.val_estimate
        );
    }
    let mut tiers: Vec<(&str, &str, &hevo_search::finalize::TestResult)> = f
        .test
        .iter()
        .flat_map(|(n, t)| {
            t.tiers
                .iter()
                .map(move |tier| (tier.as_str(), n.as_str(), t))
        })
        .collect();
    let order = |t: &str| hevo_search::objective::TIERS.iter().position(|x| *x == t);
    tiers.sort_by_key(|(t, _, _)| order(t));
    for (tier, name, t) in tiers {
        let c = &t.cost;
        text += &format!(
            "  tier {tier:<6} {name}: pass {:.3} [{:.3}, {:.3}], cost/task {} [{}, {}] {}, time/task {:.0} ms, cost of pass {}\n",
            t.pass_rate,
            t.ci_low,
            t.ci_high,
            cost(c.unit, c.per_task.value),
            cost(c.unit, c.per_task.ci_low),
            cost(c.unit, c.per_task.ci_high),
            c.unit.label(),
            c.wall_ms_per_task,
            cost(c.unit, c.cost_of_pass())
        );
    }
    let pick = f.test.values().find(|t| t.role.starts_with("pick"));
    let best_seed = f
        .test
        .iter()
        .filter(|(_, t)| t.role == "seed")
        .max_by(|a, b| a.1.pass_rate.total_cmp(&b.1.pass_rate));
    if pick.is_some_and(|p| p.role == "pick, seed") {
        text += "the pick is a seed: the search found nothing better on validation\n";
    } else if let (Some(p), Some((seed, s))) = (pick, best_seed) {
        text += &format!(
            "pick vs best seed ({seed}) on test: {:+.1} points ({:.3} vs {:.3})\n",
            100.0 * (p.pass_rate - s.pass_rate),
            p.pass_rate,
            s.pass_rate
        );
    }
    for d in &f.paired {
        let e = &d.difference;
        text += &format!(
            "  pick minus {}, paired by task: {:+.1} points, 95% interval [{:+.1}, {:+.1}] \
             ({} tasks: pick better on {}, seed on {}, {} ties){}\n",
            d.seed,
            100.0 * e.value,
            100.0 * e.ci_low,
            100.0 * e.ci_high,
            d.tasks,
            d.pick_better,
            d.seed_better,
            d.ties,
            if e.ci_low > 0.0 {
                ": a gain"
            } else {
                ": the interval covers zero, no gain shown"
            }
        );
    }
    text
}

/// The `paired` array of `--json`: the pick minus each seed on test, paired by task.
pub(crate) fn paired_json(f: &FinalizeReport) -> serde_json::Value {
    f.paired
        .iter()
        .map(|d| {
            json!({"seed": d.seed, "tasks": d.tasks, "difference": d.difference.value,
                   "se": d.difference.se, "ci_low": d.difference.ci_low,
                   "ci_high": d.difference.ci_high, "pick_better": d.pick_better,
                   "seed_better": d.seed_better, "ties": d.ties})
        })
        .collect()
}

/// Runs `hevo finalize`.
pub fn run_finalize(args: FinalizeArgs, cancel: &Cancel) -> Result<ExitCode, CliError> {
    let jobs = crate::num_args::jobs(args.jobs)?;
    hevo_search::view::require_run(&args.run).map_err(CliError::user)?;
    let record_path = args.run.join(RECORD_FILE);
    let text = std::fs::read(&record_path).map_err(|e| {
        CliError::user(format!(
            "the search in `{}` has not finished (cannot read `{}`: {e}); run the same \
             `hevo run` command again to finish it (it resumes), then finalize",
            args.run.display(),
            record_path.display()
        ))
    })?;
    let record: SearchRecord = serde_json::from_slice(&text).map_err(|e| {
        CliError::user(format!(
            "`{}` is not as hevo wrote it ({e}); was it edited? Run the same `hevo run` \
             command again, which writes it anew from the store and the archive",
            record_path.display()
        ))
    })?;
    let (config, config_file) = RunConfig::load(&record.config_file).map_err(|e| match e {
        // The search's config is found where the search recorded it, not where the user
        // points: say so, and how to get it back.
        ConfigError::Read { path, source } => CliError::user(format!(
            "cannot read `{}`, the hevo.toml this search ran with ({source}; recorded in `{}` \
             as `config_file`): finalize evaluates the pick with that config's suite, model \
             and limits; put the file back there, or copy it there from where it is now",
            path.display(),
            record_path.display()
        )),
        e => CliError::user(e),
    })?;
    let suite_dir = config.resolve(&config_file, &config.suite);
    // The suite is checked before the model layer starts: a run without test tasks stops here.
    hevo_search::finalize::test_suite(&suite_dir).map_err(finalize_error)?;
    let progress = !args.no_progress;
    let mut log = |line: &str| {
        if progress {
            eprintln!("hevo: {line}");
        }
    };
    let launcher = crate::executor_launcher(&config, &config_file, &args.run, progress)?;
    let model = ModelLayer::start(&config, &config_file, &args.run, cancel, &mut log)?;
    let opts = FinalizeOptions {
        trials: args.trials,
        jobs,
        model_env: hevo_runtime::model_access::ModelEnv::offline(),
        model_access: model.access(),
        launcher,
        cancel: cancel.clone(),
        frontier: args.frontier,
        progress: (!args.no_progress).then(stderr_progress),
    };
    let f = finalize(&args.run, &suite_dir, &record, &opts, &mut log).map_err(finalize_error)?;
    let usage = model.usage();
    model.shutdown();
    let (_, test_failures) = run_failures(&args.run)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = json!({
            "pick": {"name": f.pick.name, "estimate": f.pick.estimate.value,
                     "ci_low": f.pick.estimate.ci_low, "ci_high": f.pick.estimate.ci_high},
            "evaluations": f.evaluations,
            "tokens": {"input": f.spend.input_tokens, "cached": f.spend.cached_tokens,
                       "output": f.spend.output_tokens},
            "cost_usd": f.spend.cost_usd,
            "session_model_usage": {"input": usage.input_tokens, "cached": usage.cached_tokens,
                       "output": usage.output_tokens, "cost_usd": usage.cost_usd},
            "test": test_json(&f),
            "failures": test_failures.to_json(),
            "paired": paired_json(&f),
        });
        writeln!(out, "{doc}").map_err(|e| CliError::Internal(e.into()))?;
    } else {
        let text = finalize_table(&f) + &failure_lines("test trials", &test_failures);
        write!(out, "{text}").map_err(|e| CliError::Internal(e.into()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Maps a finalize error to exit 2 (a mistake in the input) or 1.
pub(crate) fn finalize_error(e: FinalizeError) -> CliError {
    if let Some(reason) = e.cancel_reason() {
        return CliError::Stopped(reason, e.into());
    }
    if e.is_user_error() {
        CliError::user(e)
    } else {
        CliError::Internal(e.into())
    }
}
