//! Seeded synthetic candidate x task outcome matrices for replay and simulation tests.
//!
//! The generator is a Rasch model with optional extras that real harness searches show:
//! near-identical candidates, task groups (datasets) of different difficulty, families of
//! candidates that agree beyond what their abilities explain, repeated trials and per-task
//! cost. Every draw comes from ChaCha8 seeded by the caller, one independent stream per
//! component, so the output is a pure function of `(n_candidates, n_tasks, params, seed)`, and
//! changing one knob does not reshuffle the others (e.g. the abilities do not depend on
//! `n_tasks`).
//!
//! # Model
//!
//! ```text
//! θ_c  ~ N(ability_mean, ability_spread²)                    candidate ability
//! b_t  =  d_t + group_shifts[g(t)],  d_t ~ N(difficulty_mean, difficulty_spread²)
//! γ_ft ~ N(0, family_effect_sd²)                               family x task interaction
//! p_ct =  σ(θ_c - b_t + γ_{f(c), t})                           true success probability
//! y_ct =  (1/r) Σ_{k=1..r} 1[u_ctk < p_ct]                     observed outcome (r = trials)
//! u_ctk = v_tk with probability outcome_agreement, else a private U(0, 1) draw
//! v_tk ~ U(0, 1)                                               shared by all candidates
//! cost_t = exp(cost_log_sd (r d̃_t + sqrt(1 - r²) z_t)),  z_t ~ N(0, 1)   relative task cost
//! k_c  = exp(N(0, candidate_cost_log_sd²))                    candidate cost multiplier
//! cost_ct = k_c cost_t (1 + (φ - 1)(1 - y_ct))                 cost per trial (mean)
//! ```
//!
//! `d̃_t` is the standardized difficulty and `r = cost_difficulty_corr`: with `r > 0` hard
//! tasks cost more, as in agent benchmarks. `φ = failure_cost` is what a failed trial costs
//! relative to a passed one (an agent that fails often runs to its turn limit); with `φ = 1`
//! a cell's cost does not depend on its outcome.
//!
//! `g(t) = floor(t · G / n_tasks)` puts tasks in `G = group_shifts.len()` contiguous groups of
//! near-equal size; `f(c) = c mod n_families`. Each `u_ctk` is uniform whatever the
//! agreement, so every outcome is exactly Bernoulli(`p_ct`) (averaged over trials): the
//! agreement knob changes only how outcomes of different candidates on the same task are
//! correlated (a mixture copula), not any marginal. `prob` in the result is `p_ct`, so the
//! true full-set score of candidate `c` is `mean_t p_ct`.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::irt::sigmoid;

/// Knobs of [`rasch_matrix`]; see the [module documentation](self) for the model.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthParams {
    /// Mean ability in logits. With difficulties centered at 0, `ability_mean = 0` gives pass
    /// rates around 50%, `-1` around 30%.
    pub ability_mean: f64,
    /// Standard deviation of the abilities in logits. 0.1 to 0.3 makes near-identical
    /// candidates (harness variants of one model, the hard case for selection); 1.0 makes
    /// clearly different ones.
    pub ability_spread: f64,
    /// Mean task difficulty in logits (before group shifts).
    pub difficulty_mean: f64,
    /// Standard deviation of task difficulties in logits. Around 2 gives many tasks that are
    /// almost always or almost never solved, as on agent benchmarks.
    pub difficulty_spread: f64,
    /// Difficulty shift of each task group (stratum), in logits; empty means one group with
    /// no shift. Tasks are split into `group_shifts.len()` contiguous groups of near-equal
    /// size.
    pub group_shifts: Vec<f64>,
    /// Number of candidate families (candidate `c` belongs to family `c mod n_families`).
    /// Must be at least 1.
    pub n_families: usize,
    /// Standard deviation (logits) of a per-(family, task) random effect added to the logit:
    /// members of a family are better or worse on the same tasks beyond what ability and
    /// difficulty explain, so they agree more than independent Rasch candidates do (and the
    /// Rasch model is misspecified, as on real data). 0 disables it. With `n_families = 1`
    /// the effect is common to all candidates and so only widens the difficulty spread; use
    /// two or more families (or [`SynthParams::outcome_agreement`]) to make some candidates
    /// agree more than others.
    pub family_effect_sd: f64,
    /// Probability in `[0, 1]` that an outcome draw reuses the task's shared uniform number
    /// instead of a private one. 0 = independent draws given `p_ct`; 1 = comonotone draws
    /// (a candidate with a higher `p_ct` passes every trial a weaker one passes). Marginal
    /// success probabilities are unchanged.
    pub outcome_agreement: f64,
    /// Trials per (candidate, task); the outcome is the mean of the trials (so it is 0/1 only
    /// for `trials = 1`). Must be at least 1.
    pub trials: usize,
    /// Log-scale standard deviation of the per-task relative cost (log-normal with median 1).
    /// 0 gives every task cost 1.
    pub cost_log_sd: f64,
    /// Log-scale standard deviation of the per-candidate cost multiplier `k_c` (median 1);
    /// 0 gives every candidate multiplier 1.
    pub candidate_cost_log_sd: f64,
    /// Correlation `r` in `[-1, 1]` of the log task cost with the task difficulty.
    pub cost_difficulty_corr: f64,
    /// Cost of a failed trial relative to a passed one (`φ > 0`); 1 makes a cell's cost
    /// independent of its outcome.
    pub failure_cost: f64,
}

