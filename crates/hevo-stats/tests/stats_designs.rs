//! Simulation tests of the sampling designs and estimators: unbiasedness under the design,
//! Monte Carlo inclusion probabilities against the exact ones, interval coverage.
//! Everything is seeded, so the tests are deterministic.

#![allow(clippy::needless_range_loop)]

use hevo_stats::design::{
    mc_inclusion, pips_inclusion, stratified_successive_sample, successive_inclusion_exact,
    successive_sample, NestedPoisson, Strata,
};
use hevo_stats::estimate::{
    combine_strata, hajek, hajek_residual, horvitz_thompson, residual, Design, Estimate, Unit,
};
use hevo_stats::irt::RaschFit;
use hevo_stats::synth::{rasch_matrix, SynthParams};
use hevo_stats::weights::{coevolve_weights, TaskStats, WeightParams};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const N: usize = 200;
const M: usize = 30;

struct Setup {
    y: Vec<f64>,
    p: Vec<f64>,
    w: Vec<f64>,
    pi: Vec<f64>,
    greg_anchor: Vec<f64>,
}

/// Candidate 5 of a Rasch matrix is the target; candidates 0 and 1 are Phase 0 (history).
fn setup() -> Setup {
    setup_with(1.0)
}

/// Like [`setup`] with the weights raised to `power` (below 1: a milder design).
fn setup_with(power: f64) -> Setup {
    let mx = rasch_matrix(8, N, &SynthParams::default(), 11);
    let mut stats = TaskStats::new(N);
    for c in 0..2 {
        for t in 0..N {
            stats.record(t, mx.outcomes[c][t]);
        }
    }
    let w: Vec<f64> = coevolve_weights(&stats, WeightParams::default())
        .into_iter()
        .map(|w| w.powf(power))
        .collect();
    let pi = successive_inclusion_exact(&w, M);
    // A model-assisted anchor fitted before sampling: all of candidates 0..5 and candidate 5
    // on nothing (its ability is the average one); fixed, so GREG is exactly unbiased.
    let mut obs = Vec::new();
    for c in 0..5 {
        for t in 0..N {
            obs.push((c, t, mx.outcomes[c][t]));
        }
    }
    let fit = RaschFit::fit(&obs, 6, N);
    let greg_anchor = (0..N).map(|t| fit.predict(5, t)).collect();
    Setup {
        y: mx.outcomes[5].clone(),
        p: stats.rates(),
        w,
        pi,
        greg_anchor,
    }
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let m = xs.iter().sum::<f64>() / n;
    let v = xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0);
    (m, v.sqrt())
}

struct Sim {
    values: Vec<f64>,
    covered: usize,
}

fn simulate(
    s: &Setup,
    draws: usize,
    seed: u64,
    est: impl Fn(&[Unit]) -> Estimate,
    anchor: &[f64],
) -> Sim {
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut values = Vec::with_capacity(draws);
    let mut covered = 0;
    for _ in 0..draws {
        let sample = successive_sample(&s.w, M, &mut rng);
        let units: Vec<Unit> = sample
            .iter()
            .map(|&t| Unit {
                y: s.y[t],
                pi: s.pi[t],
                anchor: anchor[t],
            })
            .collect();
        let e = est(&units);
        if e.ci_low <= truth && truth <= e.ci_high {
            covered += 1;
        }
        values.push(e.value);
    }
    Sim { values, covered }
}

fn check_unbiased(name: &str, sim: &Sim, truth: f64, slack: f64) {
    let (m, sd) = mean_sd(&sim.values);
    let se = sd / (sim.values.len() as f64).sqrt();
    assert!(
        (m - truth).abs() <= 4.0 * se + slack,
        "{name}: mean {m} vs truth {truth} (se {se})"
    );
}

fn check_coverage(name: &str, sim: &Sim, lo: f64) {
    let rate = sim.covered as f64 / sim.values.len() as f64;
    assert!(rate >= lo && rate <= 0.995, "{name}: coverage {rate}");
}

