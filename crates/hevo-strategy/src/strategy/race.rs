//! `race` and `default`: paired racing under one global budget.

use std::collections::HashSet;

use hevo_stats::design::NestedPoisson;
use hevo_stats::estimate::{
    combine_strata, greg_poisson, unseen_difference_se, Design, Estimate, Unit,
};
use hevo_stats::irt::RaschFit;
use hevo_stats::racing::{Budget, RaceDecision, RaceRule};
use hevo_stats::weights::coevolve_weights;

use super::{argmax, CandidateId, Core, Oracle, Outcome, Strategy};

/// Per-candidate racing state: a nested Poisson sample per stratum and its level.
pub(crate) struct Racer {
    pub(super) designs: Vec<NestedPoisson>,
    pub(super) level: f64,
    /// Tasks of the candidate's design sample at its current level, per stratum.
    pub(super) sample: Vec<Vec<usize>>,
    /// Inclusion probabilities at the current level, per stratum (local indices).
    pub(super) pi: Vec<Vec<f64>>,
}

/// `race` and `default` share their state: nested Poisson designs per candidate, paired
/// differences and one global budget. `race` races every newcomer against the incumbent
/// (below); `default` (`verifying`) screens it against the anchor and verifies the
/// contenders (`default.rs`).
pub(crate) struct Race {
    pub(super) core: Core,
    pub(super) name: String,
    pub(super) verifying: bool,
    pub(super) rule: RaceRule,
    pub(super) budget: Budget,
    pub(super) racers: Vec<Option<Racer>>,
    pub(super) seen: usize,
    pub(super) max_levels: f64,
}

/// Budget units per evaluation of average price (the budget counts in these units so that,
/// with costs, a cell is charged its price; [`Race::charge`]).
const UNIT: usize = 1000;

impl Race {
    pub(super) fn new(core: Core, name: String, verifying: bool) -> Self {
        let per: usize = core.sizes().iter().sum();
        let budget = Budget::new(per * core.expected * UNIT);
        Race {
            core,
            name,
            verifying,
            rule: RaceRule::default(),
            budget,
            racers: Vec::new(),
            seen: 0,
            max_levels: 8.0,
        }
    }

    /// Expected size per stratum of one level (half of `m_g`, at least 1).
    pub(super) fn batch(&self) -> Vec<f64> {
        self.core
            .sizes()
            .iter()
            .map(|&m| (m as f64 / 2.0).max(1.0))
            .collect()
    }

    pub(super) fn set_level(&mut self, c: CandidateId, level: f64) {
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
    pub(super) fn cells_for(
        &self,
        c: CandidateId,
        level: f64,
        inc: Option<CandidateId>,
    ) -> Vec<(usize, usize)> {
        let batch = self.batch();
        let r = self.racers[c].as_ref().expect("racer");
        let mut cells = Vec::new();
        let mut listed = HashSet::new();
        for (g, d) in r.designs.iter().enumerate() {
            let m = &self.core.strata.members[g];
            let n_g = m.len() as f64;
            let (s, _) = d.sample((level * batch[g]).min(n_g));
            for i in s {
                let t = m[i];
                if self.core.obs[c][t].is_none() {
                    cells.push((c, t));
                    listed.insert((c, t));
                }
                if let Some(inc) = inc {
                    if self.core.obs[inc][t].is_none() && listed.insert((inc, t)) {
                        cells.push((inc, t));
                    }
                }
            }
        }
        cells
    }

    /// The paired difference `S(c) - S(inc)` on `c`'s design sample (exact Poisson design).
    pub(super) fn diff(&self, c: CandidateId, inc: CandidateId) -> Estimate {
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

    /// `c`'s score from its paired difference `d` with `base`: `S(base) + D`, its standard
    /// error at least what `c`'s sample cannot rule out on the tasks it has not seen
    /// ([`unseen_difference_se`]): a sample that agrees with `base` everywhere has a plug-in
    /// standard error of 0 and would print `0.850 [0.850, 0.850]` after 4 trials. The
    /// decisions use `d` itself; this is the interval a user reads.
    pub(super) fn paired_score(&self, c: CandidateId, base: CandidateId, d: &Estimate) -> Estimate {
        let seen: usize = self.racers[c]
            .as_ref()
            .map_or(0, |r| r.sample.iter().map(Vec::len).sum());
        let d_se = d.se.max(unseen_difference_se(seen, self.core.n_tasks));
        let base = self.core.estimates[base];
        let se = (base.se * base.se + d_se * d_se).sqrt();
        Estimate::normal(base.value + d.value, se, 0.0, 1.0)
    }

    /// Rasch-GREG re-estimation of every non-Phase-0 candidate with everything observed.
    pub(super) fn reestimate(&mut self) {
        let n_c = self.core.obs.len();
        let fit = RaschFit::fit(&self.core.obs_list(), n_c, self.core.n_tasks);
        let gw = 1.0 / self.core.strata.len() as f64;
        for c in 0..n_c {
            if self.core.phase0.contains(&c) {
                continue;
            }
            if self.core.fully_observed(c) {
                self.core.set_exact(c);
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
                    let population: Vec<(f64, f64)> = m
                        .iter()
                        .enumerate()
                        .map(|(i, &t)| (fit.predict(c, t), r.pi[g][i]))
                        .collect();
                    let units: Vec<Unit> = r.sample[g]
                        .iter()
                        .map(|&i| Unit {
                            y: self.core.y(c, m[i]),
                            pi: r.pi[g][i],
                            anchor: population[i].0,
                        })
                        .collect();
                    (greg_poisson(&units, &population), gw)
                })
                .collect();
            self.core.estimates[c] = combine_strata(&parts);
            let mut design: Vec<(usize, f64)> = Vec::new();
            for (g, m) in self.core.strata.members.iter().enumerate() {
                design.extend(r.sample[g].iter().map(|&i| (m[i], r.pi[g][i])));
            }
            design.sort_by_key(|&(t, _)| t);
            self.core.design[c] = design;
        }
    }

    pub(super) fn incumbent(&self) -> CandidateId {
        argmax(&self.core.estimates)
    }

    /// The best candidate whose score is known exactly (a Phase-0 seed or a fully observed
    /// candidate): new candidates are paired with it, so their batches cost only their own
    /// trials. Pairing with a sampled incumbent instead would buy the incumbent's outcome on
    /// every task of every batch, doubling each candidate's cost.
    pub(super) fn anchor(&self) -> Option<CandidateId> {
        (0..self.core.obs.len())
            .filter(|&c| self.core.phase0.contains(&c) || self.core.fully_observed(c))
            .max_by(|&a, &b| {
                self.core.estimates[a]
                    .value
                    .total_cmp(&self.core.estimates[b].value)
                    .then(b.cmp(&a))
            })
    }

    /// The budget units `cells` cost. Without costs, [`UNIT`] per cell: the budget is the
    /// number of evaluations a fixed `rho` spends. With costs, a cell of task `t` costs
    /// `UNIT c_t / c_draw`, where `c_t` is the task's relative cost and `c_draw` the expected
    /// relative cost of one evaluation drawn for information per unit of cost
    /// (`pi_t ∝ w_t / sqrt(c_t)`: `c_draw = sum w sqrt(c) / sum w / sqrt(c)`). The budget is
    /// then the dollars that `rho`'s evaluations cost when drawn that way, and a task twice
    /// as expensive uses twice as much of it.
    pub(super) fn charge(&self, cells: &[(CandidateId, usize)]) -> usize {
        let Some(rc) = self.core.relative_costs() else {
            return cells.len() * UNIT;
        };
        let w = coevolve_weights(&self.core.stats, self.core.params);
        let num: f64 = w.iter().zip(&rc).map(|(w, c)| w * c.sqrt()).sum();
        let den: f64 = w.iter().zip(&rc).map(|(w, c)| w / c.sqrt()).sum();
        let draw = if den > 0.0 { num / den } else { 1.0 };
        cells
            .iter()
            .map(|&(_, t)| ((UNIT as f64) * rc[t] / draw).round().max(1.0) as usize)
            .sum()
    }
}

impl Strategy for Race {
    core_accessors!();

    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
        for &c in seeds {
            while self.racers.len() <= c {
                self.racers.push(None);
            }
        }
    }

