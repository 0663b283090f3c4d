//! `hevo replay`: evaluation strategies replayed offline on a logged outcome matrix
//! (SPEC.md section 5).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::anyhow;
use hevo_stats::design::DEFAULT_MC_DRAWS;
use hevo_stats::estimate::Estimator;
use hevo_stats::synth::SynthParams;
use hevo_strategy::frontier::Frontier;
use hevo_strategy::matches::Matches;
use hevo_strategy::matrix::{MatrixError, MAX_CELLS};
use hevo_strategy::replay::{self, Matrix, ReplayConfig, MAX_SEEDS};
use hevo_strategy::strategy::StrategyKind;
use hevo_strategy::vocab::{parse_estimator, parse_pi, StrategyName, StrategyOptions, UnknownName};

use crate::num_args::count;
use crate::replay_progress::SeedProgress;
use crate::CliError;

/// The description of `hevo replay --help` (set on the subcommand in main.rs, where the
/// one-line doc comment would otherwise replace it).
pub const LONG_ABOUT: &str = "Replays evaluation strategies offline, at zero cost, on a \
    complete candidate x task outcome matrix (long CSV `candidate,task,outcome[,cost_usd]`). \
    For each seed, tasks are split 50/50 into val and test, candidates are shuffled, the \
    first two are Phase 0 (full val evaluation) and the rest arrive --per-iter at a time. \
    Prints, per strategy, means over seeds of: the true val rank of the pick (1 = best), its \
    val and test scores, Spearman of estimates vs truth, and the shares of full-search \
    evaluations and cost used.\n\n\
    Strategies: full, fixed (Naive), resample (Random-Resample), coevolve (Task-CoEvolve; \
    --estimator hajek|residual|auto), screen (GEPA), race (paired racing), default \
    (recommended: every newcomer screened against the best exactly known candidate, \
    contenders verified by racing them to every val task, the pick on exact scores), or all.\n\n\
    Workloads: a logged matrix; --attempts K on a pass@1 file (near-identical attempts); \
    --sample CxT for a small seeded field; --synth CxT (Rasch); --synth-cost LOG_SD for \
    heavy-tailed dollars on any of them. A matrix holds at most 10000000 cells (candidates \
    x tasks).\n\n\
    Budgets: --rho 0.2,0.1,0.05 replays each in turn, to see what each strategy's pick costs \
    at each budget (docs/replay.md compares `default` at several rhos with `coevolve` at 0.2).";

