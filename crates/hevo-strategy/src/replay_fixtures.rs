//! Replay reports built by hand for the unit tests of what reads them (the frontier, the
//! matches): rows whose ranks and spends a test chooses.

use crate::replay::{ReplayReport, StrategyRow};

/// A strategy row of `name` with the given mean rank, evaluation share and dollar share
/// (every other column a fixed plausible value).
pub fn row(name: &str, rank: f64, evals: f64, cost: Option<f64>) -> StrategyRow {
    StrategyRow {
        name: name.into(),
        strategy: name.into(),
        estimator: None,
        rank,
        val: 0.5,
        test: 0.5,
        spearman: 0.0,
        evals_share: evals,
        cost_share: cost,
        top1: 0.0,
        rank_se: 0.1,
        pick_coverage: 1.0,
        field_coverage: 1.0,
        field_rmse: 0.0,
        pick_width: 0.1,
        cost_usd: cost.map(|c| c * 100.0),
        honest: true,
    }
}

/// A report at `rho` holding `rows`.
pub fn report(rho: f64, rows: Vec<StrategyRow>) -> ReplayReport {
    ReplayReport {
        candidates: 10,
        val_tasks: 20,
        test_tasks: 20,
        rho,
        per_iter: 3,
        seeds: 5,
        first_seed: 0,
        split: true,
        strategies: rows,
        oracle_test: 0.9,
        val_best_test: 0.8,
        caveat: String::new(),
    }
}
