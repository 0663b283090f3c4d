//! Evaluation strategies: which tasks each candidate is evaluated on, and how its full-set
//! score is estimated.
//!
//! A strategy is a synchronous policy object. It never runs a trial itself: it asks an
//! [`Oracle`] for a *batch* of `(candidate, task)` outcomes at a time (replay answers by
//! matrix lookup; the live search in `hevo-search` runs the batch's trials in parallel
//! through `hevo-runtime`). The same code therefore drives offline replay and the live
//! search loop:
//!
//! 1. [`Strategy::phase0`] with the seed candidates (evaluated on every task);
//! 2. [`Strategy::iteration`] once per iteration with that iteration's new candidates;
//! 3. [`Strategy::finish`] returns an [`Estimate`] per candidate and the pick.
//!
//! Candidate ids are dense arrival indices (`0, 1, 2, ...` in the order candidates are
//! handed to the strategy); tasks are `0..n_tasks`, optionally grouped into strata. A
//! strategy never asks twice for the same cell (outcomes are cached here), and every
//! randomness source is seeded.
//!
//! Strategies (see [`StrategyKind`]): `full`, `fixed` (Naive), `resample`
//! (Random-Resample), `coevolve` (Task-CoEvolve, paper-faithful), `screen` (GEPA's
//! minibatch screen), `race` (paired racing under one global budget) and `default` (the
//! recommended one: a screen against the best exactly known candidate, verification of the
//! contenders on every task, a pick on exact scores).
//!
//! `default` in detail. Its budget is what a fixed `rho` spends after Phase 0,
//! `sum_g ceil(rho N_g)` evaluations per expected candidate (with per-cell costs: the
//! dollars those evaluations cost when drawn for information per unit of cost, see
//! `Race::charge`). Each newcomer draws a nested Poisson sample (`pi_t` proportional to the
//! Task-CoEvolve weights divided by `sqrt(cost_t)`, capped at 1, exact); its first batch
//! (`m_g / 2` per stratum, at least 3 tasks in all) is paired with the **anchor**, the best
//! exactly known candidate, whose outcomes are known, so it costs only the newcomer's
//! trials. `D = (1/N) sum_S (x_t(c) - x_t(anchor)) / pi_t` is estimated with its exact
//! Poisson variance. A newcomer with at least a 25% chance of beating the anchor
//! (`D + 0.674 se > 0`) is verified: its sample is doubled until every val task is observed
//! (it is then known exactly and may become the anchor), unless racing's rule drops it
//! first (`D + 1.0 se < 0`). First batches and verifications are bought even past the budget
//! (GEPA's screen does the same: on near-identical candidates only exact scores can pick),
//! verifications up to six budgets in all, so that a smaller rho still spends less; what is
//! left of the budget at the end verifies the finalists that still have that 25%
//! chance (or, when fewer than 3 full evaluations fit, gives the top 3 one more batch per
//! round), and is handed back when none has it (`default.rs`). The pick is the best exactly
//! known candidate unless a sampled one beats it by 1.5 standard errors. Sampled candidates
//! are re-estimated by Rasch-GREG ([`hevo_stats::estimate::greg_poisson`]); the pick's
//! printed interval is [`Outcome::pick_interval`] (selection-adjusted).

/// The three [`Strategy`] accessors every strategy answers from its `core: Core` and
/// `name: String` fields, written once: `design`, `estimates` and `name`.
macro_rules! core_accessors {
    () => {
        fn design(&self, c: CandidateId) -> &[(usize, f64)] {
            self.core.design.get(c).map_or(&[], Vec::as_slice)
        }

        fn estimates(&self) -> &[hevo_stats::estimate::Estimate] {
            &self.core.estimates
        }

        fn name(&self) -> String {
            self.name.clone()
        }
    };
}

mod coevolve;
mod core;
mod default;
mod full;
mod race;
mod screen;
mod subset;

