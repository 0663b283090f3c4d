//! Pareto dominance and HarnessPro tiers: hand-computed cases and properties.

use hevo_stats::pareto::{
    closest_to_ideal, dominates, min_max_normalize, non_dominated, normalized_goodness,
    pareto_front, tier_picks, tier_survivors, weighted_sq_distance, weighted_sq_distance_to_ideal,
    Direction, Point, PASS_COST,
};
use proptest::prelude::*;

fn pt(pass_rate: f64, cost: f64) -> Point {
    Point { pass_rate, cost }
}

#[test]
fn dominance_is_strict() {
    let d = PASS_COST;
    assert!(dominates(&[0.6, 1.0], &[0.5, 1.0], &d));
    assert!(dominates(&[0.5, 0.9], &[0.5, 1.0], &d));
    assert!(!dominates(&[0.5, 1.0], &[0.5, 1.0], &d)); // identical
    assert!(!dominates(&[0.6, 2.0], &[0.5, 1.0], &d)); // trade-off
    assert!(!dominates(&[f64::NAN, 0.0], &[0.5, 1.0], &d));
}

#[test]
fn front_keeps_duplicates_and_drops_nan() {
    let pts = [
        pt(0.5, 1.0),
        pt(0.5, 1.0),
        pt(0.4, 1.0),
        pt(f64::NAN, 0.0),
        pt(0.7, 3.0),
    ];
    assert_eq!(non_dominated(&pts), vec![0, 1, 4]);
}

#[test]
fn three_objective_front() {
    use Direction::*;
    let dirs = [Maximize, Minimize, Minimize];
    let pts = vec![
        vec![0.5, 1.0, 10.0],
        vec![0.5, 1.0, 12.0], // dominated by 0 (slower)
        vec![0.6, 2.0, 12.0],
        vec![0.4, 0.5, 20.0],
    ];
    assert_eq!(pareto_front(&pts, &dirs), vec![0, 2, 3]);
}

#[test]
fn min_max_reference_values() {
    assert_eq!(min_max_normalize(&[2.0, 4.0, 3.0]), vec![0.0, 1.0, 0.5]);
    assert_eq!(min_max_normalize(&[5.0, 5.0]), vec![0.0, 0.0]);
    assert!(min_max_normalize(&[]).is_empty());
    let v = min_max_normalize(&[1.0, f64::NAN, 3.0]);
    assert_eq!(v[0], 0.0);
    assert!(v[1].is_nan());
    assert_eq!(v[2], 1.0);
}

#[test]
fn distance_reference_values() {
    // alpha (1 - p)² + beta c²: 1 * 0.25 + 2 * 0.04 = 0.33
    let d = weighted_sq_distance_to_ideal(0.5, 0.2, 1.0, 2.0);
    assert!((d - 0.33).abs() < 1e-12, "{d}");
    assert_eq!(weighted_sq_distance(&[1.0, 1.0], &[5.0, 7.0]), 0.0);
}

#[test]
fn tiers_hand_computed() {
    // Survivors 1, 2, 3 (0 dominated by 1, 4 below the floor).
    // P' = (0, 1/3, 1), C' = (0, 11/17, 1).
    // lite  (1,2): 1, 4/9 + 2*(11/17)^2 = 1.2817, 2          -> 1
    // medium(1,1): 1, 4/9 + (11/17)^2   = 0.8631, 1          -> 2
    // heavy (2,1): 2, 8/9 + (11/17)^2   = 1.3075, 1          -> 3
    let pts = [
        pt(0.50, 1.0),
        pt(0.52, 0.3),
        pt(0.56, 1.4),
        pt(0.64, 2.0),
        pt(0.45, 0.1),
    ];
    assert_eq!(tier_survivors(&pts, 0.5), vec![1, 2, 3]);
    let t = tier_picks(&pts, 0.5);
    assert_eq!((t.lite, t.medium, t.heavy), (Some(1), Some(2), Some(3)));
}

#[test]
fn initial_harness_may_survive_as_the_only_pick() {
    let pts = [pt(0.5, 1.0), pt(0.45, 0.5), pt(0.5, 1.2)];
    let t = tier_picks(&pts, 0.5);
    assert_eq!((t.lite, t.medium, t.heavy), (Some(0), Some(0), Some(0)));
    assert_eq!(t.distinct(), vec![0]);
}

#[test]
fn no_survivors_gives_no_picks() {
    let t = tier_picks(&[pt(0.3, 1.0)], 0.5);
    assert_eq!(t.distinct(), Vec::<usize>::new());
    assert_eq!(t.lite, None);
    let t = tier_picks(&[], 0.5);
    assert_eq!(t.heavy, None);
}

#[test]
fn duplicates_resolve_to_the_earliest_index() {
    let pts = [pt(0.4, 9.0), pt(0.6, 1.0), pt(0.6, 1.0)];
    let t = tier_picks(&pts, 0.5);
    assert_eq!(t.distinct(), vec![1]);
}

#[test]
fn nan_baseline_means_no_floor() {
    let pts = [pt(0.1, 0.1), pt(0.9, 5.0)];
    assert_eq!(tier_survivors(&pts, f64::NAN), vec![0, 1]);
}

