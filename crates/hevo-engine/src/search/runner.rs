//! How the search loop gets trials run: the [`CandidateRunner`] seam and its live
//! implementation over the eval machinery (executor, store, launcher).
//!
//! The runner is memoized by the store: asking again for a trial that already finished
//! returns the stored outcome without running anything. That is what makes a killed search
//! resume exactly: the loop simply replays its decisions, and only missing trials run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::eval::{self, EvalOptions, EvalReport};
use crate::executor::ProgressEvent;
use crate::model_access::ModelAccess;
use crate::suite::Split;
use crate::trial::{Launcher, ModelEnv, TrialStatus};

/// Token and dollar totals of some trials.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Spend {
    /// Trials run (scored or not).
    pub trials: u64,
    /// Uncached input tokens.
    pub input_tokens: u64,
    /// Cached input tokens.
    pub cached_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Dollars.
    pub cost_usd: f64,
}

impl Spend {
    /// Adds another spend to this one.
    pub fn add(&mut self, other: &Spend) {
        self.trials += other.trials;
        self.input_tokens += other.input_tokens;
        self.cached_tokens += other.cached_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// Per-task results of evaluating one candidate on some tasks.
#[derive(Clone, Debug, Default)]
pub struct TaskResults {
    /// Mean outcome per task id (scored trials only; `NaN` if none was scored).
    pub outcomes: HashMap<String, f64>,
    /// What the candidate spent on these tasks so far (all its stored trials on them).
    pub spend: Spend,
}

/// Runs a candidate's trials for the search.
pub trait CandidateRunner {
    /// Mean outcome of `code_dir`'s harness on each of `task_ids` (of `split`), running only
    /// the trials not already in the store.
    fn evaluate(
        &mut self,
        name: &str,
        code_dir: &Path,
        split: Split,
        task_ids: &[String],
    ) -> Result<TaskResults, eval::EvalError>;

    /// One smoke trial of `code_dir` on the task `task_id` of the train split: `Ok` when the
    /// harness printed a parsable answer, else the reason.
    fn smoke(&mut self, name: &str, code_dir: &Path, task_id: &str) -> Result<(), String>;
}

/// The live runner: real processes through the eval machinery, one store per run.
pub struct LiveRunner {
    /// The run directory (holds `hevo.db`, `traces/`, `state/`).
    pub run_dir: PathBuf,
    /// The suite directory.
    pub suite_dir: PathBuf,
    /// Trials per (candidate, task).
    pub trials: u32,
    /// Concurrent trials.
    pub jobs: usize,
    /// Gateway variables for trials (used when `model_access` is `None`).
    pub model_env: ModelEnv,
    /// Per-trial gateway keys (set when a gateway runs).
    pub model_access: Option<Arc<dyn ModelAccess>>,
    /// The launcher every trial goes through.
    pub launcher: Arc<dyn Launcher>,
    /// Whether Ctrl-C cancels running trials (the CLI sets this).
    pub handle_signals: bool,
    /// Receives a progress line now and then while trials run (at most one per
    /// [`PROGRESS_EVERY`], plus one when a batch ends); `None` for quiet runs.
    pub progress: Option<ProgressFn>,
}

/// Where progress lines go (the CLI prints them on stderr).
pub type ProgressFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How often a running batch reports its progress.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Turns a batch's progress events into throttled lines for `report`.
fn progress_lines(
    name: String,
    report: ProgressFn,
) -> (
    std::sync::mpsc::Sender<ProgressEvent>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<ProgressEvent>();
    let handle = std::thread::spawn(move || {
        let mut last = std::time::Instant::now();
        let mut line = None;
        for ev in rx {
            if let ProgressEvent::TrialFinished {
                done,
                total,
                mean_outcome,
                ..
            } = ev
            {
                let text =
                    format!("  {name}: {done}/{total} trials, mean outcome {mean_outcome:.3}");
                if last.elapsed() >= PROGRESS_EVERY {
                    report(&text);
                    last = std::time::Instant::now();
                    line = None;
                } else {
                    line = Some(text);
                }
            }
        }
        if let Some(text) = line {
            report(&text);
        }
    });
    (tx, handle)
}

impl LiveRunner {
    fn options(
        &self,
        code_dir: &Path,
        split: Split,
        task_ids: &[String],
        run_dir: PathBuf,
    ) -> EvalOptions {
        let mut o = EvalOptions::new(code_dir, &self.suite_dir);
        o.split = split;
        o.trials = self.trials;
        o.jobs = self.jobs;
        o.run_dir = Some(run_dir);
        o.only_tasks = Some(task_ids.to_vec());
        o.model_env = self.model_env.clone();
        o.model_access = self.model_access.clone();
        o.handle_signals = self.handle_signals;
        o
    }
}

/// Mean outcome per task and the spend, from an eval report.
fn results_of(report: &EvalReport) -> TaskResults {
    let mut out = TaskResults::default();
    for t in &report.tasks {
        out.outcomes
            .insert(t.id.clone(), t.outcome.unwrap_or(f64::NAN));
    }
    out.spend = Spend {
        trials: report.trials as u64,
        input_tokens: report.tokens.input.max(0) as u64,
        cached_tokens: report.tokens.cached.max(0) as u64,
        output_tokens: report.tokens.output.max(0) as u64,
        cost_usd: report.cost_usd,
    };
    out
}

impl CandidateRunner for LiveRunner {
    fn evaluate(
        &mut self,
        name: &str,
        code_dir: &Path,
        split: Split,
        task_ids: &[String],
    ) -> Result<TaskResults, eval::EvalError> {
        let plan = eval::plan(self.options(code_dir, split, task_ids, self.run_dir.clone()))?;
        let (tx, reporter) = match &self.progress {
            Some(p) => {
                let (tx, handle) = progress_lines(name.to_string(), p.clone());
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        let report = eval::run_with(&plan, self.launcher.clone(), tx);
        if let Some(handle) = reporter {
            let _ = handle.join();
        }
        Ok(results_of(&report?))
    }

    fn smoke(&mut self, _name: &str, code_dir: &Path, task_id: &str) -> Result<(), String> {
        // Smoke trials live in their own store so they never count as evaluations.
        let dir = self.run_dir.join("smoke");
        let mut o = self.options(code_dir, Split::Train, &[task_id.to_string()], dir);
        o.trials = 1;
        o.retries = 1;
        let plan = eval::plan(o).map_err(|e| e.to_string())?;
        let report =
            eval::run_with(&plan, self.launcher.clone(), None).map_err(|e| e.to_string())?;
        let task = report.tasks.first().ok_or("the smoke trial did not run")?;
        let trial = task.details.last().ok_or("the smoke trial did not run")?;
        match TrialStatus::parse(&trial.status) {
            Some(TrialStatus::Pass | TrialStatus::Fail) => Ok(()),
            _ => Err(format!(
                "its smoke trial on train task `{task_id}` ended as `{}`{}",
                trial.status,
                trial
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )),
        }
    }
}
