//! Replay's honesty columns by seeded simulation: the coverage of `default`'s intervals, the
//! per-attempt matrix generator and the synthetic cost model.

use std::io::Write;

use hevo_stats::synth::SynthParams;
use hevo_strategy::replay::{run, Matrix, ReplayConfig, COVERAGE_TARGET};
use hevo_strategy::strategy::StrategyKind;

fn cfg(strategies: Vec<StrategyKind>, rho: f64, seeds: u64) -> ReplayConfig {
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
    // Heavy-tailed costs: default buys information per dollar, paper coevolve does not.
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
    assert!(
        de.cost_usd.unwrap() < 0.85 * co.cost_usd.unwrap(),
        "default ${:?} vs coevolve ${:?}",
        de.cost_usd,
        co.cost_usd
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
