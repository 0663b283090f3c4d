//! `eval`: one harness on one split of a suite, every task `trials` times, resumable.
//!
//! [`plan`] loads and validates the suite and the harness (every problem reported before
//! anything runs) and picks the run directory; [`run`] opens the store, runs `prepare` if the
//! harness declares it, schedules the units that have no finished row yet on the local
//! executor, writes each trial once when it finishes, and builds the [`EvalReport`] from the
//! store (so a resumed run reports everything, not just what ran this time).
//!
//! The default run directory is `runs/eval-<harness>-<hash>` where the hash covers the
//! harness's files and parameters, the suite's files, the split and the trial count: running
//! the same command again resumes the same run.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use hevo_stats::estimate::{sample_mean, Estimate};
use serde::Serialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use tokio::sync::watch;

use crate::executor::{order_longest_first, run_pool, ProgressEvent, Unit};
use crate::harness::{Harness, HarnessError};
use crate::model_access::ModelAccess;
use crate::scorer::Scorer;
use crate::store::{EstimateRow, Store, StoreError, TaskRow, TrialRow};
use crate::suite::{Split, Suite, SuiteError, Task};
use crate::trial::{
    base_env, run_trial, Exit, LaunchSpec, Launcher, LocalLauncher, ModelEnv, TrialRequest,
    TrialSettings, TrialStatus,
};

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
    /// Whether Ctrl-C / SIGTERM cancel the run (the CLI sets this; tests do not).
    pub handle_signals: bool,
    /// Restricts the evaluation to these task ids of the split (a drawn subset); `None`
    /// evaluates the whole split.
    pub only_tasks: Option<Vec<String>>,
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
            handle_signals: false,
            only_tasks: None,
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
    /// The async runtime could not start.
    #[error("cannot start the executor: {0}")]
    Runtime(#[source] std::io::Error),
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
    /// The run was interrupted; finished trials are stored and the same command resumes.
    #[error("interrupted after {done} finished trial(s); run the same command again to resume")]
    Interrupted {
        /// Trials finished in this invocation.
        done: usize,
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
        )
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
                .map(Duration::from_secs_f64)
                .unwrap_or(DEFAULT_TIMEOUT)
        })
    }
}

