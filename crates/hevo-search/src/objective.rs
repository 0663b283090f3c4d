//! HarnessPro's objective (SPEC section 3): every candidate scored on pass rate and mean cost
//! per task, both with intervals, and the lite / medium / heavy tiers picked from them.
//!
//! Cost comes from the store's trial rows: dollars when any trial of the run was priced,
//! otherwise total tokens per trial (a free local model still costs tokens). Wall time per
//! task is kept as a secondary column; it never enters the selection.
//!
//! The selection itself is `hevo_stats::pareto`'s: drop candidates below the initial
//! harness's validation pass rate, drop dominated ones, min-max normalize over the
//! survivors, and per tier take the survivor closest to the ideal point by
//! `alpha (1 - P')² + beta C'²`.

use std::collections::BTreeMap;

use hevo_runtime::store::TrialRow;
use hevo_stats::estimate::Estimate;
use hevo_stats::pareto::{closest_to_ideal, tier_survivors, Point, TierPicks, PASS_COST};
use serde::{Deserialize, Serialize};

use crate::config::ObjectiveConfig;

/// What a cost is counted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostUnit {
    /// Dollars from the gateway's price table.
    Usd,
    /// Tokens (uncached and cached input plus output), when every call was free.
    Tokens,
}

impl CostUnit {
    /// Dollars when any of `rows` cost money, else tokens.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a TrialRow>) -> CostUnit {
        if rows.into_iter().any(|r| r.spend.cost_usd > 0.0) {
            CostUnit::Usd
        } else {
            CostUnit::Tokens
        }
    }

    /// The cost of one trial row in this unit.
    pub fn cost_of(self, row: &TrialRow) -> f64 {
        match self {
            CostUnit::Usd => row.spend.cost_usd,
            CostUnit::Tokens => row.spend.total_tokens() as f64,
        }
    }

    /// `$` or `tokens`, for tables.
    pub fn label(self) -> &'static str {
        match self {
            CostUnit::Usd => "$",
            CostUnit::Tokens => "tokens",
        }
    }
}

/// A candidate's cost over some trials.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostSummary {
    /// The unit of `per_task` and `total`.
    pub unit: CostUnit,
    /// Mean over tasks of each task's mean cost per trial, with a 95% normal interval
    /// (clipped at 0).
    pub per_task: Estimate,
    /// Mean over tasks of each task's mean harness wall time (ms).
    pub wall_ms_per_task: f64,
    /// Total cost of all the trials.
    pub total: f64,
    /// Trials counted.
    pub trials: usize,
    /// Sum of the outcomes of the scored trials (passes, for 0/1 outcomes).
    pub successes: f64,
}

impl CostSummary {
    /// Cost of a pass: total cost divided by successes (infinite without a success).
    pub fn cost_of_pass(&self) -> f64 {
        if self.successes > 0.0 {
            self.total / self.successes
        } else {
            f64::INFINITY
        }
    }
}

