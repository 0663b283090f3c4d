//! A Rasch (one-parameter logistic IRT) model fitted to sparse candidate x task outcomes.
//!
//! The fit turns every observation made so far into a prediction for every (candidate, task)
//! pair, including pairs never run. Model-assisted estimators (GREG / difference estimators,
//! SPEC section 4) use these predictions as their per-candidate anchor: the better the
//! prediction, the smaller the variance of the design-based correction on top of it.
//!
//! # Model
//!
//! `P(y_ct = 1) = σ(θ_c - b_t)` with `σ(x) = 1 / (1 + e^(-x))`, where `θ_c` is the ability of
//! candidate `c` and `b_t` the difficulty of task `t`. Outcomes may be fractional (mean of
//! several trials, partial credit); they enter the Bernoulli log-likelihood as-is
//! (quasi-likelihood), which keeps the same score equations.
//!
//! # Estimation
//!
//! Penalized joint maximum likelihood (equivalently the MAP under Gaussian priors). Internally
//! the linear predictor is `μ + θ_c - β_t` with a free (unpenalized) intercept `μ`, and
//! zero-mean Gaussian priors `θ_c ~ N(0, σ_θ²)`, `β_t ~ N(0, σ_β²)`:
//!
//! ```text
//! maximize  ℓ(μ, θ, β) = Σ_obs [ y ln p + (1 - y) ln(1 - p) ]  -  Σ_c θ_c² / (2σ_θ²)  -  Σ_t β_t² / (2σ_β²)
//!           with p = σ(μ + θ_c - β_t)
//! ```
//!
//! The intercept lets the difficulty prior centre on the observed pass rate instead of 50%.
//! The reported difficulties are `b_t = β_t - μ`, so `predict = σ(θ_c - b_t)` and the
//! abilities have mean exactly 0 (see below): the model is identified without any extra
//! constraint. The penalty keeps every estimate finite: a task nobody solved gets a large
//! but finite difficulty, a candidate seen once stays near the average ability.
//!
//! The objective is strictly concave. It is maximized by alternating blockwise Newton steps;
//! with the other block fixed, the Hessian of each block is diagonal, so one sweep is:
//!
//! ```text
//! θ_c ← θ_c + clamp( [ Σ_{t∈obs(c)} (y - p) - θ_c/σ_θ² ] / [ Σ_{t∈obs(c)} p(1-p) + 1/σ_θ² ], ±s )
//! β_t ← β_t + clamp( [ Σ_{c∈obs(t)} (p - y) - β_t/σ_β² ] / [ Σ_{c∈obs(t)} p(1-p) + 1/σ_β² ], ±s )
//! μ ← μ + mean(θ) - mean(β);  θ ← θ - mean(θ);  β ← β - mean(β)
//! ```
//!
//! The last line moves along the two directions that leave the likelihood unchanged
//! (`μ + δ, θ - δ` and `μ - δ, β - δ`) to the exact optimum of the penalty, which is where
//! plain alternation would otherwise crawl (the classic zig-zag of joint ML). `s` caps each
//! step (1 logit by default) so early steps on saturated parameters cannot overshoot. Each
//! sweep costs two passes over the observations; it stops when no reported parameter moves
//! by more than `tol`, or after `max_iter` sweeps. Everything is deterministic.

/// The logistic function `σ(x) = 1 / (1 + e^(-x))`.
///
/// # Formula
///
/// `σ(x) = 1 / (1 + exp(-x))`; it returns exactly 0 or 1 only when `|x|` exceeds about 745
/// (36.7 for 1), and never `NaN` for finite or infinite `x`.
pub fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

/// `ln σ(x)`, computed without overflow or cancellation.
fn ln_sigmoid(x: f64) -> f64 {
    // ln σ(x) = -ln(1 + e^(-x)) = -softplus(-x)
    if x >= 0.0 {
        -(-x).exp().ln_1p()
    } else {
        x - x.exp().ln_1p()
    }
}

/// Settings for [`RaschFit::fit_with`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RaschOptions {
    /// Prior variance `σ_θ²` of the abilities (centered at 0). Smaller values shrink
    /// candidates with few observations harder towards the average candidate.
    pub ability_prior_var: f64,
    /// Prior variance `σ_β²` of the difficulties around the overall level `μ`. Smaller values
    /// shrink rarely observed tasks harder towards the average task.
    pub difficulty_prior_var: f64,
    /// Convergence tolerance: stop when no ability or difficulty moves by more than this
    /// (in logits) during one sweep.
    pub tol: f64,
    /// Maximum number of sweeps (one ability block step plus one difficulty block step).
    pub max_iter: usize,
    /// Largest change of one parameter in one Newton step, in logits (step damping); a
    /// non-positive value disables the cap.
    pub max_step: f64,
}

