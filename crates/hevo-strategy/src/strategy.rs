//! Evaluation strategies: which tasks each candidate is evaluated on, and how its full-set
//! score is estimated.
//!
//! A strategy is a synchronous policy object. It never runs a trial itself: it asks an
//! [`Oracle`] for a *batch* of `(candidate, task)` outcomes at a time (replay answers by
//! matrix lookup; the live engine runs the batch's trials in parallel). The same code
//! therefore drives offline replay and the live search loop:
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
//! recommended one: racing + a final playoff + Rasch-GREG re-estimation).
//!
//! `default` in detail. The global budget is what a fixed `rho` spends after Phase 0,
//! `sum_g ceil(rho N_g)` per expected candidate. Half of it goes to racing: each new
//! candidate draws a nested Poisson sample (`pi_t` proportional to the Task-CoEvolve
//! weights, capped at 1, exact) grown in batches of `m_g / 2`. Every batch is paired with
//! the incumbent on the same tasks. `D = (1/N) sum_S (x_t(c) - x_t(inc)) / pi_t` is
//! estimated with its exact Poisson variance, and the candidate is dropped if
//! `D + 1.0 se < 0`, stops if `D - 2.0 se > 0`, and gets another batch otherwise (up to
//! 8 batches, keeping every later candidate's first batch in reserve). A first batch that
//! does not fit paired with an incumbent that is itself only sampled (its outcomes would be
//! bought too) is screened against the best exactly known candidate instead and raced
//! against the incumbent through both estimates; a candidate still without a trial may draw
//! on the playoff's share, so none is left unevaluated (docs/replay.md). The other half is the
//! playoff: the top 3 candidates by re-estimated score whose interval still reaches the
//! best exactly known score get one more batch each, round after round, until the budget
//! is spent. At every step and at the end, each candidate is re-estimated by GREG
//! `S = mean_T yhat_ct + (1/N) sum_S (x_t - yhat_ct) / pi_t` with `yhat` from a Rasch fit
//! on everything observed. Estimates are normal-approximation intervals. The adaptive
//! stopping makes the final-level HT correction slightly optimistic (the usual sequential
//! testing caveat).

use hevo_stats::design::{
    stratum_size, successive_inclusion_exact, successive_sample, McInclusion, NestedPoisson, Strata,
};
use hevo_stats::estimate::{
    choose_estimator, combine_strata, estimate_with, residual, sample_mean, Design, Estimate,
    Estimator, Unit,
};
use hevo_stats::irt::RaschFit;
use hevo_stats::racing::{Budget, RaceDecision, RaceRule};
use hevo_stats::weights::{coevolve_weights, TaskStats, WeightParams};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// A candidate's id: its arrival index (0-based, dense).
pub type CandidateId = usize;

/// Something that can evaluate candidates on tasks, a batch at a time.
pub trait Oracle {
    /// Outcomes in `[0, 1]` of each `(candidate, task)` request, in order.
    fn evaluate(&mut self, requests: &[(CandidateId, usize)]) -> Vec<f64>;
}

/// The result of a strategy at the end of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The estimate of every candidate's full-set score, indexed by [`CandidateId`].
    pub estimates: Vec<Estimate>,
    /// The picked candidate.
    pub pick: CandidateId,
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
}

/// How inclusion probabilities of successive sampling are obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PiMethod {
    /// Seeded Monte Carlo simulation of the draw (the paper; default 4,000 draws).
    MonteCarlo(usize),
    /// Exact numerical integration ([`successive_inclusion_exact`]).
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
    /// The recommended default: racing, a final playoff, Rasch-GREG re-estimation.
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

/// What every strategy needs: tasks, cached observations, task statistics, estimates.
struct Core {
    strata: Strata,
    n_tasks: usize,
    rho: f64,
    expected: usize,
    seed: u64,
    rng: ChaCha8Rng,
    params: WeightParams,
    obs: Vec<Vec<Option<f64>>>,
    stats: TaskStats,
    estimates: Vec<Estimate>,
    phase0: Vec<CandidateId>,
}