use hevo_stats::design::{stratum_size, McInclusion, Strata};
use hevo_stats::estimate::{Estimate, Estimator};
use hevo_stats::weights::WeightParams;

use self::coevolve::Coevolve;
use self::core::Core;
use self::full::Full;
use self::race::Race;
use self::screen::Screen;
use self::subset::Subset;

/// A candidate's id: its arrival index (0-based, dense).
pub type CandidateId = usize;

/// Something that can evaluate candidates on tasks, a batch at a time.
pub trait Oracle {
    /// The outcome and, when known, the cost of each `(candidate, task)` request, in order.
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Observed;
}

/// What an [`Oracle`] answers for a batch of requests, in the requests' order.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// Each request's outcome in `[0, 1]`.
    pub outcomes: Vec<f64>,
    /// Each request's cost, when known: any positive unit, the same for every trial of a
    /// run (dollars, or tokens when dollars are zero; the live search feeds its ledger
    /// here). Strategies that sample tasks use it to weigh information per unit of cost;
    /// with `None` every task counts as equally expensive.
    pub costs: Option<Vec<f64>>,
}

/// The result of a strategy at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The estimate of every candidate's full-set score, indexed by [`CandidateId`].
    pub estimates: Vec<Estimate>,
    /// The picked candidate.
    pub pick: CandidateId,
    /// The pick's selection-adjusted 95% interval
    /// ([`hevo_stats::selection::pick_interval`]): wider than `estimates[pick]`'s own
    /// interval unless the pick is known exactly. Print this one for the pick.
    pub pick_interval: Estimate,
}

impl Outcome {
    /// The outcome that picks `pick`, with its selection-adjusted interval.
    pub fn new(estimates: Vec<Estimate>, pick: CandidateId) -> Self {
        Outcome {
            pick_interval: hevo_stats::selection::pick_interval(&estimates, pick),
            estimates,
            pick,
        }
    }
}

/// An evaluation strategy (see the [module documentation](self)).
pub trait Strategy {
    /// A short name for reports (e.g. `coevolve/hajek`).
    fn name(&self) -> String;
    /// Phase 0: evaluates the seed candidates on every task.
    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]);
    /// Evaluates one iteration's new candidates.
    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]);
    /// Final estimates (optionally after re-estimation or a final playoff) and the pick.
    fn finish(&mut self, oracle: &mut dyn Oracle) -> Outcome;
    /// The current estimate of every candidate seen so far (indexed by [`CandidateId`]);
    /// the live search shows these to the proposer after each iteration.
    fn estimates(&self) -> &[Estimate];
    /// The design behind `c`'s current estimate: each task it rests on with its inclusion
    /// probability (1 for a task every candidate gets); empty for an estimate that rests on
    /// no task of its own (e.g. a prior). The live search stores it (`draws`).
    fn design(&self, c: CandidateId) -> &[(usize, f64)];
}

/// How inclusion probabilities of successive sampling are obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PiMethod {
    /// Seeded Monte Carlo simulation of the draw (the paper; default 4,000 draws).
    MonteCarlo(usize),
    /// Exact numerical integration ([`hevo_stats::design::successive_inclusion_exact`]).
    Exact,
}

/// Which strategy, with its options.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StrategyKind {
    /// Every candidate on every task.
    Full,
    /// Naive: one fixed uniform subset for the whole run, raw subset mean.
    Fixed,
    /// Random-Resample: a fresh uniform subset each iteration, raw subset mean.
    Resample,
    /// Task-CoEvolve: variance-weighted successive sampling + a design-based estimator
    /// (`Hajek`, `Residual`, or `None` = automatic per stratum).
    Coevolve {
        /// The estimator; `None` is `auto`.
        estimator: Option<Estimator>,
        /// Inclusion probabilities.
        pi: PiMethod,
    },
    /// GEPA's screen: a minibatch of `b` tasks paired with the incumbent, full evaluation
    /// only if strictly better on the minibatch.
    Screen {
        /// Minibatch size (GEPA default 3).
        minibatch: usize,
    },
    /// Paired racing against the incumbent under one global budget.
    Race,
    /// The recommended default: a screen of every newcomer against the best exactly known
    /// candidate, verification of the contenders by racing, a pick on exact scores.
    Default,
}