    fn iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        self.admit(candidates);
        if self.verifying {
            self.screen_iteration(oracle, candidates);
        } else {
            self.race_iteration(oracle, candidates);
        }
    }

    fn finish(&mut self, oracle: &mut dyn Oracle) -> Outcome {
        if !self.verifying {
            return self.core.outcome();
        }
        self.verify(oracle)
    }
}

impl Race {
    /// Gives each new candidate its racing state (a nested Poisson design per stratum,
    /// drawn for information per unit of cost) and the prior as its estimate.
    pub(super) fn admit(&mut self, candidates: &[CandidateId]) {
        let w = self
            .core
            .cost_weighted(&coevolve_weights(&self.core.stats, self.core.params));
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
        let prior = self.core.prior_estimate();
        for &c in candidates {
            self.core.estimates[c] = prior;
        }
    }

    /// `race`'s iteration: paired racing against the incumbent, batch by batch.
    fn race_iteration(&mut self, oracle: &mut dyn Oracle, candidates: &[CandidateId]) {
        let inc = self.incumbent();
        let later = self.core.expected.saturating_sub(self.seen);
        let first_batch: usize = self.batch().iter().map(|b| b.ceil() as usize).sum();
        let mut active: Vec<CandidateId> = candidates.to_vec();
        let mut level = 1.0;
        while !active.is_empty() && level <= self.max_levels {
            // One batch request for every active candidate at this level (parallel live).
            let mut cells = Vec::new();
            let mut listed = HashSet::new();
            let mut raised = Vec::new();
            for &c in &active {
                let new: Vec<(CandidateId, usize)> = self
                    .cells_for(c, level, Some(inc))
                    .into_iter()
                    .filter(|x| !listed.contains(x))
                    .collect();
                // Deeper levels keep every later candidate's first batch (paired with the
                // incumbent) in reserve.
                let reserve = if level > 1.0 {
                    later * (2 * first_batch + 1) * UNIT
                } else {
                    0
                };
                let allowed = self.budget.remaining().saturating_sub(reserve);
                let price = self.charge(&new);
                if price <= allowed && self.budget.try_spend(price) {
                    listed.extend(new.iter().copied());
                    cells.extend(new);
                    raised.push(c);
                }
            }
            self.core.observe(oracle, &cells);
            let mut next = Vec::new();
            for &c in &raised {
                self.set_level(c, level);
                let d = self.diff(c, inc);
                self.core.estimates[c] = self.paired_score(c, inc, &d);
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
}

fn g_len(core: &Core) -> usize {
    core.strata.len()
}