impl Core {
    fn new(c: StrategyConfig) -> Self {
        let n_tasks = c.strata.members.iter().map(|m| m.len()).sum();
        Core {
            n_tasks,
            rho: c.rho,
            expected: c.expected_candidates,
            seed: c.seed,
            rng: ChaCha8Rng::seed_from_u64(c.seed),
            params: c.weights,
            obs: Vec::new(),
            stats: TaskStats::new(n_tasks),
            estimates: Vec::new(),
            phase0: Vec::new(),
            strata: c.strata,
        }
    }

    fn ensure(&mut self, c: CandidateId) {
        while self.obs.len() <= c {
            self.obs.push(vec![None; self.n_tasks]);
            self.estimates
                .push(Estimate::normal(f64::NAN, f64::INFINITY, 0.0, 1.0));
        }
    }

    /// Evaluates the cells not yet observed (deduplicated), records them; returns how many
    /// were evaluated.
    fn observe(&mut self, oracle: &mut dyn Oracle, cells: &[(CandidateId, usize)]) -> usize {
        let mut todo: Vec<(CandidateId, usize)> = Vec::new();
        for &(c, t) in cells {
            self.ensure(c);
            if self.obs[c][t].is_none() && !todo.contains(&(c, t)) {
                todo.push((c, t));
            }
        }
        if todo.is_empty() {
            return 0;
        }
        let ys = oracle.evaluate(&todo);
        for (&(c, t), &y) in todo.iter().zip(&ys) {
            self.obs[c][t] = Some(y);
            self.stats.record(t, y);
        }
        todo.len()
    }

    fn y(&self, c: CandidateId, t: usize) -> f64 {
        self.obs[c][t].expect("cell observed")
    }

    /// The full-set score of a fully observed candidate: the average of stratum means.
    fn full_score(&self, c: CandidateId) -> f64 {
        let g = self.strata.len() as f64;
        self.strata
            .members
            .iter()
            .map(|m| m.iter().map(|&t| self.y(c, t)).sum::<f64>() / m.len() as f64)
            .sum::<f64>()
            / g
    }

    fn fully_observed(&self, c: CandidateId) -> bool {
        self.obs[c].iter().all(|o| o.is_some())
    }

    fn all_cells(&self, cands: &[CandidateId]) -> Vec<(CandidateId, usize)> {
        cands
            .iter()
            .flat_map(|&c| (0..self.n_tasks).map(move |t| (c, t)))
            .collect()
    }

    fn phase0_full(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        let cells = self.all_cells(seeds);
        self.observe(oracle, &cells);
        for &c in seeds {
            self.estimates[c] = Estimate::exact(self.full_score(c));
        }
        self.phase0.extend_from_slice(seeds);
    }

    fn sizes(&self) -> Vec<usize> {
        self.strata.sizes(self.rho)
    }

    /// Raw stratified subset mean of `c` over `tasks` (all observed): the average of the
    /// subset means of the strata the subset touches.
    fn raw_score(&self, c: CandidateId, tasks: &[usize]) -> Estimate {
        let mut parts: Vec<(Estimate, f64)> = self
            .strata
            .members
            .iter()
            .filter_map(|m| {
                let ys: Vec<f64> = tasks
                    .iter()
                    .filter(|t| m.binary_search(t).is_ok())
                    .map(|&t| self.y(c, t))
                    .collect();
                (!ys.is_empty()).then(|| (sample_mean(&ys), 1.0))
            })
            .collect();
        let k = parts.len() as f64;
        for p in &mut parts {
            p.1 = 1.0 / k;
        }
        combine_strata(&parts)
    }

    /// The estimate of a candidate nothing is known about: the historical mean success rate
    /// (averaged over strata) with an unbounded standard error.
    fn prior_estimate(&self) -> Estimate {
        let p = self.stats.rates();
        let v = self
            .strata
            .members
            .iter()
            .map(|m| m.iter().map(|&t| p[t]).sum::<f64>() / m.len() as f64)
            .sum::<f64>()
            / self.strata.len() as f64;
        Estimate::normal(v, f64::INFINITY, 0.0, 1.0)
    }

