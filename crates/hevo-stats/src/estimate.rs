//! Estimates of a mean score: the point value, its standard error and a 95% interval.
//!
//! Every score hevo reports is an [`Estimate`], whether it comes from a full evaluation
//! (exact up to trial noise) or from a subset with a design-based estimator.

use serde::{Deserialize, Serialize};

/// The 97.5% quantile of the standard normal distribution (two-sided 95% intervals).
pub const Z95: f64 = 1.959_963_984_540_054;

/// A point estimate of a mean score with its standard error and a 95% interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The point estimate.
    pub value: f64,
    /// Its standard error (0 when the value is known exactly).
    pub se: f64,
    /// Lower end of the 95% interval.
    pub ci_low: f64,
    /// Upper end of the 95% interval.
    pub ci_high: f64,
}

impl Estimate {
    /// A normal-approximation interval `value ± 1.96 se`, clipped to `[lo, hi]`.
    ///
    /// Scores in hevo live in `[0, 1]`; pass those bounds for scores, or
    /// `f64::NEG_INFINITY, f64::INFINITY` for unbounded quantities such as differences.
    pub fn normal(value: f64, se: f64, lo: f64, hi: f64) -> Self {
        let se = if se.is_finite() {
            se.max(0.0)
        } else {
            f64::INFINITY
        };
        Estimate {
            value,
            se,
            ci_low: (value - Z95 * se).max(lo),
            ci_high: (value + Z95 * se).min(hi),
        }
    }

    /// A value known without sampling error (e.g. a full-set mean of deterministic outcomes).
    pub fn exact(value: f64) -> Self {
        Estimate {
            value,
            se: 0.0,
            ci_low: value,
            ci_high: value,
        }
    }
}

/// The mean of per-task outcomes in `[0, 1]`, with the sample standard error and a 95%
/// Wilson score interval.
///
/// # Formula
///
/// `p = mean(x)`, `se = sd(x) / sqrt(n)` (sample sd, `n - 1` denominator), interval
/// `(p + z²/2n ± z sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)` with `z = 1.96`. Wilson's interval
/// uses the largest variance a `[0, 1]` variable with mean `p` can have, so it stays honest
/// for partial credit and does not collapse to a point when every task passes or fails.
/// An empty input gives `NaN` with the interval `[0, 1]`.
pub fn sample_mean(xs: &[f64]) -> Estimate {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return Estimate {
            value: f64::NAN,
            se: f64::NAN,
            ci_low: 0.0,
            ci_high: 1.0,
        };
    }
    let p = xs.iter().sum::<f64>() / n;
    let se = if xs.len() > 1 {
        let var = xs.iter().map(|x| (x - p) * (x - p)).sum::<f64>() / (n - 1.0);
        (var / n).sqrt()
    } else {
        0.0
    };
    let (ci_low, ci_high) = wilson(p.clamp(0.0, 1.0), n);
    Estimate {
        value: p,
        se,
        ci_low,
        ci_high,
    }
}

/// The 95% Wilson score interval for a proportion `p` observed on `n` items.
pub fn wilson(p: f64, n: f64) -> (f64, f64) {
    if n <= 0.0 {
        return (0.0, 1.0);
    }
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    ((center - half).max(0.0), (center + half).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_reference_values() {
        // Reference: 8 successes of 10 -> [0.4902, 0.9433] (Wilson 1927; standard tables).
        let (lo, hi) = wilson(0.8, 10.0);
        assert!((lo - 0.4902).abs() < 1e-3, "{lo}");
        assert!((hi - 0.9433).abs() < 1e-3, "{hi}");
    }

    #[test]
    fn sample_mean_of_all_passes_keeps_a_nondegenerate_interval() {
        let e = sample_mean(&[1.0; 20]);
        assert_eq!(e.value, 1.0);
        assert_eq!(e.se, 0.0);
        assert!(e.ci_low < 0.9 && e.ci_high == 1.0, "{e:?}");
    }

    #[test]
    fn sample_mean_se_is_sd_over_root_n() {
        let e = sample_mean(&[0.0, 1.0, 0.0, 1.0]);
        assert_eq!(e.value, 0.5);
        let sd = (1.0f64 / 3.0).sqrt();
        assert!((e.se - sd / 2.0).abs() < 1e-12);
    }
}
