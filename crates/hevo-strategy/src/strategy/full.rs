//! `full`: every candidate on every task.

use super::{CandidateId, Core, Oracle, Outcome, Strategy};

/// `full`: every candidate on every task, exact scores.
pub(crate) struct Full {
    pub(super) core: Core,
    pub(super) name: String,
}

impl Strategy for Full {
    core_accessors!();

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