/// Loads and validates everything, and picks the run directory. Runs nothing.
pub fn plan(options: EvalOptions) -> Result<EvalPlan, EvalError> {
    if options.trials == 0 {
        return Err(EvalError::Option("`--trials` must be at least 1".into()));
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
    for argv in std::iter::once(harness.entry_argv()).chain(harness.prepare_argv()) {
        let program = crate::trial::resolve_program(&argv[0], &base_env(&harness.dir));
        if !program.is_file() {
            return Err(EvalError::Harness(HarnessError::Invalid {
                path: harness.dir.join("harness.toml"),
                line: None,
                message: format!(
                    "program `{}` not found (neither on PATH nor in the harness directory); \
                     fix `entry`/`prepare` or install it",
                    argv[0]
                ),
            }));
        }
    }
    if suite.split(options.split).is_empty() {
        let counts = suite
            .split_counts()
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(EvalError::NoTasks {
            suite: suite.dir.clone(),
            split: options.split,
            counts: if counts.is_empty() {
                "no tasks".into()
            } else {
                counts
            },
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
    let run_id = run_dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "eval".into());
    Ok(EvalPlan {
        harness,
        suite,
        run_dir,
        run_id,
        options,
    })
}

/// Token totals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tokens {
    /// Uncached input tokens.
    pub input: i64,
    /// Cached input tokens.
    pub cached: i64,
    /// Output tokens.
    pub output: i64,
    /// Model calls made through the gateway.
    pub calls: i64,
}

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
    /// Trials recorded (all statuses).
    pub trials: usize,
    /// Trials per status (every status listed).
    pub status_counts: BTreeMap<String, usize>,
    /// Mean harness wall time per scored trial (ms; `infra_error` trials left out).
    pub mean_wall_ms: f64,
    /// Token totals (filled once the model gateway exists).
    pub tokens: Tokens,
    /// Dollar total.
    pub cost_usd: f64,
    /// Every task of the split.
    pub tasks: Vec<TaskReport>,
    /// Per-group pass rates (tasks without a group are left out).
    pub groups: BTreeMap<String, GroupReport>,
    /// Trials run by this invocation.
    pub ran_now: usize,
    /// Trials found finished in the store (resume).
    pub reused: usize,
}

impl EvalReport {
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
            "status_counts": self.status_counts,
            "mean_wall_ms": num(self.mean_wall_ms),
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "harness": self.harness,
            "suite": self.suite,
            "split": self.split,
            "trials_per_task": self.trials_per_task,
            "run_dir": self.run_dir,
            "run_id": self.run_id,
            "ran_now": self.ran_now,
            "reused": self.reused,
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

/// Shared state of the workers.
struct Ctx {
    plan_tasks: Vec<Task>,
    harness: Harness,
    suite_dir: PathBuf,
    scorer: Scorer,
    settings: TrialSettings,
    launcher: Arc<dyn Launcher>,
    run_id: String,
    candidate_id: i64,
    trace_root: PathBuf,
    retries: u32,
    progress: Option<mpsc::Sender<ProgressEvent>>,
    writer: mpsc::Sender<TrialRow>,
    cancel: watch::Receiver<bool>,
    done: AtomicUsize,
    total: usize,
    running: Mutex<(f64, usize)>,
}

impl Ctx {
    fn emit(&self, ev: ProgressEvent) {
        if let Some(p) = &self.progress {
            let _ = p.send(ev);
        }
    }

    async fn run_unit(&self, task_idx: usize, trial_index: u32) {
        let task = &self.plan_tasks[task_idx];
        self.emit(ProgressEvent::TrialStarted {
            task_id: task.id.clone(),
            trial_index,
        });
        let trace_prefix = self
            .trace_root
            .join(sanitize(&task.id))
            .join(trial_index.to_string());
        let mut attempt = 0;
        let result = loop {
            attempt += 1;
            let req = TrialRequest {
                harness: &self.harness,
                task,
                suite_dir: &self.suite_dir,
                trial_index,
                trial_id: format!(
                    "{}/c{}/{}/{}",
                    self.run_id, self.candidate_id, task.id, trial_index
                ),
                trace_prefix: trace_prefix.clone(),
                cancel: Some(self.cancel.clone()),
            };
            let r = run_trial(&*self.launcher, &self.scorer, &self.settings, req).await;
            if r.cancelled || *self.cancel.borrow() {
                return;
            }
            if r.status == TrialStatus::InfraError && attempt <= self.retries {
                self.emit(ProgressEvent::TrialRetry {
                    task_id: task.id.clone(),
                    trial_index,
                    attempt,
                    error: r.error.clone().unwrap_or_default(),
                });
                continue;
            }
            break r;
        };
        let row = TrialRow {
            run_id: self.run_id.clone(),
            candidate_id: self.candidate_id,
            task_id: task.id.clone(),
            trial_index,
            outcome: result.outcome,
            status: result.status.as_str().into(),
            input_tokens: result.spend.input_tokens as i64,
            cached_tokens: result.spend.cached_tokens as i64,
            output_tokens: result.spend.output_tokens as i64,
            cost_usd: result.spend.cost_usd,
            tool_calls: 0,
            model_calls: result.spend.calls as i64,
            wall_ms: result.wall_ms,
            attempts: attempt,
            trace_path: Some(trace_prefix.to_string_lossy().into_owned()),
            answer: result.answer.as_ref().map(|a| a.to_string()),
            error: result.error.clone(),
        };
        if self.writer.send(row).is_err() {
            return;
        }
        let done = self.done.fetch_add(1, Ordering::SeqCst) + 1;
        let mean = {
            let mut r = self.running.lock().unwrap_or_else(|e| e.into_inner());
            if result.status.is_scored() {
                r.0 += result.outcome;
                r.1 += 1;
            }
            if r.1 > 0 {
                r.0 / r.1 as f64
            } else {
                f64::NAN
            }
        };
        self.emit(ProgressEvent::TrialFinished {
            task_id: task.id.clone(),
            trial_index,
            status: result.status,
            outcome: result.outcome,
            wall_ms: result.wall_ms,
            done,
            total: self.total,
            mean_outcome: mean,
        });
    }
}

/// Runs a planned evaluation with the local launcher and reports from the store.
pub fn run(
    plan: &EvalPlan,
    progress: Option<mpsc::Sender<ProgressEvent>>,
) -> Result<EvalReport, EvalError> {
    run_with(plan, Arc::new(LocalLauncher), progress)
}

/// Runs a planned evaluation with the given launcher (the seam a sandbox plugs into).
pub fn run_with(
    plan: &EvalPlan,
    launcher: Arc<dyn Launcher>,
    progress: Option<mpsc::Sender<ProgressEvent>>,
) -> Result<EvalReport, EvalError> {
    let opts = &plan.options;
    std::fs::create_dir_all(&plan.run_dir).map_err(|source| EvalError::RunDir {
        path: plan.run_dir.clone(),
        source,
    })?;
    let run_dir = plan
        .run_dir
        .canonicalize()
        .map_err(|source| EvalError::RunDir {
            path: plan.run_dir.clone(),
            source,
        })?;
    let mut store = Store::open(&run_dir.join("hevo.db"))?;
    let config = json!({
        "command": "eval",
        "harness": plan.harness.dir,
        "suite": plan.suite.dir,
        "split": opts.split,
        "trials": opts.trials,
    });
    store.ensure_run(&plan.run_id, "eval", &config.to_string())?;
    let candidate_id = store.ensure_candidate(
        &plan.run_id,
        &plan.harness.name,
        &plan.harness.code_hash,
        &plan.harness.params_json(),
        Some(&plan.harness.dir.to_string_lossy()),
    )?;
    let tasks: Vec<Task> = plan.tasks().into_iter().cloned().collect();
    store.upsert_tasks(
        &plan
            .suite
            .tasks
            .iter()
            .map(|t| TaskRow {
                id: t.id.clone(),
                split: t.split.as_str().into(),
                group: t.group.clone(),
                line: t.line,
            })
            .collect::<Vec<_>>(),
    )?;
    store.record_subset(
        &plan.run_id,
        opts.split.as_str(),
        Some(candidate_id),
        &tasks
            .iter()
            .map(|t| (t.id.clone(), 1.0))
            .collect::<Vec<_>>(),
    )?;
    let finished = store.finished_units(candidate_id)?;
    let past = store.mean_wall_ms_by_task()?;
    let mut units = Vec::new();
    let mut reused = 0;
    for (i, t) in tasks.iter().enumerate() {
        for r in 0..opts.trials {
            if finished.contains(&(t.id.clone(), r)) {
                reused += 1;
            } else {
                units.push(Unit {
                    item: (i, r),
                    expected_ms: past.get(&t.id).copied(),
                });
            }
        }
    }
    order_longest_first(&mut units);
    let total = units.len();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.jobs.min(default_jobs()).max(1))
        .enable_all()
        .build()
        .map_err(EvalError::Runtime)?;
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let cancel_tx = Arc::new(cancel_tx);
    let trace_root = run_dir.join("traces").join(format!("c{candidate_id}"));
    let work_root = opts.work_root.clone().unwrap_or_else(std::env::temp_dir);

    let state_dir = match plan.harness.prepare_argv() {
        Some(argv) if total > 0 => {
            Some(runtime.block_on(prepare(plan, &*launcher, argv, &run_dir, &trace_root))?)
        }
        _ => None,
    };

    if let Some(p) = &progress {
        let _ = p.send(ProgressEvent::RunStarted {
            total,
            already_done: reused,
            jobs: opts.jobs,
        });
    }

    let (writer_tx, writer_rx) = mpsc::channel::<TrialRow>();
    let writer_cancel = cancel_tx.clone();
    let writer = std::thread::spawn(move || -> (Store, Result<usize, StoreError>) {
        let mut written = 0;
        while let Ok(first) = writer_rx.recv() {
            let mut batch = vec![first];
            while batch.len() < 512 {
                match writer_rx.try_recv() {
                    Ok(more) => batch.push(more),
                    Err(_) => break,
                }
            }
            if let Err(e) = store.insert_trials(&batch) {
                let _ = writer_cancel.send(true);
                return (store, Err(e));
            }
            written += batch.len();
        }
        (store, Ok(written))
    });

    let ctx = Arc::new(Ctx {
        plan_tasks: tasks.clone(),
        harness: plan.harness.clone(),
        suite_dir: plan.suite.dir.clone(),
        scorer: Scorer::new(plan.suite.config.scorer.clone()),
        settings: TrialSettings {
            timeout: plan.timeout(),
            grace: opts.grace,
            output_cap: opts.output_cap,
            work_root,
            model_env: opts.model_env.clone(),
            model_access: opts.model_access.clone(),
            state_dir,
        },
        launcher,
        run_id: plan.run_id.clone(),
        candidate_id,
        trace_root,
        retries: opts.retries,
        progress: progress.clone(),
        writer: writer_tx,
        cancel: cancel_rx.clone(),
        done: AtomicUsize::new(0),
        total,
        running: Mutex::new((0.0, 0)),
    });

    let handle_signals = opts.handle_signals;
    let jobs = opts.jobs;
    let pool_ctx = ctx.clone();
    runtime.block_on(async move {
        let signals = handle_signals.then(|| {
            let cancel_tx = cancel_tx.clone();
            let progress = progress.clone();
            tokio::spawn(async move {
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
                next_signal(&mut term).await;
                if let Some(p) = &progress {
                    let _ = p.send(ProgressEvent::Cancelling);
                }
                let _ = cancel_tx.send(true);
                // A second signal skips the grace period.
                next_signal(&mut term).await;
                crate::trial::kill_all_running();
            })
        });
        run_pool(units, jobs, cancel_rx.clone(), move |(i, r)| {
            let ctx = pool_ctx.clone();
            async move { ctx.run_unit(i, r).await }
        })
        .await;
        if let Some(s) = signals {
            s.abort();
        }
    });
    let cancelled = *ctx.cancel.borrow();
    let done = ctx.done.load(Ordering::SeqCst);
    drop(ctx);
    let (store, written) = writer
        .join()
        .unwrap_or_else(|_| panic!("the store writer thread panicked"));
    written?;
    drop(runtime);
    if cancelled {
        return Err(EvalError::Interrupted { done });
    }
    let report = build_report(plan, &store, candidate_id, &tasks, done, reused, &run_dir)?;
    store.insert_estimate(&EstimateRow {
        run_id: plan.run_id.clone(),
        candidate_id,
        label: opts.split.as_str().into(),
        value: report
            .pass_rate
            .value
            .is_finite()
            .then_some(report.pass_rate.value),
        se: report
            .pass_rate
            .se
            .is_finite()
            .then_some(report.pass_rate.se),
        ci_low: report.pass_rate.ci_low,
        ci_high: report.pass_rate.ci_high,
        estimator: "sample_mean".into(),
        tasks_used: report.tasks_scored,
    })?;
    Ok(report)
}

/// Waits for Ctrl-C or SIGTERM.
async fn next_signal(term: &mut Option<tokio::signal::unix::Signal>) {
    let term_recv = async {
        match term.as_mut() {
            Some(t) => {
                t.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term_recv => {}
    }
}

/// Runs the harness's `prepare` once per candidate (skipped when already done in this run
/// directory) and returns the read-only state directory.
async fn prepare(
    plan: &EvalPlan,
    launcher: &dyn Launcher,
    argv: Vec<String>,
    run_dir: &Path,
    trace_root: &Path,
) -> Result<PathBuf, EvalError> {
    let key = format!(
        "{}-{}",
        &plan.harness.code_hash[..12],
        &hex::encode(Sha256::digest(plan.harness.params_json().as_bytes()))[..8]
    );
    let state = run_dir.join("state").join(&key);
    let marker = run_dir.join("state").join(format!("{key}.done"));
    if marker.exists() {
        return Ok(state);
    }
    let io_err = |source| EvalError::RunDir {
        path: state.clone(),
        source,
    };
    if state.exists() {
        make_writable(&state);
        std::fs::remove_dir_all(&state).map_err(io_err)?;
    }
    std::fs::create_dir_all(&state).map_err(io_err)?;
    let trace = trace_root.join("prepare");
    std::fs::create_dir_all(&trace).map_err(io_err)?;
    let mut stdin = Vec::new();
    for t in plan.suite.split(Split::Train) {
        let line = json!({"id": t.id, "group": t.group, "input": t.input, "expected": t.expected});
        stdin.extend_from_slice(line.to_string().as_bytes());
        stdin.push(b'\n');
    }
    let mut env = base_env(&state);
    env.push(("HEVO_PARAMS".into(), plan.harness.params_json()));
    let prepare_id = format!("{}/{}/prepare", plan.run_id, plan.harness.name);
    env.push(("HEVO_TRIAL_ID".into(), prepare_id.clone()));
    // Model calls made in prepare are the candidate's cost too: they get their own key and
    // land in the ledger like a trial's.
    let ticket = match &plan.options.model_access {
        Some(access) => {
            let (model_env, ticket) =
                access
                    .open(&prepare_id, &trace)
                    .map_err(|e| EvalError::Prepare {
                        harness: plan.harness.name.clone(),
                        message: format!("cannot open a gateway key: {e}"),
                        trace: trace.clone(),
                    })?;
            env.extend(model_env.vars());
            Some(ticket)
        }
        None => {
            env.extend(plan.options.model_env.vars());
            None
        }
    };
    let spec = LaunchSpec {
        argv,
        cwd: state.clone(),
        env,
        stdin,
        timeout: plan.timeout().max(Duration::from_secs(600)),
        grace: plan.options.grace,
        stdout_path: Some(trace.join("stdout")),
        stderr_path: Some(trace.join("stderr")),
        output_cap: plan.options.output_cap,
        tail_bytes: 0,
        cancel: None,
    };
    let fail = |message: String| EvalError::Prepare {
        harness: plan.harness.name.clone(),
        message,
        trace: trace.clone(),
    };
    let launched = launcher.launch(spec).await;
    if let (Some(access), Some(ticket)) = (&plan.options.model_access, ticket) {
        access.close(ticket);
    }
    let out = launched.map_err(|e| fail(e.to_string()))?;
    match out.exit {
        Exit::Code(0) => {}
        other => return Err(fail(format!("it ended with {other:?}"))),
    }
    make_read_only(&state);
    std::fs::write(&marker, b"").map_err(io_err)?;
    Ok(state)
}

fn set_mode(path: &Path, file_mode: u32, dir_mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                set_mode(&p, file_mode, dir_mode);
            } else {
                let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(file_mode));
            }
        }
    }
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(dir_mode));
}

