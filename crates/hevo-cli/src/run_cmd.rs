//! `hevo run`: the search loop; with `--finalize` it then runs the one final test
//! evaluation of `hevo finalize` (finalize_cmd.rs), whose output it shares.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::store::RunKind;
use hevo_search::config::{ConfigError, RunConfig};
use hevo_search::finalize::{finalize, FinalizeOptions, FinalizeReport, SearchRecord, RECORD_FILE};
use hevo_search::proposer::llm::LlmProposer;
use hevo_search::proposer::Proposer;
use hevo_search::proposer::{AgentProposer, ParamsProposer};
use hevo_search::run::{run_search, SearchReport};
use hevo_search::runner::{LiveRunner, RunnerSettings};
use hevo_search::view::RunView;
use serde_json::json;

use crate::finalize_cmd::{
    cost, failure_lines, finalize_error, finalize_table, paired_json, run_view, stderr_progress,
    test_json,
};
use crate::model_setup::ModelLayer;
use crate::num_args::count;
use crate::status_cmd::train_line;
use crate::words::counted;
use crate::CliError;

/// Arguments of `hevo run`.
#[derive(clap::Args, Debug)]
#[command(
    allow_negative_numbers = true,
    after_help = "PATH is a directory holding hevo.toml (or the file itself); every key \
    is documented in docs/config.md. The run directory (default: runs/<name> next to hevo.toml) \
    holds the store, the archive the proposer reads, and test results. Running the same \
    command again resumes: finished trials are reused and the proposer is not asked again \
    for candidates already written.\n\nExamples:\n  hevo run examples/classify --finalize\n  \
    hevo run my-search --strategy full --iterations 5 --json"
)]
pub struct Args {
    /// Directory with hevo.toml, or the file itself.
    #[arg(value_name = "PATH")]
    pub path: PathBuf,
    /// Override `[evaluation] strategy`: full, fixed, resample, coevolve, screen, race or default (also `recommended`).
    #[arg(long)]
    pub strategy: Option<String>,
    /// Override `[search] iterations`.
    #[arg(long, value_parser = count::<u32>)]
    pub iterations: Option<u32>,
    /// Override `seed`.
    #[arg(long, value_parser = count::<u64>)]
    pub seed: Option<u64>,
    /// Override `[search] jobs`.
    #[arg(long, value_parser = count::<usize>)]
    pub jobs: Option<usize>,
    /// Override the run directory.
    #[arg(long, value_name = "DIR")]
    pub run_dir: Option<PathBuf>,
    /// After the search, evaluate the pick and the seeds (and any pareto tiers) on the test
    /// split; `hevo finalize RUN --frontier` adds the frontier.
    #[arg(long)]
    pub finalize: bool,
    /// Print one JSON document on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub no_progress: bool,
}

