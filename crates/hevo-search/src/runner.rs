//! How the search loop gets trials run: the [`CandidateRunner`] seam and its live
//! implementation over one long-lived [`Evaluator`].
//!
//! The runner is memoized by the store: asking again for a trial that already finished
//! returns the stored outcome without running anything. That is what makes a killed search
//! resume exactly: the loop simply replays its decisions, and only missing trials run.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::eval::{self, EvalError};
use hevo_runtime::evaluator::{Batch, Evaluator, EvaluatorConfig};
use hevo_runtime::executor::ProgressEvent;
use hevo_runtime::launch::Launcher;
use hevo_runtime::model_access::{ModelAccess, ModelEnv};
use hevo_runtime::report::EvalReport;
use hevo_runtime::spend::Spend;
use hevo_runtime::suite::Suite;
use hevo_runtime::task::Split;
use hevo_runtime::trial::TrialStatus;

/// A candidate's evaluation effort: trials run and what their model calls cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize)]
pub struct Effort {
    /// Trials run (scored or not).
    pub trials: u64,
    /// Their model calls, tokens and dollars.
    pub spend: Spend,
}

impl Effort {
    /// Adds another effort to this one.
    pub fn add(&mut self, other: &Effort) {
        self.trials += other.trials;
        self.spend.add(&other.spend);
    }
}

/// Per-task results of evaluating one candidate on some tasks.
#[derive(Clone, Debug, Default)]
pub struct TaskResults {
    /// Mean outcome per task id (scored trials only; `NaN` if none was scored).
    pub outcomes: HashMap<String, f64>,
    /// What the candidate spent on these tasks so far (all its stored trials on them).
    pub effort: Effort,
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

/// What a [`LiveRunner`] is made from.
#[derive(Clone)]
pub struct RunnerSettings {
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
    /// The process's cancellation token.
    pub cancel: Cancel,
    /// Receives a progress line now and then while trials run (at most one per
    /// [`PROGRESS_EVERY`], plus one when a batch ends); `None` for quiet runs.
    pub progress: Option<ProgressFn>,
}

/// The live runner: real processes through one [`Evaluator`] kept open for the whole
/// search (the suite loaded once, each candidate loaded and hashed once, one store), and a
/// second one for smoke trials, which live in their own store so they never count as
/// evaluations.
pub struct LiveRunner {
    settings: RunnerSettings,
    evaluator: Evaluator,
    smoke: Option<Evaluator>,
}

impl LiveRunner {
    /// Loads the suite and opens the run's store.
    pub fn open(settings: RunnerSettings) -> Result<LiveRunner, EvalError> {
        let suite = Suite::load(&settings.suite_dir)?;
        let config = evaluator_config(&settings, suite, "search", &settings.run_dir);
        let evaluator = Evaluator::open(config)?;
        Ok(LiveRunner {
            settings,
            evaluator,
            smoke: None,
        })
    }

    /// The evaluator of the run (its store, for reads and records between batches).
    pub fn evaluator(&mut self) -> &mut Evaluator {
        &mut self.evaluator
    }
}

fn evaluator_config(
    s: &RunnerSettings,
    suite: Suite,
    kind: &str,
    run_dir: &Path,
) -> EvaluatorConfig {
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "search".into());
    EvaluatorConfig {
        run_dir: run_dir.to_path_buf(),
        run_id,
        kind: kind.into(),
        config_json: serde_json::json!({"command": "run", "suite": s.suite_dir}).to_string(),
        suite,
        jobs: s.jobs,
        retries: 2,
        timeout: None,
        grace: eval::DEFAULT_GRACE,
        output_cap: eval::DEFAULT_OUTPUT_CAP,
        model_env: s.model_env.clone(),
        model_access: s.model_access.clone(),
        work_root: std::env::temp_dir(),
        launcher: s.launcher.clone(),
        cancel: s.cancel.clone(),
    }
}

/// Mean outcome per task and the effort, from an eval report.
fn results_of(report: &EvalReport) -> TaskResults {
    let mut out = TaskResults::default();
    for t in &report.tasks {
        out.outcomes
            .insert(t.id.clone(), t.outcome.unwrap_or(f64::NAN));
    }
    out.effort = Effort {
        trials: report.trials as u64,
        spend: report.spend,
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
        let candidate = self.evaluator.load(code_dir)?;
        let (tx, reporter) = match &self.settings.progress {
            Some(p) => {
                let (tx, handle) = progress_lines(name.to_string(), p.clone());
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        let batch = Batch {
            split,
            tasks: Some(task_ids),
            trials: self.settings.trials,
            draw_label: None,
        };
        let report = self.evaluator.evaluate(&candidate, &batch, tx);
        if let Some(handle) = reporter {
            let _ = handle.join();
        }
        Ok(results_of(&report?))
    }

    fn smoke(&mut self, _name: &str, code_dir: &Path, task_id: &str) -> Result<(), String> {
        if self.smoke.is_none() {
            let suite = self.evaluator.suite().clone();
            let dir = self.settings.run_dir.join("smoke");
            let mut config = evaluator_config(&self.settings, suite, "smoke", &dir);
            config.retries = 1;
            self.smoke = Some(Evaluator::open(config).map_err(|e| e.to_string())?);
        }
        let smoke = self.smoke.as_mut().expect("opened above");
        let candidate = smoke.load(code_dir).map_err(|e| e.to_string())?;
        let ids = [task_id.to_string()];
        let batch = Batch {
            split: Split::Train,
            tasks: Some(&ids),
            trials: 1,
            draw_label: None,
        };
        let report = smoke
            .evaluate(&candidate, &batch, None)
            .map_err(|e| e.to_string())?;
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