    fn uniform_subset(&mut self) -> Vec<usize> {
        let sizes = self.sizes();
        let mut out = Vec::new();
        for (m, &k) in self.strata.members.iter().zip(&sizes) {
            out.extend(m.choose_multiple(&mut self.rng, k).copied());
        }
        out
    }

    fn outcome(&self) -> Outcome {
        Outcome {
            pick: argmax(&self.estimates),
            estimates: self.estimates.clone(),
        }
    }

    fn obs_list(&self) -> Vec<(usize, usize, f64)> {
        let mut v = Vec::new();
        for (c, row) in self.obs.iter().enumerate() {
            for (t, y) in row.iter().enumerate() {
                if let Some(y) = y {
                    v.push((c, t, *y));
                }
            }
        }
        v
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

/// `full`: every candidate on every task, exact scores.
struct Full {
    core: Core,
    name: String,
}

impl Strategy for Full {
    fn estimates(&self) -> &[Estimate] {
        &self.core.estimates
    }

    fn name(&self) -> String {
        self.name.clone()
    }
    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
    }
    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        self.core.phase0_full(oracle, candidates);
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        self.core.outcome()
    }
}

/// `fixed` (Naive) and `resample` (Random-Resample): uniform subsets, raw subset mean.
struct Subset {
    core: Core,
    name: String,
    fixed: Option<Vec<usize>>,
    fresh_each_iteration: bool,
}

impl Subset {
    fn subset(&mut self) -> Vec<usize> {
        if self.fresh_each_iteration {
            return self.core.uniform_subset();
        }
        if self.fixed.is_none() {
            self.fixed = Some(self.core.uniform_subset());
        }
        self.fixed.clone().unwrap_or_default()
    }
}

impl Strategy for Subset {
    fn estimates(&self) -> &[Estimate] {
        &self.core.estimates
    }

    fn name(&self) -> String {
        self.name.clone()
    }
    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
        // Phase-0 harnesses are scored the same way as the others (SPEC section 5).
        let s = self.subset();
        for &c in seeds {
            self.core.estimates[c] = self.core.raw_score(c, &s);
        }
    }
    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        let s = self.subset();
        let cells: Vec<_> = candidates
            .iter()
            .flat_map(|&c| s.iter().map(move |&t| (c, t)))
            .collect();
        self.core.observe(oracle, &cells);
        for &c in candidates {
            self.core.estimates[c] = self.core.raw_score(c, &s);
        }
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        self.core.outcome()
    }
}

/// `coevolve`: Task-CoEvolve as in the paper.
struct Coevolve {
    core: Core,
    name: String,
    estimator: Option<Estimator>,
    mc: Vec<Option<McInclusion>>,
}

impl Strategy for Coevolve {
    fn estimates(&self) -> &[Estimate] {
        &self.core.estimates
    }

    fn name(&self) -> String {
        self.name.clone()
    }
    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
    }
    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        let core = &mut self.core;
        // Weights from the statistics of all previous iterations (updated after each one).
        let w = coevolve_weights(&core.stats, core.params);
        let p = core.stats.rates();
        let sizes = core.sizes();
        let mut per_stratum: Vec<(Vec<usize>, Vec<f64>)> = Vec::new();
        for (g, m) in core.strata.members.iter().enumerate() {
            let wg: Vec<f64> = m.iter().map(|&t| w[t]).collect();
            let local = successive_sample(&wg, sizes[g], &mut core.rng);
            let pi = match &mut self.mc[g] {
                Some(mc) => mc.inclusion(&wg, sizes[g]),
                None => successive_inclusion_exact(&wg, sizes[g]),
            };
            per_stratum.push((local, pi));
        }
        let cells: Vec<_> = candidates
            .iter()
            .flat_map(|&c| {
                per_stratum
                    .iter()
                    .zip(&core.strata.members)
                    .flat_map(move |((s, _), m)| s.iter().map(move |&i| (c, m[i])))
            })
            .collect();
        core.observe(oracle, &cells);
        let gw = 1.0 / core.strata.len() as f64;
        let mut parts: Vec<Vec<(Estimate, f64)>> = vec![Vec::new(); candidates.len()];
        for (g, m) in core.strata.members.iter().enumerate() {
            let (s, pi) = &per_stratum[g];
            let anchor_mean = m.iter().map(|&t| p[t]).sum::<f64>() / m.len() as f64;
            let pg: Vec<f64> = m.iter().map(|&t| p[t]).collect();
            let units: Vec<Vec<Unit>> = candidates
                .iter()
                .map(|&c| {
                    s.iter()
                        .map(|&i| Unit {
                            y: core.y(c, m[i]),
                            pi: pi[i],
                            anchor: p[m[i]],
                        })
                        .collect()
                })
                .collect();
            let which = match self.estimator {
                Some(e) => e,
                None => {
                    let batch: Vec<(&[Unit], f64)> =
                        units.iter().map(|u| (u.as_slice(), anchor_mean)).collect();
                    choose_estimator(
                        &[
                            Estimator::Hajek,
                            Estimator::Residual,
                            Estimator::HajekResidual,
                        ],
                        &batch,
                        m.len(),
                        Design::FixedSize,
                        Some((pi, &pg)),
                    )
                }
            };
            for (k, u) in units.iter().enumerate() {
                let e = estimate_with(which, u, anchor_mean, m.len(), Design::FixedSize);
                parts[k].push((e, gw));
            }
        }
        for (k, &c) in candidates.iter().enumerate() {
            core.estimates[c] = combine_strata(&parts[k]);
        }
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        self.core.outcome()
    }
}