#[test]
fn mc_inclusion_converges_to_exact_and_sums_to_m() {
    let s = setup();
    let exact_sum: f64 = s.pi.iter().sum();
    assert!((exact_sum - M as f64).abs() < 1e-5, "exact sum {exact_sum}");
    let mut prev = f64::INFINITY;
    for draws in [500, 4_000, 32_000] {
        let mc = mc_inclusion(&s.w, M, draws, 3);
        let sum: f64 = mc.iter().sum();
        // Tasks never drawn get half a draw, so the sum may exceed m by that much.
        assert!((sum - M as f64).abs() < N as f64 * 0.5 / draws as f64 + 1e-9);
        // Max error shrinks like 1/sqrt(draws): within 4.5 binomial standard errors.
        let mut max_z: f64 = 0.0;
        let mut rmse = 0.0;
        for (a, b) in mc.iter().zip(&s.pi) {
            let sd = (b * (1.0 - b) / draws as f64).sqrt().max(1e-9);
            max_z = max_z.max((a - b).abs() / sd);
            rmse += (a - b) * (a - b);
        }
        let rmse = (rmse / N as f64).sqrt();
        assert!(max_z < 4.5, "draws {draws}: max z {max_z}");
        assert!(rmse < prev, "rmse {rmse} did not shrink");
        prev = rmse;
    }
}

#[test]
fn exact_inclusion_matches_empirical_frequency_of_the_draw() {
    let s = setup();
    let draws = 20_000;
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let mut counts = vec![0usize; N];
    for _ in 0..draws {
        for t in successive_sample(&s.w, M, &mut rng) {
            counts[t] += 1;
        }
    }
    for t in 0..N {
        let f = counts[t] as f64 / draws as f64;
        let sd = (s.pi[t] * (1.0 - s.pi[t]) / draws as f64).sqrt();
        assert!(
            (f - s.pi[t]).abs() < 4.5 * sd + 1e-4,
            "task {t}: {f} vs {}",
            s.pi[t]
        );
    }
}

/// Under the paper's weights an always-solved task has `pi` around 0.02 and `y / pi` is
/// heavy-tailed: HT is unbiased but its normal interval undercovers badly (most samples
/// miss the rare huge term). This is the paper's Terminal-Bench failure mode seen from the
/// interval side; the residual forms below do not have it. Coverage of HT and Hájek is
/// therefore checked under a milder design (weights square-rooted).
#[test]
fn horvitz_thompson_is_unbiased_and_covers() {
    let s = setup();
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let sim = simulate(
        &s,
        4_000,
        1,
        |u| horvitz_thompson(u, N, Design::FixedSize),
        &s.p,
    );
    check_unbiased("ht", &sim, truth, 0.0);
    let s = setup_with(0.5);
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let sim = simulate(
        &s,
        4_000,
        1,
        |u| horvitz_thompson(u, N, Design::FixedSize),
        &s.p,
    );
    check_unbiased("ht", &sim, truth, 0.0);
    check_coverage("ht", &sim, 0.90);
}

#[test]
fn hajek_is_asymptotically_unbiased_and_covers() {
    let s = setup();
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let sim = simulate(&s, 4_000, 2, |u| hajek(u, Design::FixedSize), &s.p);
    // O(1/m) ratio bias allowed on top of the Monte Carlo error.
    check_unbiased("hajek", &sim, truth, 0.01);
    let s = setup_with(0.5);
    let sim = simulate(&s, 4_000, 2, |u| hajek(u, Design::FixedSize), &s.p);
    check_coverage("hajek", &sim, 0.90);
}

#[test]
fn residual_is_unbiased_and_covers() {
    let s = setup();
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let a = s.p.iter().sum::<f64>() / N as f64;
    let sim = simulate(&s, 4_000, 3, |u| residual(u, a, N, Design::FixedSize), &s.p);
    check_unbiased("residual", &sim, truth, 0.0);
    check_coverage("residual", &sim, 0.90);
    let sim = simulate(
        &s,
        4_000,
        4,
        |u| hajek_residual(u, a, Design::FixedSize),
        &s.p,
    );
    check_unbiased("hajek-residual", &sim, truth, 0.01);
    // Ratio forms: linearized variance, slightly optimistic at m = 30.
    check_coverage("hajek-residual", &sim, 0.87);
}

