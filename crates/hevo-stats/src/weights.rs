//! Task-CoEvolve's variance weights and the per-task statistics they are computed from.
//!
//! After Phase 0 (and after every iteration) each validation task `t` has `s_t` successes out
//! of `n_t` observations (fractional outcomes in `[0, 1]` count as partial successes). The
//! weights steer the next subset towards tasks where candidates disagree. Pure arithmetic:
//! no IO, no randomness.

/// Running per-task success statistics (`s_t`, `n_t`) over every observation so far.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskStats {
    /// `s_t`: summed outcomes per task.
    pub successes: Vec<f64>,
    /// `n_t`: number of observations per task.
    pub observations: Vec<f64>,
}

impl TaskStats {
    /// Statistics for `n_tasks` tasks with no observation yet.
    pub fn new(n_tasks: usize) -> Self {
        TaskStats {
            successes: vec![0.0; n_tasks],
            observations: vec![0.0; n_tasks],
        }
    }

    /// Records one observed outcome (in `[0, 1]`) on `task`.
    pub fn record(&mut self, task: usize, outcome: f64) {
        self.successes[task] += outcome;
        self.observations[task] += 1.0;
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.successes.len()
    }

    /// True when there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.successes.is_empty()
    }

    /// `p_t = s_t / n_t`, the historical success rate of `task` (`0.5` if never observed).
    pub fn rate(&self, task: usize) -> f64 {
        let n = self.observations[task];
        if n > 0.0 {
            self.successes[task] / n
        } else {
            0.5
        }
    }

    /// All historical success rates `p_t` (see [`TaskStats::rate`]).
    pub fn rates(&self) -> Vec<f64> {
        (0..self.len()).map(|t| self.rate(t)).collect()
    }
}

/// Parameters of the Task-CoEvolve weights (paper defaults in [`Default`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WeightParams {
    /// `l`: the weight floor for tasks never solved so far (paper: 0.125).
    pub floor: f64,
    /// `lambda`: the exploration bonus scale (paper: 0.025).
    pub lambda: f64,
}

impl Default for WeightParams {
    fn default() -> Self {
        WeightParams {
            floor: 0.125,
            lambda: 0.025,
        }
    }
}

/// Task-CoEvolve's sampling weights (paper Eq. 2).
///
/// # Formula
///
/// `w_t = max(p_t (1 - p_t), l_t) + lambda / sqrt(n_t)`
///
/// - `p_t = s_t / n_t`: historical success rate of task `t`;
/// - `l_t = l` (default 0.125) when the task was never solved (`s_t = 0`), else `0`;
/// - `lambda` (default 0.025): exploration bonus for rarely observed tasks.
///
/// A task never observed (`n_t = 0`) gets the largest weight a task can have,
/// `max(0.25, l) + lambda`. Every weight is strictly positive.
pub fn coevolve_weights(stats: &TaskStats, params: WeightParams) -> Vec<f64> {
    (0..stats.len())
        .map(|t| {
            let n = stats.observations[t];
            if n <= 0.0 {
                return params.floor.max(0.25) + params.lambda;
            }
            let p = stats.successes[t] / n;
            let l = if stats.successes[t] <= 0.0 {
                params.floor
            } else {
                0.0
            };
            (p * (1.0 - p)).max(l) + params.lambda / n.sqrt()
        })
        .collect()
}

/// Cost-aware weights: information per dollar (SPEC section 4), `w_t / c_t^gamma`.
///
/// # Formula
///
/// `w'_t = w_t / (c_t / c_bar)^gamma` with `c_bar` the mean cost of the tasks; `gamma = 1`
/// is information per dollar, `gamma = 0` ignores cost, `gamma = 0.5` is the square-root
/// allocation that minimizes variance for a fixed expected spend under PPS sampling.
/// Non-positive or non-finite costs are treated as the mean cost.
pub fn cost_aware_weights(weights: &[f64], costs: &[f64], gamma: f64) -> Vec<f64> {
    let valid: Vec<f64> = costs
        .iter()
        .copied()
        .filter(|c| c.is_finite() && *c > 0.0)
        .collect();
    if valid.is_empty() {
        return weights.to_vec();
    }
    let mean = valid.iter().sum::<f64>() / valid.len() as f64;
    weights
        .iter()
        .zip(costs)
        .map(|(w, c)| {
            let c = if c.is_finite() && *c > 0.0 { *c } else { mean };
            w / (c / mean).powf(gamma)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_weights() {
        let mut s = TaskStats::new(3);
        // task 0: never solved in 4 observations -> floor
        for _ in 0..4 {
            s.record(0, 0.0);
        }
        // task 1: 2 of 4 -> 0.25 + 0.025/2
        for x in [1.0, 0.0, 1.0, 0.0] {
            s.record(1, x);
        }
        let w = coevolve_weights(&s, WeightParams::default());
        assert!((w[0] - (0.125 + 0.0125)).abs() < 1e-12);
        assert!((w[1] - (0.25 + 0.0125)).abs() < 1e-12);
        assert!((w[2] - 0.275).abs() < 1e-12);
    }

    #[test]
    fn always_solved_tasks_get_only_the_bonus() {
        let mut s = TaskStats::new(1);
        for _ in 0..16 {
            s.record(0, 1.0);
        }
        let w = coevolve_weights(&s, WeightParams::default());
        assert!((w[0] - 0.025 / 4.0).abs() < 1e-12);
    }

    #[test]
    fn cost_aware_downweights_expensive_tasks() {
        let w = cost_aware_weights(&[1.0, 1.0], &[1.0, 3.0], 1.0);
        assert!((w[0] / w[1] - 3.0).abs() < 1e-12);
    }
}