/// `screen`: GEPA's minibatch screen against the incumbent.
struct Screen {
    core: Core,
    name: String,
    minibatch: usize,
    incumbent: Option<CandidateId>,
    full: Vec<CandidateId>,
}

impl Strategy for Screen {
    fn estimates(&self) -> &[Estimate] {
        &self.core.estimates
    }

    fn name(&self) -> String {
        self.name.clone()
    }
    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
        self.full.extend_from_slice(seeds);
        self.incumbent = Some(best_of(&self.core.estimates, &self.full));
    }
    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        for &c in candidates {
            let inc = self.incumbent.unwrap_or(0);
            let all: Vec<usize> = (0..self.core.n_tasks).collect();
            let mb: Vec<usize> = all
                .choose_multiple(&mut self.core.rng, self.minibatch.min(all.len()))
                .copied()
                .collect();
            let cells: Vec<_> = mb.iter().flat_map(|&t| [(c, t), (inc, t)]).collect();
            self.core.observe(oracle, &cells);
            let sc: f64 = mb.iter().map(|&t| self.core.y(c, t)).sum();
            let si: f64 = mb.iter().map(|&t| self.core.y(inc, t)).sum();
            if sc > si {
                let cells = self.core.all_cells(&[c]);
                self.core.observe(oracle, &cells);
                self.core.estimates[c] = Estimate::exact(self.core.full_score(c));
                self.full.push(c);
                if self.core.estimates[c].value > self.core.estimates[inc].value {
                    self.incumbent = Some(c);
                }
            } else {
                self.core.estimates[c] = self.core.raw_score(c, &mb);
            }
        }
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        Outcome {
            pick: best_of(&self.core.estimates, &self.full),
            estimates: self.core.estimates.clone(),
        }
    }
}

fn best_of(est: &[Estimate], among: &[CandidateId]) -> CandidateId {
    let mut best = among[0];
    for &c in among {
        if est[c].value > est[best].value {
            best = c;
        }
    }
    best
}

/// Per-candidate racing state: a nested Poisson sample per stratum and its level.
struct Racer {
    designs: Vec<NestedPoisson>,
    level: f64,
    /// Tasks of the candidate's design sample at its current level, per stratum.
    sample: Vec<Vec<usize>>,
    /// Inclusion probabilities at the current level, per stratum (local indices).
    pi: Vec<Vec<f64>>,
}

/// `race` and `default`: paired racing against the incumbent under one global budget
/// (`default` screens unaffordable first batches against the best exactly known candidate).
struct Race {
    core: Core,
    name: String,
    playoff: bool,
    rule: RaceRule,
    budget: Budget,
    racers: Vec<Option<Racer>>,
    seen: usize,
    max_levels: f64,
}