/// The cost of a candidate's trial rows, per task.
///
/// # Formula
///
/// With `c̄_t` the mean cost of task `t`'s trials and `T` the tasks:
/// `value = (1/|T|) Σ_t c̄_t`, `se = sd(c̄) / sqrt(|T|)`, interval `value ± 1.96 se` clipped
/// at 0. Every trial counts (a failed or errored trial still spent its tokens); successes
/// add the outcomes of `pass` and `fail` trials.
pub fn cost_summary(rows: &[TrialRow], unit: CostUnit) -> CostSummary {
    let mut by_task: BTreeMap<&str, (f64, f64, usize)> = BTreeMap::new();
    let mut total = 0.0;
    let mut successes = 0.0;
    for r in rows {
        let c = unit.cost_of(r);
        total += c;
        if r.status == "pass" || r.status == "fail" {
            successes += r.outcome;
        }
        let e = by_task.entry(&r.task_id).or_default();
        e.0 += c;
        e.1 += r.wall_ms as f64;
        e.2 += 1;
    }
    let costs: Vec<f64> = by_task.values().map(|(c, _, n)| c / *n as f64).collect();
    let walls: Vec<f64> = by_task.values().map(|(_, w, n)| w / *n as f64).collect();
    CostSummary {
        unit,
        per_task: mean_with_interval(&costs),
        wall_ms_per_task: mean(&walls),
        total,
        trials: rows.len(),
        successes,
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        f64::NAN
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

/// Mean with a normal 95% interval clipped at 0 (costs are never negative).
fn mean_with_interval(xs: &[f64]) -> Estimate {
    let m = mean(xs);
    let n = xs.len() as f64;
    let se = if xs.len() > 1 {
        (xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1.0) / n).sqrt()
    } else {
        0.0
    };
    if m.is_nan() {
        return Estimate {
            value: f64::NAN,
            se: f64::NAN,
            ci_low: 0.0,
            ci_high: f64::INFINITY,
        };
    }
    Estimate::normal(m, se, 0.0, f64::INFINITY)
}

/// The three tiers, in order, with their names.
pub const TIERS: [&str; 3] = ["lite", "medium", "heavy"];

/// HarnessPro's selection with the configured `(alpha, beta)` of each tier.
///
/// Candidates below `baseline_pass_rate` and dominated ones are dropped
/// ([`tier_survivors`]); each tier then takes the survivor closest to the ideal point
/// ([`closest_to_ideal`], earliest on ties). With the default weights this equals
/// `hevo_stats::pareto::tier_picks`.
pub fn select_tiers(points: &[Point], baseline_pass_rate: f64, w: &ObjectiveConfig) -> TierPicks {
    let survivors = tier_survivors(points, baseline_pass_rate);
    let objs: Vec<[f64; 2]> = points.iter().map(Point::objectives).collect();
    let pick = |ab: [f64; 2]| closest_to_ideal(&objs, &PASS_COST, &survivors, &ab);
    let [lite, medium, heavy] = w.weights();
    TierPicks {
        lite: pick(lite),
        medium: pick(medium),
        heavy: pick(heavy),
    }
}

/// One candidate's two objectives, as the search measured them on validation.
#[derive(Clone, Debug, Serialize)]
pub struct CandidatePoint {
    /// The candidate's name.
    pub name: String,
    /// Its iteration (0 = seed).
    pub iteration: u32,
    /// The strategy's final estimate of its pass rate.
    pub pass_rate: Estimate,
    /// Its cost on the trials the strategy ran.
    pub cost: CostSummary,
}

/// One tier of the result.
#[derive(Clone, Debug, Serialize)]
pub struct TierLine {
    /// `lite`, `medium` or `heavy`.
    pub tier: String,
    /// The `[alpha, beta]` it was picked with.
    pub weights: [f64; 2],
    /// The picked candidate.
    pub candidate: CandidatePoint,
}

/// The pareto objective's result: every candidate's point and the tiers.
#[derive(Clone, Debug, Serialize)]
pub struct ParetoReport {
    /// The initial harness (first seed), whose pass rate is the floor.
    pub baseline: String,
    /// Its validation pass rate.
    pub baseline_pass_rate: f64,
    /// The unit of every cost.
    pub unit: CostUnit,
    /// Survivors of the floor and of dominance, by name.
    pub survivors: Vec<String>,
    /// Every candidate, in arrival order.
    pub candidates: Vec<CandidatePoint>,
    /// The tiers, lite, medium, heavy (a tier is missing only when nothing survives).
    pub tiers: Vec<TierLine>,
}

impl ParetoReport {
    /// Scores `candidates` (arrival order; the first is the initial harness) and picks the
    /// tiers. `rows[i]` are candidate `i`'s trial rows.
    pub fn build(
        candidates: &[(String, u32, Estimate)],
        rows: &[Vec<TrialRow>],
        w: &ObjectiveConfig,
    ) -> ParetoReport {
        let unit = CostUnit::of(rows.iter().flatten());
        let points: Vec<CandidatePoint> = candidates
            .iter()
            .zip(rows)
            .map(|((name, iteration, est), r)| CandidatePoint {
                name: name.clone(),
                iteration: *iteration,
                pass_rate: *est,
                cost: cost_summary(r, unit),
            })
            .collect();
        let objs: Vec<Point> = points
            .iter()
            .map(|p| Point {
                pass_rate: p.pass_rate.value,
                cost: p.cost.per_task.value,
            })
            .collect();
        let baseline_pass_rate = objs.first().map_or(f64::NAN, |p| p.pass_rate);
        let picks = select_tiers(&objs, baseline_pass_rate, w);
        let weights = w.weights();
        let tiers = [picks.lite, picks.medium, picks.heavy]
            .into_iter()
            .zip(TIERS)
            .zip(weights)
            .filter_map(|((pick, tier), weights)| {
                pick.map(|i| TierLine {
                    tier: tier.into(),
                    weights,
                    candidate: points[i].clone(),
                })
            })
            .collect();
        ParetoReport {
            baseline: points.first().map(|p| p.name.clone()).unwrap_or_default(),
            baseline_pass_rate,
            unit,
            survivors: tier_survivors(&objs, baseline_pass_rate)
                .into_iter()
                .map(|i| points[i].name.clone())
                .collect(),
            candidates: points,
            tiers,
        }
    }

    /// `(tier, candidate name)` of each tier.
    pub fn tier_names(&self) -> Vec<(String, String)> {
        self.tiers
            .iter()
            .map(|t| (t.tier.clone(), t.candidate.name.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hevo_runtime::spend::Spend;
    use hevo_stats::pareto::tier_picks;

    fn row(task: &str, usd: f64, tokens: u64, outcome: f64) -> TrialRow {
        TrialRow {
            run_id: "r".into(),
            candidate_id: 1,
            task_id: task.into(),
            trial_index: 0,
            outcome,
            status: if outcome > 0.0 { "pass" } else { "fail" }.into(),
            spend: Spend {
                calls: 1,
                input_tokens: tokens,
                cost_usd: usd,
                ..Spend::default()
            },
            wall_ms: 10,
            attempts: 1,
            trace_path: None,
            error: None,
            answer: None,
            task_key: String::new(),
        }
    }

    #[test]
    fn cost_is_a_mean_over_tasks_with_an_interval_and_tokens_when_free() {
        let rows = [
            row("a", 1.0, 10, 1.0),
            row("a", 3.0, 30, 0.0),
            row("b", 4.0, 40, 1.0),
        ];
        let unit = CostUnit::of(&rows);
        assert_eq!(unit, CostUnit::Usd);
        let s = cost_summary(&rows, unit);
        // Task means 2 and 4: mean 3, se = sd([2, 4]) / sqrt(2) = 1.
        assert!((s.per_task.value - 3.0).abs() < 1e-12);
        assert!((s.per_task.se - 1.0).abs() < 1e-12);
        assert!(s.per_task.ci_low < 3.0 && s.per_task.ci_high > 3.0);
        assert_eq!((s.total, s.successes), (8.0, 2.0));
        assert_eq!(s.cost_of_pass(), 4.0);
        let free = [row("a", 0.0, 10, 1.0), row("b", 0.0, 30, 0.0)];
        assert_eq!(CostUnit::of(&free), CostUnit::Tokens);
        assert_eq!(cost_summary(&free, CostUnit::Tokens).per_task.value, 20.0);
    }

    #[test]
    fn default_weights_agree_with_hevo_stats_and_custom_weights_move_the_picks() {
        let pts = [
            Point {
                pass_rate: 0.50,
                cost: 1.0,
            },
            Point {
                pass_rate: 0.52,
                cost: 0.3,
            },
            Point {
                pass_rate: 0.56,
                cost: 1.4,
            },
            Point {
                pass_rate: 0.64,
                cost: 2.0,
            },
            Point {
                pass_rate: 0.45,
                cost: 0.1,
            },
        ];
        let w = ObjectiveConfig::default();
        assert_eq!(select_tiers(&pts, 0.5, &w), tier_picks(&pts, 0.5));
        // Every tier leaning all the way to cost picks the cheapest survivor.
        let cheap = ObjectiveConfig {
            medium: Some([0.0, 1.0]),
            heavy: Some([0.0, 1.0]),
            ..w
        };
        let p = select_tiers(&pts, 0.5, &cheap);
        assert_eq!((p.lite, p.medium, p.heavy), (Some(1), Some(1), Some(1)));
        assert_eq!(p.distinct(), vec![1]);
    }
}
