//! The strategy's history in a run: which candidates phase 0 and each finished iteration
//! gave it, so that after an evaluation budget stops a call half-way the strategy can be
//! rebuilt on what is known, as it stood after its last finished call.

use hevo_strategy::strategy::{self, argmax, Outcome, Strategy, StrategyConfig, StrategyKind};

use super::oracle::{CachedOracle, OracleState};

/// The calls a strategy finished: phase 0's seeds, then each iteration's new candidates.
pub(super) struct History {
    kind: StrategyKind,
    config: StrategyConfig,
    batches: Vec<Vec<usize>>,
}

impl History {
    /// An empty history for a strategy built as `kind` with `config`.
    pub(super) fn new(kind: StrategyKind, config: StrategyConfig) -> Self {
        History {
            kind,
            config,
            batches: Vec::new(),
        }
    }

    /// A fresh strategy, as at the run's start.
    pub(super) fn build(&self) -> Box<dyn Strategy> {
        strategy::build(self.kind, self.config.clone())
    }

    /// Records a finished call (phase 0 first) over `ids`.
    pub(super) fn finished(&mut self, ids: &[usize]) {
        self.batches.push(ids.to_vec());
    }

    /// The strategy rebuilt on the outcomes `state` already holds: phase 0 and every
    /// finished iteration replayed without a trial. Strategies are deterministic in their
    /// seed and outcomes, so this is the state after the last finished call, free of what a
    /// call stopped half-way did with its unanswered (NaN) requests.
    fn rebuild(&self, state: &OracleState, val_ids: &[String]) -> Box<dyn Strategy> {
        let mut strat = self.build();
        let mut oracle = CachedOracle::new(state, val_ids);
        for (i, ids) in self.batches.iter().enumerate() {
            if i == 0 {
                strat.phase0(&mut oracle, ids);
            } else {
                strat.iteration(&mut oracle, ids);
            }
        }
        debug_assert_eq!(
            oracle.missing, 0,
            "a finished call asked for an unknown cell"
        );
        strat
    }

    /// The outcome when the evaluation budget is reached: the strategy's own finish when it
    /// needs no new trial, else its running estimates after the last finished call, the
    /// best of them picked (its finish would have bought trials the budget does not allow).
    /// Returns the strategy the outcome came from, for its name and designs.
    pub(super) fn budget_outcome(
        &self,
        state: &OracleState,
        val_ids: &[String],
    ) -> (Box<dyn Strategy>, Outcome) {
        let mut strat = self.rebuild(state, val_ids);
        let mut oracle = CachedOracle::new(state, val_ids);
        let outcome = strat.finish(&mut oracle);
        if oracle.missing == 0 {
            return (strat, outcome);
        }
        let strat = self.rebuild(state, val_ids);
        let estimates = strat.estimates().to_vec();
        let outcome = Outcome::new(estimates.clone(), argmax(&estimates));
        (strat, outcome)
    }
}