/// Share of the racing budget kept for the final playoff of `default`.
const PLAYOFF_SHARE: f64 = 0.5;
/// How many finalists the playoff extends per round.
const PLAYOFF_K: usize = 3;

impl Race {
    fn new(core: Core, name: String, playoff: bool) -> Self {
        let per: usize = core.sizes().iter().sum();
        let budget = Budget::new(per * core.expected);
        Race {
            core,
            name,
            playoff,
            rule: RaceRule::default(),
            budget,
            racers: Vec::new(),
            seen: 0,
            max_levels: 8.0,
        }
    }

    /// Expected size per stratum of one level (half of `m_g`, at least 1).
    fn batch(&self) -> Vec<f64> {
        self.core
            .sizes()
            .iter()
            .map(|&m| (m as f64 / 2.0).max(1.0))
            .collect()
    }

    fn set_level(&mut self, c: CandidateId, level: f64) {
        let batch = self.batch();
        let r = self.racers[c].as_mut().expect("racer");
        r.level = level;
        for (g, d) in r.designs.iter().enumerate() {
            let n_g = self.core.strata.members[g].len() as f64;
            let (s, pi) = d.sample((level * batch[g]).min(n_g));
            r.sample[g] = s;
            r.pi[g] = pi;
        }
    }

    /// The cells (candidate + incumbent pairs) needed to raise `c` to `level`, not yet
    /// observed.
    fn cells_for(
        &self,
        c: CandidateId,
        level: f64,
        inc: Option<CandidateId>,
    ) -> Vec<(usize, usize)> {
        let batch = self.batch();
        let r = self.racers[c].as_ref().expect("racer");
        let mut cells = Vec::new();
        for (g, d) in r.designs.iter().enumerate() {
            let m = &self.core.strata.members[g];
            let n_g = m.len() as f64;
            let (s, _) = d.sample((level * batch[g]).min(n_g));
            for i in s {
                let t = m[i];
                if self.core.obs[c][t].is_none() {
                    cells.push((c, t));
                }
                if let Some(inc) = inc {
                    if self.core.obs[inc][t].is_none() && !cells.contains(&(inc, t)) {
                        cells.push((inc, t));
                    }
                }
            }
        }
        cells
    }

    /// The paired difference `S(c) - S(inc)` on `c`'s design sample (exact Poisson design).
    fn diff(&self, c: CandidateId, inc: CandidateId) -> Estimate {
        let r = self.racers[c].as_ref().expect("racer");
        let gw = 1.0 / self.core.strata.len() as f64;
        let parts: Vec<(Estimate, f64)> = self
            .core
            .strata
            .members
            .iter()
            .enumerate()
            .map(|(g, m)| {
                let z: Vec<f64> = r.sample[g]
                    .iter()
                    .map(|&i| (self.core.y(c, m[i]) - self.core.y(inc, m[i])) / r.pi[g][i])
                    .collect();
                let pis: Vec<f64> = r.sample[g].iter().map(|&i| r.pi[g][i]).collect();
                let n = m.len() as f64;
                let v = z.iter().sum::<f64>() / n;
                let se =
                    hevo_stats::estimate::ht_total_variance(&z, &pis, Design::Poisson).sqrt() / n;
                (Estimate::normal(v, se, -1.0, 1.0), gw)
            })
            .collect();
        let value: f64 = parts.iter().map(|(e, w)| w * e.value).sum();
        let var: f64 = parts.iter().map(|(e, w)| w * w * e.se * e.se).sum();
        Estimate::normal(value, var.sqrt(), -1.0, 1.0)
    }