#[test]
fn general_closest_matches_two_objective_picks() {
    let pts = [pt(0.50, 1.0), pt(0.52, 0.3), pt(0.56, 1.4), pt(0.64, 2.0)];
    let objs: Vec<[f64; 2]> = pts.iter().map(|p| p.objectives()).collect();
    let surv = tier_survivors(&pts, 0.5);
    let t = tier_picks(&pts, 0.5);
    assert_eq!(
        closest_to_ideal(&objs, &PASS_COST, &surv, &[1.0, 2.0]),
        t.lite
    );
    assert_eq!(
        closest_to_ideal(&objs, &PASS_COST, &surv, &[1.0, 1.0]),
        t.medium
    );
    assert_eq!(
        closest_to_ideal(&objs, &PASS_COST, &surv, &[2.0, 1.0]),
        t.heavy
    );
}

/// Points on a coarse grid so that ties and duplicates are common.
fn points() -> impl Strategy<Value = Vec<Point>> {
    prop::collection::vec((0u8..=10, 0u8..=10), 0..25).prop_map(|v| {
        v.into_iter()
            .map(|(p, c)| pt(p as f64 / 10.0, c as f64 / 4.0))
            .collect()
    })
}

proptest! {
    #[test]
    fn front_is_undominated_and_everything_else_is_dominated(pts in points()) {
        let front = non_dominated(&pts);
        for (i, p) in pts.iter().enumerate() {
            let dominated = pts.iter().any(|q| dominates(&q.objectives(), &p.objectives(), &PASS_COST));
            prop_assert_eq!(front.contains(&i), !dominated, "point {}", i);
        }
        // Every excluded point is dominated by a point of the front (the front is complete).
        for i in (0..pts.len()).filter(|i| !front.contains(i)) {
            prop_assert!(front.iter().any(|&j| dominates(&pts[j].objectives(), &pts[i].objectives(), &PASS_COST)));
        }
    }

    #[test]
    fn normalization_maps_into_unit_interval(xs in prop::collection::vec(-1e6f64..1e6, 0..30)) {
        let n = min_max_normalize(&xs);
        prop_assert_eq!(n.len(), xs.len());
        for (v, x) in n.iter().zip(&xs) {
            prop_assert!((0.0..=1.0).contains(v));
            // Order preserving.
            for (w, y) in n.iter().zip(&xs) {
                if x < y { prop_assert!(v <= w); }
            }
        }
        if xs.iter().any(|&x| x != xs[0]) {
            prop_assert!(n.contains(&0.0) && n.contains(&1.0));
        }
    }

    #[test]
    fn goodness_is_in_unit_interval(pts in points()) {
        let objs: Vec<[f64; 2]> = pts.iter().map(|p| p.objectives()).collect();
        let all: Vec<usize> = (0..pts.len()).collect();
        for row in normalized_goodness(&objs, &PASS_COST, &all) {
            for g in row { prop_assert!((0.0..=1.0).contains(&g)); }
        }
    }

    #[test]
    fn picks_are_survivors_and_optimal(pts in points(), base in 0u8..=10) {
        let base = base as f64 / 10.0;
        let surv = tier_survivors(&pts, base);
        let t = tier_picks(&pts, base);
        prop_assert!(t.distinct().len() <= 3);
        prop_assert_eq!(t.lite.is_none(), surv.is_empty());
        for &s in &surv {
            prop_assert!(pts[s].pass_rate >= base);
        }
        let pass: Vec<f64> = surv.iter().map(|&i| pts[i].pass_rate).collect();
        let cost: Vec<f64> = surv.iter().map(|&i| pts[i].cost).collect();
        let (pn, cn) = (min_max_normalize(&pass), min_max_normalize(&cost));
        for (pick, (a, b)) in [t.lite, t.medium, t.heavy].into_iter().zip([(1.0, 2.0), (1.0, 1.0), (2.0, 1.0)]) {
            if let Some(p) = pick {
                prop_assert!(surv.contains(&p));
                let k = surv.iter().position(|&s| s == p).unwrap();
                let dp = weighted_sq_distance_to_ideal(pn[k], cn[k], a, b);
                for j in 0..surv.len() {
                    let dj = weighted_sq_distance_to_ideal(pn[j], cn[j], a, b);
                    // No survivor is closer; an equally close one never has a smaller index.
                    prop_assert!(dp < dj || (dp == dj && p <= surv[j]));
                }
            }
        }
    }

    #[test]
    fn heavier_tiers_never_pick_a_lower_pass_rate(pts in points(), base in 0u8..=10) {
        // On the front, pass rate and cost increase together; a larger alpha/beta ratio
        // moves the pick towards higher pass rate.
        let t = tier_picks(&pts, base as f64 / 10.0);
        if let (Some(l), Some(m), Some(h)) = (t.lite, t.medium, t.heavy) {
            prop_assert!(pts[l].pass_rate <= pts[m].pass_rate);
            prop_assert!(pts[m].pass_rate <= pts[h].pass_rate);
        }
    }
}