#[test]
fn greg_with_rasch_anchor_is_unbiased_and_tighter() {
    let s = setup();
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let a = s.greg_anchor.iter().sum::<f64>() / N as f64;
    let sim = simulate(
        &s,
        4_000,
        5,
        |u| residual(u, a, N, Design::FixedSize),
        &s.greg_anchor,
    );
    check_unbiased("greg", &sim, truth, 0.0);
    check_coverage("greg", &sim, 0.90);
    let ht = simulate(
        &s,
        4_000,
        5,
        |u| horvitz_thompson(u, N, Design::FixedSize),
        &s.p,
    );
    assert!(mean_sd(&sim.values).1 < mean_sd(&ht.values).1);
}

#[test]
fn nested_poisson_is_exact_and_ht_unbiased() {
    let s = setup();
    let truth = s.y.iter().sum::<f64>() / N as f64;
    let pi = pips_inclusion(&s.w, M as f64);
    assert!((pi.iter().sum::<f64>() - M as f64).abs() < 1e-9);
    let draws = 4_000;
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut values = Vec::new();
    let mut counts = vec![0usize; N];
    let mut covered = 0;
    for _ in 0..draws {
        let d = NestedPoisson::new(&s.w, &mut rng);
        let (sample, pi) = d.sample(M as f64);
        for &t in &sample {
            counts[t] += 1;
        }
        let units: Vec<Unit> = sample
            .iter()
            .map(|&t| Unit {
                y: s.y[t],
                pi: pi[t],
                anchor: s.p[t],
            })
            .collect();
        let a = s.p.iter().sum::<f64>() / N as f64;
        let e = residual(&units, a, N, Design::Poisson);
        if e.ci_low <= truth && truth <= e.ci_high {
            covered += 1;
        }
        values.push(e.value);
    }
    for t in 0..N {
        let f = counts[t] as f64 / draws as f64;
        let sd = (pi[t] * (1.0 - pi[t]) / draws as f64).sqrt();
        assert!((f - pi[t]).abs() < 4.5 * sd + 1e-4);
    }
    let sim = Sim { values, covered };
    check_unbiased("poisson residual", &sim, truth, 0.0);
    check_coverage("poisson residual", &sim, 0.90);
}

#[test]
fn stratified_design_estimates_the_average_of_strata() {
    let params = SynthParams {
        group_shifts: vec![-2.0, 0.0, 2.0],
        ..SynthParams::default()
    };
    let mx = rasch_matrix(4, 150, &params, 21);
    let strata = Strata::from_groups(&mx.group);
    assert_eq!(strata.len(), 3);
    let mut stats = TaskStats::new(150);
    for c in 0..2 {
        for t in 0..150 {
            stats.record(t, mx.outcomes[c][t]);
        }
    }
    let w = coevolve_weights(&stats, WeightParams::default());
    let sizes = strata.sizes(0.2);
    let pis: Vec<Vec<f64>> = strata
        .members
        .iter()
        .zip(&sizes)
        .map(|(m, &k)| {
            let ws: Vec<f64> = m.iter().map(|&t| w[t]).collect();
            successive_inclusion_exact(&ws, k)
        })
        .collect();
    let mut pi = vec![0.0; 150];
    for (m, p) in strata.members.iter().zip(&pis) {
        for (&t, &v) in m.iter().zip(p) {
            pi[t] = v;
        }
    }
    let y = &mx.outcomes[3];
    let truth: f64 = strata
        .members
        .iter()
        .map(|m| m.iter().map(|&t| y[t]).sum::<f64>() / m.len() as f64)
        .sum::<f64>()
        / 3.0;
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut values = Vec::new();
    for _ in 0..3_000 {
        let s = stratified_successive_sample(&strata, &w, &sizes, &mut rng);
        let parts: Vec<(Estimate, f64)> = strata
            .members
            .iter()
            .map(|m| {
                let units: Vec<Unit> = s
                    .iter()
                    .filter(|t| m.contains(t))
                    .map(|&t| Unit {
                        y: y[t],
                        pi: pi[t],
                        anchor: 0.0,
                    })
                    .collect();
                (
                    horvitz_thompson(&units, m.len(), Design::FixedSize),
                    1.0 / 3.0,
                )
            })
            .collect();
        values.push(combine_strata(&parts).value);
    }
    let (m, sd) = mean_sd(&values);
    assert!((m - truth).abs() < 4.0 * sd / (values.len() as f64).sqrt());
}
