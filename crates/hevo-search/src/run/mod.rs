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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use hevo_runtime::spend::Spend;
use hevo_stats::design::Strata;
use hevo_stats::estimate::Estimate;
use hevo_stats::weights::WeightParams;
use serde::{Deserialize, Serialize};

use crate::archive::{
    valid_name, write_atomic, Archive, Candidate, CandidateMeta, CandidateScores, FrontierEntry,
    SkillContext, SummaryLine,
};
use crate::config::{ObjectiveKind, RunConfig};
use crate::objective::CostUnit;
use crate::objective::ParetoReport;
use crate::proposer::{ProposeContext, ProposeError, Proposer};
use crate::runner::{CandidateRunner, Effort, FinalEstimate};
use hevo_runtime::cancel::CancelReason;
use hevo_runtime::eval::EvalError;
use hevo_runtime::harness::Harness;
use hevo_runtime::suite::Suite;
use hevo_runtime::task::Split;
use hevo_strategy::strategy::{self, CandidateId, Oracle, Strategy, StrategyConfig};

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
    /// The pick: highest estimate, earliest on ties.
    pub pick: Ranked,
    /// The runner-up, if there is one.
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
    #[error("the evaluation budget of {max_trials} trials is reached")]
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

/// Which iterations' proposals have been taken into the archive.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
struct LoopState {
    proposals_taken: u32,
}

/// What the live oracle remembers across strategy calls.
struct OracleState {
    effort: HashMap<usize, Effort>,
    outcomes: HashMap<usize, BTreeMap<String, f64>>,
    requested: u64,
    budget_trials: Option<u64>,
    trials_per_task: u64,
    /// The unit of per-task costs, fixed by the first batch that had any.
    cost_unit: Option<CostUnit>,
}

impl OracleState {
    /// Lets `f` drive the strategy with a live oracle over `candidates`.
    fn call(
        &mut self,
        runner: &mut dyn CandidateRunner,
        candidates: &[Candidate],
        val_ids: &[String],
        f: &mut dyn FnMut(&mut dyn Oracle),
    ) -> Result<(), SearchError> {
        let mut oracle = LiveOracle {
            state: self,
            runner,
            candidates,
            val_ids,
            error: None,
        };
        f(&mut oracle);
        match oracle.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

/// The oracle of the live search: groups requests per candidate and runs them.
struct LiveOracle<'a> {
    state: &'a mut OracleState,
    runner: &'a mut dyn CandidateRunner,
    candidates: &'a [Candidate],
    val_ids: &'a [String],
    /// The first error; once set, the oracle answers nothing more.
    error: Option<SearchError>,
}

impl Oracle for LiveOracle<'_> {
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Vec<f64> {
        self.evaluate_with_costs(requests).0
    }

    /// Outcomes with each cell's model cost from the ledger, so sampling strategies weigh
    /// information per unit of cost: dollars when the run's trials cost any, else tokens.
    /// Wall time is never used (it would make two runs with the same seed differ). No cost
    /// (a harness that calls no model): `None`, every task equally expensive.
    fn evaluate_costed(
        &mut self,
        requests: &[(CandidateId, usize)],
    ) -> (Vec<f64>, Option<Vec<f64>>) {
        let (out, costs) = self.evaluate_with_costs(requests);
        if self.state.cost_unit.is_none() {
            if costs.iter().any(|c| c.0 > 0.0) {
                self.state.cost_unit = Some(CostUnit::Usd);
            } else if costs.iter().any(|c| c.1 > 0.0) {
                self.state.cost_unit = Some(CostUnit::Tokens);
            }
        }
        let costs = self.state.cost_unit.map(|unit| {
            costs
                .iter()
                .map(|&(usd, tokens)| match unit {
                    CostUnit::Usd => usd,
                    CostUnit::Tokens => tokens,
                })
                .collect()
        });
        (out, costs)
    }
}

