//! `default`'s end of run: verify the finalists on every task, then pick on exact scores.
//!
//! Racing (half of the budget, [`Race::iteration`]) leaves every candidate with a paired,
//! cheap estimate; most are dropped early. The other half verifies: the candidates that can
//! still beat the best exactly known score are evaluated on the rest of the val set, best
//! estimate first, while the budget lasts (when a full evaluation no longer fits, the next
//! finalist gets one more racing batch instead). The pick is the best exactly known
//! candidate, as in GEPA's screen, unless a sampled candidate's selection-adjusted interval
//! lies entirely above it. Exact scores are what wins on near-identical candidates, where
//! estimates from a sample rank noise; cheap early drops are what wins on separable ones.

use hevo_stats::estimate::Estimate;
use hevo_stats::selection::pick_interval;

use super::race::Race;
use super::{argmax, CandidateId, Oracle, Outcome};

impl Race {
    /// The finalists still able to beat the best exactly known score, best estimate first.
    fn finalists(&self) -> Vec<CandidateId> {
        let exact_best = self
            .anchor()
            .map_or(f64::NEG_INFINITY, |a| self.core.estimates[a].value);
        let mut order: Vec<CandidateId> = (0..self.core.obs.len())
            .filter(|&c| self.racers.get(c).is_some_and(|r| r.is_some()))
            .filter(|&c| !self.core.fully_observed(c))
            .filter(|&c| self.core.estimates[c].ci_high >= exact_best)
            .collect();
        order.sort_by(|&a, &b| {
            self.core.estimates[b]
                .value
                .total_cmp(&self.core.estimates[a].value)
                .then(a.cmp(&b))
        });
        order
    }

    /// Spends the rest of the budget on the finalists and picks (see the module docs).
    pub(super) fn verify(&mut self, oracle: &mut dyn Oracle) -> Outcome {
        self.reestimate();
        while self.budget.remaining() > 0 {
            let order = self.finalists();
            let Some(&c) = order.first() else { break };
            let all = self.core.all_cells(&[c]);
            let rest: Vec<(CandidateId, usize)> = all
                .into_iter()
                .filter(|&(c, t)| self.core.obs[c][t].is_none())
                .collect();
            if self.budget.try_spend(rest.len()) {
                self.core.observe(oracle, &rest);
            } else {
                // A full evaluation does not fit: one more batch for the best finalist that
                // can afford one.
                let mut spent = false;
                for &c in &order {
                    let level = self.racers[c].as_ref().map_or(1.0, |r| r.level) + 1.0;
                    let cells = self.cells_for(c, level, None);
                    if !cells.is_empty() && self.budget.try_spend(cells.len()) {
                        self.core.observe(oracle, &cells);
                        self.set_level(c, level);
                        spent = true;
                        break;
                    }
                }
                if !spent {
                    break;
                }
            }
            self.reestimate();
        }
        self.reestimate();
        let pick = self.pick();
        Outcome::new(self.core.estimates.clone(), pick)
    }

    /// The best exactly known candidate, unless a sampled one is surely better.
    fn pick(&self) -> CandidateId {
        let est: &[Estimate] = &self.core.estimates;
        let Some(exact) = self.anchor() else {
            return argmax(est);
        };
        let best = argmax(est);
        if best != exact && pick_interval(est, best).ci_low > est[exact].value {
            best
        } else {
            exact
        }
    }
}
