//! The search loop (SPEC.md section 1 with Task-CoEvolve / racing evaluation).
//!
//! ```text
//! Phase 0: every seed harness ─► archive/candidates/00N-<seed> ─► strategy.phase0 (all val)
//! for it in 1..=iterations:
//!     proposer writes k candidates into archive/pending/      (skipped if already written)
//!     each is validated (name, manifest, entry, smoke trial)  ─► rejected, with the reason
//!     valid ones move to archive/candidates/NNN-<name>        ─► strategy.iteration
//!     scores.json, summary.jsonl, frontier.json are updated
//! strategy.finish ─► final estimates, the pick (argmax, earliest on ties), the runner-up
//! ```
//!
//! **Resume.** Every decision is a pure function of the seed and what is on disk, and
//! trials are memoized by the store, so running the loop again on the same run directory
//! replays the decisions, reuses every finished trial and continues where it stopped. The
//! proposer is not asked again for an iteration whose candidates are already in `pending/`
//! or in the archive (`archive/state.json` records which iterations' proposals were taken).
//!
//! **No test data.** The loop only ever evaluates the validation split (and smoke trials on
//! one train task). Test evaluation is `finalize`'s job, outside the archive.

mod candidates;
mod finish;
mod history;
mod manifest_rule;
mod oracle;
mod pending;
mod record;
mod traces;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use hevo_runtime::spend::Spend;
use hevo_stats::design::Strata;
use hevo_stats::estimate::Estimate;
use hevo_stats::weights::WeightParams;
use serde::{Deserialize, Serialize};

use crate::archive::{write_atomic, Archive, Candidate};
use crate::config::{ObjectiveKind, RunConfig};
use crate::objective::ParetoReport;
use crate::proposer::{ProposeContext, Proposer};
use crate::runner::{CandidateRunner, Effort};
use candidates::{
    archive_accepted, archive_seeds, check_nothing_missing, list_archived, take_archived,
};
use finish::{final_estimates, pareto_tiers, rank};
use hevo_runtime::cancel::CancelReason;
use hevo_runtime::eval::EvalError;
use hevo_runtime::suite::Suite;
use hevo_runtime::task::Split;
use hevo_strategy::strategy::{Strategy, StrategyConfig};
use history::History;
use oracle::OracleState;
use pending::{clear_pending, take_proposals, validate_pending};
use record::{iteration_line, record_iteration, record_rejections};

/// A candidate's final line in the report.
#[derive(Clone, Debug, Serialize)]
pub struct Ranked {
    /// Its name.
    pub name: String,
    /// Its iteration (0 = seed).
    pub iteration: u32,
    /// Its estimate.
    pub estimate: Estimate,
}

/// The result of a search.
#[derive(Clone, Debug, Serialize)]
pub struct SearchReport {
    /// The run directory.
    pub run_dir: PathBuf,
    /// The pick: the strategy's choice (`default`: the best exactly known candidate unless a
    /// sampled one clears it clearly), with its selection-adjusted interval.
    pub pick: Ranked,
    /// The best-estimated candidate other than the pick, if there is one (its estimate can
    /// be above the pick's: a sampled estimate the strategy did not trust enough).
    pub runner_up: Option<Ranked>,
    /// Every candidate, best first.
    pub candidates: Vec<Ranked>,
    /// Candidates rejected before evaluation.
    pub rejected: usize,
    /// Trials in the store (evaluations spent on validation).
    pub evaluations: u64,
    /// What those trials' model calls cost.
    pub spend: Spend,
    /// The strategy used.
    pub strategy: String,
    /// Why the run stopped before its last iteration, if it did (a budget).
    pub stopped_early: Option<String>,
    /// Iterations completed.
    pub iterations_done: u32,
    /// Under `[objective] kind = "pareto"`: every candidate's pass rate and cost, and the
    /// lite / medium / heavy tiers (`None` under `pass_rate`).
    pub pareto: Option<ParetoReport>,
}