impl LiveOracle<'_> {
    /// Outcomes of `requests` and each cell's mean (dollars, tokens) per trial.
    fn evaluate_with_costs(
        &mut self,
        requests: &[(CandidateId, usize)],
    ) -> (Vec<f64>, Vec<(f64, f64)>) {
        let mut out = vec![f64::NAN; requests.len()];
        let mut costs = vec![(0.0, 0.0); requests.len()];
        if self.error.is_some() {
            return (out, costs);
        }
        let mut by_cand: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        for (i, &(c, _)) in requests.iter().enumerate() {
            by_cand.entry(c).or_default().push(i);
        }
        for (c, idxs) in by_cand {
            let cand = &self.candidates[c];
            let ids: Vec<String> = idxs
                .iter()
                .map(|&i| self.val_ids[requests[i].1].clone())
                .collect();
            let known = self.state.outcomes.entry(c).or_default();
            let new_cells = ids.iter().filter(|id| !known.contains_key(*id)).count() as u64;
            if let Some(max) = self.state.budget_trials {
                if self.state.requested + new_cells * self.state.trials_per_task > max {
                    self.error = Some(SearchError::Budget { max_trials: max });
                    return (out, costs);
                }
            }
            self.state.requested += new_cells * self.state.trials_per_task;
            match self
                .runner
                .evaluate(&cand.meta.name, &cand.code(), Split::Val, &ids)
            {
                Ok(res) => {
                    let known = self.state.outcomes.entry(c).or_default();
                    for (&i, id) in idxs.iter().zip(&ids) {
                        let y = res.outcomes.get(id).copied().unwrap_or(f64::NAN);
                        // A task whose every trial was an infra error has no outcome; the
                        // harness is not blamed, the run stops (and resumes later).
                        if y.is_nan() && self.error.is_none() {
                            self.error = Some(SearchError::NoScore {
                                candidate: cand.meta.name.clone(),
                                task: id.clone(),
                            });
                        }
                        out[i] = y;
                        costs[i] = res.costs.get(id).copied().unwrap_or((0.0, 0.0));
                        known.insert(id.clone(), y);
                    }
                    // Each cell is requested once per strategy pass, so the per-call spends add up
                    // to the candidate's total.
                    self.state.effort.entry(c).or_default().add(&res.effort);
                }
                Err(source) => {
                    self.error = Some(SearchError::Evaluation {
                        candidate: cand.meta.name.clone(),
                        source,
                    });
                    return (out, costs);
                }
            }
        }
        (out, costs)
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
    let iterations = config
        .harnesspro
        .as_ref()
        .map_or(config.search.iterations, |h| h.epochs);
    let k = match epochs {
        Some(_) => 9,
        None => config.search.candidates_per_iteration,
    };
    let mut strat: Box<dyn Strategy> = strategy::build(
        kind,
        StrategyConfig {
            strata,
            rho: config.evaluation.rho,
            expected_candidates: (iterations * k) as usize,
            seed: config.seed,
            weights: WeightParams::default(),
        },
    );

    // Phase 0: the seeds, archived under their manifest names.
    let mut candidates: Vec<Candidate> = Vec::new();
    for seed_dir in &config.seeds {
        let dir = config.resolve(config_file, seed_dir);
        let harness = Harness::load(&dir).map_err(|e| SearchError::User(e.to_string()))?;
        let name = hevo_runtime::eval::sanitize(&harness.name);
        if candidates.iter().any(|c| c.meta.name == name) {
            return Err(SearchError::User(format!(
                "two seeds are named `{name}`: give each seed a distinct `name` in its harness.toml"
            )));
        }
        let meta = CandidateMeta {
            name: name.clone(),
            parent: None,
            iteration: 0,
            hypothesis: "seed harness".into(),
            axis: "seed".into(),
            components: vec![],
        };
        let seq = candidates.len();
        let cdir = archive
            .add_candidate(seq as u32, &meta, &harness.dir)
            .map_err(io_err("cannot archive seed", &harness.dir))?;
        candidates.push(Candidate {
            seq,
            meta,
            dir: cdir,
        });
    }
    let n_seeds = candidates.len();
    // Candidates accepted in earlier invocations, in sequence order.
    let mut archived = list_archived(&archive)?;
    archived.retain(|c| c.seq >= n_seeds);
    let mut summary_names: HashSet<String> = archive
        .read_summary()
        .map_err(io_err("cannot read", &archive_root))?
        .into_iter()
        .map(|l| l.name)
        .collect();

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
    record_iteration(
        &archive,
        &candidates,
        &seeds,
        strat.as_ref(),
        &oracle.effort,
        &oracle.outcomes,
        &mut summary_names,
    )?;

    let loop_started = Instant::now();
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
        if state.proposals_taken >= it {
            // Resume: this iteration's candidates were accepted before.
            for c in archived.iter().filter(|c| c.meta.iteration == it) {
                let seq = candidates.len();
                if c.seq != seq {
                    return Err(SearchError::User(format!(
                        "the archive at `{}` is inconsistent: candidate `{}` has sequence {} where {seq} was expected; \
                         restore it or start a new run directory",
                        archive_root.display(),
                        c.meta.name,
                        c.seq
                    )));
                }
                candidates.push(c.clone());
                new_ids.push(seq);
            }
        } else {
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
            let (accepted, rejected) = validate_pending(
                &archive,
                &candidates,
                it,
                runner,
                smoke_task.as_deref(),
                log,
            )?;
            rejected_total += rejected.len();
            let logged: HashSet<(u32, String, String)> = archive
                .read_summary()
                .map_err(io_err("cannot read the summary in", &archive_root))?
                .into_iter()
                .map(|l| (l.iteration, l.name, l.outcome))
                .collect();
            for (name, hypothesis, reason) in &rejected {
                let outcome = format!("rejected: {reason}");
                if logged.contains(&(it, name.clone(), outcome.clone())) {
                    continue;
                }
                archive
                    .append_summary(&SummaryLine {
                        iteration: it,
                        name: name.clone(),
                        estimate: None,
                        ci_low: None,
                        ci_high: None,
                        delta_vs_best: None,
                        hypothesis: hypothesis.clone(),
                        outcome,
                    })
                    .map_err(io_err("cannot write the summary in", &archive_root))?;
            }
            if let Some(cause) = failure {
                let outcome = format!("proposer failed: {cause}");
                if !logged.contains(&(it, PROPOSER_LINE.to_string(), outcome.clone())) {
                    archive
                        .append_summary(&SummaryLine {
                            iteration: it,
                            name: PROPOSER_LINE.into(),
                            estimate: None,
                            ci_low: None,
                            ci_high: None,
                            delta_vs_best: None,
                            hypothesis: String::new(),
                            outcome,
                        })
                        .map_err(io_err("cannot write the summary in", &archive_root))?;
                }
                if accepted.is_empty() {
                    // what it left is in rejected/; a rerun asks the proposer afresh
                    clear_pending(&archive)?;
                    return Err(SearchError::Proposer {
                        iteration: it,
                        cause,
                    });
                }
            }
            for (meta, code) in accepted {
                let seq = candidates.len();
                let dir = archive
                    .add_candidate(seq as u32, &meta, &code)
                    .map_err(io_err("cannot archive candidate", &code))?;
                let cand = Candidate { seq, meta, dir };
                if let Some(ep) = &epochs {
                    ep.archived(&cand)?;
                }
                candidates.push(cand);
                new_ids.push(seq);
            }
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
                loop_started.elapsed().as_secs_f64(),
            ));
            let ids = new_ids.clone();
            if let Err(e) = oracle.call(runner, &candidates, &val_ids, &mut |o| {
                strat.iteration(o, &ids)
            }) {
                if let SearchError::Budget { .. } = e {
                    stopped_early = Some(e.to_string());
                    break;
                }
                return Err(e);
            }
            record_iteration(
                &archive,
                &candidates,
                &new_ids,
                strat.as_ref(),
                &oracle.effort,
                &oracle.outcomes,
                &mut summary_names,
            )?;
        } else {
            log(&format!("iteration {it}: no valid candidate"));
        }
        iterations_done = it;
    }

    let mut final_outcome = None;
    let finish = oracle.call(runner, &candidates, &val_ids, &mut |o| {
        final_outcome = Some(strat.finish(o))
    });
    match finish {
        Ok(()) | Err(SearchError::Budget { .. }) => {}
        Err(e) => return Err(e),
    }
    let final_outcome = final_outcome.expect("finish ran");
    // Scores are reported inside [0, 1]; the pick and the order use the raw estimates.
    let shown: Vec<Estimate> = final_outcome
        .estimates
        .iter()
        .map(|e| e.clipped(0.0, 1.0))
        .collect();
    let all: Vec<usize> = (0..candidates.len()).collect();
    write_scores(
        &archive,
        &candidates,
        &all,
        &shown,
        &oracle.effort,
        &oracle.outcomes,
        &strat.name(),
    )?;
    write_frontier(&archive, &candidates, &shown, &oracle.effort)?;
    // The store keeps the estimates the strategy really made (unclipped), one per candidate.
    for c in &candidates {
        let estimate = FinalEstimate {
            label: "val".into(),
            estimate: final_outcome
                .estimates
                .get(c.seq)
                .copied()
                .unwrap_or(Estimate::exact(f64::NAN)),
            estimator: strat.name(),
            tasks_used: oracle.outcomes.get(&c.seq).map_or(0, |o| o.len()),
            design: strat
                .design(c.seq)
                .iter()
                .map(|&(t, pi)| (val_ids[t].clone(), pi))
                .collect(),
        };
        runner
            .record_estimate(&c.code(), &estimate)
            .map_err(|source| SearchError::Evaluation {
                candidate: c.meta.name.clone(),
                source,
            })?;
    }

    let raw = |seq: usize| {
        final_outcome
            .estimates
            .get(seq)
            .map_or(f64::NAN, |e| e.value)
    };
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    // Best first; earliest on ties (a stable sort keeps arrival order).
    order.sort_by(|&a, &b| raw(b).total_cmp(&raw(a)));
    let rank_of = |seq: usize| Ranked {
        name: candidates[seq].meta.name.clone(),
        iteration: candidates[seq].meta.iteration,
        estimate: shown.get(seq).copied().unwrap_or(Estimate::exact(f64::NAN)),
    };
    // The pick's interval is selection-adjusted (the winner's curse): wider than its own
    // interval as a candidate (`hevo_stats::selection::pick_interval`).
    let mut pick = rank_of(final_outcome.pick);
    pick.estimate = final_outcome.pick_interval.clipped(0.0, 1.0);
    let ranked: Vec<Ranked> = order.into_iter().map(rank_of).collect();
    let runner_up = ranked.iter().find(|r| r.name != pick.name).cloned();
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
        strategy: strat.name(),
        stopped_early,
        iterations_done,
        pareto,
    })
}

