//! Ranks and rank correlation: average ranks with ties, Spearman's rho, and the "true rank"
//! of a pick that replay reports (1 = best).
//!
//! Conventions used throughout:
//!
//! - [`ranks`] ranks ascending (1 = smallest value), as statistics texts do.
//! - [`rank_of`] and [`average_rank_of`] rank descending (1 = largest value), because the
//!   replay question is "how good was the candidate we picked".
//! - `NaN` is treated as larger than every number in [`ranks`] (all `NaN`s tie with each
//!   other) and is never counted as "better" in [`rank_of`].

use std::cmp::Ordering;

/// Average ranks of `xs` (1 = smallest); tied values share the mean of the ranks they span.
///
/// # Formula
///
/// Sort the values; a block of `t` tied values occupying sorted positions `i+1, ..., i+t`
/// (1-based) gets the rank `i + (t + 1) / 2` for each member. The ranks always sum to
/// `n (n + 1) / 2`.
///
/// Values are ordered numerically with `-0.0 == 0.0`; every `NaN` is larger than every number
/// and all `NaN`s tie, so the result is deterministic for every input.
///
/// # Examples
///
/// ```
/// use hevo_stats::rank::ranks;
/// assert_eq!(ranks(&[10.0, 30.0, 20.0, 20.0]), vec![1.0, 4.0, 2.5, 2.5]);
/// ```
pub fn ranks(xs: &[f64]) -> Vec<f64> {
    ranks_within(xs, 0.0)
}

/// [`ranks`], with values that differ by at most `tol` tied: two estimates of one score that
/// differ only by rounding (`0.35` and `0.35000000000000003`) share a rank.
///
/// # Formula
///
/// Sort the values; a block starts at the smallest value not yet ranked and holds every
/// value at most `tol` above it (so a block spans at most `tol`, and a chain of small steps
/// does not merge distant values); each member gets the block's mean rank, as in [`ranks`].
/// `tol = 0` is [`ranks`]. With a finite `tol` infinities tie only with themselves; `NaN`s
/// tie as in [`ranks`].
///
/// # Examples
///
/// ```
/// use hevo_stats::rank::ranks_within;
/// let x = [0.1 + 0.2, 0.3, 0.5];
/// assert_eq!(ranks_within(&x, 1e-9), vec![1.5, 1.5, 3.0]);
/// ```
pub fn ranks_within(xs: &[f64], tol: f64) -> Vec<f64> {
    let n = xs.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| cmp_value(xs[i], xs[j]).then(i.cmp(&j)));
    let tied = |a: f64, b: f64| cmp_value(a, b) == Ordering::Equal || b - a <= tol;
    let mut out = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && tied(xs[order[i]], xs[order[j]]) {
            j += 1;
        }
        // Sorted positions i+1 ..= j (1-based) share their mean rank.
        let avg = (i + 1 + j) as f64 / 2.0;
        for &k in &order[i..j] {
            out[k] = avg;
        }
        i = j;
    }
    out
}

/// Total order used by [`ranks`]: numeric order, `-0.0 == 0.0`, `NaN` last and all `NaN`s equal.
fn cmp_value(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Pearson's product-moment correlation of two equally long samples.
///
/// # Formula
///
/// `r = sum (a_i - ā)(b_i - b̄) / sqrt( sum (a_i - ā)² · sum (b_i - b̄)² )`
///
/// Returns `NaN` when `n < 2` or when either side is constant (zero variance), since the
/// correlation is undefined there. The result is clamped to `[-1, 1]` against rounding.
///
/// # Panics
///
/// If `a.len() != b.len()`.
pub fn pearson(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len(), "pearson: samples differ in length");
    let n = a.len();
    if n < 2 {
        return f64::NAN;
    }
    let ma = a.iter().sum::<f64>() / n as f64;
    let mb = b.iter().sum::<f64>() / n as f64;
    let (mut sab, mut saa, mut sbb) = (0.0, 0.0, 0.0);
    for (&x, &y) in a.iter().zip(b) {
        let (dx, dy) = (x - ma, y - mb);
        sab += dx * dy;
        saa += dx * dx;
        sbb += dy * dy;
    }
    if saa <= 0.0 || sbb <= 0.0 {
        return f64::NAN;
    }
    (sab / (saa * sbb).sqrt()).clamp(-1.0, 1.0)
}

