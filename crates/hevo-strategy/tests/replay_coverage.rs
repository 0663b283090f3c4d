//! Replay's honesty columns by seeded simulation: the coverage of `default`'s intervals, the
//! per-attempt matrix generator and the synthetic cost model.

mod support;

use std::io::Write;

use hevo_stats::synth::SynthParams;
use hevo_strategy::replay::{run, Matrix, COVERAGE_TARGET};
use hevo_strategy::strategy::StrategyKind;

use support::cfg;

#[test]
fn defaults_intervals_cover_on_near_identical_and_separable_candidates() {
    for (spread, seed) in [(0.1, 1u64), (1.0, 2)] {
        let params = SynthParams {
            ability_spread: spread,
            ..SynthParams::near_identical()
        };
        let m = Matrix::synthetic(30, 120, &params, seed);
        for rho in [0.2, 0.07] {
            let r = run(&m, &cfg(vec![StrategyKind::Default], rho, 40));
            let d = &r.strategies[0];
            // The field coverage averages 28 candidates x 40 seeds: its noise is about
            // 0.01, so the 93% target is checked as is.
            assert!(
                d.field_coverage >= COVERAGE_TARGET,
                "sd {spread} rho {rho}: field {}",
                d.field_coverage
            );
            // One pick per seed: 40 seeds give a binomial se of 0.035 at 95%, so 0.9.
            assert!(
                d.pick_coverage >= 0.9,
                "sd {spread} rho {rho}: pick {}",
                d.pick_coverage
            );
            assert!(d.pick_width >= 0.0);
        }
    }
}

#[test]
fn same_seed_same_numbers_and_costs_are_reported() {
    let params = SynthParams {
        cost_log_sd: 1.0,
        candidate_cost_log_sd: 0.5,
        cost_difficulty_corr: 0.5,
        ..SynthParams::near_identical()
    };
    let m = Matrix::synthetic(20, 60, &params, 3);
    assert!(m.cost.is_some());
    let kinds = vec![StrategyKind::Screen { minibatch: 3 }, StrategyKind::Default];
    let a = run(&m, &cfg(kinds.clone(), 0.2, 6));
    let b = run(&m, &cfg(kinds, 0.2, 6));
    assert_eq!(a, b);
    for row in &a.strategies {
        let share = row.cost_share.expect("cost share with costs");
        assert!(share > 0.0 && share <= 1.0, "{share}");
        assert!(row.cost_usd.expect("dollars with costs") > 0.0);
    }
    // Heavy-tailed costs: default draws its samples for information per dollar (cheap tasks
    // more often), paper coevolve for information per task (hard tasks, which cost more), so
    // an evaluation costs default less than an average cell and less than it costs coevolve.
    // (Default's verifications pay whole rows, so its total can exceed coevolve's.)
    let m = Matrix::synthetic(40, 120, &params, 5);
    let kinds = vec![
        StrategyKind::Coevolve {
            estimator: Some(hevo_stats::estimate::Estimator::Hajek),
            pi: hevo_strategy::strategy::PiMethod::MonteCarlo(500),
        },
        StrategyKind::Default,
    ];
    let r = run(&m, &cfg(kinds, 0.2, 10));
    let (co, de) = (&r.strategies[0], &r.strategies[1]);
    let price = |r: &hevo_strategy::replay::StrategyRow| r.cost_share.unwrap() / r.evals_share;
    eprintln!(
        "price per evaluation: default {:.3}, coevolve {:.3}",
        price(de),
        price(co)
    );
    assert!(
        price(de) < 0.95 && price(de) < 0.9 * price(co),
        "price per evaluation relative to an average cell: default {:.3}, coevolve {:.3}",
        price(de),
        price(co)
    );
    // Without a cost model there are no cost columns.
    let plain = Matrix::synthetic(20, 60, &SynthParams::near_identical(), 3);
    assert!(plain.cost.is_none());
}