/// The pareto objective after the strategy's finish: each candidate's cost from its trial
/// rows in the store, the tiers, and the built-in analyzer's `diagnosis.json` beside each
/// candidate in the archive.
fn pareto_tiers(
    config: &RunConfig,
    candidates: &[Candidate],
    shown: &[Estimate],
    val_ids: &[String],
    runner: &mut dyn CandidateRunner,
    log: &mut dyn FnMut(&str),
) -> Result<ParetoReport, SearchError> {
    let mut rows = Vec::with_capacity(candidates.len());
    for c in candidates {
        let mut r = runner
            .trials(&c.code())
            .map_err(|source| SearchError::Evaluation {
                candidate: c.meta.name.clone(),
                source,
            })?;
        // Validation rows only (HarnessPro's core-set runs are train trials).
        r.retain(|row| val_ids.contains(&row.task_id));
        let diagnosis = crate::diagnose::diagnose(&c.meta.name, &r);
        crate::diagnose::save(&c.dir, &diagnosis).map_err(io_err("cannot write", &c.dir))?;
        rows.push(r);
    }
    let points: Vec<(String, u32, Estimate)> = candidates
        .iter()
        .map(|c| {
            let e = shown
                .get(c.seq)
                .copied()
                .unwrap_or(Estimate::exact(f64::NAN));
            (c.meta.name.clone(), c.meta.iteration, e)
        })
        .collect();
    let report = ParetoReport::build(&points, &rows, &config.objective);
    for t in &report.tiers {
        log(&format!(
            "tier {}: {} (pass rate {:.3}, cost per task {:.6} {})",
            t.tier,
            t.candidate.name,
            t.candidate.pass_rate.value,
            t.candidate.cost.per_task.value,
            t.candidate.cost.unit.label()
        ));
    }
    Ok(report)
}

