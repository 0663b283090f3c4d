//! Racing rules (SPEC.md section 4): evaluate a candidate in batches, paired with the
//! incumbent on the same tasks; stop a clearly worse candidate early, give a close call more
//! tasks, and never spend more than one global evaluation budget.
//!
//! This module holds the pure parts: the sequential decision on a paired difference
//! estimate ([`RaceRule::decide`]) and the budget ledger ([`Budget`]). The engine's `race`
//! strategy drives them with real evaluations.

use crate::estimate::Estimate;

/// What to do with a racing candidate after a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaceDecision {
    /// Clearly worse than the incumbent: stop evaluating it.
    Drop,
    /// Clearly better than the incumbent: stop, it becomes the incumbent.
    Promote,
    /// Too close to call: evaluate another batch if the budget allows.
    Continue,
}

/// The sequential rule on the estimated difference `D = S(candidate) - S(incumbent)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RaceRule {
    /// Drop when `D + z_drop * se < 0` (the whole upper band is below zero).
    pub z_drop: f64,
    /// Promote when `D - z_promote * se > 0`.
    pub z_promote: f64,
}

impl Default for RaceRule {
    /// `z_drop = 1.0` (drop early: a wrong drop of a truly better candidate only loses one
    /// candidate, while budget saved goes to close calls), `z_promote = 2.0`.
    fn default() -> Self {
        RaceRule {
            z_drop: 1.0,
            z_promote: 2.0,
        }
    }
}

impl RaceRule {
    /// The decision for a difference estimate.
    ///
    /// # Formula
    ///
    /// `Drop` if `D + z_drop se < 0`; `Promote` if `D - z_promote se > 0`; else `Continue`.
    /// A non-finite `se` always continues.
    pub fn decide(&self, diff: &Estimate) -> RaceDecision {
        if !diff.se.is_finite() || !diff.value.is_finite() {
            return RaceDecision::Continue;
        }
        if diff.value + self.z_drop * diff.se < 0.0 {
            RaceDecision::Drop
        } else if diff.value - self.z_promote * diff.se > 0.0 {
            RaceDecision::Promote
        } else {
            RaceDecision::Continue
        }
    }
}

/// One global evaluation budget shared by all racing candidates.
///
/// `total` is what a fixed `rho` would spend (`sum over candidates of m`), so racing never
/// costs more than the paper's design. [`Budget::try_spend`] is all-or-nothing per request;
/// [`Budget::spend`] buys past the total what must be bought regardless (`default`'s
/// screens and verifications).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    total: usize,
    spent: usize,
}

impl Budget {
    /// A budget of `total` evaluations.
    pub fn new(total: usize) -> Self {
        Budget { total, spent: 0 }
    }

    /// Evaluations still available.
    pub fn remaining(&self) -> usize {
        self.total.saturating_sub(self.spent)
    }

    /// Evaluations spent so far.
    pub fn spent(&self) -> usize {
        self.spent
    }

    /// The whole budget.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Spends `n` evaluations if they fit (returns `false` and spends nothing otherwise).
    pub fn try_spend(&mut self, n: usize) -> bool {
        if n <= self.remaining() {
            self.spent += n;
            true
        } else {
            false
        }
    }

    /// Spends `n` evaluations even past the total (what must be bought regardless: the
    /// budget then has nothing left, and [`Budget::spent`] says how far it went over).
    pub fn spend(&mut self, n: usize) {
        self.spent += n;
    }

    /// How much one candidate may spend now, keeping `reserve_each` evaluations for each of
    /// the `others_left` candidates still to come.
    ///
    /// # Formula
    ///
    /// `allowance = remaining - others_left * reserve_each` (0 if negative), capped at
    /// `cap`. With this, every later candidate still gets its first batch.
    pub fn allowance(&self, others_left: usize, reserve_each: usize, cap: usize) -> usize {
        self.remaining()
            .saturating_sub(others_left.saturating_mul(reserve_each))
            .min(cap)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let r = RaceRule::default();
        assert_eq!(
            r.decide(&Estimate::normal(-0.2, 0.05, -1.0, 1.0)),
            RaceDecision::Drop
        );
        assert_eq!(
            r.decide(&Estimate::normal(0.2, 0.05, -1.0, 1.0)),
            RaceDecision::Promote
        );
        assert_eq!(
            r.decide(&Estimate::normal(0.01, 0.05, -1.0, 1.0)),
            RaceDecision::Continue
        );
    }

    #[test]
    fn budget_never_overspends() {
        let mut b = Budget::new(10);
        assert!(b.try_spend(6));
        assert!(!b.try_spend(5));
        assert_eq!(b.remaining(), 4);
        assert_eq!(b.allowance(1, 3, 100), 1);
        assert_eq!(b.allowance(5, 3, 100), 0);
    }
}