impl StrategyKind {
    /// The name used on the command line and in reports.
    pub fn name(&self) -> String {
        match self {
            StrategyKind::Full => "full".into(),
            StrategyKind::Fixed => "fixed".into(),
            StrategyKind::Resample => "resample".into(),
            StrategyKind::Coevolve { estimator, pi } => {
                let e = estimator.map_or("auto", |e| e.name());
                match pi {
                    PiMethod::MonteCarlo(_) => format!("coevolve/{e}"),
                    PiMethod::Exact => format!("coevolve/{e}/exact-pi"),
                }
            }
            StrategyKind::Screen { .. } => "screen".into(),
            StrategyKind::Race => "race".into(),
            StrategyKind::Default => "default".into(),
        }
    }
}

/// Settings shared by all strategies.
#[derive(Clone, Debug, PartialEq)]
pub struct StrategyConfig {
    /// Task groups (strata); one stratum for ungrouped tasks.
    pub strata: Strata,
    /// Share of each stratum evaluated per candidate (`m_g = ceil(rho N_g)`).
    pub rho: f64,
    /// How many non-Phase-0 candidates the run expects (sets the racing budget).
    pub expected_candidates: usize,
    /// Seed of every random choice the strategy makes.
    pub seed: u64,
    /// Task-CoEvolve weight parameters.
    pub weights: WeightParams,
}

/// Builds a strategy.
pub fn build(kind: StrategyKind, config: StrategyConfig) -> Box<dyn Strategy> {
    let name = kind.name();
    let core = Core::new(config);
    match kind {
        StrategyKind::Full => Box::new(Full { core, name }),
        StrategyKind::Fixed => Box::new(Subset {
            core,
            name,
            fixed: None,
            fresh_each_iteration: false,
        }),
        StrategyKind::Resample => Box::new(Subset {
            core,
            name,
            fixed: None,
            fresh_each_iteration: true,
        }),
        StrategyKind::Coevolve { estimator, pi } => {
            let mc = match pi {
                PiMethod::MonteCarlo(d) => core
                    .strata
                    .members
                    .iter()
                    .enumerate()
                    .map(|(g, m)| {
                        Some(McInclusion::new(
                            m.len(),
                            d.max(1),
                            core.seed ^ (0x9e37 + g as u64),
                        ))
                    })
                    .collect(),
                PiMethod::Exact => vec![None; core.strata.len()],
            };
            Box::new(Coevolve {
                core,
                name,
                estimator,
                mc,
            })
        }
        StrategyKind::Screen { minibatch } => Box::new(Screen {
            core,
            name,
            minibatch: minibatch.max(1),
            incumbent: None,
            full: Vec::new(),
        }),
        StrategyKind::Race => Box::new(Race::new(core, name, false)),
        StrategyKind::Default => Box::new(Race::new(core, name, true)),
    }
}

/// Index of the largest value (earliest on ties; `NaN` never wins unless all are `NaN`).
pub fn argmax(est: &[Estimate]) -> CandidateId {
    let mut best = 0;
    for (i, e) in est.iter().enumerate() {
        if e.value > est[best].value || (est[best].value.is_nan() && !e.value.is_nan()) {
            best = i;
        }
    }
    best
}

/// The number of evaluations a fixed `rho` spends per candidate: `sum_g ceil(rho N_g)`.
pub fn per_candidate_budget(strata: &Strata, rho: f64) -> usize {
    strata
        .members
        .iter()
        .map(|m| stratum_size(m.len(), rho))
        .sum()
}
