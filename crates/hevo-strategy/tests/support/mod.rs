//! What the replay tests share.

use hevo_strategy::replay::ReplayConfig;
use hevo_strategy::strategy::StrategyKind;

/// A replay of `strategies` at `rho` over `seeds` seeds from 0: 3 candidates per iteration,
/// the val/test split, 2 threads.
pub fn cfg(strategies: Vec<StrategyKind>, rho: f64, seeds: u64) -> ReplayConfig {
    ReplayConfig {
        strategies,
        rho,
        per_iter: 3,
        seeds,
        first_seed: 0,
        split: true,
        threads: 2,
    }
}