/// Arguments of `hevo replay`.
#[derive(clap::Args, Debug)]
#[command(
    allow_negative_numbers = true,
    override_usage = "hevo replay <MATRIX | --synth CxT> [OPTIONS]",
    after_help = "Examples:\n  \
    hevo replay --synth 60x200 --strategy default,coevolve --seeds 20\n  \
    hevo replay runs.csv --rho 0.2,0.1 --json\n  \
    hevo replay runs.csv --cost costs.csv --strategy default"
)]
pub struct Args {
    /// The outcome matrix: CSV with header `candidate,task,outcome[,cost_usd]`, one row per cell.
    #[arg(required_unless_present = "synth")]
    pub matrix: Option<PathBuf>,
    /// Instead of a file, replay a seeded synthetic Rasch matrix of CANDIDATESxTASKS
    /// (e.g. 60x200, at most 10000000 cells) with near-identical candidates (see
    /// --ability-spread).
    #[arg(long, value_name = "CxT", conflicts_with = "matrix")]
    pub synth: Option<String>,
    /// Ability spread (logits) of the synthetic candidates; 0.2 = near-identical variants.
    #[arg(long, default_value_t = 0.2)]
    pub ability_spread: f64,
    /// Seed of the synthetic matrix, of the attempts drawn by --attempts, of the --sample
    /// and of the costs of --synth-cost.
    #[arg(long, default_value_t = 1, value_parser = count::<u64>)]
    pub synth_seed: u64,
    /// Give the matrix (synthetic or a file without costs) seeded per-cell costs:
    /// log-normal per-task costs with this log-sd (1.0 = heavy-tailed), correlated 0.5 with
    /// task difficulty (hard tasks cost more), times a log-normal per-candidate multiplier
    /// (log-sd 0.5). The three --synth-cost-* options change the shape.
    #[arg(long, value_name = "LOG_SD", conflicts_with = "cost")]
    pub synth_cost: Option<f64>,
    /// With --synth-cost: the correlation, in [-1, 1], of a task's log cost with its
    /// difficulty (default 0.5: hard tasks cost more; 0: unrelated; -0.5: easy tasks cost
    /// more).
    #[arg(long, value_name = "R", requires = "synth_cost")]
    pub synth_cost_corr: Option<f64>,
    /// With --synth-cost: the log-sd of the per-candidate cost multiplier (default 0.5;
    /// 1.0 = harnesses whose prices differ several-fold).
    #[arg(long, value_name = "LOG_SD", requires = "synth_cost")]
    pub synth_cost_candidate: Option<f64>,
    /// With --synth-cost: what a failed trial costs relative to a passed one (default 1;
    /// 3 = an agent that fails runs to its turn limit and costs three times as much).
    #[arg(long, value_name = "X", requires = "synth_cost")]
    pub synth_cost_fail: Option<f64>,
    /// Replay a seeded sample of the matrix file: CANDIDATES (with --attempts: models, each
    /// with all its attempts) and TASKS, e.g. `--attempts 5 --sample 13x80` for a small
    /// field of 13 agents x 5 attempts on 80 tasks. Seeded by --synth-seed.
    #[arg(long, value_name = "CxT", conflicts_with = "synth")]
    pub sample: Option<String>,
    /// Read MATRIX as `candidate,task,pass_at_1` (a `.extra.csv`) and turn every candidate
    /// into K attempts with Bernoulli(pass_at_1) outcomes (seeded by --synth-seed): attempts
    /// of one candidate differ only by noise, as children of one parent do in a live search.
    /// At most 10000000 cells (candidates x K x tasks).
    #[arg(long, value_name = "K", conflicts_with = "synth", value_parser = count::<usize>)]
    pub attempts: Option<usize>,
    /// Strategies to replay, comma-separated (`--strategy default,coevolve,screen`): full,
    /// fixed, resample, coevolve, screen, race, default, or all (alone).
    #[arg(long, default_value = "all", value_name = "NAME[,NAME...]")]
    pub strategy: String,
    /// Share of the val tasks each candidate is evaluated on (m = ceil(rho * N)). Several
    /// values (`--rho 0.2,0.1,0.05`) replay each in turn on the same seeds: one table per
    /// value, then the frontier, the (strategy, rho) settings no other picks better for less,
    /// then for every peer setting the cheapest `default` setting whose pick ranks no worse
    /// and its share of the peer's spend: e.g. the least rho at which `default` ranks as well
    /// as `coevolve` at 0.2, and at what price (with --json: `{"runs": [one document per
    /// value], "frontier": {...}, "matches": {...}}`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.2",
        value_name = "RHO[,RHO...]"
    )]
    pub rho: Vec<f64>,
    /// New candidates per iteration.
    #[arg(long, default_value_t = 3, value_parser = count::<usize>)]
    pub per_iter: usize,
    /// Number of seeds, 1 to 100000 (FIRST_SEED..FIRST_SEED+SEEDS); results are means over
    /// seeds.
    #[arg(long, default_value_t = 50, value_parser = count::<u64>)]
    pub seeds: u64,
    /// The first seed (e.g. 100 to report on seeds no constant was tuned on); the last seed,
    /// FIRST_SEED+SEEDS-1, is at most 18446744073709551615.
    #[arg(long, default_value_t = 0, value_parser = count::<u64>)]
    pub first_seed: u64,
    /// Do not split tasks into val and test: val = test = all tasks.
    #[arg(long)]
    pub no_split: bool,
    /// Estimators of `coevolve`, comma-separated, one row each: hajek (paper Eq. 3),
    /// residual (Eq. 4), hajek-residual (Eq. 4 with Hajek normalization) or auto (chosen per
    /// stratum). Without it: hajek, residual and auto with `--strategy all`, else hajek.
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub estimator: Option<String>,
    /// Inclusion probabilities of `coevolve`: mc (Monte Carlo, the paper) or exact.
    #[arg(long, default_value = "mc")]
    pub pi: String,
    /// Monte Carlo draws for `--pi mc`.
    #[arg(long, default_value_t = DEFAULT_MC_DRAWS, value_parser = count::<usize>)]
    pub mc_draws: usize,
    /// Minibatch size of `screen` (GEPA's default is 3).
    #[arg(long, default_value_t = 3, value_parser = count::<usize>)]
    pub minibatch: usize,
    /// Per-cell costs in a separate CSV `candidate,task,cost_usd` (they replace the
    /// matrix's own cost_usd, with a warning). Not with --synth, which makes its own.
    #[arg(long)]
    pub cost: Option<PathBuf>,
    /// Worker threads over seeds (default: available cores).
    #[arg(long, value_parser = count::<usize>)]
    pub threads: Option<usize>,
    /// Print one JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr (by default a replay that runs longer than 2 s prints
    /// the seeds done, elapsed time and ETA every 2 s).
    #[arg(long)]
    pub no_progress: bool,
}