impl Default for RaschOptions {
    /// `σ_θ² = 1`, `σ_β² = 4`, `tol = 1e-6`, `max_iter = 500`, `max_step = 1`.
    ///
    /// Harness variants of one model differ by a few tenths of a logit at most, so a unit
    /// ability prior costs little bias; task difficulties spread much wider (some tasks are
    /// never solved), hence the looser difficulty prior.
    fn default() -> Self {
        RaschOptions {
            ability_prior_var: 1.0,
            difficulty_prior_var: 4.0,
            tol: 1e-6,
            max_iter: 500,
            max_step: 1.0,
        }
    }
}

/// A fitted Rasch model: one ability per candidate and one difficulty per task.
///
/// See the [module documentation](self) for the model and the estimator.
///
/// # Examples
///
/// ```
/// use hevo_stats::irt::RaschFit;
/// // Candidate 1 solves more than candidate 0; task 1 is harder than task 0.
/// let obs = [(0, 0, 1.0), (0, 1, 0.0), (1, 0, 1.0), (1, 1, 1.0), (0, 2, 0.0), (1, 2, 1.0)];
/// let fit = RaschFit::fit(&obs, 2, 3);
/// assert!(fit.ability[1] > fit.ability[0]);
/// assert!(fit.difficulty[1] > fit.difficulty[0]);
/// let p = fit.predict(0, 0);
/// assert!(p > 0.0 && p < 1.0);
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RaschFit {
    /// Ability `θ_c` of each candidate (logits; mean exactly 0 over all candidates).
    pub ability: Vec<f64>,
    /// Difficulty `b_t` of each task (logits, on the same scale: `P = σ(θ_c - b_t)`).
    pub difficulty: Vec<f64>,
}

/// A [`RaschFit`] together with how the optimizer ended.
#[derive(Clone, Debug, PartialEq)]
pub struct RaschReport {
    /// The fitted parameters.
    pub fit: RaschFit,
    /// Number of sweeps performed.
    pub iterations: usize,
    /// Whether the tolerance was reached before `max_iter`.
    pub converged: bool,
    /// The penalized log-likelihood (log posterior up to a constant) at the returned fit.
    pub log_posterior: f64,
}

impl RaschFit {
    /// Fits the model with [`RaschOptions::default`].
    ///
    /// `obs` holds `(candidate, task, outcome)` with `candidate < n_candidates`,
    /// `task < n_tasks` and `outcome` in `[0, 1]` (values outside are clamped; non-finite
    /// outcomes are ignored). A pair may appear several times (repeated trials). Candidates
    /// or tasks without observations get the average ability / difficulty.
    ///
    /// # Panics
    ///
    /// If an index is out of range.
    pub fn fit(obs: &[(usize, usize, f64)], n_candidates: usize, n_tasks: usize) -> RaschFit {
        Self::fit_with(obs, n_candidates, n_tasks, &RaschOptions::default())
    }

    /// Fits the model with explicit options; see [`RaschFit::fit`].
    pub fn fit_with(
        obs: &[(usize, usize, f64)],
        n_candidates: usize,
        n_tasks: usize,
        opts: &RaschOptions,
    ) -> RaschFit {
        Self::fit_report(obs, n_candidates, n_tasks, opts, None).fit
    }

