//! The series the report's charts draw, derived from a [`RunView`] (pure functions).

use std::collections::BTreeMap;

use hevo_runtime::spend::Spend;
use hevo_stats::estimate::Estimate;
use hevo_stats::pareto::{non_dominated, tier_picks, Point};
use serde::Serialize;

use super::{best_of, RunView};

/// The best candidate among those proposed up to an iteration.
#[derive(Clone, Debug, Serialize)]
pub struct BestAt {
    /// The iteration.
    pub iteration: u32,
    /// The best candidate's name.
    pub name: String,
    /// Its latest estimate.
    pub estimate: Estimate,
}

/// For each iteration, the best candidate proposed up to it (iterations with no estimated
/// candidate yet are left out).
pub fn best_per_iteration(run: &RunView) -> Vec<BestAt> {
    (0..=run.last_iteration())
        .filter_map(|it| {
            let c = best_of(run.candidates.iter().filter(|c| c.iteration <= it))?;
            Some(BestAt {
                iteration: it,
                name: c.name.clone(),
                estimate: c.estimate?,
            })
        })
        .collect()
}

/// What the search spent up to an iteration, against full evaluation.
#[derive(Clone, Debug, Serialize)]
pub struct SpendAt {
    /// The iteration.
    pub iteration: u32,
    /// Candidates proposed up to it.
    pub candidates: usize,
    /// Validation trials they got.
    pub trials: u64,
    /// What those trials cost.
    pub spend: Spend,
    /// Trials full evaluation would have run: candidates x val tasks x trials per task.
    pub full_trials: u64,
}

impl SpendAt {
    /// The trials run as a fraction of full evaluation's.
    pub fn fraction(&self) -> f64 {
        if self.full_trials == 0 {
            0.0
        } else {
            self.trials as f64 / self.full_trials as f64
        }
    }

    /// Tokens full evaluation would have used, at this run's mean tokens per trial.
    pub fn full_tokens(&self) -> f64 {
        self.per_trial(self.spend.total_tokens() as f64)
    }

    /// Dollars full evaluation would have spent, at this run's mean dollars per trial.
    pub fn full_usd(&self) -> f64 {
        self.per_trial(self.spend.cost_usd)
    }

    fn per_trial(&self, total: f64) -> f64 {
        if self.trials == 0 {
            0.0
        } else {
            total / self.trials as f64 * self.full_trials as f64
        }
    }
}

/// Cumulative spend per iteration (the last entry is the run's total).
pub fn spend_per_iteration(run: &RunView) -> Vec<SpendAt> {
    (0..=run.last_iteration())
        .map(|it| {
            let mut at = SpendAt {
                iteration: it,
                candidates: 0,
                trials: 0,
                spend: Spend::default(),
                full_trials: 0,
            };
            for c in run.candidates.iter().filter(|c| c.iteration <= it) {
                at.candidates += 1;
                at.trials += c.trials;
                at.spend.add(&c.spend);
            }
            at.full_trials = (at.candidates * run.val_tasks) as u64 * run.trials_per_task as u64;
            at
        })
        .collect()
}

/// The validation tasks by how often they were solved, over the trials of the candidates
/// proposed up to an iteration (as in Task-CoEvolve's Table 5).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PoolAt {
    /// The iteration.
    pub iteration: u32,
    /// Tasks whose every trial failed (outcome 0).
    pub never_solved: usize,
    /// Tasks whose every trial passed (outcome 1).
    pub always_solved: usize,
    /// Tasks solved between a third and two thirds of the time: where candidates differ.
    pub frontier: usize,
    /// Tasks solved sometimes, but less than a third or more than two thirds of the time.
    pub other: usize,
    /// Validation tasks with no trial yet.
    pub unseen: usize,
}

/// The task pool per iteration (cumulative over candidates).
pub fn pool_per_iteration(run: &RunView) -> Vec<PoolAt> {
    (0..=run.last_iteration())
        .map(|it| {
            // task -> (sum of outcomes, trials)
            let mut by_task: BTreeMap<&str, (f64, u32)> = BTreeMap::new();
            for c in run.candidates.iter().filter(|c| c.iteration <= it) {
                for t in &c.tasks {
                    let e = by_task.entry(&t.task).or_default();
                    e.0 += t.outcome * t.trials as f64;
                    e.1 += t.trials;
                }
            }
            let mut at = PoolAt {
                iteration: it,
                unseen: run.val_tasks.saturating_sub(by_task.len()),
                ..PoolAt::default()
            };
            for (sum, n) in by_task.values() {
                let rate = sum / *n as f64;
                if rate <= 0.0 {
                    at.never_solved += 1;
                } else if rate >= 1.0 {
                    at.always_solved += 1;
                } else if (1.0 / 3.0..=2.0 / 3.0).contains(&rate) {
                    at.frontier += 1;
                } else {
                    at.other += 1;
                }
            }
            at
        })
        .collect()
}

/// Pass rate against cost: every estimated candidate, its Pareto front and HarnessPro's
/// lite/medium/heavy picks (`hevo_stats::pareto::tier_picks`, floored at the best seed).
#[derive(Clone, Debug, Serialize)]
pub struct ParetoView {
    /// What the cost axis is: dollars per trial, or tokens per trial when no trial cost
    /// a dollar (a free local model, or no model).
    pub cost_label: &'static str,
    /// `(candidate seq, estimate, cost per trial)` of every candidate with an estimate and
    /// a trial.
    pub points: Vec<(usize, f64, f64)>,
    /// The seqs of the non-dominated points.
    pub front: Vec<usize>,
    /// The seqs of the lite, medium and heavy picks.
    pub picks: [Option<usize>; 3],
}

