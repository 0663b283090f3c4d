//! `screen`: GEPA's minibatch screen.

use hevo_stats::estimate::Estimate;
use rand::seq::SliceRandom;

use super::{CandidateId, Core, Oracle, Outcome, Strategy};

/// `screen`: GEPA's minibatch screen against the incumbent.
pub(crate) struct Screen {
    pub(super) core: Core,
    pub(super) name: String,
    pub(super) minibatch: usize,
    pub(super) incumbent: Option<CandidateId>,
    pub(super) full: Vec<CandidateId>,
}

impl Strategy for Screen {
    core_accessors!();

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
                self.core.set_exact(c);
                self.full.push(c);
                if self.core.estimates[c].value > self.core.estimates[inc].value {
                    self.incumbent = Some(c);
                }
            } else {
                self.core.set_raw(c, &mb);
            }
        }
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        Outcome::new(
            self.core.estimates.clone(),
            best_of(&self.core.estimates, &self.full),
        )
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
