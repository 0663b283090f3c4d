//! The rows the store reads and writes.

use crate::spend::Spend;

/// A task as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskRow {
    /// Task id.
    pub id: String,
    /// `train`, `val` or `test`.
    pub split: String,
    /// Stratum.
    pub group: Option<String>,
    /// Line in `tasks.jsonl`.
    pub line: usize,
}

/// A finished trial as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialRow {
    /// Run id.
    pub run_id: String,
    /// Candidate id.
    pub candidate_id: i64,
    /// Task id.
    pub task_id: String,
    /// 0-based repetition index.
    pub trial_index: u32,
    /// Outcome in `[0, 1]`.
    pub outcome: f64,
    /// Status name (see `TrialStatus`).
    pub status: String,
    /// What the trial's model calls cost (its gateway key's totals).
    pub spend: Spend,
    /// Harness wall time in milliseconds.
    pub wall_ms: u64,
    /// How many attempts it took (retries of infrastructure faults).
    pub attempts: u32,
    /// The trace prefix: files `<trace_path>.stdout`, `.stderr`, `.scorer-<i>.*`.
    pub trace_path: Option<String>,
    /// The cause of a non-pass, non-fail status.
    pub error: Option<String>,
    /// The parsed answer as JSON text, when there was one.
    pub answer: Option<String>,
    /// The content key of the task it ran (input, expected, scorer; see
    /// [`crate::suite::task_key`]): a row whose key is not the task's current one is stale.
    pub task_key: String,
}

/// An estimate as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct EstimateRow {
    /// Run id.
    pub run_id: String,
    /// Candidate id.
    pub candidate_id: i64,
    /// What was estimated (e.g. `val`).
    pub label: String,
    /// The point value (`None` when nothing was scored).
    pub value: Option<f64>,
    /// Standard error.
    pub se: Option<f64>,
    /// Lower end of the 95% interval.
    pub ci_low: f64,
    /// Upper end of the 95% interval.
    pub ci_high: f64,
    /// Estimator name.
    pub estimator: String,
    /// Number of tasks the estimate used.
    pub tasks_used: usize,
}