fn strat_estimate(strat: &dyn Strategy, seq: usize) -> Estimate {
    strat
        .estimates()
        .get(seq)
        .copied()
        .unwrap_or(Estimate::exact(f64::NAN))
}

/// Candidates already in the archive, in sequence order.
fn list_archived(archive: &Archive) -> Result<Vec<Candidate>, SearchError> {
    let root = archive.root().join("candidates");
    let mut out = Vec::new();
    let dirs = archive
        .candidate_dirs()
        .map_err(io_err("cannot read", &root))?;
    for (seq, _, dir) in dirs {
        let meta_path = dir.join("candidate.toml");
        let text =
            std::fs::read_to_string(&meta_path).map_err(io_err("cannot read", &meta_path))?;
        let meta: CandidateMeta = toml::from_str(&text)
            .map_err(|e| SearchError::User(format!("{}: {e}", meta_path.display())))?;
        out.push(Candidate { seq, meta, dir });
    }
    out.sort_by_key(|c| c.seq);
    Ok(out)
}

/// The `name` of a `summary.jsonl` line about the proposer itself (a failure), not a candidate.
pub const PROPOSER_LINE: &str = "(proposer)";

/// Asks the proposer for `ctx.iteration` unless its candidates are already waiting. Returns
/// why the proposer failed, if it did (its iteration is then not marked as proposed: a
/// rerun asks again).
fn take_proposals(
    ctx: &ProposeContext<'_>,
    suite_name: &str,
    proposer: &mut dyn Proposer,
    log: &mut dyn FnMut(&str),
) -> Result<Option<String>, SearchError> {
    let (archive, it, k) = (ctx.archive, ctx.iteration, ctx.k);
    let pending = archive.pending_dir();
    let marker = pending.join(".proposed");
    let done_for = std::fs::read_to_string(&marker)
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let has_candidates = pending_dirs(&pending)?.next().is_some();
    if done_for == Some(it) || (has_candidates && !proposer.deterministic()) {
        log(&format!(
            "iteration {it}: using the candidates already in pending/"
        ));
        return Ok(None);
    }
    if has_candidates {
        // A deterministic proposer was interrupted: redo its proposal from scratch.
        clear_pending(archive)?;
    }
    archive
        .write_skill(&SkillContext {
            run: archive
                .root()
                .parent()
                .and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            suite: suite_name.to_string(),
            k,
            iteration: it,
            manifest_example: "name = \"my-candidate\"\nentry = [\"python3\", \"harness.py\"]"
                .into(),
        })
        .map_err(io_err("cannot write SKILL.md in", archive.root()))?;
    log(&format!(
        "iteration {it}: asking the proposer for {k} candidate(s)"
    ));
    match proposer.propose(ctx) {
        Ok(()) => {}
        // Not marked as taken: the same command asks the proposer again.
        Err(ProposeError::Cancelled(reason)) => return Err(SearchError::Interrupted(reason)),
        Err(ProposeError::Failed(why)) => {
            log(&format!("iteration {it}: the proposer failed: {why}"));
            return Ok(Some(why));
        }
    }
    std::fs::write(&marker, it.to_string()).map_err(io_err("cannot write", &marker))?;
    Ok(None)
}

