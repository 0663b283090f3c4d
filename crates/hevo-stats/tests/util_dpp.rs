//! DPP greedy MAP: agreement with a naive determinant-based greedy, duplicates, early stop.

use hevo_stats::dpp::{
    cosine_similarity, greedy_map, greedy_map_flat, greedy_map_with, quality_diversity_kernel,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Determinant by Gaussian elimination with partial pivoting.
fn det(mut a: Vec<Vec<f64>>) -> f64 {
    let n = a.len();
    let mut d = 1.0;
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&x, &y| a[x][col].abs().total_cmp(&a[y][col].abs()))
            .unwrap();
        if a[piv][col] == 0.0 {
            return 0.0;
        }
        if piv != col {
            a.swap(piv, col);
            d = -d;
        }
        d *= a[col][col];
        let pivot_row = a[col].clone();
        for row in a.iter_mut().skip(col + 1) {
            let f = row[col] / pivot_row[col];
            for (x, p) in row.iter_mut().zip(&pivot_row).skip(col) {
                *x -= f * p;
            }
        }
    }
    d
}

fn sub(l: &[Vec<f64>], idx: &[usize]) -> Vec<Vec<f64>> {
    idx.iter()
        .map(|&i| idx.iter().map(|&j| l[i][j]).collect())
        .collect()
}

/// The greedy algorithm written naively: at each step, the item maximizing det(L_{Y+i}).
fn naive_greedy(l: &[Vec<f64>], k: usize, eps: f64) -> Vec<usize> {
    let n = l.len();
    let mut y: Vec<usize> = Vec::new();
    let mut cur = 1.0;
    while y.len() < k.min(n) {
        let mut best: Option<(usize, f64)> = None;
        for i in (0..n).filter(|i| !y.contains(i)) {
            let mut s = y.clone();
            s.push(i);
            let g = det(sub(l, &s)) / cur;
            if best.is_none() || g > best.unwrap().1 {
                best = Some((i, g));
            }
        }
        let (j, g) = best.unwrap();
        if g <= eps {
            break;
        }
        y.push(j);
        cur *= g;
    }
    y
}

/// L = B Bᵀ with B n x r Gaussian: PSD of rank min(n, r).
fn random_kernel(n: usize, r: usize, seed: u64) -> Vec<Vec<f64>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let b: Vec<Vec<f64>> = (0..n)
        .map(|_| (0..r).map(|_| rng.gen::<f64>() * 2.0 - 1.0).collect())
        .collect();
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| b[i].iter().zip(&b[j]).map(|(x, y)| x * y).sum())
                .collect()
        })
        .collect()
}

proptest! {
    #[test]
    fn fast_greedy_matches_naive_greedy(seed in any::<u64>(), n in 1usize..9, r in 1usize..9, k in 0usize..10) {
        let l = random_kernel(n, r, seed);
        let eps = 1e-9;
        let fast = greedy_map_with(&l, k, eps);
        let naive = naive_greedy(&l, k, eps);
        prop_assert_eq!(&fast.items, &naive);
        // Never more than the rank, never more than k.
        prop_assert!(fast.items.len() <= r.min(n).min(k));
        if !fast.items.is_empty() {
            let ld = det(sub(&l, &fast.items)).ln();
            // Relative tolerance 1e-8 on the log-determinant.
            prop_assert!((fast.log_det - ld).abs() <= 1e-8 * ld.abs().max(1.0), "{} vs {}", fast.log_det, ld);
        }
        // Gains are the successive determinant ratios.
        let mut prev = 1.0;
        for t in 0..fast.items.len() {
            let d = det(sub(&l, &fast.items[..=t]));
            prop_assert!((fast.gains[t] - d / prev).abs() <= 1e-8 * (d / prev).abs().max(1e-3));
            prev = d;
        }
    }

    #[test]
    fn flat_and_row_kernels_agree(seed in any::<u64>(), n in 1usize..8, k in 0usize..8) {
        let l = random_kernel(n, n, seed);
        let flat: Vec<f64> = l.iter().flatten().copied().collect();
        prop_assert_eq!(greedy_map_flat(&flat, n, k, 1e-10), greedy_map_with(&l, k, 1e-10));
    }
}

