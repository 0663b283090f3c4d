//! Seeded simulations of the intervals hevo prints for a pick: the Rasch-GREG estimate of a
//! candidate whose ability is fitted on its own sample, and the selection-adjusted interval
//! of the argmax of many noisy estimates (the winner's curse). Tolerances are stated next to
//! each check: a coverage over `R` replications has a binomial standard error of
//! `sqrt(0.95 * 0.05 / R)`.

use hevo_stats::design::NestedPoisson;
use hevo_stats::estimate::{greg_poisson, Estimate, Unit};
use hevo_stats::irt::RaschFit;
use hevo_stats::selection::pick_interval;
use hevo_stats::synth::{rasch_matrix, SynthParams};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn covers(e: &Estimate, truth: f64) -> bool {
    e.ci_low <= truth && truth <= e.ci_high
}

/// The target candidate is sampled by Poisson sampling (expected `n` of `N` tasks, unequal
/// probabilities); the Rasch anchor is fitted on the history (other candidates, fully
/// observed) plus the target's own sample, exactly as `default` re-estimates.
fn self_fitted_greg(n_expected: f64, reps: usize, seed: u64) -> (f64, f64, f64, f64) {
    const NC: usize = 6;
    const NT: usize = 120;
    let mx = rasch_matrix(NC, NT, &SynthParams::near_identical(), seed);
    let target = NC - 1;
    let y = &mx.outcomes[target];
    let truth = y.iter().sum::<f64>() / NT as f64;
    let mut history = Vec::new();
    for c in 0..target {
        for t in 0..NT {
            history.push((c, t, mx.outcomes[c][t]));
        }
    }
    // Weights like Task-CoEvolve's: p(1 - p) of the history, floored.
    let w: Vec<f64> = (0..NT)
        .map(|t| {
            let p = (0..target).map(|c| mx.outcomes[c][t]).sum::<f64>() / target as f64;
            (p * (1.0 - p)).max(0.125)
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let (mut sum, mut sum2, mut covered) = (0.0, 0.0, 0usize);
    for _ in 0..reps {
        let design = NestedPoisson::new(&w, &mut rng);
        let (sample, pi) = design.sample(n_expected);
        let mut obs = history.clone();
        obs.extend(sample.iter().map(|&t| (target, t, y[t])));
        let fit = RaschFit::fit(&obs, NC, NT);
        let population: Vec<(f64, f64)> =
            (0..NT).map(|t| (fit.predict(target, t), pi[t])).collect();
        let units: Vec<Unit> = sample
            .iter()
            .map(|&t| Unit {
                y: y[t],
                pi: pi[t],
                anchor: population[t].0,
            })
            .collect();
        let e = greg_poisson(&units, &population);
        sum += e.value;
        sum2 += e.value * e.value;
        covered += covers(&e, truth) as usize;
    }
    let r = reps as f64;
    let mean = sum / r;
    let sd = (sum2 / r - mean * mean).max(0.0).sqrt();
    (mean, truth, sd / r.sqrt(), covered as f64 / r)
}

#[test]
fn self_fitted_rasch_greg_is_unbiased_and_its_interval_covers() {
    // Small samples (10 and 30 of 120 tasks) are where a fitted anchor flatters itself.
    for (n, seed) in [(10.0, 1u64), (30.0, 2), (30.0, 3)] {
        let reps = 400;
        let (mean, truth, se, coverage) = self_fitted_greg(n, reps, seed);
        // Unbiased up to 4 Monte Carlo standard errors plus 0.01 for the model-assisted
        // (ratio-type) estimator's O(1/n) bias.
        assert!(
            (mean - truth).abs() <= 4.0 * se + 0.01,
            "n {n}: mean {mean:.4} vs truth {truth:.4} (se {se:.4})"
        );
        // Nominal 95%; 400 reps have a binomial se of 0.011, so 0.93 is about -2 se.
        assert!(coverage >= 0.93, "n {n}: coverage {coverage:.3}");
    }
}

/// `k` near-identical candidates, each estimated by the mean of `n` Bernoulli draws; the
/// pick is the argmax. Returns (plain coverage of the pick, adjusted coverage of the pick).
fn winners_curse(k: usize, n: usize, reps: usize, seed: u64) -> (f64, f64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let truth: Vec<f64> = (0..k).map(|i| 0.5 + 0.02 * i as f64 / k as f64).collect();
    let (mut plain, mut adjusted) = (0usize, 0usize);
    for _ in 0..reps {
        let est: Vec<Estimate> = truth
            .iter()
            .map(|&p| {
                let hits = (0..n).filter(|_| rng.gen::<f64>() < p).count() as f64;
                let v = hits / n as f64;
                Estimate::normal(v, (v * (1.0 - v) / n as f64).sqrt(), 0.0, 1.0)
            })
            .collect();
        let pick = (0..k)
            .max_by(|&a, &b| est[a].value.total_cmp(&est[b].value))
            .unwrap_or(0);
        plain += covers(&est[pick], truth[pick]) as usize;
        adjusted += covers(&pick_interval(&est, pick), truth[pick]) as usize;
    }
    (plain as f64 / reps as f64, adjusted as f64 / reps as f64)
}

#[test]
fn the_picks_plain_interval_suffers_the_winners_curse_and_the_adjusted_one_does_not() {
    let reps = 2000;
    for (k, n, seed) in [(10usize, 40usize, 7u64), (30, 20, 8), (60, 60, 9)] {
        let (plain, adjusted) = winners_curse(k, n, reps, seed);
        // The plain 95% interval of the argmax of k >= 10 near-identical estimates covers far
        // less than 95% (its estimate sits about sqrt(2 ln k) se above the truth).
        assert!(plain < 0.80, "k {k}: plain coverage {plain:.3}");
        // Bonferroni over k: at least 95% up to binomial noise (se 0.005 at 2,000 reps).
        assert!(adjusted >= 0.94, "k {k}: adjusted coverage {adjusted:.3}");
    }
}