    /// Rasch-GREG re-estimation of every non-Phase-0 candidate with everything observed.
    fn reestimate(&mut self) {
        let n_c = self.core.obs.len();
        let fit = RaschFit::fit(&self.core.obs_list(), n_c, self.core.n_tasks);
        let gw = 1.0 / self.core.strata.len() as f64;
        for c in 0..n_c {
            if self.core.phase0.contains(&c) {
                continue;
            }
            if self.core.fully_observed(c) {
                self.core.estimates[c] = Estimate::exact(self.core.full_score(c));
                continue;
            }
            let Some(r) = self.racers[c].as_ref() else {
                continue;
            };
            let parts: Vec<(Estimate, f64)> = self
                .core
                .strata
                .members
                .iter()
                .enumerate()
                .map(|(g, m)| {
                    let anchor_mean =
                        m.iter().map(|&t| fit.predict(c, t)).sum::<f64>() / m.len() as f64;
                    let units: Vec<Unit> = r.sample[g]
                        .iter()
                        .map(|&i| Unit {
                            y: self.core.y(c, m[i]),
                            pi: r.pi[g][i],
                            anchor: fit.predict(c, m[i]),
                        })
                        .collect();
                    (residual(&units, anchor_mean, m.len(), Design::Poisson), gw)
                })
                .collect();
            self.core.estimates[c] = combine_strata(&parts);
        }
    }

    fn incumbent(&self) -> CandidateId {
        argmax(&self.core.estimates)
    }

    /// The best candidate whose score is known exactly (a Phase-0 seed or a fully observed
    /// candidate): new candidates are paired with it, so their batches cost only their own
    /// trials. Pairing with a sampled incumbent instead would buy the incumbent's outcome on
    /// every task of every batch, doubling each candidate's cost.
    fn anchor(&self) -> Option<CandidateId> {
        (0..self.core.obs.len())
            .filter(|&c| self.core.phase0.contains(&c) || self.core.fully_observed(c))
            .max_by(|&a, &b| {
                self.core.estimates[a]
                    .value
                    .total_cmp(&self.core.estimates[b].value)
                    .then(b.cmp(&a))
            })
    }

    fn racing_budget_left(&self) -> usize {
        if self.playoff {
            let keep = (self.budget.total() as f64 * PLAYOFF_SHARE).round() as usize;
            self.budget.remaining().saturating_sub(keep)
        } else {
            self.budget.remaining()
        }
    }
}