    /// Fits the model, optionally starting from an earlier fit, and reports convergence.
    ///
    /// `init` is a warm start (e.g. last iteration's fit when a few observations or
    /// candidates were added): its vectors may be shorter or longer than the new sizes;
    /// missing entries start at 0, extra ones are ignored. The optimum does not depend on the
    /// start (the objective is strictly concave), only the number of sweeps does.
    ///
    /// # Panics
    ///
    /// If an index is out of range, or a prior variance is not positive.
    pub fn fit_report(
        obs: &[(usize, usize, f64)],
        n_candidates: usize,
        n_tasks: usize,
        opts: &RaschOptions,
        init: Option<&RaschFit>,
    ) -> RaschReport {
        assert!(
            opts.ability_prior_var > 0.0 && opts.difficulty_prior_var > 0.0,
            "rasch: prior variances must be positive"
        );
        let prec_a = 1.0 / opts.ability_prior_var;
        let prec_d = 1.0 / opts.difficulty_prior_var;
        let max_step = if opts.max_step > 0.0 {
            opts.max_step
        } else {
            f64::INFINITY
        };

        // Structure-of-arrays copy of the valid observations, plus outcome sums.
        let mut cand = Vec::with_capacity(obs.len());
        let mut task = Vec::with_capacity(obs.len());
        let mut y = Vec::with_capacity(obs.len());
        let mut ysum_c = vec![0.0; n_candidates];
        let mut ysum_t = vec![0.0; n_tasks];
        for &(c, t, v) in obs {
            assert!(c < n_candidates, "rasch: candidate {c} >= {n_candidates}");
            assert!(t < n_tasks, "rasch: task {t} >= {n_tasks}");
            if !v.is_finite() {
                continue;
            }
            let v = v.clamp(0.0, 1.0);
            cand.push(c as u32);
            task.push(t as u32);
            y.push(v);
            ysum_c[c] += v;
            ysum_t[t] += v;
        }

        // Internal parameters: θ (centered), β (centered), μ. A warm start is converted from
        // the reported scale (b = β - μ) and recentered.
        let mut theta = vec![0.0; n_candidates];
        let mut beta = vec![0.0; n_tasks];
        let mut mu = 0.0;
        if let Some(f) = init {
            for (dst, src) in theta.iter_mut().zip(&f.ability) {
                *dst = *src;
            }
            for (dst, src) in beta.iter_mut().zip(&f.difficulty) {
                *dst = *src;
            }
            recenter(&mut theta, &mut beta, &mut mu);
        } else if !y.is_empty() {
            // Start the intercept at the logit of the overall (shrunk) pass rate.
            let n = y.len() as f64;
            let rate = (y.iter().sum::<f64>() + 0.5) / (n + 1.0);
            mu = (rate / (1.0 - rate)).ln();
        }

        let mut sp_c = vec![0.0; n_candidates];
        let mut w_c = vec![0.0; n_candidates];
        let mut sp_t = vec![0.0; n_tasks];
        let mut w_t = vec![0.0; n_tasks];
        let mut old_ability = vec![0.0; n_candidates];
        let mut old_difficulty = vec![0.0; n_tasks];
        let mut iterations = 0;
        let mut converged = false;

        while iterations < opts.max_iter {
            iterations += 1;
            old_ability.copy_from_slice(&theta);
            for (o, b) in old_difficulty.iter_mut().zip(&beta) {
                *o = b - mu;
            }

            // Ability block.
            sp_c.fill(0.0);
            w_c.fill(0.0);
            for i in 0..y.len() {
                let (c, t) = (cand[i] as usize, task[i] as usize);
                let p = sigmoid(mu + theta[c] - beta[t]);
                sp_c[c] += p;
                w_c[c] += p * (1.0 - p);
            }
            for c in 0..n_candidates {
                let g = ysum_c[c] - sp_c[c] - theta[c] * prec_a;
                let h = w_c[c] + prec_a;
                theta[c] += (g / h).clamp(-max_step, max_step);
            }

            // Difficulty block.
            sp_t.fill(0.0);
            w_t.fill(0.0);
            for i in 0..y.len() {
                let (c, t) = (cand[i] as usize, task[i] as usize);
                let p = sigmoid(mu + theta[c] - beta[t]);
                sp_t[t] += p;
                w_t[t] += p * (1.0 - p);
            }
            for t in 0..n_tasks {
                let g = sp_t[t] - ysum_t[t] - beta[t] * prec_d;
                let h = w_t[t] + prec_d;
                beta[t] += (g / h).clamp(-max_step, max_step);
            }

            recenter(&mut theta, &mut beta, &mut mu);

            let mut delta: f64 = 0.0;
            for (a, o) in theta.iter().zip(&old_ability) {
                delta = delta.max((a - o).abs());
            }
            for (b, o) in beta.iter().zip(&old_difficulty) {
                delta = delta.max((b - mu - o).abs());
            }
            if delta <= opts.tol {
                converged = true;
                break;
            }
        }

        let mut log_posterior = 0.0;
        for i in 0..y.len() {
            let x = mu + theta[cand[i] as usize] - beta[task[i] as usize];
            log_posterior += y[i] * ln_sigmoid(x) + (1.0 - y[i]) * ln_sigmoid(-x);
        }
        log_posterior -= theta.iter().map(|a| a * a).sum::<f64>() * prec_a / 2.0;
        log_posterior -= beta.iter().map(|b| b * b).sum::<f64>() * prec_d / 2.0;

        let difficulty = beta.iter().map(|b| b - mu).collect();
        RaschReport {
            fit: RaschFit {
                ability: theta,
                difficulty,
            },
            iterations,
            converged,
            log_posterior,
        }
    }

