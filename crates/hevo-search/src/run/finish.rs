//! The search's finish: the strategy's final estimates, written to the archive and the
//! store, the ranking with the pick and the runner-up, and under the pareto objective the
//! tiers with each candidate's diagnosis.

use hevo_stats::estimate::Estimate;
use hevo_strategy::strategy::{Outcome, Strategy};

use super::history::History;
use super::oracle::OracleState;
use super::record::{write_frontier, write_scores};
use super::{io_err, Ranked, SearchError};
use crate::archive::{Archive, Candidate};
use crate::config::RunConfig;
use crate::objective::ParetoReport;
use crate::runner::{CandidateRunner, FinalEstimate};

/// The strategy's finish: its final estimates, written to the candidates' `scores.json`
/// (clipped to [0, 1]), `frontier.json` and the store (unclipped). `strat` is the strategy
/// with the run's [`History`] and why a budget stopped the run, if one did (set here when
/// the finish itself meets the evaluation budget). A reached budget is no error here: the
/// outcome then rests on what was evaluated ([`History::budget_outcome`]), no trial is
/// bought to verify it. Returns the outcome and the clipped estimates; candidates
/// without an estimate (an iteration the budget stopped) get no score and no store row.
pub(super) fn final_estimates(
    oracle: &mut OracleState,
    runner: &mut dyn CandidateRunner,
    candidates: &[Candidate],
    val_ids: &[String],
    (mut strat, history, stopped): (Box<dyn Strategy>, &History, &mut Option<String>),
    archive: &Archive,
) -> Result<(Outcome, Vec<Estimate>), SearchError> {
    let mut final_outcome = None;
    if stopped.is_none() {
        let finish = oracle.call(runner, candidates, val_ids, &mut |o| {
            final_outcome = Some(strat.finish(o))
        });
        match finish {
            Ok(()) => {}
            Err(e @ SearchError::Budget { .. }) => {
                // The finish's own verification met the budget: the run stopped early too.
                *stopped = Some(e.to_string());
                final_outcome = None;
            }
            Err(e) => return Err(e),
        }
    }
    let final_outcome = match final_outcome {
        Some(o) => o,
        None => {
            let (rebuilt, outcome) = history.budget_outcome(oracle, val_ids);
            strat = rebuilt;
            outcome
        }
    };
    // Scores are reported inside [0, 1]; the pick and the order use the raw estimates.
    let shown: Vec<Estimate> = final_outcome
        .estimates
        .iter()
        .map(|e| e.clipped(0.0, 1.0))
        .collect();
    let all: Vec<usize> = (0..candidates.len())
        .filter(|&c| shown.get(c).is_some_and(|e| e.value.is_finite()))
        .collect();
    write_scores(
        archive,
        candidates,
        &all,
        &shown,
        &oracle.effort,
        &oracle.outcomes,
        &strat.name(),
    )?;
    write_frontier(archive, candidates, &shown, &oracle.effort)?;
    super::traces::copy_traces(archive, candidates)?;
    // The store keeps the estimates the strategy really made (unclipped), one per candidate.
    for &seq in &all {
        let c = &candidates[seq];
        let estimate = FinalEstimate {
            label: crate::runner::VAL_LABEL.into(),
            estimate: final_outcome.estimates[seq],
            estimator: strat.name(),
            tasks_used: oracle.outcomes.get(&c.seq).map_or(0, |o| o.len()),
            design: strat
                .design(c.seq)
                .iter()
                .map(|&(t, pi)| (val_ids[t].clone(), pi))
                .collect(),
        };
        runner
            .record_estimate(&c.meta.name, &c.code(), &estimate)
            .map_err(|source| SearchError::Evaluation {
                candidate: c.meta.name.clone(),
                source,
            })?;
    }
    Ok((final_outcome, shown))
}

/// Every candidate ranked best first (earliest on ties), the pick with its
/// selection-adjusted interval and the runner-up.
pub(super) fn rank(
    candidates: &[Candidate],
    final_outcome: &Outcome,
    shown: &[Estimate],
) -> (Ranked, Option<Ranked>, Vec<Ranked>) {
    let raw = |seq: usize| {
        final_outcome
            .estimates
            .get(seq)
            .map_or(f64::NAN, |e| e.value)
    };
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    // Best first, candidates without an estimate last; earliest on ties (a stable sort
    // keeps arrival order).
    order.sort_by(|&a, &b| (raw(a).is_nan().cmp(&raw(b).is_nan())).then(raw(b).total_cmp(&raw(a))));
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
    let runner_up = ranked
        .iter()
        .find(|r| r.name != pick.name && r.estimate.value.is_finite())
        .cloned();
    (pick, runner_up, ranked)
}

/// The pareto objective after the strategy's finish: each candidate's cost from its trial
/// rows in the store, the tiers, and the built-in analyzer's `diagnosis.json` beside each
/// candidate in the archive.
pub(super) fn pareto_tiers(
    config: &RunConfig,
    candidates: &[Candidate],
    shown: &[Estimate],
    val_ids: &[String],
    runner: &mut dyn CandidateRunner,
    log: &mut dyn FnMut(&str),
) -> Result<ParetoReport, SearchError> {
    let mut rows = Vec::with_capacity(candidates.len());
    for c in candidates {
        let mut r =
            runner
                .trials(&c.meta.name, &c.code())
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