/// The pass-rate/cost picture of a run.
pub fn pareto(run: &RunView) -> ParetoView {
    let measured: Vec<_> = run
        .candidates
        .iter()
        .filter(|c| c.trials > 0 && c.estimate.is_some_and(|e| e.value.is_finite()))
        .collect();
    let dollars = measured.iter().any(|c| c.spend.cost_usd > 0.0);
    let points: Vec<(usize, f64, f64)> = measured
        .iter()
        .map(|c| {
            let total = if dollars {
                c.spend.cost_usd
            } else {
                c.spend.total_tokens() as f64
            };
            (
                c.seq,
                c.estimate.map_or(f64::NAN, |e| e.value),
                total / c.trials as f64,
            )
        })
        .collect();
    let pts: Vec<Point> = points
        .iter()
        .map(|&(_, pass_rate, cost)| Point { pass_rate, cost })
        .collect();
    let seed_floor = measured
        .iter()
        .zip(&points)
        .filter(|(c, _)| c.iteration == 0)
        .map(|(_, p)| p.1)
        .fold(f64::NAN, f64::max);
    let picks = tier_picks(&pts, seed_floor);
    let seq = |i: Option<usize>| i.map(|i| points[i].0);
    ParetoView {
        cost_label: if dollars {
            "dollars per trial"
        } else {
            "tokens per trial"
        },
        front: non_dominated(&pts)
            .into_iter()
            .map(|i| points[i].0)
            .collect(),
        picks: [seq(picks.lite), seq(picks.medium), seq(picks.heavy)],
        points,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::{CandidateView, TaskOutcome};

    fn cand(
        seq: usize,
        iteration: u32,
        value: Option<f64>,
        tasks: &[(&str, f64)],
    ) -> CandidateView {
        CandidateView {
            seq,
            name: format!("c{seq}"),
            parent: None,
            iteration,
            hypothesis: String::new(),
            axis: "seed".into(),
            dir: Default::default(),
            store_id: Some(seq as i64 + 1),
            estimate: value.map(Estimate::exact),
            status: "evaluated".into(),
            trials: tasks.len() as u64,
            spend: Spend {
                cost_usd: 0.5 * tasks.len() as f64,
                ..Spend::default()
            },
            tasks: tasks
                .iter()
                .map(|(t, y)| TaskOutcome {
                    task: t.to_string(),
                    outcome: *y,
                    trials: 1,
                    status: "pass".into(),
                    error: None,
                    cost_usd: 0.5,
                    inclusion: None,
                })
                .collect(),
            trace_dir: None,
        }
    }

    fn run(candidates: Vec<CandidateView>) -> RunView {
        RunView {
            dir: Default::default(),
            name: "r".into(),
            finished: false,
            stopped_early: None,
            strategy: None,
            pick: None,
            recorded_iterations: None,
            tiers: vec![],
            val_tasks: 4,
            trials_per_task: 1,
            candidates,
            rejected: vec![],
            train: Default::default(),
            test: vec![],
            failures: Default::default(),
            test_failures: Default::default(),
        }
    }

    #[test]
    fn the_front_and_picks_follow_pass_rate_against_cost() {
        let mut cs = vec![
            cand(0, 0, Some(0.5), &[("a", 1.0), ("b", 0.0)]), // seed, $0.5 per trial
            cand(1, 1, Some(0.8), &[("a", 1.0)]),
            cand(2, 1, Some(0.4), &[("a", 1.0)]), // below the seed
        ];
        cs[1].spend.cost_usd = 2.0; // $2 per trial: better and dearer
        let p = pareto(&run(cs));
        assert_eq!(p.cost_label, "dollars per trial");
        // c2 costs the same per trial as the seed and scores less: dominated.
        assert_eq!(p.front, vec![0, 1]);
        assert_eq!(p.picks, [Some(0), Some(0), Some(1)]);
    }

    #[test]
    fn the_pool_counts_each_task_once_over_all_earlier_candidates() {
        let r = run(vec![
            cand(0, 0, Some(0.5), &[("a", 1.0), ("b", 0.0), ("c", 1.0)]),
            cand(1, 1, Some(0.6), &[("a", 1.0), ("b", 0.0), ("c", 0.0)]),
            cand(2, 1, Some(0.7), &[("c", 1.0)]),
        ]);
        let pool = pool_per_iteration(&r);
        assert_eq!(
            pool[0],
            PoolAt {
                iteration: 0,
                never_solved: 1,
                always_solved: 2,
                frontier: 0,
                other: 0,
                unseen: 1
            }
        );
        // c: 2 of 3 solved = frontier; a always; b never; d unseen.
        assert_eq!(
            pool[1],
            PoolAt {
                iteration: 1,
                never_solved: 1,
                always_solved: 1,
                frontier: 1,
                other: 0,
                unseen: 1
            }
        );
    }

    #[test]
    fn best_and_spend_are_cumulative_and_full_counts_every_cell() {
        let r = run(vec![
            cand(0, 0, Some(0.5), &[("a", 1.0), ("b", 0.0)]),
            cand(1, 1, Some(0.4), &[("a", 1.0)]),
            cand(2, 2, Some(0.9), &[("a", 1.0)]),
        ]);
        let best: Vec<(u32, String)> = best_per_iteration(&r)
            .into_iter()
            .map(|b| (b.iteration, b.name))
            .collect();
        assert_eq!(
            best,
            vec![(0, "c0".into()), (1, "c0".into()), (2, "c2".into())]
        );
        let spend = spend_per_iteration(&r);
        assert_eq!(spend[2].trials, 4);
        assert_eq!(spend[2].full_trials, 12);
        assert!((spend[2].full_usd() - 6.0).abs() < 1e-9);
        assert!((spend[2].fraction() - 1.0 / 3.0).abs() < 1e-9);
    }
}