/// Runs `hevo run`.
pub fn run(args: Args, cancel: &Cancel) -> Result<ExitCode, CliError> {
    let (mut config, config_file) = RunConfig::load(&args.path).map_err(CliError::user)?;
    let config_file = std::fs::canonicalize(&config_file).unwrap_or(config_file);
    if let Some(s) = &args.strategy {
        config.evaluation.strategy = s.clone();
    }
    if let Some(i) = args.iterations {
        config.search.iterations = i;
    }
    if let Some(s) = args.seed {
        config.seed = s;
    }
    if let Some(j) = args.jobs {
        config.search.jobs = Some(j);
    }
    // Re-validate after the overrides; a bad value that came from a flag is named as the flag.
    config.validate(&config_file).map_err(|e| match e {
        ConfigError::Invalid { key, problem, .. } => {
            let flag = match key.as_str() {
                "evaluation.strategy" if args.strategy.is_some() => Some("--strategy"),
                "search.iterations" if args.iterations.is_some() => Some("--iterations"),
                "seed" if args.seed.is_some() => Some("--seed"),
                "search.jobs" if args.jobs.is_some() => Some("--jobs"),
                _ => None,
            };
            match flag {
                Some(flag) => CliError::user(format!("{flag}: {problem}")),
                None => CliError::user(ConfigError::invalid(&config_file, &key, problem)),
            }
        }
        e => CliError::user(e),
    })?;
    let name = config.run_name(&config_file);
    let run_dir = match (&args.run_dir, &config.run_dir) {
        (Some(d), _) => d.clone(),
        (None, Some(d)) => config.resolve(&config_file, d),
        (None, None) => config_file
            .parent()
            .unwrap_or(Path::new("."))
            .join("runs")
            .join(&name),
    };
    let progress = !args.no_progress;
    let mut log = |line: &str| {
        if progress {
            eprintln!("hevo: {line}");
        }
    };
    let suite_dir = config.resolve(&config_file, &config.suite);
    crate::run_checks::before_work(&config, &config_file, args.finalize, &mut log)?;
    let suite = hevo_runtime::suite::Suite::load(&suite_dir).map_err(CliError::user)?;
    if let Some(problem) = config.run_dir_problem(&config_file, &run_dir, &suite) {
        return Err(match &args.run_dir {
            Some(d) => CliError::user(format!("--run-dir `{}` {problem}", d.display())),
            None => CliError::user(ConfigError::invalid_at_line(
                &config_file,
                "run_dir",
                problem,
            )),
        });
    }
    if let Some(problem) = hevo_runtime::store::run_kind_problem(&run_dir, RunKind::Search) {
        return Err(CliError::user(problem));
    }
    let launcher = crate::executor_launcher(&config, &config_file, &run_dir, progress)?;
    std::fs::create_dir_all(&run_dir)
        .map_err(|e| CliError::user(format!("cannot create `{}`: {e}", run_dir.display())))?;
    log(&format!("run directory: {}", run_dir.display()));
    let model = ModelLayer::start(&config, &config_file, &run_dir, cancel, &mut log)?;
    let jobs = config
        .search
        .jobs
        .unwrap_or_else(hevo_runtime::eval::default_jobs);
    let mut runner = LiveRunner::open(RunnerSettings {
        run_dir: run_dir.clone(),
        suite_dir: suite_dir.clone(),
        trials: config.search.trials,
        jobs,
        model_env: hevo_runtime::model_access::ModelEnv::offline(),
        model_access: model.access(),
        launcher: launcher.clone(),
        cancel: cancel.clone(),
        progress: progress.then(stderr_progress),
    })
    .map_err(|e| {
        if e.is_user_error() {
            CliError::user(e)
        } else {
            CliError::Internal(e.into())
        }
    })?;
    let mut proposer: Box<dyn Proposer> = match config.proposer.kind.as_str() {
        "agent" => {
            let preset = config.proposer.preset.as_deref().map(|p| {
                hevo_search::proposer::agent_preset::preset(
                    p,
                    config.proposer.model.as_deref(),
                    launcher.isolation() != "none",
                )
                .ok_or_else(|| CliError::user(format!("unknown agent preset `{p}`")))
            });
            let preset = preset.transpose()?;
            let (command, mut env, install) = match (&config.proposer.command, preset) {
                (Some(c), p) => (
                    c.clone(),
                    p.as_ref().map(|p| p.env.clone()).unwrap_or_default(),
                    None,
                ),
                (None, Some(p)) => (p.command, p.env, Some(p.install)),
                (None, None) => {
                    return Err(CliError::user(
                        "an `agent` proposer needs `preset` or `command`",
                    ))
                }
            };
            // a missing agent is found now, before any evaluation
            hevo_search::proposer::agent_preset::check_program(
                &command,
                install,
                "`[proposer] command`",
            )
            .map_err(|e| CliError::user(format!("{}: [proposer] {e}", config_file.display())))?;
            env.extend(config.proposer.env.clone());
            Box::new(AgentProposer {
                command,
                timeout: Duration::from_secs(config.proposer.timeout_s),
                transcripts: run_dir.join("proposer"),
                home: run_dir.join("proposer").join("home"),
                env,
                model_env: model.proposer_env(&run_dir.join("proposer")),
                launcher: launcher.clone(),
                cancel: cancel.clone(),
                hidden: vec![run_dir.clone(), suite_dir.clone()],
            })
        }
        "llm" => {
            let layer = config
                .model
                .clone()
                .unwrap_or_else(hevo_llm::ModelLayerConfig::local_default);
            let model_name = config
                .proposer
                .model
                .clone()
                .or(layer.default_model.clone())
                .or_else(|| layer.models.first().map(|m| m.name.clone()))
                .ok_or_else(|| CliError::user("an `llm` proposer needs a model: set `[proposer] model` and a `[model]` route"))?;
            Box::new(LlmProposer {
                model: model_name,
                model_env: model.proposer_env(&run_dir.join("proposer")),
                run_dir: run_dir.clone(),
                timeout: Duration::from_secs(config.proposer.timeout_s),
                max_tokens: config.proposer.max_tokens,
            })
        }
        _ => Box::new(ParamsProposer::default()),
    };
    let report = match run_search(
        &config,
        &config_file,
        &run_dir,
        &mut runner,
        proposer.as_mut(),
        &mut log,
    ) {
        Ok(r) => r,
        Err(e) => {
            model.shutdown();
            if let Some(reason) = e.cancel_reason() {
                eprintln!(
                    "hevo: stopped by {reason}; everything finished is kept in {}. \
                     Resume with the same command: {}",
                    run_dir.display(),
                    crate::cli_error::command_line()
                );
                if args.json {
                    crate::cli_error::print_stopped_json(reason, &run_dir);
                }
                return Ok(ExitCode::from(reason.exit_code()));
            }
            return Err(if e.is_user_error() {
                CliError::user(e)
            } else {
                CliError::Internal(e.into())
            });
        }
    };
    let seeds: Vec<String> = report
        .candidates
        .iter()
        .filter(|c| c.iteration == 0)
        .map(|c| c.name.clone())
        .collect();
    let record = SearchRecord::from_report(&report, &config_file, &seeds);
    std::fs::write(
        run_dir.join(RECORD_FILE),
        serde_json::to_vec_pretty(&record).unwrap_or_default(),
    )
    .map_err(|e| CliError::Internal(e.into()))?;
    let finalized = if args.finalize {
        let opts = FinalizeOptions {
            trials: 1,
            jobs,
            model_env: hevo_runtime::model_access::ModelEnv::offline(),
            model_access: model.access(),
            launcher,
            cancel: cancel.clone(),
            frontier: false,
            progress: progress.then(stderr_progress),
        };
        Some(finalize(&run_dir, &suite_dir, &record, &opts, &mut log).map_err(finalize_error)?)
    } else {
        None
    };
    let usage = model.usage();
    model.shutdown();
    let view = run_view(&run_dir)?;
    print_run(&report, finalized.as_ref(), usage, &view, args.json)?;
    Ok(ExitCode::SUCCESS)
}