fn make_read_only(path: &Path) {
    set_mode(path, 0o444, 0o555);
}

fn make_writable(path: &Path) {
    // Directories first, so their entries can be listed and changed.
    let _ = std::fs::set_permissions(
        path,
        <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755),
    );
    set_mode(path, 0o644, 0o755);
}

fn build_report(
    plan: &EvalPlan,
    store: &Store,
    candidate_id: i64,
    tasks: &[Task],
    ran_now: usize,
    reused: usize,
    run_dir: &Path,
) -> Result<EvalReport, EvalError> {
    let trials_per_task = plan.options.trials;
    let mut by_task: HashMap<String, Vec<TrialRow>> = HashMap::new();
    for row in store.trials_of(candidate_id)? {
        if row.trial_index < trials_per_task {
            by_task.entry(row.task_id.clone()).or_default().push(row);
        }
    }
    let mut status_counts: BTreeMap<String, usize> = TrialStatus::ALL
        .iter()
        .map(|s| (s.as_str().to_string(), 0))
        .collect();
    let mut tokens = Tokens::default();
    let mut cost = 0.0;
    let mut wall_sum = 0.0;
    let mut n_trials = 0;
    let mut n_timed = 0;
    let mut task_reports = Vec::new();
    let mut outcomes = Vec::new();
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for t in tasks {
        let rows = by_task.remove(&t.id).unwrap_or_default();
        let mut scored = Vec::new();
        for r in &rows {
            *status_counts.entry(r.status.clone()).or_default() += 1;
            tokens.input += r.input_tokens;
            tokens.cached += r.cached_tokens;
            tokens.output += r.output_tokens;
            tokens.calls += r.model_calls;
            cost += r.cost_usd;
            n_trials += 1;
            if TrialStatus::parse(&r.status).is_some_and(TrialStatus::is_scored) {
                scored.push(r.outcome);
                wall_sum += r.wall_ms as f64;
                n_timed += 1;
            }
        }
        let outcome =
            (!scored.is_empty()).then(|| scored.iter().sum::<f64>() / scored.len() as f64);
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
                })
                .collect(),
        });
    }
    Ok(EvalReport {
        run_dir: run_dir.to_path_buf(),
        run_id: plan.run_id.clone(),
        candidate_id,
        harness: plan.harness.name.clone(),
        suite: plan.suite.config.name.clone(),
        split: plan.options.split,
        trials_per_task,
        pass_rate: sample_mean(&outcomes),
        tasks_scored: outcomes.len(),
        trials: n_trials,
        status_counts,
        mean_wall_ms: if n_timed > 0 {
            wall_sum / n_timed as f64
        } else {
            f64::NAN
        },
        tokens,
        cost_usd: cost,
        tasks: task_reports,
        groups: groups
            .into_iter()
            .map(|(g, xs)| {
                (
                    g,
                    GroupReport {
                        tasks: xs.len(),
                        pass_rate: sample_mean(&xs),
                    },
                )
            })
            .collect(),
        ran_now,
        reused,
    })
}

/// Makes a string safe as one path component.
pub fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with('.') {
        format!("_{out}")
    } else {
        out
    }
}