/// Why a search failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SearchError {
    /// The configuration or an input is wrong (the user's to fix).
    #[error("{0}")]
    User(String),
    /// A filesystem operation on the run directory failed.
    #[error("{what} `{}`: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Evaluating a candidate failed (its harness or the suite is invalid, the store
    /// failed, or the run was cancelled).
    #[error("evaluating `{candidate}`: {source}")]
    Evaluation {
        /// The candidate's name.
        candidate: String,
        /// The cause.
        #[source]
        source: EvalError,
    },
    /// A task has no scored trial because every attempt was an infrastructure fault; the
    /// harness is not blamed, the run stops and resumes later.
    #[error(
        "candidate `{candidate}` has no scored trial on task `{task}` (infrastructure errors); \
         run the same command again to retry"
    )]
    NoScore {
        /// The candidate's name.
        candidate: String,
        /// The task id.
        task: String,
    },
    /// The run was cancelled (a signal); everything finished is kept.
    #[error("stopped by {0}; run the same command again to resume")]
    Interrupted(CancelReason),
    /// The proposer failed and left no valid candidate; the failure is in `summary.jsonl` with
    /// the end of its transcript, and the iteration is not taken: the same command asks the
    /// proposer again.
    #[error(
        "iteration {iteration}: the proposer failed and wrote no valid candidate: {cause}; \
         fix the cause and run the same command again to retry the iteration"
    )]
    Proposer {
        /// The iteration.
        iteration: u32,
        /// Why, with the end of the proposer's transcript.
        cause: String,
    },
    /// `[budget] max_evaluations` would be exceeded by the next batch of trials.
    #[error("the evaluation budget of {max_trials} trials ([budget] max_evaluations) is reached")]
    Budget {
        /// The budget.
        max_trials: u64,
    },
}

impl SearchError {
    /// Whether the user must fix something (exit code 2).
    pub fn is_user_error(&self) -> bool {
        match self {
            SearchError::User(_) => true,
            SearchError::Evaluation { source, .. } => source.is_user_error(),
            _ => false,
        }
    }

    /// The cancellation reason, if the run was cancelled.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        match self {
            SearchError::Interrupted(r) => Some(*r),
            SearchError::Evaluation {
                source: EvalError::Interrupted { reason, .. },
                ..
            } => Some(*reason),
            _ => None,
        }
    }
}

fn io_err<'a>(
    what: &'static str,
    path: &'a Path,
) -> impl FnOnce(std::io::Error) -> SearchError + 'a {
    move |source| SearchError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Which iterations' proposals have been taken into the archive, and the settings that
/// decide the run's pick, so a resume cannot silently rewrite it under others.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct LoopState {
    proposals_taken: u32,
    /// Absent in runs started before it was recorded.
    #[serde(default)]
    decided_by: Option<Decider>,
}

/// The settings a resume must keep: another seed or strategy would replay the run's
/// decisions differently and rewrite its pick while its archive and test results stay.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
struct Decider {
    seed: u64,
    strategy: String,
    rho: f64,
    estimator: String,
}

impl Decider {
    fn of(config: &RunConfig) -> Self {
        Decider {
            seed: config.seed,
            strategy: config.evaluation.strategy.clone(),
            rho: config.evaluation.rho,
            estimator: config.evaluation.estimator.clone(),
        }
    }

    /// Refuses to resume `run_dir`, decided by `self`, with `now`; names what differs.
    fn check(&self, now: &Decider, run_dir: &Path) -> Result<(), SearchError> {
        let mut diffs = Vec::new();
        if self.seed != now.seed {
            diffs.push(format!("seed {} (--seed)", self.seed));
        }
        if self.strategy != now.strategy {
            diffs.push(format!(
                "[evaluation] strategy `{}` (--strategy)",
                self.strategy
            ));
        }
        if self.rho != now.rho {
            diffs.push(format!("[evaluation] rho {}", self.rho));
        }
        if self.estimator != now.estimator {
            diffs.push(format!("[evaluation] estimator `{}`", self.estimator));
        }
        if diffs.is_empty() {
            return Ok(());
        }
        Err(SearchError::User(format!(
            "`{}` was run with {}; resuming it with other settings would rewrite its pick: \
             use the same settings to resume it, or start a new run with --run-dir",
            run_dir.display(),
            diffs.join(", ")
        )))
    }
}