fn pending_dirs(pending: &Path) -> Result<impl Iterator<Item = PathBuf>, SearchError> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(pending)
        .map_err(io_err("cannot read", pending))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir() && !e.file_name().to_string_lossy().starts_with('.'))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    Ok(dirs.into_iter())
}

fn clear_pending(archive: &Archive) -> Result<(), SearchError> {
    let pending = archive.pending_dir();
    std::fs::remove_dir_all(&pending).map_err(io_err("cannot clear", &pending))?;
    std::fs::create_dir_all(&pending).map_err(io_err("cannot create", &pending))
}

type Accepted = Vec<(CandidateMeta, PathBuf)>;
type Rejected = Vec<(String, String, String)>;

/// Checks each pending candidate; rejected ones are kept under `archive/rejected/`.
fn validate_pending(
    archive: &Archive,
    known: &[Candidate],
    it: u32,
    runner: &mut dyn CandidateRunner,
    smoke_task: Option<&str>,
    log: &mut dyn FnMut(&str),
) -> Result<(Accepted, Rejected), SearchError> {
    let mut names: HashSet<String> = known.iter().map(|c| c.meta.name.clone()).collect();
    let mut accepted = Vec::new();
    let mut rejected = Vec::new();
    let rejected_root = archive.root().join("rejected");
    // Candidates stay in pending/ until the whole iteration is archived (then pending/ is
    // cleared): a run killed half-way validates the same directories again on resume, with
    // the same results (smoke trials are memoized), and archiving is idempotent.
    for dir in pending_dirs(&archive.pending_dir())? {
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (meta, problem) = check_candidate(&dir, &dir_name, it, &names);
        let problem = match problem {
            Some(p) => Some(p),
            None => match smoke_task {
                Some(task) => runner.smoke(&meta.name, &dir, task).err(),
                None => None,
            },
        };
        match problem {
            Some(reason) => {
                log(&format!("  rejected `{}`: {reason}", meta.name));
                // Kept for inspection, outside candidates/.
                let dest = rejected_root.join(format!("{it:03}-{dir_name}"));
                if !dest.exists() {
                    let _ = crate::archive::copy_dir(&dir, &dest);
                }
                rejected.push((meta.name, meta.hypothesis, reason));
            }
            None => {
                names.insert(meta.name.clone());
                accepted.push((meta, dir));
            }
        }
    }
    Ok((accepted, rejected))
}