#[test]
fn attempts_are_bernoulli_draws_of_pass_at_1_and_differ_only_by_noise() {
    let dir = std::env::temp_dir().join(format!("hevo-attempts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("m.extra.csv");
    let mut f = std::fs::File::create(&p).unwrap();
    writeln!(f, "candidate,task,pass_at_1,difficulty").unwrap();
    for t in 0..400 {
        writeln!(f, "a,t{t},0.25,easy").unwrap();
        writeln!(f, "b,t{t},{},hard", if t % 2 == 0 { 1.0 } else { 0.0 }).unwrap();
    }
    drop(f);
    let m = Matrix::from_attempts(&p, 3, 9).unwrap();
    assert_eq!(m.candidates, ["a#0", "a#1", "a#2", "b#0", "b#1", "b#2"]);
    assert_eq!(m.tasks.len(), 400);
    for a in 0..3 {
        let mean = m.outcomes[a].iter().sum::<f64>() / 400.0;
        // Bernoulli(0.25) over 400 tasks: se 0.022, checked at 4 se.
        assert!((mean - 0.25).abs() < 0.09, "{mean}");
        // pass@1 of 0 or 1 is deterministic.
        for t in 0..400 {
            assert_eq!(m.outcomes[3 + a][t], if t % 2 == 0 { 1.0 } else { 0.0 });
        }
    }
    assert_ne!(m.outcomes[0], m.outcomes[1]);
    assert_eq!(m, Matrix::from_attempts(&p, 3, 9).unwrap());
    // A CSV without pass_at_1 is refused with its file and line.
    let q = dir.join("bad.csv");
    std::fs::write(&q, "candidate,task,outcome\na,t0,1\n").unwrap();
    let e = Matrix::from_attempts(&q, 2, 1).unwrap_err().to_string();
    assert!(e.contains("bad.csv:1") && e.contains("pass_at_1"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--sample`: whole groups (a model's attempts) and a seeded task sample, costs following
/// their cells; `--synth-cost` on a logged matrix: heavy-tailed, harder tasks dearer.
#[test]
fn samples_keep_whole_groups_and_synthetic_costs_follow_difficulty() {
    // 10 models x 3 attempts; the outcome encodes (model, attempt, task) so cells can be
    // traced through the sample.
    let outcomes: Vec<Vec<f64>> = (0..30)
        .map(|r| (0..50).map(|t| (r * 100 + t) as f64).collect())
        .collect();
    let mut m = Matrix::from_outcomes(outcomes);
    m.cost = Some(m.outcomes.clone());
    let s = m.sample(4, 3, 20, 7);
    assert_eq!((s.candidates.len(), s.tasks.len()), (12, 20));
    for g in 0..4 {
        let first = s.outcomes[3 * g][0] as usize / 100;
        assert_eq!(first % 3, 0, "a group starts at its first attempt");
        for a in 0..3 {
            assert_eq!(s.outcomes[3 * g + a][0] as usize / 100, first + a);
        }
    }
    for (r, row) in s.outcomes.iter().enumerate() {
        for (j, &y) in row.iter().enumerate() {
            let (src, t) = (y as usize / 100, y as usize % 100);
            assert_eq!(s.candidates[r], m.candidates[src]);
            assert_eq!(s.tasks[j], m.tasks[t]);
            assert_eq!(
                s.cost.as_ref().unwrap()[r][j],
                y,
                "the cost follows its cell"
            );
        }
    }
    assert_eq!(s, m.sample(4, 3, 20, 7), "seeded");
    assert_ne!(s, m.sample(4, 3, 20, 8));
    // Asking for more than there is keeps everything.
    assert_eq!(m.sample(99, 3, 999, 1).outcomes.len(), 30);

    // Synthetic costs on a real-shaped matrix: task t is passed by the first 100 - t of
    // 100 candidates, so later tasks are harder.
    let outcomes: Vec<Vec<f64>> = (0..100)
        .map(|c| (0..400).map(|t| ((c + t / 4) < 100) as u8 as f64).collect())
        .collect();
    let base = Matrix::from_outcomes(outcomes);
    let model = SynthParams::default().with_costs(1.0);
    let m = base.with_synthetic_costs(&model, 3);
    assert_eq!(m.outcomes, base.outcomes, "costs only");
    assert_eq!(m, base.with_synthetic_costs(&model, 3), "seeded");
    let cost = m.cost.as_ref().expect("costs");
    let task = |t: usize| cost.iter().map(|r| r[t]).sum::<f64>() / 100.0;
    let logs: Vec<f64> = (0..400).map(|t| task(t).ln()).collect();
    let mean = logs.iter().sum::<f64>() / 400.0;
    let sd = (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / 399.0).sqrt();
    // Per-task log cost: sd 1.0 plus the candidates' multipliers averaged out (400 tasks:
    // the sample sd is within 0.1 of it at about 3 se).
    assert!((sd - 1.0).abs() < 0.1, "log-sd {sd}");
    let easy = (0..200).map(task).sum::<f64>();
    let hard = (200..400).map(task).sum::<f64>();
    assert!(hard > 1.5 * easy, "hard tasks cost more: {hard} vs {easy}");

    // The knobs of --synth-cost-corr and --synth-cost-fail: a negative correlation makes
    // the easy tasks the dear ones; a failure cost of 3 triples exactly the failed cells.
    let anti = base.with_synthetic_costs(
        &SynthParams {
            cost_difficulty_corr: -0.5,
            ..model.clone()
        },
        3,
    );
    let anti = anti.cost.as_ref().expect("costs");
    let task = |t: usize| anti.iter().map(|r| r[t]).sum::<f64>();
    let (easy, hard) = (
        (0..200).map(task).sum::<f64>(),
        (200..400).map(task).sum::<f64>(),
    );
    assert!(easy > 1.5 * hard, "easy tasks cost more: {easy} vs {hard}");
    let fail = base.with_synthetic_costs(
        &SynthParams {
            failure_cost: 3.0,
            ..model
        },
        3,
    );
    let fail = fail.cost.as_ref().expect("costs");
    for (c, row) in base.outcomes.iter().enumerate() {
        for (t, &y) in row.iter().enumerate() {
            let want = if y == 1.0 { 1.0 } else { 3.0 };
            assert!(
                (fail[c][t] / cost[c][t] - want).abs() < 1e-9,
                "cell ({c}, {t})"
            );
        }
    }
}

/// `field_rmse` by simulation. `full` knows every score exactly: 0. `fixed`'s estimate is the
/// mean over one uniform subset of `m` of the `N` tasks (no split here), whose mean squared
/// error over subsets is exactly `S_c^2 (N - m) / (N m)` for candidate `c` (`S_c^2` its
/// outcome variance over the tasks, `N - 1` denominator). Every candidate is equally likely
/// to be outside Phase 0, so over 400 seeds the column is the square root of the mean of
/// that over the candidates, within 10% (its seed-to-seed noise is about 3%).
#[test]
fn field_rmse_is_how_far_the_printed_estimates_land() {
    let params = SynthParams {
        ability_spread: 1.0,
        ..SynthParams::near_identical()
    };
    let m = Matrix::synthetic(12, 80, &params, 4);
    let mut c = cfg(vec![StrategyKind::Full, StrategyKind::Fixed], 0.2, 400);
    c.split = false;
    let r = run(&m, &c);
    assert_eq!(r.strategies[0].field_rmse, 0.0);
    let (n, k) = (80.0, 16.0);
    let mse = m
        .outcomes
        .iter()
        .map(|y| {
            let p = y.iter().sum::<f64>() / n;
            let s2 = y.iter().map(|x| (x - p) * (x - p)).sum::<f64>() / (n - 1.0);
            s2 * (n - k) / (n * k)
        })
        .sum::<f64>()
        / m.outcomes.len() as f64;
    let got = r.strategies[1].field_rmse;
    let want = mse.sqrt();
    assert!(
        (got / want - 1.0).abs() < 0.1,
        "fixed's field rmse {got:.4}, expected {want:.4}"
    );
}