fn print_run(
    report: &SearchReport,
    finalized: Option<&FinalizeReport>,
    usage: hevo_runtime::spend::Spend,
    view: &RunView,
    json_out: bool,
) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    if json_out {
        let doc = json!({
            "run_dir": report.run_dir,
            "strategy": report.strategy,
            "pick": {"name": report.pick.name, "estimate": report.pick.estimate.value,
                     "ci_low": report.pick.estimate.ci_low, "ci_high": report.pick.estimate.ci_high},
            "runner_up": report.runner_up.as_ref().map(|r| json!({"name": r.name, "estimate": r.estimate.value,
                     "ci_low": r.estimate.ci_low, "ci_high": r.estimate.ci_high})),
            // The pick's entry has the pick's (selection-adjusted) interval, as `pick` and
            // `hevo status` give it: one candidate, one interval per document.
            "candidates": report.candidates.iter().map(|c| {
                let e = if c.name == report.pick.name { report.pick.estimate } else { c.estimate };
                json!({"name": c.name, "iteration": c.iteration,
                       "estimate": e.value, "ci_low": e.ci_low, "ci_high": e.ci_high})
            }).collect::<Vec<_>>(),
            "rejected": report.rejected,
            "iterations_done": report.iterations_done,
            "stopped_early": report.stopped_early,
            "evaluations": report.evaluations,
            // The search's validation trials (from the store, so a resumed run counts all).
            "tokens": {"input": report.spend.input_tokens, "cached": report.spend.cached_tokens,
                       "output": report.spend.output_tokens},
            "cost_usd": report.spend.cost_usd,
            // Everything this invocation sent through the gateway: trials, prepare, the
            // proposer and finalize (response-cache hits at the price they would have had).
            "session_model_usage": {"input": usage.input_tokens, "cached": usage.cached_tokens,
                       "output": usage.output_tokens, "cost_usd": usage.cost_usd},
            "test": finalized.map(test_json),
            "paired": finalized.map(paired_json),
            "pareto": report.pareto,
            // HarnessPro's core-set runs on the train split: in no total above.
            "train": view.train,
            "failures": view.failures.to_json(),
            "test_failures": finalized.map(|_| view.test_failures.to_json()),
        });
        writeln!(out, "{doc}").map_err(|e| CliError::Internal(e.into()))?;
        return Ok(());
    }
    let p = &report.pick;
    let mut text = format!(
        "pick: {} (iteration {}) estimate {:.3} [{:.3}, {:.3}]\n",
        p.name, p.iteration, p.estimate.value, p.estimate.ci_low, p.estimate.ci_high
    );
    if let Some(r) = &report.runner_up {
        text += &format!(
            "runner-up: {} estimate {:.3} [{:.3}, {:.3}]\n",
            r.name, r.estimate.value, r.estimate.ci_low, r.estimate.ci_high
        );
        if r.estimate.value > p.estimate.value && r.estimate.ci_high > r.estimate.ci_low {
            text += &format!(
                "  (its estimate is above the pick's but rests on a sample of tasks; the pick \
                 rests on exact scores, and a sampled candidate is picked only when it clears \
                 them clearly. To settle it: `hevo eval` the `code:` folder `hevo show {run} \
                 {name}` prints on every val task; or search with a larger rho)\n",
                run = report.run_dir.display(),
                name = r.name
            );
        }
    }
    // Candidates of an iteration the evaluation budget stopped have no estimate.
    let estimated = report
        .candidates
        .iter()
        .filter(|c| c.estimate.value.is_finite())
        .count();
    let left_out = match report.candidates.len() - estimated {
        0 => String::new(),
        n => format!(" ({n} more left out of the pick: not evaluated within the budget)"),
    };
    text += &format!(
        "strategy {}: {} evaluated{left_out}, {} rejected, {}, {}{}\n",
        report.strategy,
        counted(estimated as u64, "candidate"),
        report.rejected,
        counted(report.evaluations, "trial"),
        counted(report.iterations_done.into(), "iteration"),
        report
            .stopped_early
            .as_ref()
            .map(|s| format!(" (stopped early: {s})"))
            .unwrap_or_default()
    );
    let sp = &report.spend;
    text += &format!(
        "search trials: {} input, {} cached, {} output tokens; cost ${:.4}\n",
        sp.input_tokens, sp.cached_tokens, sp.output_tokens, sp.cost_usd
    );
    text += &format!(
        "this session through the gateway (trials, proposer, test): {} input, {} cached, {} output tokens; cost ${:.4}\n",
        usage.input_tokens, usage.cached_tokens, usage.output_tokens, usage.cost_usd
    );
    if let Some(p) = &report.pareto {
        text += &tier_lines(p);
    }
    text += &train_line(&view.train);
    text += &failure_lines("validation trials", &view.failures);
    if let Some(f) = finalized {
        text += &finalize_table(f);
        text += &failure_lines("test trials", &view.test_failures);
    }
    text += &what_next(report);
    write!(out, "{text}").map_err(|e| CliError::Internal(e.into()))
}

