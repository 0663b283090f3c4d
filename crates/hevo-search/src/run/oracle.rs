//! The oracle the strategy calls during the search: it groups the strategy's requests per
//! candidate, runs them through the [`CandidateRunner`], enforces `[budget] max_evaluations`
//! and remembers every outcome and each candidate's effort across calls.

use std::collections::{BTreeMap, HashMap};

use hevo_runtime::eval::EvalError;
use hevo_runtime::task::Split;
use hevo_strategy::strategy::{CandidateId, Observed, Oracle};

use super::SearchError;
use crate::archive::Candidate;
use crate::objective::CostUnit;
use crate::runner::{CandidateRunner, Effort};

/// What the live oracle remembers across strategy calls.
pub(super) struct OracleState {
    pub(super) effort: HashMap<usize, Effort>,
    pub(super) outcomes: HashMap<usize, BTreeMap<String, f64>>,
    pub(super) requested: u64,
    pub(super) budget_trials: Option<u64>,
    pub(super) trials_per_task: u64,
    /// The unit of per-task costs, fixed by the first batch that had any.
    pub(super) cost_unit: Option<CostUnit>,
    /// Each evaluated cell's mean (dollars, tokens) per trial, so a strategy can be replayed
    /// on what is known ([`CachedOracle`]).
    pub(super) costs: HashMap<usize, BTreeMap<String, (f64, f64)>>,
    /// What a proposed candidate could not be evaluated on and was counted as failing (see
    /// [`LiveOracle::evaluate_with_costs`]), for the search's log; drained by the caller.
    pub(super) unscored: Vec<String>,
}

impl OracleState {
    /// Lets `f` drive the strategy with a live oracle over `candidates`.
    pub(super) fn call(
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
    /// Outcomes with each cell's model cost from the ledger, so sampling strategies weigh
    /// information per unit of cost: dollars when the run's trials cost any, else tokens.
    /// Wall time is never used (it would make two runs with the same seed differ). No cost
    /// (a harness that calls no model): `None`, every task equally expensive.
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Observed {
        let (outcomes, costs) = self.evaluate_with_costs(requests);
        let costs = in_unit(&mut self.state.cost_unit, &costs);
        Observed { outcomes, costs }
    }
}

/// The costs of one batch in the run's unit: the first batch with any dollar fixes dollars,
/// else the first with any token fixes tokens; until then (and for a harness that calls no
/// model) `None`, every task equally expensive. One rule for the live oracle and its replay.
fn in_unit(unit: &mut Option<CostUnit>, costs: &[(f64, f64)]) -> Option<Vec<f64>> {
    if unit.is_none() {
        if costs.iter().any(|c| c.0 > 0.0) {
            *unit = Some(CostUnit::Usd);
        } else if costs.iter().any(|c| c.1 > 0.0) {
            *unit = Some(CostUnit::Tokens);
        }
    }
    unit.map(|unit| {
        costs
            .iter()
            .map(|&(usd, tokens)| match unit {
                CostUnit::Usd => usd,
                CostUnit::Tokens => tokens,
            })
            .collect()
    })
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
            let proposed = cand.meta.iteration > 0;
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
                        let mut y = res.outcomes.get(id).copied().unwrap_or(f64::NAN);
                        // A task whose every trial was an infra error has no outcome. A seed
                        // is not blamed: the run stops (and resumes later). A proposed
                        // candidate's answer can provoke the error itself (a program scorer
                        // that crashes on `null`, a request its provider refuses): it fails
                        // the task, so it can neither stop the search nor gain from it.
                        if y.is_nan() && proposed {
                            y = 0.0;
                            self.state.unscored.push(format!(
                                "`{}` has no scored trial on task `{id}` (its trials say why); \
                                 counted as a failure",
                                cand.meta.name
                            ));
                        } else if y.is_nan() && self.error.is_none() {
                            self.error = Some(SearchError::NoScore {
                                candidate: cand.meta.name.clone(),
                                task: id.clone(),
                            });
                        }
                        out[i] = y;
                        costs[i] = res.costs.get(id).copied().unwrap_or((0.0, 0.0));
                        known.insert(id.clone(), y);
                        self.state
                            .costs
                            .entry(c)
                            .or_default()
                            .insert(id.clone(), costs[i]);
                    }
                    // Each cell is requested once per strategy pass, so the per-call spends add up
                    // to the candidate's total.
                    self.state.effort.entry(c).or_default().add(&res.effort);
                }
                // A proposed candidate's `prepare` that fails (a flaky one, or one that
                // passed the smoke check and fails the real run on purpose) fails its tasks.
                Err(EvalError::Prepare { message, .. }) if proposed => {
                    self.state.unscored.push(format!(
                        "`{}`: its `prepare` failed ({message}); its {} task(s) are counted \
                         as failures",
                        cand.meta.name,
                        ids.len()
                    ));
                    let known = self.state.outcomes.entry(c).or_default();
                    for (&i, id) in idxs.iter().zip(&ids) {
                        out[i] = 0.0;
                        known.insert(id.clone(), 0.0);
                        self.state
                            .costs
                            .entry(c)
                            .or_default()
                            .insert(id.clone(), (0.0, 0.0));
                    }
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

/// An oracle that answers only from what the live oracle already learned, with no trial:
/// replaying a strategy's earlier calls through it gives the same outcomes, costs and cost
/// unit, so a rebuilt strategy reaches the same state. A cell never evaluated answers NaN
/// and is counted in `missing`.
pub(super) struct CachedOracle<'a> {
    state: &'a OracleState,
    val_ids: &'a [String],
    unit: Option<CostUnit>,
    /// Requests that had no known outcome.
    pub(super) missing: usize,
}

impl<'a> CachedOracle<'a> {
    /// An oracle over `state`'s outcomes, its cost unit not yet fixed (as at the run's start).
    pub(super) fn new(state: &'a OracleState, val_ids: &'a [String]) -> Self {
        CachedOracle {
            state,
            val_ids,
            unit: None,
            missing: 0,
        }
    }
}

impl Oracle for CachedOracle<'_> {
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Observed {
        let mut out = Vec::with_capacity(requests.len());
        let mut costs = Vec::with_capacity(requests.len());
        for &(c, t) in requests {
            let id = &self.val_ids[t];
            let y = self
                .state
                .outcomes
                .get(&c)
                .and_then(|o| o.get(id))
                .copied()
                .unwrap_or(f64::NAN);
            if y.is_nan() {
                self.missing += 1;
            }
            out.push(y);
            costs.push(
                self.state
                    .costs
                    .get(&c)
                    .and_then(|o| o.get(id))
                    .copied()
                    .unwrap_or((0.0, 0.0)),
            );
        }
        let costs = in_unit(&mut self.unit, &costs);
        Observed {
            outcomes: out,
            costs,
        }
    }
}
