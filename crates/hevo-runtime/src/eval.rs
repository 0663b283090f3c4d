//! `eval`: one harness on one split of a suite, every task `trials` times, resumable.
//!
//! [`plan`] loads and validates the suite and the harness (every problem reported before
//! anything runs) and picks the run directory; [`run`] evaluates it with one
//! [`Evaluator`] batch (which runs `prepare` if the harness declares it, runs the units that
//! have no finished row yet, and reports from the store, so a resumed run reports
//! everything, not just what ran this time).
//!
//! The default run directory is `runs/eval-<harness>-<hash>` where the hash covers the
//! harness's files and parameters, the suite's files, the split and the trial count: running
//! the same command again resumes the same run. The limits are deliberately not in it:
//! `--output-cap` only cuts the trace files (the answer is read from an in-memory tail of
//! stdout, the process runs on), so it changes no outcome; and a trial stopped by a shorter
//! `--timeout` than the one in force runs again in the same directory
//! ([`crate::store::Store::finished_units`]), which keeps the trials that finished in time
//! and works for a `--run-dir` given by hand too.

use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::cancel::{Cancel, CancelReason};
use crate::evaluator::{Batch, Evaluator, EvaluatorConfig};
use crate::executor::ProgressEvent;
use crate::harness::{Harness, HarnessError};
use crate::launch::{Launcher, LocalLauncher};
use crate::model_access::{ModelAccess, ModelEnv};
use crate::report::EvalReport;
use crate::store::{EstimateRow, StoreError};
use crate::suite::{Suite, SuiteError};
use crate::task::{Split, Task};

/// Default per-trial time limit when neither the harness nor the caller sets one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Default grace period between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(2);
/// Default cap on each captured output stream (bytes).
pub const DEFAULT_OUTPUT_CAP: u64 = 4 * 1024 * 1024;

/// Everything `hevo eval` can be told.
#[derive(Clone, Debug)]
pub struct EvalOptions {
    /// The harness directory.
    pub harness_dir: PathBuf,
    /// The suite directory.
    pub suite_dir: PathBuf,
    /// Which split to evaluate.
    pub split: Split,
    /// Trials per task.
    pub trials: u32,
    /// Concurrent trials.
    pub jobs: usize,
    /// The run directory; `None` picks the deterministic default under `runs_root`.
    pub run_dir: Option<PathBuf>,
    /// Where default run directories are made.
    pub runs_root: PathBuf,
    /// How many times an `infra_error` attempt is retried.
    pub retries: u32,
    /// Overrides the per-trial time limit.
    pub timeout: Option<Duration>,
    /// SIGTERM-to-SIGKILL grace period.
    pub grace: Duration,
    /// Cap on each captured output stream (bytes).
    pub output_cap: u64,
    /// Model gateway variables given to harnesses (when `model_access` is `None`).
    pub model_env: ModelEnv,
    /// Per-trial gateway keys and spend (set when a gateway runs).
    pub model_access: Option<Arc<dyn ModelAccess>>,
    /// Where trial working directories are created (default: the system temp dir).
    pub work_root: Option<PathBuf>,
    /// The process's cancellation token (the CLI turns signals into it).
    pub cancel: Cancel,
    /// Restricts the evaluation to these task ids of the split (a drawn subset); `None`
    /// evaluates the whole split.
    pub only_tasks: Option<Vec<String>>,
    /// Keep each trial's working directory in its trace (`<trace prefix>.workdir/`).
    pub keep_workdirs: bool,
}

impl EvalOptions {
    /// Options with the defaults of `hevo eval`.
    pub fn new(harness_dir: impl Into<PathBuf>, suite_dir: impl Into<PathBuf>) -> EvalOptions {
        EvalOptions {
            harness_dir: harness_dir.into(),
            suite_dir: suite_dir.into(),
            split: Split::Val,
            trials: 1,
            jobs: default_jobs(),
            run_dir: None,
            runs_root: PathBuf::from("runs"),
            retries: 2,
            timeout: None,
            grace: DEFAULT_GRACE,
            output_cap: DEFAULT_OUTPUT_CAP,
            model_env: ModelEnv::offline(),
            model_access: None,
            work_root: None,
            cancel: Cancel::new(),
            only_tasks: None,
            keep_workdirs: false,
        }
    }
}