#[test]
fn never_picks_two_identical_items_while_distinct_ones_remain() {
    // 6 distinct failure patterns, each duplicated 3 times (18 items).
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let base: Vec<Vec<f64>> = (0..6)
        .map(|_| {
            (0..10)
                .map(|_| if rng.gen::<f64>() < 0.5 { 1.0 } else { 0.0 })
                .collect()
        })
        .collect();
    let vectors: Vec<Vec<f64>> = (0..18).map(|i| base[i % 6].clone()).collect();
    let quality: Vec<f64> = (0..18).map(|i| 1.0 + i as f64 / 18.0).collect();
    let l = quality_diversity_kernel(&quality, &cosine_similarity(&vectors));
    let picks = greedy_map(&l, 10);
    // Distinct patterns (if linearly independent) are all taken, each exactly once.
    let patterns: Vec<usize> = picks.iter().map(|&i| i % 6).collect();
    let mut uniq = patterns.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(
        uniq.len(),
        patterns.len(),
        "duplicate pattern picked: {picks:?}"
    );
    assert_eq!(picks.len(), 6, "{picks:?}");
    // Among copies, the highest-quality one is chosen (copies 12..18 have the top quality).
    assert!(picks.iter().all(|&i| i >= 12), "{picks:?}");
}

#[test]
fn stops_early_when_the_gain_is_at_most_epsilon() {
    // Rank-3 kernel: a fourth item would add a zero gain.
    let l = random_kernel(10, 3, 99);
    let sel = greedy_map_with(&l, 8, 1e-10);
    assert_eq!(sel.items.len(), 3);
    // epsilon = 1 is the unconstrained MAP rule: stop as soon as det would drop.
    let small = vec![vec![0.5, 0.0], vec![0.0, 0.25]];
    assert!(greedy_map_with(&small, 2, 1.0).items.is_empty());
    let mixed = vec![vec![3.0, 0.0], vec![0.0, 0.5]];
    assert_eq!(greedy_map_with(&mixed, 2, 1.0).items, vec![0]);
}

#[test]
fn hand_computed_two_by_two() {
    // L = [[2, 1], [1, 1]]: first pick 0 (gain 2), then 1 with gain 1 - 1/2 = 0.5,
    // log det = ln(2 * 0.5) = 0.
    let l = vec![vec![2.0, 1.0], vec![1.0, 1.0]];
    let sel = greedy_map_with(&l, 2, 1e-10);
    assert_eq!(sel.items, vec![0, 1]);
    assert!((sel.gains[0] - 2.0).abs() < 1e-15);
    assert!((sel.gains[1] - 0.5).abs() < 1e-15);
    assert!(sel.log_det.abs() < 1e-15);
}

#[test]
fn ties_go_to_the_smallest_index_and_k_zero_is_empty() {
    let l = vec![
        vec![1.0, 0.0, 0.0],
        vec![0.0, 1.0, 0.0],
        vec![0.0, 0.0, 1.0],
    ];
    assert_eq!(greedy_map(&l, 2), vec![0, 1]);
    assert!(greedy_map(&l, 0).is_empty());
    assert!(greedy_map(&[], 3).is_empty());
}

#[test]
fn cosine_similarity_reference_values() {
    let s = cosine_similarity(&[
        vec![1.0, 0.0],
        vec![1.0, 1.0],
        vec![0.0, 0.0],
        vec![2.0, 0.0],
    ]);
    assert!((s[0][1] - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-15);
    assert_eq!(s[0][3], 1.0);
    assert_eq!(s[2][2], 1.0);
    assert_eq!(s[2][0], 0.0);
    assert_eq!(s[1][0], s[0][1]);
}

#[test]
fn quality_diversity_kernel_reference_values() {
    let l = quality_diversity_kernel(&[2.0, 3.0], &[vec![1.0, 0.5], vec![0.5, 1.0]]);
    assert_eq!(l, vec![vec![4.0, 3.0], vec![3.0, 9.0]]);
}