/// The names of a comma-separated flag value, each parsed by `parse`, once each in the order
/// given.
fn each_once<T: PartialEq>(
    list: &str,
    parse: impl Fn(&str) -> Result<T, CliError>,
) -> Result<Vec<T>, CliError> {
    let mut out = Vec::new();
    for part in list.split(',').map(str::trim) {
        let item = parse(part)?;
        if !out.contains(&item) {
            out.push(item);
        }
    }
    Ok(out)
}

/// The strategies `--strategy` names, with their options.
fn strategies(args: &Args) -> Result<Vec<StrategyKind>, CliError> {
    let named = |flag: &'static str| move |e: UnknownName| CliError::user(format!("{flag}: {e}"));
    let pi = parse_pi(&args.pi, args.mc_draws).map_err(named("--pi"))?;
    let estimators: Vec<Option<Estimator>> = match &args.estimator {
        Some(list) => each_once(list, |part| {
            parse_estimator(part).map_err(named("--estimator"))
        })?,
        None if args.strategy == "all" => {
            vec![Some(Estimator::Hajek), Some(Estimator::Residual), None]
        }
        None => vec![Some(Estimator::Hajek)],
    };
    let options = |estimator| StrategyOptions {
        estimator,
        pi,
        minibatch: args.minibatch,
    };
    let names: Vec<StrategyName> = if args.strategy == "all" {
        StrategyName::ALL.to_vec()
    } else {
        each_once(&args.strategy, |part| {
            if part == "all" {
                return Err(CliError::user(format!(
                    "--strategy {}: `all` replays every strategy; give it alone",
                    args.strategy
                )));
            }
            part.parse()
                .map_err(|e: UnknownName| CliError::user(format!("--strategy: {e}, or all")))
        })?
    };
    let mut kinds = Vec::new();
    for name in names {
        if name == StrategyName::Coevolve {
            kinds.extend(estimators.iter().map(|&e| name.kind(&options(e))));
        } else {
            kinds.push(name.kind(&options(None)));
        }
    }
    Ok(kinds)
}