/// The number of available cores (the default `--jobs`).
pub fn default_jobs() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// Why an evaluation could not run or finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The suite is invalid (a user error).
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// The harness is invalid (a user error).
    #[error(transparent)]
    Harness(#[from] HarnessError),
    /// The chosen split has no tasks (a user error).
    #[error("suite `{}` has no `{split}` tasks (it has {counts}); pick another `--split`", suite.display())]
    NoTasks {
        /// The suite directory.
        suite: PathBuf,
        /// The split asked for.
        split: Split,
        /// Task counts per split, for the message.
        counts: String,
    },
    /// An option is out of range (a user error).
    #[error("{0}")]
    Option(String),
    /// The run directory could not be created.
    #[error("cannot create run directory `{}`: {source}", path.display())]
    RunDir {
        /// The directory.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Another hevo process is using the run directory (a user error).
    #[error(
        "run directory `{}` is in use by another hevo process (pid {holder}); wait for it to \
         finish or stop it, or pass another `--run-dir`",
        run_dir.display()
    )]
    Locked {
        /// The run directory.
        run_dir: PathBuf,
        /// The pid written by the holder.
        holder: String,
    },
    /// The harness's `prepare` step failed.
    #[error("`prepare` of harness `{harness}` failed: {message} (see `{}`)", trace.display())]
    Prepare {
        /// The harness name.
        harness: String,
        /// What happened.
        message: String,
        /// Where its output is.
        trace: PathBuf,
    },
    /// The scheduler refused a job as configured; the batch stopped (its unfinished trials
    /// are not recorded, so the same command runs them once the configuration is fixed).
    #[error(
        "{0}; retrying cannot help: fix the job options (`[executor]` in hevo.toml, \
         docs/scale-out.md) and run the same command again"
    )]
    Refused(String),
    /// The model provider is down: a candidate's model calls failed upstream and hevo's own
    /// request to the same model failed too. Nothing is counted against the candidate; its
    /// unscored trials run again when the same command runs again.
    #[error(
        "the model provider is failing: {0}. Nothing was counted against the candidate; \
         run the same command again once the provider answers"
    )]
    Outage(String),
    /// The run was cancelled; finished trials are stored and the same command resumes.
    #[error(
        "stopped by {reason} after {done} finished trial(s); run the same command again to resume"
    )]
    Interrupted {
        /// Trials finished in this invocation.
        done: usize,
        /// Why it stopped.
        reason: CancelReason,
    },
}

impl EvalError {
    /// Whether the mistake is in the user's input (exit code 2).
    pub fn is_user_error(&self) -> bool {
        matches!(
            self,
            EvalError::Suite(SuiteError::Invalid { .. })
                | EvalError::Suite(SuiteError::Read { .. })
                | EvalError::Harness(_)
                | EvalError::NoTasks { .. }
                | EvalError::Option(_)
                | EvalError::Locked { .. }
                | EvalError::Refused(_)
        ) || matches!(self, EvalError::Store(e) if e.is_user_error())
    }
}

/// A validated evaluation, ready to run.
#[derive(Debug)]
pub struct EvalPlan {
    /// The harness.
    pub harness: Harness,
    /// The suite.
    pub suite: Suite,
    /// The run directory.
    pub run_dir: PathBuf,
    /// The run id (the run directory's name).
    pub run_id: String,
    /// The options it was made from.
    pub options: EvalOptions,
}

impl EvalPlan {
    /// The tasks evaluated: the chosen split, restricted to `only_tasks` if given.
    pub fn tasks(&self) -> Vec<&Task> {
        let mut tasks = self.suite.split(self.options.split);
        if let Some(only) = &self.options.only_tasks {
            let keep: std::collections::HashSet<&str> = only.iter().map(String::as_str).collect();
            tasks.retain(|t| keep.contains(t.id.as_str()));
        }
        tasks
    }

    /// The per-trial time limit in force.
    pub fn timeout(&self) -> Duration {
        self.options.timeout.unwrap_or_else(|| {
            self.harness
                .manifest
                .timeout_s
                .and_then(crate::limits::seconds)
                .unwrap_or(DEFAULT_TIMEOUT)
        })
    }
}