/// Static checks of one pending candidate: metadata, name, manifest, entry.
fn check_candidate(
    dir: &Path,
    dir_name: &str,
    it: u32,
    names: &HashSet<String>,
) -> (CandidateMeta, Option<String>) {
    let mut meta = CandidateMeta {
        name: dir_name.to_string(),
        parent: None,
        iteration: it,
        hypothesis: String::new(),
        axis: String::new(),
        components: vec![],
    };
    let meta_path = dir.join("candidate.toml");
    match std::fs::read_to_string(&meta_path) {
        Ok(text) => match toml::from_str::<CandidateMeta>(&text) {
            Ok(m) => {
                meta = CandidateMeta { iteration: it, ..m };
            }
            Err(e) => {
                return (
                    meta,
                    Some(format!("candidate.toml is invalid: {}", e.message())),
                )
            }
        },
        Err(_) => return (meta, Some("candidate.toml is missing".into())),
    }
    if !valid_name(&meta.name) {
        return (
            meta,
            Some("its name is not valid (letters, digits, `-`, `_`, `.`; at most 64)".into()),
        );
    }
    if names.contains(&meta.name) {
        let why = format!("the name `{}` is already taken", meta.name);
        return (meta, Some(why));
    }
    let harness = match Harness::load(dir) {
        Ok(h) => h,
        Err(e) => return (meta, Some(format!("its harness does not load: {e}"))),
    };
    if let Some(problem) = entry_problem(&harness) {
        return (meta, Some(problem));
    }
    (meta, None)
}

/// Whether the entry's program (and a script it names in the directory) exists.
fn entry_problem(h: &Harness) -> Option<String> {
    let argv = h.entry_argv();
    let program = argv.first()?;
    let on_path = |p: &str| {
        std::env::var_os("PATH")
            .map(|paths| std::env::split_paths(&paths).any(|d| d.join(p).is_file()))
            .unwrap_or(false)
    };
    if program.contains('/') {
        if !Path::new(program).exists() {
            return Some(format!("its entry program `{program}` does not exist"));
        }
    } else if !on_path(program) {
        return Some(format!("its entry program `{program}` is not on PATH"));
    }
    for arg in &h.manifest.entry[1..] {
        let looks_like_script = [".py", ".sh", ".js", ".rb", ".pl"]
            .iter()
            .any(|ext| arg.ends_with(ext));
        if looks_like_script && !arg.starts_with('-') && !h.dir.join(arg).exists() {
            return Some(format!(
                "its entry names `{arg}`, which is not in the candidate's directory"
            ));
        }
    }
    None
}

/// Writes one iteration's scores, summary lines and the frontier.
fn record_iteration(
    archive: &Archive,
    candidates: &[Candidate],
    ids: &[usize],
    strat: &dyn Strategy,
    effort: &HashMap<usize, Effort>,
    outcomes: &HashMap<usize, BTreeMap<String, f64>>,
    summary_names: &mut HashSet<String>,
) -> Result<(), SearchError> {
    let est: Vec<Estimate> = strat
        .estimates()
        .iter()
        .map(|e| e.clipped(0.0, 1.0))
        .collect();
    write_scores(
        archive,
        candidates,
        ids,
        &est,
        effort,
        outcomes,
        &strat.name(),
    )?;
    let best_before = |seq: usize| {
        est[..seq]
            .iter()
            .map(|e| e.value)
            .filter(|v| v.is_finite())
            .fold(f64::NAN, f64::max)
    };
    for &i in ids {
        let c = &candidates[i];
        if summary_names.contains(&c.meta.name) {
            continue;
        }
        let e = est.get(i).copied().unwrap_or(Estimate::exact(f64::NAN));
        let before = best_before(i);
        archive
            .append_summary(&SummaryLine {
                iteration: c.meta.iteration,
                name: c.meta.name.clone(),
                estimate: Some(e.value),
                ci_low: Some(e.ci_low),
                ci_high: Some(e.ci_high),
                delta_vs_best: before.is_finite().then_some(e.value - before),
                hypothesis: c.meta.hypothesis.clone(),
                // A strategy with a global budget (race, default) can leave a candidate
                // without a single trial; its estimate is then only the prior.
                outcome: if outcomes.get(&i).is_some_and(|o| !o.is_empty()) {
                    "evaluated".into()
                } else {
                    "not sampled: the evaluation budget was spent (estimate is the prior)".into()
                },
            })
            .map_err(io_err("cannot write the summary in", archive.root()))?;
        summary_names.insert(c.meta.name.clone());
    }
    write_frontier(archive, candidates, &est, effort)
}

