//! What every strategy needs: tasks, cached observations, task statistics, estimates.

use std::collections::HashSet;

use hevo_stats::design::Strata;
use hevo_stats::estimate::{combine_strata, sample_mean, Estimate};
use hevo_stats::weights::{TaskStats, WeightParams};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{argmax, CandidateId, Observed, Oracle, Outcome, StrategyConfig};

/// What every strategy needs: tasks, cached observations, task statistics, estimates.
pub(crate) struct Core {
    pub(crate) strata: Strata,
    pub(crate) n_tasks: usize,
    pub(crate) rho: f64,
    pub(crate) expected: usize,
    pub(crate) seed: u64,
    pub(crate) rng: ChaCha8Rng,
    pub(crate) params: WeightParams,
    pub(crate) obs: Vec<Vec<Option<f64>>>,
    pub(crate) stats: TaskStats,
    pub(crate) estimates: Vec<Estimate>,
    /// Per candidate: the tasks behind its current estimate, each with its inclusion
    /// probability under the strategy's design (1 for a task every candidate gets).
    pub(crate) design: Vec<Vec<(usize, f64)>>,
    pub(crate) phase0: Vec<CandidateId>,
    /// Sum and count of the observed costs of each task.
    pub(crate) cost_sum: Vec<f64>,
    pub(crate) cost_n: Vec<usize>,
}

