//! `default`'s end of run: verify the finalists on every task, then pick on exact scores.
//!
//! Racing (half of the budget, [`Race::iteration`]) leaves every candidate with a paired,
//! cheap estimate; most are dropped early. When the rest affords at least [`VERIFY_MIN`]
//! full evaluations, it verifies: the candidates that can
//! still beat the best exactly known score are evaluated on the rest of the val set, best
//! estimate first, while the budget lasts (when a full evaluation no longer fits, the next
//! finalist gets one more racing batch instead). The pick is the best exactly known
//! candidate, as in GEPA's screen, unless a sampled candidate's selection-adjusted interval
//! lies entirely above it. Exact scores are what wins on near-identical candidates, where
//! estimates from a sample rank noise; cheap early drops are what wins on separable ones.
//! With less budget (a small rho or few candidates) one full evaluation would eat most of
//! it, so the rest only plays off and the pick is the best estimate.

use hevo_stats::estimate::Estimate;

use super::race::Race;
use super::{argmax, CandidateId, Oracle, Outcome};

/// How many finalists get one more batch per round when a full evaluation does not fit.
const PLAYOFF_K: usize = 3;

/// Verify only if the rest of the budget affords this many full evaluations (as many as the
/// playoff extends per round); otherwise play off and pick the best estimate.
const VERIFY_MIN: usize = PLAYOFF_K;

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
        // Verification pays only when the budget can settle several finalists exactly; with
        // less (a small rho or few candidates) the playoff alone narrows the field cheaper.
        let full = self.charge(&self.core.all_cells(&[0]));
        let verifying = self.budget.remaining() >= VERIFY_MIN * full.max(1);
        while self.budget.remaining() > 0 {
            let order = self.finalists();
            let Some(&c) = order.first() else { break };
            let all = self.core.all_cells(&[c]);
            let rest: Vec<(CandidateId, usize)> = all
                .into_iter()
                .filter(|&(c, t)| self.core.obs[c][t].is_none())
                .collect();
            if verifying && self.budget.try_spend(self.charge(&rest)) {
                self.core.observe(oracle, &rest);
            } else {
                // A full evaluation does not fit: one more batch for each of the top
                // finalists (the playoff of racing).
                let mut spent = false;
                for &c in order.iter().take(PLAYOFF_K) {
                    let level = self.racers[c].as_ref().map_or(1.0, |r| r.level) + 1.0;
                    let cells = self.cells_for(c, level, None);
                    // A level that adds no task is still a step: the next one may.
                    if self.budget.try_spend(self.charge(&cells)) {
                        self.core.observe(oracle, &cells);
                        self.set_level(c, level);
                        spent = true;
                    }
                }
                if !spent {
                    break;
                }
            }
            self.reestimate();
        }
        self.reestimate();
        let pick = if verifying {
            self.pick()
        } else {
            argmax(&self.core.estimates)
        };
        Outcome::new(self.core.estimates.clone(), pick)
    }

    /// The best exactly known candidate, unless a sampled one is clearly better: its
    /// estimate exceeds the best exact score by more than `Z_PICK` standard errors.
    fn pick(&self) -> CandidateId {
        let est: &[Estimate] = &self.core.estimates;
        let Some(exact) = self.anchor() else {
            return argmax(est);
        };
        let bar = est[exact].value;
        let mut pick = exact;
        for (c, e) in est.iter().enumerate() {
            if e.se > 0.0 && e.value - Z_PICK * e.se > bar && e.value > est[pick].value {
                pick = c;
            }
        }
        pick
    }
}

/// How many standard errors a sampled candidate must clear the best exact score by to be
/// picked over it. Chosen once from {1, 1.5, 2} by the mean pick rank over 18 settings
/// (4 LiveCodeBench matrices, synthetic sd 0.1/0.2/1.0, two per-attempt matrices, at rho
/// 0.2 and 0.07; 20 seeds): 1 lets the winner's curse through on near-identical candidates
/// (rank 10.5 on synthetic sd 0.1 at rho 0.07), 2 keeps too many exact-but-worse picks on
/// real matrices; docs/replay.md.
const Z_PICK: f64 = 1.5;
