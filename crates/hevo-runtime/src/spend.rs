//! [`Spend`]: what model work cost, the one type for it from a trial's row to a run's total.

use serde::{Deserialize, Serialize};

/// Model calls, tokens and dollars of some work (a trial, a candidate, a run, a proposer).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spend {
    /// Model calls answered (by a backend or hevo's response cache).
    pub calls: u64,
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Cached input tokens (served from a provider's prompt cache).
    pub cached_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Dollars (response-cache hits at the price they would have had).
    pub cost_usd: f64,
}

impl Spend {
    /// Adds `other` to this spend.
    pub fn add(&mut self, other: &Spend) {
        self.calls += other.calls;
        self.input_tokens += other.input_tokens;
        self.cached_tokens += other.cached_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }

    /// Every token counted: uncached and cached input plus output.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.cached_tokens + self.output_tokens
    }

    /// The spend of a gateway key's running totals.
    pub fn from_usage(u: &hevo_llm::TrialUsage) -> Spend {
        Spend {
            calls: u.calls,
            input_tokens: u.input_tokens,
            cached_tokens: u.cached_tokens,
            output_tokens: u.output_tokens,
            cost_usd: u.cost_usd,
        }
    }
}

/// The one way a spend is printed: `3 model calls, 120 tokens (80 input, 20 cached, 20
/// output), $0.0012` (`hevo status`'s spend line, the core-set line of `hevo run` and
/// `hevo status`).
impl std::fmt::Display for Spend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} model calls, {} tokens ({} input, {} cached, {} output), ${:.4}",
            self.calls,
            self.total_tokens(),
            self.input_tokens,
            self.cached_tokens,
            self.output_tokens,
            self.cost_usd
        )
    }
}

impl std::iter::Sum for Spend {
    fn sum<I: Iterator<Item = Spend>>(iter: I) -> Spend {
        let mut total = Spend::default();
        for s in iter {
            total.add(&s);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_add_every_field() {
        let a = Spend {
            calls: 1,
            input_tokens: 10,
            cached_tokens: 5,
            output_tokens: 2,
            cost_usd: 0.5,
        };
        let total: Spend = [a, a].into_iter().sum();
        assert_eq!(total.calls, 2);
        assert_eq!(total.total_tokens(), 34);
        assert!((total.cost_usd - 1.0).abs() < 1e-12);
        assert_eq!(
            total.to_string(),
            "2 model calls, 34 tokens (20 input, 10 cached, 4 output), $1.0000"
        );
    }
}