fn write_scores(
    archive: &Archive,
    candidates: &[Candidate],
    ids: &[usize],
    est: &[Estimate],
    effort: &HashMap<usize, Effort>,
    outcomes: &HashMap<usize, BTreeMap<String, f64>>,
    estimator: &str,
) -> Result<(), SearchError> {
    for &i in ids {
        let c = &candidates[i];
        let s = effort.get(&i).copied().unwrap_or_default();
        let o = outcomes.get(&i).cloned().unwrap_or_default();
        let scores = CandidateScores {
            estimate: est.get(i).copied().unwrap_or(Estimate::exact(f64::NAN)),
            estimator: estimator.to_string(),
            tasks_used: o.len(),
            outcomes: o,
            trials: s.trials,
            spend: s.spend,
        };
        archive
            .write_scores(&c.dir, &scores)
            .map_err(io_err("cannot write scores of", &c.dir))?;
    }
    Ok(())
}

fn write_frontier(
    archive: &Archive,
    candidates: &[Candidate],
    est: &[Estimate],
    effort: &HashMap<usize, Effort>,
) -> Result<(), SearchError> {
    let mut entries: Vec<FrontierEntry> = candidates
        .iter()
        .filter_map(|c| {
            let e = *est.get(c.seq)?;
            if !e.value.is_finite() {
                return None;
            }
            let s = effort.get(&c.seq).copied().unwrap_or_default();
            let cost_per_task = if s.trials > 0 {
                s.spend.cost_usd / s.trials as f64
            } else {
                0.0
            };
            Some(FrontierEntry {
                name: c.meta.name.clone(),
                dir: c
                    .dir
                    .strip_prefix(archive.root())
                    .unwrap_or(&c.dir)
                    .to_string_lossy()
                    .into_owned(),
                estimate: e,
                cost_per_task_usd: cost_per_task,
            })
        })
        .collect();
    entries.sort_by(|a, b| b.estimate.value.total_cmp(&a.estimate.value));
    entries.truncate(crate::archive::FRONTIER_SIZE);
    archive
        .write_frontier(&entries)
        .map_err(io_err("cannot write the frontier in", archive.root()))
}

/// The progress line at the start of iteration `it`: what it evaluates, the validation
/// trials done so far (of the `max_evaluations` budget, if set), tokens and dollars so far,
/// the elapsed time and an ETA of the search from the iterations before it (`iterations`:
/// the search's iterations, or HarnessPro's epochs).
fn iteration_line(
    it: u32,
    iterations: u32,
    config: &RunConfig,
    candidates: usize,
    effort: &HashMap<usize, Effort>,
    elapsed_s: f64,
    loop_s: f64,
) -> String {
    let done: u64 = effort.values().map(|e| e.trials).sum();
    let mut spend = Spend::default();
    for e in effort.values() {
        spend.add(&e.spend);
    }
    let of = config
        .budget
        .max_evaluations
        .map(|m| format!(" of {m}"))
        .unwrap_or_default();
    let eta = if it > 1 {
        let per = loop_s / f64::from(it - 1);
        format!(", ETA {}", clock(per * f64::from(iterations - it + 1)))
    } else {
        String::new()
    };
    format!(
        "iteration {it}/{iterations}: evaluating {candidates} candidate(s); so far {done}{of} trials, \
         {} tokens, ${:.4}, {} elapsed{eta}",
        spend.total_tokens(),
        spend.cost_usd,
        clock(elapsed_s)
    )
}

/// `m:ss` (or `h:mm:ss`) of a number of seconds, for progress lines.
pub fn clock(secs: f64) -> String {
    let s = secs.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}
