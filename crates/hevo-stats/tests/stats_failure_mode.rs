//! The paper's Terminal-Bench failure mode (appendix A): a candidate with a low raw subset
//! score is estimated far too high by Hájek because a rarely sampled, almost-always-solved
//! task has a tiny inclusion probability and dominates the ratio. The residual form and the
//! automatic choice do not have it.

#![allow(clippy::needless_range_loop)]

use hevo_stats::design::{successive_inclusion_exact, successive_sample};
use hevo_stats::estimate::{
    choose_estimator, estimate_with, hajek, raw_mean, residual, Design, Estimator, Unit,
};
use hevo_stats::weights::{coevolve_weights, TaskStats, WeightParams};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// 89 tasks as on Terminal-Bench: 10 solved by both Phase-0 harnesses, 49 split between
/// them, 30 solved by neither. The new candidate solves the 10 easy ones and 8 split ones.
fn matrix() -> (Vec<Vec<f64>>, Vec<f64>) {
    let n = 89;
    let mut a = vec![0.0; n];
    let mut b = vec![0.0; n];
    for t in 0..10 {
        a[t] = 1.0;
        b[t] = 1.0;
    }
    for t in 10..59 {
        if t % 2 == 0 {
            a[t] = 1.0;
        } else {
            b[t] = 1.0;
        }
    }
    let mut cand = vec![0.0; n];
    for (t, x) in cand.iter_mut().enumerate() {
        if t < 10 || (10..18).contains(&t) {
            *x = 1.0;
        }
    }
    (vec![a, b], cand)
}

#[test]
fn hajek_inflates_a_low_raw_score_and_residual_does_not() {
    let (phase0, y) = matrix();
    let n = y.len();
    let truth = y.iter().sum::<f64>() / n as f64;
    let mut stats = TaskStats::new(n);
    for row in &phase0 {
        for (t, &x) in row.iter().enumerate() {
            stats.record(t, x);
        }
    }
    let w = coevolve_weights(&stats, WeightParams::default());
    let p = stats.rates();
    let a = p.iter().sum::<f64>() / n as f64;
    let m = 7; // ceil(0.07 * 89)
    let pi = successive_inclusion_exact(&w, m);
    assert!(pi[0] < 0.02, "the easy tasks are rarely sampled: {}", pi[0]);
    let mut rng = ChaCha8Rng::seed_from_u64(2026);
    let (mut se_h, mut se_r, mut se_a) = (0.0, 0.0, 0.0);
    let mut worst_inflation: f64 = 0.0;
    let mut auto_chose_hajek_in_failure = 0;
    let draws = 2_000;
    for _ in 0..draws {
        let s = successive_sample(&w, m, &mut rng);
        let units: Vec<Unit> = s
            .iter()
            .map(|&t| Unit {
                y: y[t],
                pi: pi[t],
                anchor: p[t],
            })
            .collect();
        let raw = raw_mean(&units).value;
        let h = hajek(&units, Design::FixedSize).value;
        let r = residual(&units, a, n, Design::FixedSize).value;
        let which = choose_estimator(
            &[
                Estimator::Hajek,
                Estimator::Residual,
                Estimator::HajekResidual,
            ],
            &[(&units, a)],
            n,
            Design::FixedSize,
            Some((&pi, &p)),
        );
        let au = estimate_with(which, &units, a, n, Design::FixedSize).value;
        if raw <= 0.34 && h - truth > worst_inflation {
            worst_inflation = h - truth;
            if which == Estimator::Hajek {
                auto_chose_hajek_in_failure += 1;
            }
        }
        se_h += (h - truth).powi(2);
        se_r += (r - truth).powi(2);
        se_a += (au - truth).powi(2);
    }
    let (rh, rr, ra) = (
        (se_h / draws as f64).sqrt(),
        (se_r / draws as f64).sqrt(),
        (se_a / draws as f64).sqrt(),
    );
    // The failure: a raw score of at most 1/3 turned into an estimate far above the truth.
    assert!(
        worst_inflation > 0.4,
        "hajek inflation {worst_inflation} (truth {truth})"
    );
    assert!(rr < rh / 2.0, "residual rmse {rr} vs hajek {rh}");
    assert!(ra < rh, "auto rmse {ra} vs hajek {rh}");
    assert_eq!(auto_chose_hajek_in_failure, 0);
}