/// Runs `hevo replay`.
pub fn run_cmd(args: Args) -> Result<ExitCode, CliError> {
    if let Some(bad) = args.rho.iter().find(|r| !(**r > 0.0 && **r <= 1.0)) {
        return Err(CliError::user(format!("--rho {bad} must be in (0, 1]")));
    }
    if !(1..=MAX_SEEDS).contains(&args.seeds) {
        return Err(CliError::user(format!(
            "--seeds {} is out of range: give 1 to {MAX_SEEDS} seeds",
            args.seeds
        )));
    }
    for (flag, n) in [
        ("--per-iter", args.per_iter as u64),
        ("--mc-draws", args.mc_draws as u64),
        ("--minibatch", args.minibatch as u64),
        ("--threads", args.threads.map_or(1, |t| t as u64)),
    ] {
        if n == 0 {
            return Err(CliError::user(format!("{flag} must be at least 1")));
        }
    }
    // The last seed is first + seeds - 1: u64::MAX itself is a seed.
    if args.first_seed.checked_add(args.seeds - 1).is_none() {
        return Err(CliError::user(format!(
            "--first-seed {} with --seeds {} runs past the largest seed, {}; give a smaller \
             --first-seed",
            args.first_seed,
            args.seeds,
            u64::MAX
        )));
    }
    if args.synth.is_some() && args.cost.is_some() {
        return Err(CliError::user(
            "--cost cannot be used with --synth: --synth makes its own costs (--synth-cost, \
             see --help); drop --cost",
        ));
    }
    let kinds = strategies(&args)?;
    let params = synth_params(&args)?;
    let mut matrix = match (&args.synth, &args.matrix) {
        (Some(spec), _) => synth_matrix(spec, &params, args.synth_seed)?,
        (None, Some(path)) if args.attempts.is_some() => {
            let k = args.attempts.unwrap_or(1);
            if k == 0 {
                return Err(CliError::user("--attempts must be at least 1"));
            }
            if args.cost.is_some() {
                return Err(CliError::user("--cost cannot be combined with --attempts"));
            }
            Matrix::from_attempts(path, k, args.synth_seed)
                .map_err(|e| CliError::User(anyhow!(e)))?
        }
        (None, Some(path)) => {
            let mut m = read_matrix(path, args.cost.as_deref())?;
            if m.cost
                .as_ref()
                .is_some_and(|c| c.iter().flatten().all(|&v| v == 0.0))
            {
                // A free model (a local one, or a cached log): no dollars to weigh or share.
                eprintln!(
                    "note: {}: cost_usd is 0 on every cell, so there are no dollars to weigh; \
                     replaying without costs (the spend is counted in evaluations)",
                    args.cost.as_deref().unwrap_or(path).display()
                );
                m.cost = None;
            }
            m
        }
        (None, None) => return Err(CliError::user("give a MATRIX file or --synth CxT")),
    };
    if let Some(spec) = &args.sample {
        let (groups, tasks) = dims("--sample", spec)?;
        let group = args.attempts.unwrap_or(1);
        let (have_groups, have_tasks) = (matrix.candidates.len() / group, matrix.tasks.len());
        if groups > have_groups || tasks > have_tasks {
            let models = match args.attempts {
                Some(k) => format!(" ({have_groups} models of {k} attempts)"),
                None => String::new(),
            };
            return Err(CliError::user(format!(
                "--sample {spec} is larger than the matrix: it has {} candidates{models} and \
                 {have_tasks} tasks; give at most {have_groups}x{have_tasks}",
                matrix.candidates.len()
            )));
        }
        matrix = matrix.sample(groups, group, tasks, args.synth_seed);
        if matrix.candidates.len() < 3 || matrix.tasks.len() < 2 {
            return Err(CliError::user(format!(
                "--sample {spec}: the sample has {} candidates and {} tasks; replay needs at \
                 least 3 candidates and 2 tasks",
                matrix.candidates.len(),
                matrix.tasks.len()
            )));
        }
    }
    if let (Some(_), None) = (args.synth_cost, &args.synth) {
        if matrix.cost.is_some() {
            return Err(CliError::user(
                "--synth-cost: the matrix already has costs (a cost_usd column); drop one",
            ));
        }
        matrix = matrix.with_synthetic_costs(&params, args.synth_seed);
    }
    if let Some(problem) = matrix.cost_problem() {
        // Files are checked as they are read: these costs are --synth-cost's.
        return Err(CliError::user(format!(
            "{}: the costs drawn cannot be replayed: {problem}; give smaller values (e.g. \
             --synth-cost 1.0 --synth-cost-candidate 0.5 --synth-cost-fail 3)",
            synth_cost_flags(&args)
        )));
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let progress = SeedProgress::new(
        args.seeds.saturating_mul(args.rho.len() as u64),
        args.no_progress,
    );
    let reports: Vec<replay::ReplayReport> = args
        .rho
        .iter()
        .map(|&rho| {
            let cfg = ReplayConfig {
                strategies: kinds.clone(),
                rho,
                per_iter: args.per_iter,
                seeds: args.seeds,
                first_seed: args.first_seed,
                split: !args.no_split,
                threads,
            };
            replay::run_observed(&matrix, &cfg, &|| progress.seed_done(rho))
        })
        .collect();
    if args.json {
        // One rho: its document, as always; several: the documents in --rho's order, the
        // frontier over all of them and `default`'s matches (null without `default`).
        let doc = match reports.as_slice() {
            [one] => serde_json::to_string_pretty(one),
            runs => serde_json::to_string_pretty(&serde_json::json!({
                "runs": runs,
                "frontier": Frontier::of(runs),
                "matches": Matches::of(runs, StrategyName::Default.as_str()),
            })),
        }
        .map_err(|e| CliError::Internal(anyhow!(e)))?;
        println!("{doc}");
    } else {
        let mut tables: Vec<String> = reports.iter().map(|r| r.to_string()).collect();
        if reports.len() > 1 {
            tables.push(Frontier::of(&reports).to_string());
            tables.extend(
                Matches::of(&reports, StrategyName::Default.as_str()).map(|m| m.to_string()),
            );
        }
        print!("{}", tables.join("\n"));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `CANDIDATESxTASKS` of `--synth` or `--sample`.
fn dims(flag: &str, spec: &str) -> Result<(usize, usize), CliError> {
    let bad = || {
        CliError::user(format!(
            "{flag} `{spec}`: expected CANDIDATESxTASKS, e.g. 60x200"
        ))
    };
    let (c, t) = spec.split_once('x').ok_or_else(bad)?;
    let c: usize = c.trim().parse().map_err(|_| bad())?;
    let t: usize = t.trim().parse().map_err(|_| bad())?;
    Ok((c, t))
}

/// The synthetic model of `--synth` (near-identical candidates of `--ability-spread`) with
/// the cost model of `--synth-cost` and its knobs; a file given `--synth-cost` takes the cost
/// model only. A value out of range is a user error (exit 2) naming its flag.
fn synth_params(args: &Args) -> Result<SynthParams, CliError> {
    let mut p = SynthParams {
        ability_spread: at_least_zero("--ability-spread", args.ability_spread)?,
        ..SynthParams::near_identical()
    };
    let Some(sd) = args.synth_cost else {
        return Ok(p);
    };
    p = p.with_costs(at_least_zero("--synth-cost", sd)?);
    if let Some(r) = args.synth_cost_corr {
        if !(-1.0..=1.0).contains(&r) {
            return Err(CliError::user(format!(
                "--synth-cost-corr {r} must be in [-1, 1]"
            )));
        }
        p.cost_difficulty_corr = r;
    }
    if let Some(k) = args.synth_cost_candidate {
        p.candidate_cost_log_sd = at_least_zero("--synth-cost-candidate", k)?;
    }
    if let Some(f) = args.synth_cost_fail {
        if !(f.is_finite() && f > 0.0) {
            return Err(CliError::user(format!(
                "--synth-cost-fail {f} must be a cost ratio > 0"
            )));
        }
        p.failure_cost = f;
    }
    Ok(p)
}

/// The `--synth-cost*` options given, as typed (e.g. `--synth-cost 1 --synth-cost-fail
/// 1e308`), for an error about the costs they drew.
fn synth_cost_flags(args: &Args) -> String {
    [
        ("--synth-cost", args.synth_cost),
        ("--synth-cost-corr", args.synth_cost_corr),
        ("--synth-cost-candidate", args.synth_cost_candidate),
        ("--synth-cost-fail", args.synth_cost_fail),
    ]
    .iter()
    .filter_map(|(flag, v)| v.map(|v| format!("{flag} {v:?}")))
    .collect::<Vec<_>>()
    .join(" ")
}

/// `v`, the value of the spread `flag`, when it is finite and at least 0; else a user error
/// naming the flag.
fn at_least_zero(flag: &str, v: f64) -> Result<f64, CliError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(CliError::user(format!("{flag} {v} must be a spread >= 0")))
    }
}

/// A seeded synthetic Rasch matrix of `spec` (`CxT`) drawn from `params`, of at most
/// [`MAX_CELLS`] cells (refused before anything is allocated).
fn synth_matrix(spec: &str, params: &SynthParams, seed: u64) -> Result<Matrix, CliError> {
    let (c, t) = dims("--synth", spec)?;
    if c < 3 || t < 2 {
        return Err(CliError::user(
            "--synth needs at least 3 candidates and 2 tasks",
        ));
    }
    if c.checked_mul(t).is_none_or(|cells| cells > MAX_CELLS) {
        return Err(CliError::user(format!(
            "--synth {spec}: {c} x {t} cells is more than the {MAX_CELLS} a replay holds in \
             memory; give fewer candidates or tasks, e.g. 60x200"
        )));
    }
    Ok(Matrix::synthetic(c, t, params, seed))
}

/// The matrix file, with the costs of `--cost` when given; a cost that replaces one of
/// the matrix's own `cost_usd` values is told on stderr, naming both files.
fn read_matrix(path: &Path, cost: Option<&Path>) -> Result<Matrix, CliError> {
    let user = |e: MatrixError| CliError::User(anyhow!(e));
    let Some(cost) = cost else {
        return Matrix::from_csv(path, None).map_err(user);
    };
    let (matrix, overridden) = Matrix::from_csv_counting_overrides(path, cost).map_err(user)?;
    if overridden > 0 {
        eprintln!(
            "warning: --cost {} replaces the cost_usd column of {} ({overridden} cell(s)); \
             drop --cost to use the matrix's own costs",
            cost.display(),
            path.display()
        );
    }
    Ok(matrix)
}

/// Runs `hevo replay` (entry point used by `main`).
pub fn run(args: Args) -> Result<ExitCode, CliError> {
    run_cmd(args)
}
