//! Synthetic matrices: marginals match the stated model, knobs do what their docs say.

use hevo_stats::rank::pearson;
use hevo_stats::synth::{rasch_matrix, SynthMatrix, SynthParams};

/// Mean over all cells of outcome and of probability.
fn grand_means(m: &SynthMatrix) -> (f64, f64) {
    let n = (m.n_candidates() * m.n_tasks()) as f64;
    let y: f64 = m.outcomes.iter().flatten().sum();
    let p: f64 = m.prob.iter().flatten().sum();
    (y / n, p / n)
}

/// Mean Pearson correlation of outcomes between pairs of candidates over tasks.
fn mean_pair_correlation(m: &SynthMatrix) -> f64 {
    let mut sum = 0.0;
    let mut k = 0.0;
    for a in 0..m.n_candidates() {
        for b in a + 1..m.n_candidates() {
            let r = pearson(&m.outcomes[a], &m.outcomes[b]);
            if r.is_finite() {
                sum += r;
                k += 1.0;
            }
        }
    }
    sum / k
}

#[test]
fn outcomes_are_unbiased_draws_of_the_stated_probabilities() {
    // 40 x 500 = 20,000 cells; the SE of the grand mean difference is below
    // 0.5 / sqrt(20000) = 0.0035, so 0.015 is more than 4 SE.
    for agreement in [0.0, 0.5, 1.0] {
        let params = SynthParams {
            outcome_agreement: agreement,
            ..SynthParams::default()
        };
        let m = rasch_matrix(40, 500, &params, 17);
        let (y, p) = grand_means(&m);
        // With agreement the cells are correlated within a task, so the SE grows up to
        // 0.5/sqrt(500) = 0.022 at agreement 1; allow 0.06 there.
        let tol = if agreement == 1.0 { 0.06 } else { 0.015 };
        assert!((y - p).abs() < tol, "agreement {agreement}: {y} vs {p}");
    }
}

#[test]
fn probabilities_follow_the_rasch_formula_without_family_effect() {
    let m = rasch_matrix(5, 20, &SynthParams::default(), 2);
    for c in 0..5 {
        for t in 0..20 {
            let p = 1.0 / (1.0 + (m.difficulty[t] - m.ability[c]).exp());
            assert!((m.prob[c][t] - p).abs() < 1e-12);
        }
    }
}

#[test]
fn ability_and_difficulty_moments_match_the_parameters() {
    let params = SynthParams {
        ability_mean: -0.5,
        ability_spread: 0.2,
        difficulty_mean: 1.0,
        difficulty_spread: 2.0,
        ..SynthParams::default()
    };
    let m = rasch_matrix(2000, 2000, &params, 23);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let sd = |v: &[f64]| {
        let mu = mean(v);
        (v.iter().map(|x| (x - mu) * (x - mu)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
    };
    // SE of a mean of 2000 N(0, s²) draws is s/44.7; tolerances are ~4 SE.
    assert!(
        (mean(&m.ability) + 0.5).abs() < 0.02,
        "{}",
        mean(&m.ability)
    );
    assert!((sd(&m.ability) - 0.2).abs() < 0.015, "{}", sd(&m.ability));
    assert!(
        (mean(&m.difficulty) - 1.0).abs() < 0.2,
        "{}",
        mean(&m.difficulty)
    );
    assert!(
        (sd(&m.difficulty) - 2.0).abs() < 0.15,
        "{}",
        sd(&m.difficulty)
    );
}

#[test]
fn group_shifts_move_group_pass_rates() {
    let params = SynthParams {
        group_shifts: vec![-2.0, 2.0],
        ..SynthParams::default()
    };
    let m = rasch_matrix(30, 400, &params, 31);
    let rate = |g: usize| {
        let (mut s, mut n) = (0.0, 0.0);
        for row in &m.outcomes {
            for (t, y) in row.iter().enumerate() {
                if m.group[t] == g {
                    s += y;
                    n += 1.0;
                }
            }
        }
        s / n
    };
    assert!(rate(0) > rate(1) + 0.3, "{} {}", rate(0), rate(1));
}

#[test]
fn agreement_and_family_effects_raise_between_candidate_correlation() {
    let base = SynthParams {
        ability_spread: 0.2,
        difficulty_spread: 0.5,
        ..SynthParams::default()
    };
    let r0 = mean_pair_correlation(&rasch_matrix(12, 600, &base, 41));
    let agree = SynthParams {
        outcome_agreement: 0.7,
        ..base.clone()
    };
    let r1 = mean_pair_correlation(&rasch_matrix(12, 600, &agree, 41));
    let family = SynthParams {
        family_effect_sd: 1.5,
        ..base.clone()
    };
    let r2 = mean_pair_correlation(&rasch_matrix(12, 600, &family, 41));
    // Independent draws given p: correlation comes only from difficulty spread (small here).
    assert!(r1 > r0 + 0.2, "agreement: {r1} vs {r0}");
    assert!(r2 > r0 + 0.1, "family: {r2} vs {r0}");
}

#[test]
fn family_effect_is_shared_within_a_family_only() {
    let params = SynthParams {
        n_families: 2,
        family_effect_sd: 1.0,
        ..SynthParams::default()
    };
    let m = rasch_matrix(4, 50, &params, 5);
    let logit = |p: f64| (p / (1.0 - p)).ln();
    // logit p_ct - θ_c + b_t = γ_{f(c), t}: equal for candidates 0 and 2, not for 0 and 1.
    let gamma = |c: usize, t: usize| logit(m.prob[c][t]) - m.ability[c] + m.difficulty[t];
    for t in 0..50 {
        assert!((gamma(0, t) - gamma(2, t)).abs() < 1e-9);
        assert!((gamma(1, t) - gamma(3, t)).abs() < 1e-9);
    }
    assert!((0..50).any(|t| (gamma(0, t) - gamma(1, t)).abs() > 0.1));
}

#[test]
fn cost_is_log_normal_with_median_one() {
    let params = SynthParams {
        cost_log_sd: 1.0,
        ..SynthParams::default()
    };
    let m = rasch_matrix(1, 4000, &params, 8);
    let below = m.task_cost.iter().filter(|&&c| c < 1.0).count() as f64 / 4000.0;
    // Binomial SE 0.0079; tolerance 0.035.
    assert!((below - 0.5).abs() < 0.035, "{below}");
    let unit = rasch_matrix(1, 10, &SynthParams::default(), 8);
    assert!(unit.task_cost.iter().all(|&c| c == 1.0));
}
