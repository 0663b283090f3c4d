//! `full`: every candidate on every task.

use hevo_stats::estimate::Estimate;

use super::{CandidateId, Core, Oracle, Outcome, Strategy};

/// `full`: every candidate on every task, exact scores.
pub(crate) struct Full {
    pub(super) core: Core,
    pub(super) name: String,
}

impl Strategy for Full {
    fn design(&self, c: CandidateId) -> &[(usize, f64)] {
        self.core.design.get(c).map_or(&[], Vec::as_slice)
    }

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
