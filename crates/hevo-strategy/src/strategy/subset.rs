//! `fixed` (Naive) and `resample` (Random-Resample).

use super::{CandidateId, Core, Oracle, Outcome, Strategy};

/// `fixed` (Naive) and `resample` (Random-Resample): uniform subsets, raw subset mean.
pub(crate) struct Subset {
    pub(super) core: Core,
    pub(super) name: String,
    pub(super) fixed: Option<Vec<usize>>,
    pub(super) fresh_each_iteration: bool,
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

    /// Scores `c` on the subset `s`: its raw subset mean with a Wilson interval, or, when
    /// `s` is every task (rho 1: nothing is sampled), its exact full-set score, as `full`
    /// scores it. A Wilson interval there would claim sampling error where there is none.
    fn score(&mut self, c: CandidateId, s: &[usize]) {
        if s.len() == self.core.n_tasks {
            self.core.set_exact(c);
        } else {
            self.core.set_raw(c, s);
        }
    }
}

impl Strategy for Subset {
    core_accessors!();

    fn phase0(&mut self, oracle: &mut dyn Oracle, seeds: &[CandidateId]) {
        self.core.phase0_full(oracle, seeds);
        // Phase-0 harnesses are scored the same way as the others (SPEC section 5).
        let s = self.subset();
        for &c in seeds {
            self.score(c, &s);
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
            self.score(c, &s);
        }
    }
    fn finish(&mut self, _oracle: &mut dyn Oracle) -> Outcome {
        self.core.outcome()
    }
}