impl Default for SynthParams {
    /// Clearly different candidates (`ability_spread = 1`) on moderately spread tasks
    /// (`difficulty_spread = 1.5`), one group, one family, independent draws, one trial,
    /// unit cost.
    fn default() -> Self {
        SynthParams {
            ability_mean: 0.0,
            ability_spread: 1.0,
            difficulty_mean: 0.0,
            difficulty_spread: 1.5,
            group_shifts: Vec::new(),
            n_families: 1,
            family_effect_sd: 0.0,
            outcome_agreement: 0.0,
            trials: 1,
            cost_log_sd: 0.0,
            candidate_cost_log_sd: 0.0,
            cost_difficulty_corr: 0.0,
            failure_cost: 1.0,
        }
    }
}

impl SynthParams {
    /// Near-identical harness variants of one model: ability spread 0.2 logits, wide task
    /// difficulties (spread 2), a family effect of 0.3 and outcome agreement 0.5.
    pub fn near_identical() -> Self {
        SynthParams {
            ability_spread: 0.2,
            difficulty_spread: 2.0,
            family_effect_sd: 0.3,
            outcome_agreement: 0.5,
            ..SynthParams::default()
        }
    }

    /// These parameters with the heavy-tailed cost model of `hevo replay --synth-cost`:
    /// per-task log-normal costs of log-sd `log_sd`, correlated 0.5 with difficulty, times a
    /// per-candidate multiplier of log-sd 0.5. `log_sd = 0` leaves every cost at 1.
    pub fn with_costs(self, log_sd: f64) -> Self {
        let on = log_sd > 0.0;
        SynthParams {
            cost_log_sd: log_sd,
            candidate_cost_log_sd: if on { 0.5 } else { 0.0 },
            cost_difficulty_corr: if on { 0.5 } else { 0.0 },
            ..self
        }
    }
}

/// A synthetic outcome matrix together with the truth that generated it.
#[derive(Clone, Debug, PartialEq)]
pub struct SynthMatrix {
    /// Observed outcomes, `outcomes[c][t]` in `[0, 1]` (0/1 for one trial).
    pub outcomes: Vec<Vec<f64>>,
    /// True success probabilities `p_ct`, same shape as `outcomes`.
    pub prob: Vec<Vec<f64>>,
    /// True ability `θ_c` of each candidate.
    pub ability: Vec<f64>,
    /// True difficulty `b_t` of each task, group shift included.
    pub difficulty: Vec<f64>,
    /// Group (stratum) index of each task, in `0..max(1, group_shifts.len())`.
    pub group: Vec<usize>,
    /// Relative cost of each task (median 1).
    pub task_cost: Vec<f64>,
    /// Cost multiplier `k_c` of each candidate (median 1).
    pub candidate_cost: Vec<f64>,
    /// Cost of a failed trial relative to a passed one (`φ`, from the parameters).
    pub failure_cost: f64,
}

impl SynthMatrix {
    /// Number of candidates (rows).
    pub fn n_candidates(&self) -> usize {
        self.outcomes.len()
    }

    /// Number of tasks (columns).
    pub fn n_tasks(&self) -> usize {
        self.difficulty.len()
    }

    /// The true full-set score of `candidate`: `mean_t p_ct` (`NaN` with no tasks).
    pub fn true_score(&self, candidate: usize) -> f64 {
        mean(&self.prob[candidate])
    }

    /// The observed full-set score of `candidate`: `mean_t y_ct` (`NaN` with no tasks).
    pub fn observed_score(&self, candidate: usize) -> f64 {
        mean(&self.outcomes[candidate])
    }