/// Runs (or resumes) a search. `config_file` locates relative paths; `run_dir` is the run
/// directory (created if needed).
pub fn run_search(
    config: &RunConfig,
    config_file: &Path,
    run_dir: &Path,
    runner: &mut dyn CandidateRunner,
    proposer: &mut dyn Proposer,
    log: &mut dyn FnMut(&str),
) -> Result<SearchReport, SearchError> {
    let started = Instant::now();
    let suite_dir = config.resolve(config_file, &config.suite);
    let suite = Suite::load(&suite_dir).map_err(|e| SearchError::User(e.to_string()))?;
    let (val_ids, strata) = val_split(&suite, &suite_dir)?;
    let smoke_task = {
        let mut train = suite.split(Split::Train);
        train.sort_by(|a, b| a.id.cmp(&b.id));
        train.first().map(|t| t.id.clone())
    };

    std::fs::create_dir_all(run_dir).map_err(io_err("cannot create the run directory", run_dir))?;
    let archive_root = run_dir.join("archive");
    let archive =
        Archive::open(&archive_root).map_err(io_err("cannot create the archive", &archive_root))?;
    let state_path = archive_root.join("state.json");
    let mut state: LoopState = std::fs::read(&state_path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();

    let kind = config
        .evaluation
        .kind()
        .map_err(|e| SearchError::User(e.to_string()))?;
    let iterations = config
        .harnesspro
        .as_ref()
        .map_or(config.search.iterations, |h| h.epochs);
    if state.proposals_taken > iterations {
        // Replaying fewer iterations would rewrite the run's record and pick without the
        // later candidates, while its archive and test results still show them.
        let (key, word) = match config.harnesspro {
            Some(_) => ("[harnesspro] epochs", "epochs"),
            None => ("[search] iterations (or --iterations)", "iterations"),
        };
        return Err(SearchError::User(format!(
            "`{}` has already run {} {word}, more than the {iterations} asked for; ask for at \
             least {} with {key} to resume it, or start a new run with --run-dir",
            run_dir.display(),
            state.proposals_taken,
            state.proposals_taken
        )));
    }
    let decider = Decider::of(config);
    match &state.decided_by {
        Some(d) => d.check(&decider, run_dir)?,
        None => {
            state.decided_by = Some(decider);
            write_atomic(&state_path, &serde_json::to_vec(&state).unwrap_or_default())
                .map_err(io_err("cannot write", &state_path))?;
        }
    }
    // HarnessPro's epoch loop: each iteration is an epoch with three children per survivor.
    let epochs = match &config.harnesspro {
        Some(h) => Some(crate::harnesspro::Epochs::new(
            h,
            &config.objective,
            run_dir,
            crate::harnesspro::epoch::train_tasks(&suite),
            &val_ids,
            config.search.trials,
        )?),
        None => None,
    };
    let k = match epochs {
        Some(_) => 9,
        None => config.search.candidates_per_iteration,
    };
    let mut history = History::new(
        kind,
        StrategyConfig {
            strata,
            rho: config.evaluation.rho,
            expected_candidates: (iterations * k) as usize,
            seed: config.seed,
            weights: WeightParams::default(),
        },
    );
    let mut strat: Box<dyn Strategy> = history.build();

    // Phase 0: the seeds, archived under their manifest names.
    let mut candidates = archive_seeds(config, config_file, &archive)?;
    let n_seeds = candidates.len();
    check_phase0_budget(config, config_file, n_seeds * val_ids.len())?;
    // Candidates accepted in earlier invocations, in sequence order.
    let mut archived = list_archived(&archive)?;
    archived.retain(|c| c.seq >= n_seeds);
    let summary = archive
        .read_summary()
        .map_err(io_err("cannot read", &archive_root))?;
    // The candidates an earlier invocation evaluated (rejections have no estimate).
    let evaluated: HashSet<String> = summary
        .iter()
        .filter(|l| l.estimate.is_some())
        .map(|l| l.name.clone())
        .collect();
    check_nothing_missing(&evaluated, &candidates, &archived, &archive_root)?;
    let mut summary_names: HashSet<String> = summary.into_iter().map(|l| l.name).collect();

    let budget_trials = config.budget.max_evaluations;
    let mut stopped_early = None;
    let mut iterations_done = 0;
    let mut rejected_total = 0usize;
    let trials_per_task = config.search.trials as u64;

    let mut oracle = OracleState {
        effort: HashMap::new(),
        outcomes: HashMap::new(),
        requested: 0,
        budget_trials,
        trials_per_task,
        cost_unit: None,
        costs: HashMap::new(),
        unscored: Vec::new(),
    };

    log(&format!(
        "phase 0: {} seed harness(es) on all {} validation tasks",
        n_seeds,
        val_ids.len()
    ));
    let seeds: Vec<usize> = (0..n_seeds).collect();
    oracle.call(runner, &candidates, &val_ids, &mut |o| {
        strat.phase0(o, &seeds)
    })?;
    history.finished(&seeds);
    record_iteration(
        &archive,
        &candidates,
        &seeds,
        strat.as_ref(),
        &oracle.effort,
        &oracle.outcomes,
        &mut summary_names,
    )?;

    // The first iteration whose proposals this invocation makes, and when it began: the ETA
    // is paced by those alone (a resumed run takes the earlier ones from the archive at
    // once, which says nothing of how long an iteration takes).
    let mut timed: Option<(u32, Instant)> = None;
    for it in 1..=iterations {
        if let Some(max) = config.budget.max_wall_s {
            if started.elapsed().as_secs() >= max {
                stopped_early = Some(format!("the wall-time budget of {max} s is reached"));
                break;
            }
        }
        if let Some(max) = config.budget.max_usd {
            let total: f64 = oracle.effort.values().map(|s| s.spend.cost_usd).sum();
            if total >= max {
                stopped_early = Some(format!("the dollar budget of ${max} is reached"));
                break;
            }
        }
        let mut new_ids: Vec<usize> = Vec::new();
        // The proposer wrote nothing at all this iteration (not even a rejected candidate).
        let mut wrote_none = false;
        if state.proposals_taken >= it {
            // Resume: this iteration's candidates were accepted before.
            take_archived(&archived, it, &archive_root, &mut candidates, &mut new_ids)?;
        } else {
            timed.get_or_insert((it, Instant::now()));
            let history: Vec<(Candidate, Estimate)> = candidates
                .iter()
                .map(|c| (c.clone(), strat_estimate(strat.as_ref(), c.seq)))
                .collect();
            let ctx = ProposeContext {
                iteration: it,
                k,
                seed: config.seed,
                archive: &archive,
                history,
            };
            let failure = match &epochs {
                Some(ep) => ep.propose(
                    it,
                    config.seed,
                    &archive,
                    &candidates,
                    strat.estimates(),
                    runner,
                    proposer,
                    log,
                )?,
                None => take_proposals(&ctx, &suite.config.name, proposer, log)?,
            };
            // A proposer writes at most `k`; HarnessPro's children are hevo's own copies.
            let most = epochs.is_none().then_some(k as usize);
            let (accepted, rejected) = validate_pending(
                &archive,
                &candidates,
                it,
                most,
                runner,
                smoke_task.as_deref(),
                log,
            )?;
            rejected_total += rejected.len();
            wrote_none = accepted.is_empty() && rejected.is_empty();
            record_rejections(&archive, &archive_root, it, &rejected, failure.as_deref())?;
            if let Some(cause) = failure {
                if accepted.is_empty() {
                    // what it left is in rejected/; a rerun asks the proposer afresh
                    clear_pending(&archive)?;
                    return Err(SearchError::Proposer {
                        iteration: it,
                        cause,
                    });
                }
            }
            archive_accepted(
                &archive,
                epochs.as_ref(),
                accepted,
                &mut candidates,
                &mut new_ids,
            )?;
            state.proposals_taken = it;
            write_atomic(&state_path, &serde_json::to_vec(&state).unwrap_or_default())
                .map_err(io_err("cannot write", &state_path))?;
            clear_pending(&archive)?;
        }
        if !new_ids.is_empty() {
            log(&iteration_line(
                it,
                iterations,
                config,
                new_ids.len(),
                &oracle.effort,
                started.elapsed().as_secs_f64(),
                timed.map(|(from, at)| (it - from, at.elapsed().as_secs_f64())),
            ));
            let ids = new_ids.clone();
            let called = oracle.call(runner, &candidates, &val_ids, &mut |o| {
                strat.iteration(o, &ids)
            });
            for note in oracle.unscored.drain(..) {
                log(&format!("iteration {it}: {note}"));
            }
            if let Err(e) = called {
                if let SearchError::Budget { .. } = e {
                    // This iteration's candidates are left out of the pick; raising the
                    // budget and running again evaluates them. The strategy, which saw NaN
                    // for the refused cells, is rebuilt once, in `final_estimates`.
                    log(&format!(
                        "iteration {it}: {e}; its {} candidate(s) are left out of the pick \
                         (raise the budget and run the same command again to evaluate them)",
                        ids.len()
                    ));
                    stopped_early = Some(e.to_string());
                    break;
                }
                return Err(e);
            }
            history.finished(&ids);
            record_iteration(
                &archive,
                &candidates,
                &new_ids,
                strat.as_ref(),
                &oracle.effort,
                &oracle.outcomes,
                &mut summary_names,
            )?;
        } else if wrote_none && config.proposer.kind == "params" {
            log(&format!(
                "iteration {it}: the params proposer wrote no candidate: it has tried every \
                 configuration it would (more iterations cannot help; an agent or llm \
                 proposer can change the code)"
            ));
        } else if wrote_none {
            log(&format!("iteration {it}: the proposer wrote no candidate"));
        } else {
            log(&format!("iteration {it}: no valid candidate"));
        }
        iterations_done = it;
    }

    let strategy_name = strat.name();
    let (final_outcome, shown) = final_estimates(
        &mut oracle,
        runner,
        &candidates,
        &val_ids,
        (strat, &history, &mut stopped_early),
        &archive,
    )?;
    for note in oracle.unscored.drain(..) {
        log(&format!("final estimates: {note}"));
    }
    let (pick, runner_up, ranked) = rank(&candidates, &final_outcome, &shown);
    let mut total = Effort::default();
    for s in oracle.effort.values() {
        total.add(s);
    }
    let pareto = match config.objective.kind {
        ObjectiveKind::PassRate => None,
        ObjectiveKind::Pareto => Some(pareto_tiers(
            config,
            &candidates,
            &shown,
            &val_ids,
            runner,
            log,
        )?),
    };
    Ok(SearchReport {
        run_dir: run_dir.to_path_buf(),
        pick,
        runner_up,
        candidates: ranked,
        rejected: rejected_total,
        evaluations: total.trials,
        spend: total.spend,
        strategy: strategy_name,
        stopped_early,
        iterations_done,
        pareto,
    })
}

/// The ids of the suite's validation tasks, sorted, and their strata (one per task group);
/// a suite without `val` tasks is the user's to fix (`hevo run` checks it before any work).
pub fn val_split(suite: &Suite, suite_dir: &Path) -> Result<(Vec<String>, Strata), SearchError> {
    let mut val: Vec<&hevo_runtime::task::Task> = suite.split(Split::Val);
    if val.is_empty() {
        return Err(SearchError::User(format!(
            "suite `{}` has no `val` tasks: the search evaluates candidates on the validation split",
            suite_dir.display()
        )));
    }
    val.sort_by(|a, b| a.id.cmp(&b.id));
    let val_ids: Vec<String> = val.iter().map(|t| t.id.clone()).collect();
    let mut group_index: BTreeMap<String, usize> = BTreeMap::new();
    let groups: Vec<usize> = val
        .iter()
        .map(|t| {
            let g = t.group.clone().unwrap_or_default();
            let n = group_index.len();
            *group_index.entry(g).or_insert(n)
        })
        .collect();
    let strata = Strata::from_groups(&groups);
    Ok((val_ids, strata))
}

/// Refuses an evaluation budget below what phase 0 needs (every seed on every validation
/// task, `[search] trials` times each `cells`): such a run could pick nothing.
fn check_phase0_budget(
    config: &RunConfig,
    config_file: &Path,
    cells: usize,
) -> Result<(), SearchError> {
    let need = cells as u64 * config.search.trials as u64;
    match config.budget.max_evaluations {
        Some(max) if max < need => {
            let text = std::fs::read_to_string(config_file).unwrap_or_default();
            let e = crate::config::ConfigError::invalid(
                config_file,
                "budget.max_evaluations",
                format!(
                    "is {max}, below the {need} trials phase 0 needs (every seed on every \
                     validation task, [search] trials times): raise it to at least {need}, \
                     plus what the iterations should spend"
                ),
            );
            Err(SearchError::User(e.located(&text).to_string()))
        }
        _ => Ok(()),
    }
}

fn strat_estimate(strat: &dyn Strategy, seq: usize) -> Estimate {
    strat
        .estimates()
        .get(seq)
        .copied()
        .unwrap_or(Estimate::exact(f64::NAN))
}

/// The `name` of a `summary.jsonl` line about the proposer itself (a failure), not a candidate.
pub const PROPOSER_LINE: &str = "(proposer)";

/// `m:ss` (or `h:mm:ss`) of a number of seconds, for progress lines.
pub fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}
