//! Replay at the edges of its inputs: the last seeds a `u64` holds, costs too large to sum,
//! rho 1 (every val task seen), estimates equal to the truth and a matrix of many tasks.

mod support;

use hevo_stats::estimate::Estimator;
use hevo_stats::synth::SynthParams;
use hevo_strategy::matrix::MAX_TOTAL_COST;
use hevo_strategy::replay::{run, Matrix, ReplayConfig};
use hevo_strategy::strategy::{PiMethod, StrategyKind};

use support::cfg;

/// The matrix of `hevo replay --synth CxT` (ability spread 0.2, `--synth-seed 1`).
fn synth(candidates: usize, tasks: usize) -> Matrix {
    let params = SynthParams {
        ability_spread: 0.2,
        ..SynthParams::near_identical()
    };
    Matrix::synthetic(candidates, tasks, &params, 1)
}

/// `u64::MAX` is a seed: `first_seed` = `u64::MAX` with one seed, or three seeds ending
/// there, replay (before, both panicked: `first_seed + seeds` overflowed).
#[test]
fn the_last_seeds_of_a_u64_replay() {
    let m = synth(8, 30);
    for (first_seed, seeds) in [(u64::MAX, 1), (u64::MAX - 2, 3)] {
        let r = run(
            &m,
            &ReplayConfig {
                first_seed,
                ..cfg(vec![StrategyKind::Full, StrategyKind::Fixed], 0.2, seeds)
            },
        );
        assert_eq!((r.first_seed, r.seeds), (first_seed, seeds));
        assert!(r.strategies.iter().all(|s| s.rank >= 1.0), "{r:?}");
    }
}

/// At rho 1 `fixed` and `resample` evaluate every val task: their scores are exact, as
/// `full`'s, so the pick's interval is a point (before: a Wilson interval 0.69 wide on 20
/// tasks, though nothing was sampled) and they pick what `full` picks.
#[test]
fn a_subset_of_every_task_scores_exactly() {
    let m = synth(20, 40);
    let r = run(
        &m,
        &cfg(
            vec![
                StrategyKind::Full,
                StrategyKind::Fixed,
                StrategyKind::Resample,
            ],
            1.0,
            5,
        ),
    );
    let full = &r.strategies[0];
    for row in &r.strategies[1..] {
        assert_eq!(row.evals_share, 1.0, "{}", row.name);
        assert_eq!(row.pick_width, 0.0, "{}", row.name);
        assert_eq!(row.field_rmse, 0.0, "{}", row.name);
        assert_eq!((row.rank, row.val), (full.rank, full.val), "{}", row.name);
    }
}

/// Where every estimate equals the truth up to rounding (rho 1: `coevolve/residual`'s
/// estimates are the true scores within 1e-16), Spearman is 1, not the 0.98 it was when
/// float noise broke the ties of the true scores.
#[test]
fn estimates_equal_to_the_truth_correlate_1_with_it() {
    let m = synth(20, 40);
    let kinds: Vec<StrategyKind> = [Estimator::Hajek, Estimator::Residual]
        .map(|e| StrategyKind::Coevolve {
            estimator: Some(e),
            pi: PiMethod::MonteCarlo(4000),
        })
        .into_iter()
        .chain([
            StrategyKind::Full,
            StrategyKind::Fixed,
            StrategyKind::Resample,
        ])
        .collect();
    let r = run(&m, &cfg(kinds, 1.0, 5));
    for row in &r.strategies {
        assert!(row.field_rmse < 1e-12, "{}: {}", row.name, row.field_rmse);
        assert!(
            row.spearman > 1.0 - 1e-12,
            "{}: spearman {}",
            row.name,
            row.spearman
        );
    }
}

/// Costs whose total overflows (cells of 1.7e308) are refused as they are read, naming the
/// file that gave them: the matrix's own `cost_usd` column or the cost file.
#[test]
fn costs_too_large_to_sum_are_refused_naming_their_file() {
    let (mut matrix, mut costs) = (
        String::from("candidate,task,outcome,cost_usd\n"),
        String::from("candidate,task,cost_usd\n"),
    );
    for c in 0..4 {
        for t in 0..3 {
            matrix.push_str(&format!("c{c},t{t},{},1.7e308\n", (c + t) % 2));
            costs.push_str(&format!("c{c},t{t},1.7e308\n"));
        }
    }
    let e = Matrix::parse_csv(&matrix, "m.csv", None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("m.csv: ") && e.contains("1e100"), "{e}");
    let plain = matrix.replace(",1.7e308", "").replace(",cost_usd", "");
    let e = Matrix::parse_csv(&plain, "m.csv", Some((&costs, "c.csv")))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("c.csv: ") && e.contains("smaller unit"),
        "{e}"
    );
    // Dollars of a real size pass.
    let fine = matrix.replace(",1.7e308", ",0.25");
    assert!(Matrix::parse_csv(&fine, "m.csv", None).is_ok());
    // Synthetic costs whose multiplier overflows are named by `cost_problem`.
    let params = SynthParams {
        cost_log_sd: 1.0,
        candidate_cost_log_sd: 400.0,
        ..SynthParams::near_identical()
    };
    let p = Matrix::synthetic(20, 60, &params, 1).cost_problem();
    assert!(
        p.as_deref().is_some_and(|p| p.contains("costs inf")),
        "{p:?}"
    );
    assert_eq!(synth(20, 60).cost_problem(), None);
    assert!(MAX_TOTAL_COST.is_finite());
}

/// A seed whose dollars overflowed is not left out of the means: the cost columns show it
/// (not finite) instead of averaging the other seeds (before, they silently did).
#[test]
fn a_seed_whose_cost_overflowed_shows_in_the_mean() {
    let mut m = synth(8, 30);
    let mut cost = vec![vec![1.0; 30]; 8];
    cost[3][7] = f64::INFINITY;
    m.cost = Some(cost);
    let r = run(&m, &cfg(vec![StrategyKind::Full], 0.2, 6));
    let full = &r.strategies[0];
    assert!(!full.cost_usd.unwrap().is_finite(), "{full:?}");
    assert!(!full.cost_share.unwrap().is_finite(), "{full:?}");
}

/// A matrix of many tasks replays whole: each strategy's requests (a whole row of 200,000
/// tasks at once for Phase 0 and `full`) are deduplicated in one pass. Before, in time
/// quadratic in the row: this test ran for many minutes (no timing is asserted here; the
/// speed is recorded in bench/replay.md).
#[test]
fn a_replay_of_many_tasks_evaluates_each_cell_once() {
    let m = synth(3, 200_000);
    let kinds = vec![
        StrategyKind::Full,
        StrategyKind::Fixed,
        StrategyKind::Resample,
        StrategyKind::Screen { minibatch: 3 },
        StrategyKind::Race,
        StrategyKind::Default,
    ];
    let r = run(&m, &cfg(kinds, 0.2, 1));
    assert_eq!(r.val_tasks, 100_000);
    assert_eq!(r.strategies[0].evals_share, 1.0);
    // Phase 0 (2 of 3 candidates whole) and a fifth of the val tasks for the third.
    let fixed = (2.0 + 0.2) / 3.0;
    assert!((r.strategies[1].evals_share - fixed).abs() < 1e-9, "{r:?}");
    for row in &r.strategies {
        assert!(row.evals_share <= 1.0, "{}: {}", row.name, row.evals_share);
    }
}