    /// The cost of every cell, `cost[c][t]` ([`cell_costs`]).
    pub fn cell_costs(&self) -> Vec<Vec<f64>> {
        cell_costs(
            &self.task_cost,
            &self.candidate_cost,
            &self.outcomes,
            self.failure_cost,
        )
    }

    /// All outcomes as `(candidate, task, outcome)` triples, row by row, in the form
    /// [`crate::irt::RaschFit::fit`] takes.
    pub fn to_obs(&self) -> Vec<(usize, usize, f64)> {
        let mut out = Vec::with_capacity(self.n_candidates() * self.n_tasks());
        for (c, row) in self.outcomes.iter().enumerate() {
            out.extend(row.iter().enumerate().map(|(t, &y)| (c, t, y)));
        }
        out
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// A standard normal draw (Box-Muller, one value per call, deterministic given the stream).
fn std_normal(rng: &mut ChaCha8Rng) -> f64 {
    // u1 in (0, 1] so ln(u1) is finite.
    let u1: f64 = 1.0 - rng.gen::<f64>();
    let u2: f64 = rng.gen::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// ChaCha8 seeded with `seed`, on an independent stream per model component.
fn stream(seed: u64, id: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(id);
    rng
}

/// Draws a synthetic outcome matrix from the model in the [module documentation](self).
///
/// Deterministic: the same arguments always give the same matrix.
///
/// # Panics
///
/// If `params.n_families == 0`, `params.trials == 0`, a spread is negative or not finite, or
/// `outcome_agreement` is outside `[0, 1]`.
///
/// # Examples
///
/// ```
/// use hevo_stats::synth::{rasch_matrix, SynthParams};
/// let m = rasch_matrix(5, 40, &SynthParams::near_identical(), 7);
/// assert_eq!(m.outcomes.len(), 5);
/// assert_eq!(m.outcomes[0].len(), 40);
/// assert_eq!(m, rasch_matrix(5, 40, &SynthParams::near_identical(), 7));
/// ```
pub fn rasch_matrix(
    n_candidates: usize,
    n_tasks: usize,
    params: &SynthParams,
    seed: u64,
) -> SynthMatrix {
    let p = params;
    assert!(p.n_families >= 1, "synth: n_families must be >= 1");
    assert!(p.trials >= 1, "synth: trials must be >= 1");
    for (name, v) in [
        ("ability_spread", p.ability_spread),
        ("difficulty_spread", p.difficulty_spread),
        ("family_effect_sd", p.family_effect_sd),
        ("cost_log_sd", p.cost_log_sd),
        ("candidate_cost_log_sd", p.candidate_cost_log_sd),
    ] {
        assert!(v.is_finite() && v >= 0.0, "synth: {name} = {v}");
    }
    assert!(
        p.failure_cost.is_finite() && p.failure_cost > 0.0,
        "synth: failure_cost = {}",
        p.failure_cost
    );
    assert!(
        (0.0..=1.0).contains(&p.outcome_agreement),
        "synth: outcome_agreement = {}",
        p.outcome_agreement
    );

    let mut rng = stream(seed, 0);
    let ability: Vec<f64> = (0..n_candidates)
        .map(|_| p.ability_mean + p.ability_spread * std_normal(&mut rng))
        .collect();

    let n_groups = p.group_shifts.len().max(1);
    let group: Vec<usize> = (0..n_tasks).map(|t| t * n_groups / n_tasks).collect();
    let mut rng = stream(seed, 1);
    let difficulty: Vec<f64> = (0..n_tasks)
        .map(|t| {
            let shift = p.group_shifts.get(group[t]).copied().unwrap_or(0.0);
            p.difficulty_mean + p.difficulty_spread * std_normal(&mut rng) + shift
        })
        .collect();

    let mut rng = stream(seed, 2);
    let family_effect: Vec<Vec<f64>> = (0..p.n_families)
        .map(|_| {
            (0..n_tasks)
                .map(|_| p.family_effect_sd * std_normal(&mut rng))
                .collect()
        })
        .collect();

    let (task_cost, candidate_cost) = cost_model(&difficulty, n_candidates, p, seed);

    let mut rng = stream(seed, 4);
    let shared: Vec<f64> = (0..n_tasks * p.trials).map(|_| rng.gen::<f64>()).collect();

    let prob: Vec<Vec<f64>> = (0..n_candidates)
        .map(|c| {
            let fam = &family_effect[c % p.n_families];
            (0..n_tasks)
                .map(|t| sigmoid(ability[c] - difficulty[t] + fam[t]))
                .collect()
        })
        .collect();

    // Outcome draws: each candidate row gets its own stream so rows do not depend on each
    // other's consumption of random numbers.
    let outcomes: Vec<Vec<f64>> = prob
        .iter()
        .enumerate()
        .map(|(c, row)| {
            let mut rng = stream(seed, 1000 + c as u64);
            row.iter()
                .enumerate()
                .map(|(t, &pct)| {
                    let mut hits = 0usize;
                    for k in 0..p.trials {
                        let pick_shared = rng.gen::<f64>() < p.outcome_agreement;
                        let private = rng.gen::<f64>();
                        let u = if pick_shared {
                            shared[t * p.trials + k]
                        } else {
                            private
                        };
                        if u < pct {
                            hits += 1;
                        }
                    }
                    hits as f64 / p.trials as f64
                })
                .collect()
        })
        .collect();

    SynthMatrix {
        outcomes,
        prob,
        ability,
        difficulty,
        group,
        task_cost,
        candidate_cost,
        failure_cost: p.failure_cost,
    }
}

/// The cost of every cell of a matrix of `outcomes` (`outcomes[c][t]` in `[0, 1]`, the mean
/// of the trials): `cost[c][t] = k_c cost_t (1 + (φ - 1)(1 - y_ct))`, with `k_c =
/// candidate_cost[c]`, `cost_t = task_cost[t]` and `φ = failure_cost`, the model of
/// [`rasch_matrix`] and of costs put on a logged matrix.
pub fn cell_costs(
    task_cost: &[f64],
    candidate_cost: &[f64],
    outcomes: &[Vec<f64>],
    failure_cost: f64,
) -> Vec<Vec<f64>> {
    candidate_cost
        .iter()
        .zip(outcomes)
        .map(|(k, row)| {
            task_cost
                .iter()
                .zip(row)
                .map(|(t, y)| k * t * (1.0 + (failure_cost - 1.0) * (1.0 - y)))
                .collect()
        })
        .collect()
}

/// The cost model of [`rasch_matrix`], for any tasks: the relative cost of each task
/// (log-normal with median 1 and log-sd `cost_log_sd`, correlated `cost_difficulty_corr` with
/// `difficulty`, so hard tasks cost more when it is positive) and the cost multiplier of each
/// of `n_candidates` candidates (log-normal, log-sd `candidate_cost_log_sd`). Seeded like
/// [`rasch_matrix`]: the same seed and difficulties give the same costs.
pub fn cost_model(
    difficulty: &[f64],
    n_candidates: usize,
    p: &SynthParams,
    seed: u64,
) -> (Vec<f64>, Vec<f64>) {
    assert!(
        (-1.0..=1.0).contains(&p.cost_difficulty_corr),
        "synth: cost_difficulty_corr = {}",
        p.cost_difficulty_corr
    );
    let r = p.cost_difficulty_corr;
    let d_mean = difficulty.iter().sum::<f64>() / difficulty.len().max(1) as f64;
    let d_sd = (difficulty.iter().map(|d| (d - d_mean).powi(2)).sum::<f64>()
        / difficulty.len().max(1) as f64)
        .sqrt();
    let mut rng = stream(seed, 3);
    let task_cost: Vec<f64> = difficulty
        .iter()
        .map(|d| {
            let z = std_normal(&mut rng);
            let dz = if d_sd > 0.0 { (d - d_mean) / d_sd } else { 0.0 };
            let mix = if r == 0.0 {
                z
            } else {
                r * dz + (1.0 - r * r).sqrt() * z
            };
            (p.cost_log_sd * mix).exp()
        })
        .collect();
    let mut rng = stream(seed, 5);
    let candidate_cost: Vec<f64> = (0..n_candidates)
        .map(|_| (p.candidate_cost_log_sd * std_normal(&mut rng)).exp())
        .collect();
    (task_cost, candidate_cost)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic_and_seed_dependent() {
        let p = SynthParams::default();
        assert_eq!(rasch_matrix(4, 30, &p, 1), rasch_matrix(4, 30, &p, 1));
        assert_ne!(
            rasch_matrix(4, 30, &p, 1).outcomes,
            rasch_matrix(4, 30, &p, 2).outcomes
        );
    }

    #[test]
    fn abilities_do_not_depend_on_the_number_of_tasks() {
        let p = SynthParams::default();
        assert_eq!(
            rasch_matrix(6, 10, &p, 3).ability,
            rasch_matrix(6, 500, &p, 3).ability
        );
    }

    #[test]
    fn shapes_groups_and_ranges() {
        let p = SynthParams {
            group_shifts: vec![-1.0, 0.0, 2.0],
            trials: 3,
            cost_log_sd: 0.5,
            ..SynthParams::default()
        };
        let m = rasch_matrix(3, 10, &p, 9);
        assert_eq!(m.n_candidates(), 3);
        assert_eq!(m.n_tasks(), 10);
        assert_eq!(m.group, vec![0, 0, 0, 0, 1, 1, 1, 2, 2, 2]);
        for row in &m.outcomes {
            for &y in row {
                // Means of three 0/1 trials.
                assert!([0.0, 1.0 / 3.0, 2.0 / 3.0, 1.0].contains(&y), "{y}");
            }
        }
        assert!(m.task_cost.iter().all(|&c| c > 0.0));
        assert_eq!(m.candidate_cost, vec![1.0; 3]);
        assert_eq!(m.to_obs().len(), 30);
    }

    #[test]
    fn costs_are_heavy_tailed_per_candidate_and_follow_difficulty() {
        let p = SynthParams {
            cost_log_sd: 1.0,
            candidate_cost_log_sd: 0.5,
            cost_difficulty_corr: 0.6,
            ..SynthParams::default()
        };
        let m = rasch_matrix(40, 2000, &p, 4);
        let lc: Vec<f64> = m.task_cost.iter().map(|c| c.ln()).collect();
        let n = lc.len() as f64;
        let (mc, md) = (
            lc.iter().sum::<f64>() / n,
            m.difficulty.iter().sum::<f64>() / n,
        );
        let cov = lc
            .iter()
            .zip(&m.difficulty)
            .map(|(c, d)| (c - mc) * (d - md))
            .sum::<f64>()
            / n;
        let sd = |v: &[f64], mu: f64| (v.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / n).sqrt();
        let corr = cov / (sd(&lc, mc) * sd(&m.difficulty, md));
        // Sample correlation of 2,000 tasks: standard error about 0.015.
        assert!((corr - 0.6).abs() < 0.06, "{corr}");
        assert!((sd(&lc, mc) - 1.0).abs() < 0.06);
        // Heavy tail: the mean cost is well above the median (log-normal: e^0.5 = 1.65).
        let mean = m.task_cost.iter().sum::<f64>() / n;
        assert!(mean > 1.4, "{mean}");
        let cells = m.cell_costs();
        assert!((cells[3][7] - m.candidate_cost[3] * m.task_cost[7]).abs() < 1e-12);
        assert!(m.candidate_cost.iter().any(|&k| (k - 1.0).abs() > 0.1));
    }

    #[test]
    fn a_failed_trial_costs_failure_cost_times_a_passed_one() {
        let p = SynthParams {
            cost_log_sd: 1.0,
            candidate_cost_log_sd: 0.5,
            failure_cost: 3.0,
            ..SynthParams::default()
        };
        let m = rasch_matrix(5, 40, &p, 2);
        let cells = m.cell_costs();
        let (mut passed, mut failed) = (0, 0);
        for (c, row) in m.outcomes.iter().enumerate() {
            for (t, &y) in row.iter().enumerate() {
                let base = m.candidate_cost[c] * m.task_cost[t];
                let factor = if y == 1.0 { 1.0 } else { 3.0 };
                assert!(
                    (cells[c][t] - factor * base).abs() < 1e-12,
                    "cell ({c}, {t})"
                );
                *if y == 1.0 { &mut passed } else { &mut failed } += 1;
            }
        }
        assert!(
            passed > 20 && failed > 20,
            "{passed} passed, {failed} failed"
        );
        // With several trials the cost is the mean of the trials' costs.
        let m = rasch_matrix(5, 40, &SynthParams { trials: 2, ..p }, 2);
        let cells = m.cell_costs();
        let half = (0..5)
            .flat_map(|c| (0..40).map(move |t| (c, t)))
            .find(|&(c, t)| m.outcomes[c][t] == 0.5)
            .expect("a cell with one of two trials passed");
        let base = m.candidate_cost[half.0] * m.task_cost[half.1];
        assert!((cells[half.0][half.1] - 2.0 * base).abs() < 1e-12);
    }

    #[test]
    fn empty_shapes_are_fine() {
        let m = rasch_matrix(0, 0, &SynthParams::default(), 0);
        assert_eq!(m.n_candidates(), 0);
        assert_eq!(m.n_tasks(), 0);
    }
}
