//! [`EvalReport`]: the result of evaluating one candidate on some tasks, read back from the
//! store (so a resumed evaluation reports everything, not just what ran this time).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hevo_stats::estimate::{task_mean, Estimate};
use serde::Serialize;
use serde_json::{json, Value};

use crate::failures::{Failures, TrialRef};
use crate::spend::Spend;
use crate::store::{Store, StoreError, TrialRow};
use crate::task::{Split, Task};
use crate::trial::TrialStatus;

/// One trial in a report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrialReport {
    /// Trial index.
    pub index: u32,
    /// Outcome in `[0, 1]`.
    pub outcome: f64,
    /// Status name.
    pub status: String,
    /// Harness wall time.
    pub wall_ms: u64,
    /// Cause of a non-pass, non-fail status.
    pub error: Option<String>,
    /// The parsed answer, when there was one.
    pub answer: Option<Value>,
    /// What its model calls cost.
    pub spend: Spend,
    /// The trace prefix: `<trace>.stdout`, `<trace>.stderr`.
    pub trace: Option<String>,
}

/// One task in a report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TaskReport {
    /// Task id.
    pub id: String,
    /// Stratum.
    pub group: Option<String>,
    /// Mean outcome over its scored trials (`None` if none was scored).
    pub outcome: Option<f64>,
    /// The status shared by all its trials, or `mixed`.
    pub status: String,
    /// Number of trials recorded.
    pub trials: usize,
    /// Each recorded trial.
    pub details: Vec<TrialReport>,
}

/// Per-group summary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    /// Tasks scored in the group.
    pub tasks: usize,
    /// Mean task outcome with its interval.
    pub pass_rate: Estimate,
}

/// The result of an evaluation, read back from the store.
#[derive(Clone, Debug, Serialize)]
pub struct EvalReport {
    /// The run directory.
    pub run_dir: PathBuf,
    /// The run id.
    pub run_id: String,
    /// The candidate's id in the store.
    pub candidate_id: i64,
    /// Harness name.
    pub harness: String,
    /// Suite name.
    pub suite: String,
    /// The split.
    pub split: Split,
    /// Trials per task.
    pub trials_per_task: u32,
    /// Mean over tasks of each task's mean outcome, with its 95% interval.
    pub pass_rate: Estimate,
    /// Tasks that had at least one scored trial.
    pub tasks_scored: usize,
    /// The pass rate over every task of the split with each trial not scored (missing, or
    /// `infra_error`) counted as a failure: what [`EvalReport::pass_rate`] would be had
    /// they all failed. Equal to it when every trial was scored. A harness that provokes
    /// provider errors on the tasks it would fail (they are `infra_error`, not scored)
    /// raises `pass_rate`, not this.
    pub pass_rate_floor: Estimate,
    /// Trials recorded (all statuses).
    pub trials: usize,
    /// Trials per status (every status listed).
    pub status_counts: BTreeMap<String, usize>,
    /// Mean harness wall time per scored trial (ms; `infra_error` trials left out).
    pub mean_wall_ms: f64,
    /// Model calls, tokens and dollars of every recorded trial.
    pub spend: Spend,
    /// Every task of the split.
    pub tasks: Vec<TaskReport>,
    /// Per-group pass rates (tasks without a group are left out).
    pub groups: BTreeMap<String, GroupReport>,
    /// Trials run by this invocation.
    pub ran_now: usize,
    /// Trials found finished in the store (resume).
    pub reused: usize,
    /// How this invocation's processes were isolated: `bwrap`, or `none` (unsandboxed).
    pub sandbox: String,
}

impl EvalReport {
    /// The trials of the split not scored: `infra_error` (after its retries) or not run.
    /// [`EvalReport::pass_rate_floor`] counts each of them as a failure.
    pub fn unscored_trials(&self) -> usize {
        let scored: usize = self
            .status_counts
            .iter()
            .filter(|(s, _)| TrialStatus::parse(s).is_some_and(TrialStatus::is_scored))
            .map(|(_, n)| n)
            .sum();
        (self.tasks.len() * self.trials_per_task as usize).saturating_sub(scored)
    }

    /// The trials that did not pass or fail, by class, in task order, named as
    /// `candidate` (the harness's name for `hevo eval`, the archive's name in a search).
    pub fn failures(&self, candidate: &str) -> Failures {
        let mut f = Failures::default();
        for t in &self.tasks {
            for d in &t.details {
                f.add(TrialRef {
                    candidate,
                    task: &t.id,
                    trial: d.index,
                    status: &d.status,
                    error: d.error.as_deref(),
                    trace: d.trace.as_deref(),
                });
            }
        }
        f
    }

    /// The `--json` document.
    pub fn to_json(&self) -> Value {
        let num = |x: f64| if x.is_finite() { json!(x) } else { Value::Null };
        json!({
            "pass_rate": num(self.pass_rate.value),
            "ci_low": num(self.pass_rate.ci_low),
            "ci_high": num(self.pass_rate.ci_high),
            "se": num(self.pass_rate.se),
            "trials": self.trials,
            "tasks_scored": self.tasks_scored,
            "pass_rate_floor": num(self.pass_rate_floor.value),
            "status_counts": self.status_counts,
            "mean_wall_ms": num(self.mean_wall_ms),
            "tokens": {
                "input": self.spend.input_tokens,
                "cached": self.spend.cached_tokens,
                "output": self.spend.output_tokens,
                "calls": self.spend.calls,
            },
            "cost_usd": self.spend.cost_usd,
            "harness": self.harness,
            "suite": self.suite,
            "split": self.split,
            "trials_per_task": self.trials_per_task,
            "run_dir": self.run_dir,
            "run_id": self.run_id,
            "ran_now": self.ran_now,
            "reused": self.reused,
            "sandbox": self.sandbox,
            "failures": self.failures(&self.harness).to_json(),
            "groups": self.groups.iter().map(|(g, r)| (g.clone(), json!({
                "tasks": r.tasks,
                "pass_rate": num(r.pass_rate.value),
                "ci_low": num(r.pass_rate.ci_low),
                "ci_high": num(r.pass_rate.ci_high),
            }))).collect::<serde_json::Map<_, _>>(),
            "tasks": self.tasks.iter().map(|t| json!({
                "id": t.id,
                "group": t.group,
                "outcome": t.outcome,
                "status": t.status,
                "trials": t.trials,
                "details": t.details,
            })).collect::<Vec<_>>(),
        })
    }
}

