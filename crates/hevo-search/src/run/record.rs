//! What is written as the search goes: after each iteration the candidates' `scores.json`,
//! their `summary.jsonl` lines and `frontier.json`; the summary lines of rejected candidates
//! and of a failed proposer; and the progress line logged at the start of an iteration.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use hevo_runtime::spend::Spend;
use hevo_stats::estimate::Estimate;
use hevo_strategy::strategy::Strategy;

use super::pending::Rejected;
use super::{clock, io_err, SearchError, PROPOSER_LINE};
use crate::archive::{Archive, Candidate, CandidateScores, FrontierEntry, SummaryLine};
use crate::config::RunConfig;
use crate::runner::Effort;

/// Writes one iteration's scores, summary lines and the frontier.
pub(super) fn record_iteration(
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
    // Every candidate's: the strategy may have run earlier ones on more tasks.
    super::traces::copy_traces(archive, candidates)?;
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

/// Appends to `summary.jsonl` a line for each candidate rejected in iteration `it` and, if
/// the proposer failed, one for the failure; a line already there (the iteration is being
/// resumed) is not written again.
pub(super) fn record_rejections(
    archive: &Archive,
    archive_root: &Path,
    it: u32,
    rejected: &Rejected,
    failure: Option<&str>,
) -> Result<(), SearchError> {
    let logged: HashSet<(u32, String, String)> = archive
        .read_summary()
        .map_err(io_err("cannot read the summary in", archive_root))?
        .into_iter()
        .map(|l| (l.iteration, l.name, l.outcome))
        .collect();
    for (name, hypothesis, reason) in rejected {
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
            .map_err(io_err("cannot write the summary in", archive_root))?;
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
                .map_err(io_err("cannot write the summary in", archive_root))?;
        }
    }
    Ok(())
}

pub(super) fn write_scores(
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

pub(super) fn write_frontier(
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
/// the elapsed time and an ETA of the search, paced by the iterations this invocation
/// proposed before it (`pace`: how many, and their seconds; `iterations`: the search's
/// iterations, or HarnessPro's epochs).
pub(super) fn iteration_line(
    it: u32,
    iterations: u32,
    config: &RunConfig,
    candidates: usize,
    effort: &HashMap<usize, Effort>,
    elapsed_s: f64,
    pace: Option<(u32, f64)>,
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
    // `pace`: the iterations this invocation timed before this one, and their seconds.
    let eta = match pace.filter(|&(n, _)| n > 0) {
        Some((n, secs)) => {
            let per = secs / f64::from(n);
            format!(", ETA {}", clock(per * f64::from(iterations - it + 1)))
        }
        None => String::new(),
    };
    format!(
        "iteration {it}/{iterations}: evaluating {candidates} candidate(s); so far {done}{of} trials, \
         {} tokens, ${:.4}, {} elapsed{eta}",
        spend.total_tokens(),
        spend.cost_usd,
        clock(elapsed_s)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ETA is paced by this invocation's own iterations: a resumed run that took four
    /// iterations from the archive in a second and timed one of 20 s has 2 left at 20 s
    /// each, not at a fifth of a second (it said `ETA 0:00` with 10 s of work left).
    #[test]
    fn the_eta_is_paced_by_the_iterations_this_invocation_timed() {
        let config: RunConfig = toml::from_str("suite = \"s\"\nseeds = [\"a\"]\n").unwrap();
        let effort = HashMap::new();
        let line = |pace| iteration_line(6, 7, &config, 2, &effort, 21.0, pace);
        assert!(
            line(Some((1, 20.0))).ends_with("0:21 elapsed, ETA 0:40"),
            "{}",
            line(Some((1, 20.0)))
        );
        assert!(line(Some((0, 0.0))).ends_with("0:21 elapsed"));
        assert!(line(None).ends_with("0:21 elapsed"));
    }
}