/// Spearman's rank correlation: Pearson's correlation of the average ranks ([`ranks`]).
///
/// # Formula
///
/// `rho = pearson(ranks(a), ranks(b))`. With ties this is the tie-corrected rho; without ties
/// it equals `1 - 6 sum d_i² / (n (n² - 1))` where `d_i` is the rank difference of item `i`.
///
/// Returns `NaN` when `n < 2` or when either side is constant (all values tied).
///
/// # Panics
///
/// If `a.len() != b.len()`.
///
/// # Examples
///
/// ```
/// use hevo_stats::rank::spearman;
/// let rho = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]);
/// assert!((rho - 0.820_782_681_668_123_8).abs() < 1e-12);
/// ```
pub fn spearman(a: &[f64], b: &[f64]) -> f64 {
    spearman_within(a, b, 0.0)
}

/// [`spearman`] on [`ranks_within`] `tol`: values of one side that differ by at most `tol`
/// tie. Use it where the values are computed scores, so that estimates equal to the truth
/// up to rounding correlate 1 with it instead of ranking float noise.
///
/// # Panics
///
/// If `a.len() != b.len()`.
pub fn spearman_within(a: &[f64], b: &[f64], tol: f64) -> f64 {
    assert_eq!(a.len(), b.len(), "spearman: samples differ in length");
    if a.len() < 2 {
        return f64::NAN;
    }
    pearson(&ranks_within(a, tol), &ranks_within(b, tol))
}

/// The true rank of `values[index]` among `values`, where 1 = best = largest value; ties are
/// counted **optimistically** (a pick tied with the best has rank 1).
///
/// # Formula
///
/// `rank = 1 + #{ j : values[j] > values[index] }`
///
/// `NaN` entries are never counted as better; a `NaN` pick ranks behind every non-`NaN` value,
/// i.e. `1 + #{ j : values[j] is not NaN }`. See [`average_rank_of`] for the tie-averaged rank.
///
/// # Panics
///
/// If `index >= values.len()`.
///
/// # Examples
///
/// ```
/// use hevo_stats::rank::rank_of;
/// let scores = [0.5, 0.7, 0.7, 0.2];
/// assert_eq!(rank_of(&scores, 1), 1); // tied for best
/// assert_eq!(rank_of(&scores, 0), 3);
/// assert_eq!(rank_of(&scores, 3), 4);
/// ```
pub fn rank_of(values: &[f64], index: usize) -> usize {
    let v = values[index];
    let better = if v.is_nan() {
        values.iter().filter(|x| !x.is_nan()).count()
    } else {
        values.iter().filter(|&&x| x > v).count()
    };
    1 + better
}