/// What a report is about (everything but the trials, which come from the store).
pub(crate) struct ReportHeader<'a> {
    pub run_dir: &'a Path,
    pub run_id: &'a str,
    pub candidate_id: i64,
    pub harness: &'a str,
    pub suite: &'a str,
    pub split: Split,
    pub trials_per_task: u32,
    pub ran_now: usize,
    pub reused: usize,
    pub sandbox: String,
    /// Each task's content key: rows run on other content are stale and not reported.
    pub task_keys: &'a HashMap<String, String>,
}

/// The sum of outcomes, from `+0.0`: `f64`'s `Sum` starts from `-0.0`, so a task with no
/// scored trial had a floor of `-0.0`, which `--json` printed as `-0.0` and the table as
/// "-0.0%" (a `-0.0` outcome, such as a scoring program printing `-0`, becomes `0.0` too).
fn total(outcomes: &[f64]) -> f64 {
    outcomes.iter().fold(0.0, |sum, x| sum + x)
}

/// Builds the report of `tasks` from the store's rows of the candidate.
pub(crate) fn build_report(
    h: ReportHeader<'_>,
    store: &Store,
    tasks: &[&Task],
) -> Result<EvalReport, StoreError> {
    let trials_per_task = h.trials_per_task;
    let candidate_id = h.candidate_id;
    let mut by_task: HashMap<String, Vec<TrialRow>> = HashMap::new();
    for row in store.trials_of(candidate_id)? {
        if row.trial_index < trials_per_task && h.task_keys.get(&row.task_id) == Some(&row.task_key)
        {
            by_task.entry(row.task_id.clone()).or_default().push(row);
        }
    }
    let mut status_counts: BTreeMap<String, usize> = TrialStatus::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    let mut spend = Spend::default();
    let mut wall_sum = 0.0;
    let mut n_trials = 0;
    let mut n_timed = 0;
    let mut task_reports = Vec::new();
    let mut outcomes = Vec::new();
    let mut floors = Vec::new();
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for t in tasks {
        let rows = by_task.remove(&t.id).unwrap_or_default();
        let mut scored = Vec::new();
        for r in &rows {
            *status_counts.entry(r.status.clone()).or_default() += 1;
            spend.add(&r.spend);
            n_trials += 1;
            if TrialStatus::parse(&r.status).is_some_and(TrialStatus::is_scored) {
                scored.push(r.outcome);
                wall_sum += r.wall_ms as f64;
                n_timed += 1;
            }
        }
        let outcome = (!scored.is_empty()).then(|| total(&scored) / scored.len() as f64);
        floors.push(total(&scored) / f64::from(trials_per_task.max(1)));
        if let Some(o) = outcome {
            outcomes.push(o);
            if let Some(g) = &t.group {
                groups.entry(g.clone()).or_default().push(o);
            }
        }
        let status = match rows.first() {
            None => "missing".to_string(),
            Some(first) if rows.iter().all(|r| r.status == first.status) => first.status.clone(),
            Some(_) => "mixed".to_string(),
        };
        task_reports.push(TaskReport {
            id: t.id.clone(),
            group: t.group.clone(),
            outcome,
            status,
            trials: rows.len(),
            details: rows
                .iter()
                .map(|r| TrialReport {
                    index: r.trial_index,
                    outcome: r.outcome,
                    status: r.status.clone(),
                    wall_ms: r.wall_ms,
                    error: r.error.clone(),
                    answer: r
                        .answer
                        .as_deref()
                        .and_then(|a| serde_json::from_str(a).ok()),
                    spend: r.spend,
                    trace: r.trace_path.clone(),
                })
                .collect(),
        });
    }
    Ok(EvalReport {
        run_dir: h.run_dir.to_path_buf(),
        run_id: h.run_id.to_string(),
        candidate_id,
        harness: h.harness.to_string(),
        suite: h.suite.to_string(),
        split: h.split,
        trials_per_task,
        pass_rate: task_mean(&outcomes, trials_per_task),
        tasks_scored: outcomes.len(),
        pass_rate_floor: task_mean(&floors, trials_per_task),
        trials: n_trials,
        status_counts,
        mean_wall_ms: if n_timed > 0 {
            wall_sum / n_timed as f64
        } else {
            f64::NAN
        },
        spend,
        tasks: task_reports,
        groups: groups
            .into_iter()
            .map(|(g, xs)| {
                (
                    g,
                    GroupReport {
                        tasks: xs.len(),
                        pass_rate: task_mean(&xs, trials_per_task),
                    },
                )
            })
            .collect(),
        ran_now: h.ran_now,
        reused: h.reused,
        sandbox: h.sandbox,
    })
}