    /// Predicted success probability of `candidate` on `task`.
    ///
    /// # Formula
    ///
    /// `P = σ(θ_candidate - b_task)`; always in `(0, 1)` for the finite parameters the
    /// penalized fit produces.
    ///
    /// # Panics
    ///
    /// If an index is out of range.
    pub fn predict(&self, candidate: usize, task: usize) -> f64 {
        sigmoid(self.ability[candidate] - self.difficulty[task])
    }

    /// The predicted mean score of `candidate` over `tasks` (its model-based full-set score
    /// when `tasks` is the whole validation set). `NaN` for an empty task list.
    ///
    /// # Formula
    ///
    /// `(1 / |T|) Σ_{t ∈ T} σ(θ_candidate - b_t)`
    pub fn predict_mean(&self, candidate: usize, tasks: &[usize]) -> f64 {
        if tasks.is_empty() {
            return f64::NAN;
        }
        tasks
            .iter()
            .map(|&t| self.predict(candidate, t))
            .sum::<f64>()
            / tasks.len() as f64
    }
}

/// Moves `θ` and `β` to mean zero, compensating in `μ` so `μ + θ_c - β_t` is unchanged.
fn recenter(theta: &mut [f64], beta: &mut [f64], mu: &mut f64) {
    if !theta.is_empty() {
        let m = theta.iter().sum::<f64>() / theta.len() as f64;
        theta.iter_mut().for_each(|a| *a -= m);
        *mu += m;
    }
    if !beta.is_empty() {
        let m = beta.iter().sum::<f64>() / beta.len() as f64;
        beta.iter_mut().for_each(|b| *b -= m);
        *mu -= m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sigmoid_reference_values() {
        // Tolerance 1e-15.
        assert_eq!(sigmoid(0.0), 0.5);
        assert!((sigmoid(1.0) - 0.731_058_578_630_004_9).abs() < 1e-15);
        assert!((sigmoid(-2.0) - 0.119_202_922_022_117_57).abs() < 1e-15);
        assert_eq!(sigmoid(f64::INFINITY), 1.0);
        assert_eq!(sigmoid(f64::NEG_INFINITY), 0.0);
        assert!((ln_sigmoid(-800.0) + 800.0).abs() < 1e-12);
        assert!((ln_sigmoid(2.0) - sigmoid(2.0).ln()).abs() < 1e-15);
    }

    #[test]
    fn empty_input_gives_zero_parameters() {
        let r = RaschFit::fit_report(&[], 3, 2, &RaschOptions::default(), None);
        assert!(r.converged);
        assert_eq!(r.fit.ability, vec![0.0; 3]);
        assert_eq!(r.fit.predict(0, 0), 0.5);
        let r = RaschFit::fit(&[], 0, 0);
        assert!(r.ability.is_empty() && r.difficulty.is_empty());
    }

    #[test]
    fn two_by_two_gradient_vanishes_at_the_optimum() {
        // Check stationarity of the penalized likelihood on the reported scale by
        // comparing with a brute-force solution of the score equations.
        let obs = [
            (0, 0, 1.0),
            (0, 1, 0.0),
            (1, 0, 1.0),
            (1, 1, 0.5),
            (1, 1, 1.0),
        ];
        let opts = RaschOptions {
            tol: 1e-12,
            ..RaschOptions::default()
        };
        let r = RaschFit::fit_report(&obs, 2, 2, &opts, None);
        assert!(r.converged);
        let f = &r.fit;
        // Recover μ: β_t = b_t + μ with mean(β) = 0 -> μ = -mean(b).
        let mu = -(f.difficulty.iter().sum::<f64>() / 2.0);
        let beta: Vec<f64> = f.difficulty.iter().map(|b| b + mu).collect();
        let mut g_theta = [0.0; 2];
        let mut g_beta = [0.0; 2];
        let mut g_mu = 0.0;
        for &(c, t, v) in &obs {
            let res = v - f.predict(c, t);
            g_theta[c] += res;
            g_beta[t] -= res;
            g_mu += res;
        }
        for c in 0..2 {
            g_theta[c] -= f.ability[c] / opts.ability_prior_var;
            assert!(g_theta[c].abs() < 1e-9, "{g_theta:?}");
        }
        for t in 0..2 {
            g_beta[t] -= beta[t] / opts.difficulty_prior_var;
            assert!(g_beta[t].abs() < 1e-9, "{g_beta:?}");
        }
        assert!(g_mu.abs() < 1e-9, "{g_mu}");
        assert!(f.ability.iter().sum::<f64>().abs() < 1e-12);
    }
}