impl Core {
    pub(crate) fn new(c: StrategyConfig) -> Self {
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
            design: Vec::new(),
            phase0: Vec::new(),
            cost_sum: vec![0.0; n_tasks],
            cost_n: vec![0; n_tasks],
            strata: c.strata,
        }
    }

    pub(crate) fn ensure(&mut self, c: CandidateId) {
        while self.obs.len() <= c {
            self.obs.push(vec![None; self.n_tasks]);
            self.estimates
                .push(Estimate::normal(f64::NAN, f64::INFINITY, 0.0, 1.0));
            self.design.push(Vec::new());
        }
    }

    /// Evaluates the cells not yet observed (deduplicated, in their first order), records
    /// them; returns how many were evaluated. Linear in `cells`: a whole evaluation of a
    /// candidate is one request of every task.
    pub(crate) fn observe(
        &mut self,
        oracle: &mut dyn Oracle,
        cells: &[(CandidateId, usize)],
    ) -> usize {
        let mut todo: Vec<(CandidateId, usize)> = Vec::new();
        let mut asked: HashSet<(CandidateId, usize)> = HashSet::new();
        for &(c, t) in cells {
            self.ensure(c);
            if self.obs[c][t].is_none() && asked.insert((c, t)) {
                todo.push((c, t));
            }
        }
        if todo.is_empty() {
            return 0;
        }
        let Observed {
            outcomes: ys,
            costs,
        } = oracle.evaluate(&todo);
        for (&(c, t), &y) in todo.iter().zip(&ys) {
            self.obs[c][t] = Some(y);
            self.stats.record(t, y);
        }
        if let Some(costs) = costs {
            for (&(_, t), &k) in todo.iter().zip(&costs) {
                if k.is_finite() && k >= 0.0 {
                    self.cost_sum[t] += k;
                    self.cost_n[t] += 1;
                }
            }
        }
        todo.len()
    }

    /// Each task's mean observed cost relative to the mean over tasks (tasks never costed
    /// count as average); `None` when no cost was ever reported or all are zero.
    pub(crate) fn relative_costs(&self) -> Option<Vec<f64>> {
        let seen: Vec<f64> = (0..self.n_tasks)
            .filter(|&t| self.cost_n[t] > 0)
            .map(|t| self.cost_sum[t] / self.cost_n[t] as f64)
            .collect();
        if seen.is_empty() {
            return None;
        }
        let mean = seen.iter().sum::<f64>() / seen.len() as f64;
        if mean <= 0.0 {
            return None;
        }
        Some(
            (0..self.n_tasks)
                .map(|t| {
                    if self.cost_n[t] > 0 {
                        // A free task still costs time: floor at 1% of the mean.
                        (self.cost_sum[t] / self.cost_n[t] as f64 / mean).max(0.01)
                    } else {
                        1.0
                    }
                })
                .collect(),
        )
    }

    /// Sampling weights that weigh information per unit of cost: `w_t / sqrt(c_t)` with
    /// `c_t` the relative cost (the Neyman allocation with unequal unit costs minimizes the
    /// variance for a fixed spend at `pi_t ∝ sd_t / sqrt(c_t)`); `w` unchanged without costs.
    pub(crate) fn cost_weighted(&self, w: &[f64]) -> Vec<f64> {
        match self.relative_costs() {
            Some(c) => w.iter().zip(&c).map(|(w, c)| w / c.sqrt()).collect(),
            None => w.to_vec(),
        }
    }

    pub(crate) fn y(&self, c: CandidateId, t: usize) -> f64 {
        self.obs[c][t].expect("cell observed")
    }

    /// The full-set score of a fully observed candidate: the average of stratum means.
    pub(crate) fn full_score(&self, c: CandidateId) -> f64 {
        let g = self.strata.len() as f64;
        self.strata
            .members
            .iter()
            .map(|m| m.iter().map(|&t| self.y(c, t)).sum::<f64>() / m.len() as f64)
            .sum::<f64>()
            / g
    }

    pub(crate) fn fully_observed(&self, c: CandidateId) -> bool {
        self.obs[c].iter().all(|o| o.is_some())
    }

    pub(crate) fn all_cells(&self, cands: &[CandidateId]) -> Vec<(CandidateId, usize)> {
        cands
            .iter()
            .flat_map(|&c| (0..self.n_tasks).map(move |t| (c, t)))
            .collect()
    }

    pub(crate) fn phase0_full(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        let cells = self.all_cells(seeds);
        self.observe(oracle, &cells);
        for &c in seeds {
            self.set_exact(c);
        }
        self.phase0.extend_from_slice(seeds);
    }

    pub(crate) fn sizes(&self) -> Vec<usize> {
        self.strata.sizes(self.rho)
    }

    /// Sets `c`'s estimate to its exact full-set score (every task observed); its design is
    /// every task with probability 1.
    pub(crate) fn set_exact(&mut self, c: CandidateId) {
        self.estimates[c] = Estimate::exact(self.full_score(c));
        self.design[c] = (0..self.n_tasks).map(|t| (t, 1.0)).collect();
    }

    /// Sets `c`'s estimate to its raw subset mean over `tasks` ([`Core::raw_score`]); its
    /// design treats the subset as a uniform draw within each stratum
    /// (`pi_t = |S_g| / N_g`).
    pub(crate) fn set_raw(&mut self, c: CandidateId, tasks: &[usize]) {
        self.estimates[c] = self.raw_score(c, tasks);
        let mut design = Vec::with_capacity(tasks.len());
        for m in &self.strata.members {
            let in_g: Vec<usize> = tasks
                .iter()
                .copied()
                .filter(|t| m.binary_search(t).is_ok())
                .collect();
            let pi = in_g.len() as f64 / m.len() as f64;
            design.extend(in_g.into_iter().map(|t| (t, pi)));
        }
        design.sort_by_key(|&(t, _)| t);
        self.design[c] = design;
    }

    /// Raw stratified subset mean of `c` over `tasks` (all observed): the average of the
    /// subset means of the strata the subset touches.
    pub(crate) fn raw_score(&self, c: CandidateId, tasks: &[usize]) -> Estimate {
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
    pub(crate) fn prior_estimate(&self) -> Estimate {
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

    pub(crate) fn uniform_subset(&mut self) -> Vec<usize> {
        let sizes = self.sizes();
        let mut out = Vec::new();
        for (m, &k) in self.strata.members.iter().zip(&sizes) {
            out.extend(m.choose_multiple(&mut self.rng, k).copied());
        }
        out
    }

    pub(crate) fn outcome(&self) -> Outcome {
        Outcome::new(self.estimates.clone(), argmax(&self.estimates))
    }

    pub(crate) fn obs_list(&self) -> Vec<(usize, usize, f64)> {
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