/// The true rank of `values[index]` (1 = best = largest), with ties sharing the mean of the
/// ranks they span (the descending analogue of [`ranks`]).
///
/// # Formula
///
/// `rank = 1 + #{ j : values[j] > v } + (#{ j : values[j] == v } - 1) / 2` with
/// `v = values[index]`. For a `NaN` pick, the non-`NaN` values count as better and the `NaN`s
/// (the pick included) as tied.
///
/// # Panics
///
/// If `index >= values.len()`.
pub fn average_rank_of(values: &[f64], index: usize) -> f64 {
    let v = values[index];
    let (better, tied) = if v.is_nan() {
        let nan = values.iter().filter(|x| x.is_nan()).count();
        (values.len() - nan, nan)
    } else {
        (
            values.iter().filter(|&&x| x > v).count(),
            values.iter().filter(|&&x| x == v).count(),
        )
    };
    1.0 + better as f64 + (tied as f64 - 1.0) / 2.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_without_ties_are_a_permutation() {
        assert_eq!(ranks(&[3.0, 1.0, 2.0]), vec![3.0, 1.0, 2.0]);
        assert!(ranks(&[]).is_empty());
        assert_eq!(ranks(&[7.0]), vec![1.0]);
    }

    #[test]
    fn ranks_average_ties_hand_computed() {
        // Sorted: 1 (pos 1), 2 2 2 (pos 2-4 -> 3), 5 (pos 5), 9 9 (pos 6-7 -> 6.5)
        let r = ranks(&[9.0, 2.0, 5.0, 2.0, 1.0, 9.0, 2.0]);
        assert_eq!(r, vec![6.5, 3.0, 5.0, 3.0, 1.0, 6.5, 3.0]);
        let n = r.len() as f64;
        assert_eq!(r.iter().sum::<f64>(), n * (n + 1.0) / 2.0);
    }

    #[test]
    fn ranks_put_nan_last_and_treat_signed_zero_as_equal() {
        assert_eq!(ranks(&[f64::NAN, 1.0, -0.0, 0.0]), vec![4.0, 3.0, 1.5, 1.5]);
    }

    #[test]
    fn spearman_reference_values() {
        // Tolerance 1e-12 (exact arithmetic up to rounding).
        // No ties: d = (0, 0, 1, -1, 0) -> rho = 1 - 6*2/(5*24) = 0.9.
        let rho = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[10.0, 20.0, 40.0, 30.0, 50.0]);
        assert!((rho - 0.9).abs() < 1e-12, "{rho}");
        // Ties on b: ranks b = (1, 2, 3.5, 5, 3.5); hand computed
        // sum dx dy = 8, sum dx² = 10, sum dy² = 9.5 -> 8 / sqrt(95) = 0.8207826816681238.
        let rho = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[5.0, 6.0, 7.0, 8.0, 7.0]);
        assert!((rho - 8.0 / 95f64.sqrt()).abs() < 1e-12, "{rho}");
        // Perfectly reversed under a monotone transform.
        let rho = spearman(&[1.0, 2.0, 3.0], &[1000.0, 10.0, 0.1]);
        assert!((rho + 1.0).abs() < 1e-12, "{rho}");
    }

    /// Values equal up to rounding tie; a tie block spans at most `tol` (a chain of small
    /// steps does not merge distant values); `tol = 0` is plain [`ranks`].
    #[test]
    fn ranks_within_tie_values_equal_up_to_rounding() {
        let x = [0.3, 0.1 + 0.2, 0.5, 0.5 - 1e-16, f64::NAN, f64::INFINITY];
        assert_eq!(ranks(&x), vec![1.0, 2.0, 4.0, 3.0, 6.0, 5.0]);
        assert_eq!(ranks_within(&x, 1e-9), vec![1.5, 1.5, 3.5, 3.5, 6.0, 5.0]);
        let chain = [0.0, 0.6e-9, 1.2e-9, 1.8e-9];
        assert_eq!(ranks_within(&chain, 1e-9), vec![1.5, 1.5, 3.5, 3.5]);
        let v = [9.0, 2.0, 5.0, 2.0, 1.0, 9.0, 2.0];
        assert_eq!(ranks_within(&v, 0.0), ranks(&v));
    }

    /// Estimates equal to the truth up to rounding correlate exactly 1 with it; plain
    /// `spearman` ranks the rounding and says less (0.949 here).
    #[test]
    fn spearman_within_ignores_rounding_noise() {
        let truth = [0.3, 0.3, 0.5, 0.5, 0.7];
        let est = [0.1 + 0.2, 0.3, 0.5, 0.5 - 1e-16, 0.7];
        assert!(spearman(&est, &truth) < 0.95);
        assert_eq!(spearman_within(&est, &truth, 1e-9), 1.0);
        let reversed = spearman_within(&truth, &[0.7, 0.7, 0.5, 0.5, 0.3], 1e-9);
        assert!((reversed + 1.0).abs() < 1e-12, "{reversed}");
    }

    #[test]
    fn spearman_is_nan_when_undefined() {
        assert!(spearman(&[], &[]).is_nan());
        assert!(spearman(&[1.0], &[2.0]).is_nan());
        assert!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_nan());
        assert!(spearman(&[1.0, 2.0, 3.0], &[4.0, 4.0, 4.0]).is_nan());
    }

    #[test]
    #[should_panic]
    fn spearman_panics_on_length_mismatch() {
        spearman(&[1.0, 2.0], &[1.0]);
    }

    #[test]
    fn pearson_reference_value() {
        // x = 1..5, y = (2, 4, 5, 4, 5): sxy = 6, sxx = 10, syy = 6 -> 6/sqrt(60).
        let r = pearson(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2.0, 4.0, 5.0, 4.0, 5.0]);
        assert!((r - 6.0 / 60f64.sqrt()).abs() < 1e-12, "{r}");
    }

    #[test]
    fn rank_of_is_optimistic_and_average_rank_splits_ties() {
        let v = [0.3, 0.9, 0.5, 0.9, 0.1];
        assert_eq!(rank_of(&v, 1), 1);
        assert_eq!(rank_of(&v, 3), 1);
        assert_eq!(rank_of(&v, 2), 3);
        assert_eq!(rank_of(&v, 4), 5);
        assert_eq!(average_rank_of(&v, 1), 1.5);
        assert_eq!(average_rank_of(&v, 2), 3.0);
        assert_eq!(average_rank_of(&v, 4), 5.0);
    }

    #[test]
    fn rank_of_handles_nan() {
        let v = [f64::NAN, 0.5, 0.7];
        assert_eq!(rank_of(&v, 1), 2); // NaN is never better
        assert_eq!(rank_of(&v, 0), 3); // NaN pick ranks last
        assert_eq!(average_rank_of(&v, 0), 3.0);
    }

    #[test]
    fn average_rank_of_agrees_with_ranks_descending() {
        let v = [4.0, 1.0, 4.0, 2.0, 8.0, 2.0, 2.0];
        let neg: Vec<f64> = v.iter().map(|x| -x).collect();
        let r = ranks(&neg);
        for (i, &ri) in r.iter().enumerate() {
            assert_eq!(average_rank_of(&v, i), ri, "index {i}");
        }
    }
}