/// What a newcomer needs after a run: where it lives, how to look at it and resume, how to
/// bring their own harness and a real API model.
fn what_next(report: &SearchReport) -> String {
    let run = report.run_dir.display();
    format!(
        "\nwhat next:\n\
         \x20 this run    {run} (hevo.db: every trial; archive/: each candidate's code, params, \
         scores and traces; test/: the test split)\n\
         \x20 look at it  hevo report {run}   (an HTML page), hevo status {run}, \
         hevo show {run} {pick}\n\
         \x20 resume      run the same command again: finished trials are reused; \
         --iterations N searches further\n\
         \x20 your own    a directory with harness.toml and a program that reads a task on \
         stdin and prints {{\"answer\": ...}} (docs/harness-protocol.md); list it under \
         `seeds` in a hevo.toml (docs/config.md)\n\
         \x20 a real API  add a [[model.backends]] of kind openai or anthropic with \
         api_key_env, and a [budget] max_usd (docs/models.md)\n",
        pick = report.pick.name
    )
}

/// One line per pareto tier, as the search measured it on validation.
fn tier_lines(p: &hevo_search::objective::ParetoReport) -> String {
    let unit = p.unit.label();
    let mut text = format!(
        "pareto tiers (floor: {} at {:.3}; {} of {} candidates survive):\n",
        p.baseline,
        p.baseline_pass_rate,
        p.survivors.len(),
        p.candidates.len()
    );
    for t in &p.tiers {
        let c = &t.candidate;
        text += &format!(
            "  {:<6} {:<28} pass {:.3} [{:.3}, {:.3}]  cost/task {} [{}, {}] {unit}  time/task {:.0} ms\n",
            t.tier,
            c.name,
            c.pass_rate.value,
            c.pass_rate.ci_low,
            c.pass_rate.ci_high,
            cost(p.unit, c.cost.per_task.value),
            cost(p.unit, c.cost.per_task.ci_low),
            cost(p.unit, c.cost.per_task.ci_high),
            c.cost.wall_ms_per_task
        );
    }
    let mut names: Vec<&str> = p.tiers.iter().map(|t| t.candidate.name.as_str()).collect();
    names.dedup();
    if p.tiers.len() > 1 && names.len() == 1 {
        text += "  (the tiers coincide: no surviving candidate trades pass rate for cost)\n";
    }
    text
}