/// Loads and validates everything, and picks the run directory. Runs nothing.
pub fn plan(options: EvalOptions) -> Result<EvalPlan, EvalError> {
    if let Some(problem) = crate::limits::trials_problem(options.trials) {
        return Err(EvalError::Option(format!("`--trials` {problem}")));
    }
    if options.jobs == 0 {
        return Err(EvalError::Option("`--jobs` must be at least 1".into()));
    }
    // Both are loaded before either error is returned, so a user sees the suite's problems
    // even when the harness is also wrong.
    let suite = Suite::load(&options.suite_dir);
    let harness = Harness::load(&options.harness_dir);
    let suite = suite?;
    let harness = harness?;
    harness.check_programs()?;
    if options.split == Split::Train && harness.manifest.prepare.is_some() {
        // `prepare` reads the train split with its expected answers: scored there, the
        // harness could answer from what it stored, and the pass rate would measure that.
        return Err(EvalError::Option(format!(
            "harness `{}` declares `prepare`, which learns from the train split with its \
             expected answers, so it cannot be scored on the train split: evaluate it on \
             `--split val` or `--split test`",
            harness.name
        )));
    }
    if suite.split(options.split).is_empty() {
        // A suite without any task is refused when it loads, so some split has tasks.
        let counts = suite
            .split_counts()
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(EvalError::NoTasks {
            suite: suite.dir.clone(),
            split: options.split,
            counts,
        });
    }
    if let Some(only) = &options.only_tasks {
        let known: std::collections::HashSet<&str> = suite
            .split(options.split)
            .iter()
            .map(|t| t.id.as_str())
            .collect();
        let unknown: Vec<&str> = only
            .iter()
            .map(String::as_str)
            .filter(|id| !known.contains(id))
            .collect();
        if !unknown.is_empty() {
            return Err(EvalError::Option(format!(
                "task id(s) {} are not in the `{}` split of suite `{}`",
                unknown.join(", "),
                options.split,
                suite.dir.display()
            )));
        }
    }
    let run_dir = match &options.run_dir {
        Some(d) => d.clone(),
        None => {
            let suite_hash = suite.content_hash().map_err(|source| SuiteError::Read {
                path: suite.dir.clone(),
                source,
            })?;
            let mut h = Sha256::new();
            for part in [
                harness.code_hash.as_str(),
                &harness.params_json(),
                &suite_hash,
                options.split.as_str(),
                &options.trials.to_string(),
            ] {
                h.update(part.as_bytes());
                h.update([0]);
            }
            if let Some(only) = &options.only_tasks {
                let mut ids = only.clone();
                ids.sort();
                h.update(ids.join("\n").as_bytes());
            }
            let hash = hex::encode(h.finalize());
            options
                .runs_root
                .join(format!("eval-{}-{}", sanitize(&harness.name), &hash[..10]))
        }
    };
    let harnesses = [(harness.name.as_str(), harness.dir.as_path())];
    if let Some(problem) = crate::run_place::problem(&run_dir, &suite, &harnesses, None) {
        // The default is `runs/` of the current directory: from inside a harness's folder
        // it is refused too, so the flag that moves it is named.
        return Err(EvalError::Option(format!(
            "the run directory `{}` {problem}; choose one with --run-dir",
            run_dir.display()
        )));
    }
    if let Some(problem) = crate::store::run_kind_problem(&run_dir, crate::store::RunKind::Eval) {
        return Err(EvalError::Option(problem));
    }
    let run_id = crate::store::run_id(&run_dir);
    Ok(EvalPlan {
        harness,
        suite,
        run_dir,
        run_id,
        options,
    })
}

/// Runs a planned evaluation with the local launcher and reports from the store.
pub fn run(
    plan: &EvalPlan,
    progress: Option<mpsc::Sender<ProgressEvent>>,
) -> Result<EvalReport, EvalError> {
    run_with(plan, Arc::new(LocalLauncher::default()), progress)
}

/// Runs a planned evaluation with the given launcher (the seam a sandbox plugs into): one
/// [`Evaluator`] with one batch, the whole split (or `only_tasks`), and the pass rate
/// recorded as the candidate's estimate (a plain mean: every task of the batch was run).
pub fn run_with(
    plan: &EvalPlan,
    launcher: Arc<dyn Launcher>,
    progress: Option<mpsc::Sender<ProgressEvent>>,
) -> Result<EvalReport, EvalError> {
    let opts = &plan.options;
    let config = json!({
        "command": "eval",
        "harness": plan.harness.dir,
        "suite": plan.suite.dir,
        "split": opts.split,
        "trials": opts.trials,
    });
    let mut evaluator = Evaluator::open(EvaluatorConfig {
        run_dir: plan.run_dir.clone(),
        run_id: plan.run_id.clone(),
        kind: crate::store::RunKind::Eval,
        config_json: config.to_string(),
        suite: plan.suite.clone(),
        jobs: opts.jobs,
        retries: opts.retries,
        timeout: opts.timeout,
        grace: opts.grace,
        output_cap: opts.output_cap,
        model_env: opts.model_env.clone(),
        model_access: opts.model_access.clone(),
        work_root: opts.work_root.clone().unwrap_or_else(std::env::temp_dir),
        launcher,
        cancel: opts.cancel.clone(),
        keep_workdirs: opts.keep_workdirs,
    })?;
    let candidate = evaluator.register_loaded(plan.harness.clone())?;
    let label = opts.split.as_str();
    let report = evaluator.evaluate(
        &candidate,
        &Batch {
            split: opts.split,
            tasks: opts.only_tasks.as_deref(),
            trials: opts.trials,
            draw_label: Some(label),
        },
        progress,
    )?;
    let finite = |x: f64| x.is_finite().then_some(x);
    evaluator.store().insert_estimate(&EstimateRow {
        run_id: plan.run_id.clone(),
        candidate_id: candidate.candidate_id,
        label: label.into(),
        value: finite(report.pass_rate.value),
        se: finite(report.pass_rate.se),
        ci_low: report.pass_rate.ci_low,
        ci_high: report.pass_rate.ci_high,
        estimator: "sample_mean".into(),
        tasks_used: report.tasks_scored,
    })?;
    Ok(report)
}

pub use crate::task::sanitize;