impl Strategy for Race {
    fn estimates(&self) -> &[Estimate] {
        &self.core.estimates
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
        for &c in seeds {
            while self.racers.len() <= c {
                self.racers.push(None);
            }
        }
    }

    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        let inc = self.incumbent();
        let anchor = self.anchor().unwrap_or(inc);
        let w = coevolve_weights(&self.core.stats, self.core.params);
        for &c in candidates {
            self.core.ensure(c);
            while self.racers.len() <= c {
                self.racers.push(None);
            }
            let designs: Vec<NestedPoisson> = self
                .core
                .strata
                .members
                .iter()
                .map(|m| {
                    let wg: Vec<f64> = m.iter().map(|&t| w[t]).collect();
                    NestedPoisson::new(&wg, &mut self.core.rng)
                })
                .collect();
            let g = self.core.strata.len();
            self.racers[c] = Some(Racer {
                designs,
                level: 0.0,
                sample: vec![Vec::new(); g],
                pi: vec![Vec::new(); g],
            });
        }
        self.seen += candidates.len();
        let later = self.core.expected.saturating_sub(self.seen);
        let first_batch: usize = self.batch().iter().map(|b| b.ceil() as usize).sum();
        let prior = self.core.prior_estimate();
        for &c in candidates {
            self.core.estimates[c] = prior;
        }
        let mut active: Vec<CandidateId> = candidates.to_vec();
        let mut level = 1.0;
        while !active.is_empty() && level <= self.max_levels {
            // One batch request for every active candidate at this level (parallel live).
            let mut cells = Vec::new();
            let mut raised = Vec::new();
            for (i, &c) in active.iter().enumerate() {
                let new_cells = |pair: CandidateId| -> Vec<(CandidateId, usize)> {
                    self.cells_for(c, level, Some(pair))
                        .into_iter()
                        .filter(|x| !cells.contains(x))
                        .collect()
                };
                // Keep every later candidate's first batch: deeper levels keep one paired with
                // the incumbent each; `default`'s first level keeps one screened against the
                // anchor each, this iteration's other newcomers included.
                let reserve = if level > 1.0 {
                    later * (2 * first_batch + 1)
                } else if self.playoff {
                    (later + active.len() - i - 1) * first_batch
                } else {
                    0
                };
                let mut allowed = self.racing_budget_left().saturating_sub(reserve);
                let mut pair = inc;
                let mut new = new_cells(inc);
                // No trial yet (a first sample can also be drawn empty).
                let unseen = self.core.obs[c].iter().all(Option::is_none);
                if new.len() > allowed && unseen && self.playoff {
                    if anchor != inc {
                        // Unaffordable paired with a sampled incumbent (whose outcomes on the
                        // batch must be bought too): screen it against the anchor, whose are
                        // known.
                        pair = anchor;
                        new = new_cells(anchor);
                    }
                    if new.len() > allowed {
                        // Still unaffordable (a sample drawn larger than expected, or after an
                        // empty one): a first batch may draw on the playoff's share rather than
                        // leave a candidate without a trial.
                        allowed = self.budget.remaining().saturating_sub(reserve);
                    }
                }
                if new.len() <= allowed && self.budget.try_spend(new.len()) {
                    cells.extend(new);
                    raised.push((c, pair));
                }
            }
            self.core.observe(oracle, &cells);
            let mut next = Vec::new();
            for &(c, pair) in &raised {
                self.set_level(c, level);
                let d = self.diff(c, pair);
                let base = self.core.estimates[pair];
                let se = (base.se * base.se + d.se * d.se).sqrt();
                let estimate = Estimate::normal(base.value + d.value, se, 0.0, 1.0);
                self.core.estimates[c] = estimate;
                // Raced against the incumbent: paired when it was paired with it, else
                // (screened against the anchor) through both estimates.
                let d = if inc == pair {
                    d
                } else {
                    let i = self.core.estimates[inc];
                    let se = (estimate.se * estimate.se + i.se * i.se).sqrt();
                    Estimate::normal(estimate.value - i.value, se, -1.0, 1.0)
                };
                let full = (0..g_len(&self.core)).all(|g| {
                    self.racers[c]
                        .as_ref()
                        .is_none_or(|r| r.sample[g].len() == self.core.strata.members[g].len())
                });
                if self.rule.decide(&d) == RaceDecision::Continue && !full {
                    next.push(c);
                }
            }
            active = next;
            level += 1.0;
        }
    }

    fn finish(&mut self, oracle: &mut dyn Oracle) -> Outcome {
        if !self.playoff {
            return self.core.outcome();
        }
        self.reestimate();
        // Playoff: extend the top finalists' samples with what is left of the budget.
        while self.budget.remaining() > 0 {
            let mut order: Vec<CandidateId> = (0..self.core.obs.len())
                .filter(|&c| self.racers.get(c).is_some_and(|r| r.is_some()))
                .filter(|&c| !self.core.fully_observed(c))
                .collect();
            order.sort_by(|&a, &b| {
                self.core.estimates[b]
                    .value
                    .total_cmp(&self.core.estimates[a].value)
                    .then(a.cmp(&b))
            });
            // Only candidates that could beat the best exactly known score.
            let exact_best = self
                .anchor()
                .map_or(f64::NEG_INFINITY, |a| self.core.estimates[a].value);
            order.retain(|&c| self.core.estimates[c].ci_high >= exact_best);
            order.truncate(PLAYOFF_K);
            if order.is_empty() {
                break;
            }
            let mut spent_any = false;
            for &c in &order {
                let level = self.racers[c].as_ref().map_or(1.0, |r| r.level) + 1.0;
                let cells = self.cells_for(c, level, None);
                if self.budget.try_spend(cells.len()) {
                    self.core.observe(oracle, &cells);
                    self.set_level(c, level);
                    spent_any = true;
                }
            }
            if !spent_any {
                // Nothing affordable: stop.
                break;
            }
            self.reestimate();
        }
        self.reestimate();
        self.core.outcome()
    }
}

fn g_len(core: &Core) -> usize {
    core.strata.len()
}

/// The number of evaluations a fixed `rho` spends per candidate: `sum_g ceil(rho N_g)`.
pub fn per_candidate_budget(strata: &Strata, rho: f64) -> usize {
    strata
        .members
        .iter()
        .map(|m| stratum_size(m.len(), rho))
        .sum()
}
