//! How the search loop gets trials run: the [`CandidateRunner`] seam and its live
//! implementation over one long-lived [`Evaluator`].
//!
//! The runner is memoized by the store: asking again for a trial that already finished
//! returns the stored outcome without running anything. That is what makes a killed search
//! resume exactly: the loop simply replays its decisions, and only missing trials run.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hevo_runtime::cancel::Cancel;
use hevo_runtime::eval::{self, EvalError};
use hevo_runtime::evaluator::{Batch, Evaluator, EvaluatorConfig};
use hevo_runtime::executor::ProgressEvent;
use hevo_runtime::failures::Failures;
use hevo_runtime::launch::Launcher;
use hevo_runtime::model_access::{ModelAccess, ModelEnv, TrialRef};
use hevo_runtime::report::EvalReport;
use hevo_runtime::spend::Spend;
use hevo_runtime::store::{EstimateRow, RunKind, TrialRow};
use hevo_runtime::suite::Suite;
use hevo_runtime::task::Split;
use hevo_runtime::trial::TrialStatus;

use crate::outage::{probe, Probe};

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
    /// Mean model cost per trial of each task: (dollars, tokens).
    pub costs: HashMap<String, (f64, f64)>,
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

    /// One smoke trial of `code_dir` on the task `task_id` of the train split: `Ok(None)`
    /// when the harness printed a parsable answer, `Ok(Some(reason))` when the candidate is
    /// to blame (it does not load, its `prepare` fails, its trial did not answer), `Err`
    /// when the check could not judge it (a signal, the store): the run stops, and the same
    /// command checks the candidate again.
    fn smoke(
        &mut self,
        name: &str,
        code_dir: &Path,
        task_id: &str,
    ) -> Result<Option<String>, EvalError>;

    /// Records the strategy's final estimate of `code_dir`'s candidate in the store, with
    /// the design it rests on (the `draws` table).
    fn record_estimate(
        &mut self,
        name: &str,
        code_dir: &Path,
        estimate: &FinalEstimate,
    ) -> Result<(), EvalError>;

    /// Every stored trial row of `code_dir`'s candidate in the search (not smoke trials):
    /// spend, wall time and trace prefix, for the cost objective and the analyzer.
    fn trials(&mut self, name: &str, code_dir: &Path) -> Result<Vec<TrialRow>, EvalError>;

    /// HarnessPro's core-set runs: `runs` trials of `code_dir` on each of `task_ids` of the
    /// train split, running only the ones not already in the store; returns exactly those
    /// trials' rows.
    fn core_runs(
        &mut self,
        name: &str,
        code_dir: &Path,
        task_ids: &[String],
        runs: u32,
    ) -> Result<Vec<TrialRow>, EvalError>;

    /// Records one HarnessPro decision of `epoch` in the store (`decisions` table).
    fn record_decision(&mut self, epoch: u32, kind: &str, body: &str) -> Result<(), EvalError>;

    /// The body of the decision of `kind` recorded for `epoch`, if one was (a run stopped
    /// in the middle of the epoch resumes with it).
    fn decision(&mut self, epoch: u32, kind: &str) -> Result<Option<String>, EvalError>;
}

/// The rows an evaluation report counts: trial index below `trials` and run on the task's
/// current content (its task key); rows of a changed task are stale and left out.
pub fn current_rows(rows: Vec<TrialRow>, suite: &Suite, trials: u32) -> Vec<TrialRow> {
    let keys: HashMap<&str, String> = suite
        .tasks
        .iter()
        .map(|t| (t.id.as_str(), hevo_runtime::suite::task_key(t, suite)))
        .collect();
    rows.into_iter()
        .filter(|r| r.trial_index < trials && keys.get(r.task_id.as_str()) == Some(&r.task_key))
        .collect()
}

/// The label of a search's estimates and draws in the store: the validation score.
pub const VAL_LABEL: &str = "val";

/// A strategy's final estimate of one candidate, as the store keeps it.
#[derive(Clone, Debug)]
pub struct FinalEstimate {
    /// What was estimated ([`VAL_LABEL`]).
    pub label: String,
    /// The estimate with its interval.
    pub estimate: hevo_stats::estimate::Estimate,
    /// The strategy (and so the estimator) that made it.
    pub estimator: String,
    /// Distinct tasks the candidate was evaluated on.
    pub tasks_used: usize,
    /// The design behind the estimate: task ids with their inclusion probabilities.
    pub design: Vec<(String, f64)>,
}

/// Where progress lines go (the CLI prints them on stderr).
pub type ProgressFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How often a running batch reports its progress.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Turns a batch's progress events into throttled lines for `report`, each with the
/// batch's elapsed time and an ETA from its rate so far.
pub(crate) fn progress_lines(
    name: String,
    report: ProgressFn,
) -> (
    std::sync::mpsc::Sender<ProgressEvent>,
    std::thread::JoinHandle<()>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<ProgressEvent>();
    let handle = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let mut last = started;
        let mut line = None;
        for ev in rx {
            if let ProgressEvent::TrialFinished {
                done,
                total,
                mean_outcome,
                ..
            } = ev
            {
                let elapsed = started.elapsed().as_secs_f64();
                let eta = if done > 0 && total > done {
                    format!(
                        ", ETA {}",
                        crate::run::clock(elapsed / done as f64 * (total - done) as f64)
                    )
                } else {
                    String::new()
                };
                let text = format!(
                    "  {name}: {done}/{total} trials, mean outcome {mean_outcome:.3}, {} elapsed{eta}",
                    crate::run::clock(elapsed)
                );
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

/// Progress lines for `report` of what a Slurm executor's jobs do (`--no-progress`: none):
/// how many the first sbatch of a batch submitted, then every 30 s, while any is queued or
/// running, how many wait and run; a controller outage when it begins, every 30 s while it
/// lasts, and when it ends.
pub fn queue_lines(report: ProgressFn) -> hevo_runtime::slurm::QueueReport {
    use hevo_runtime::slurm::QueueNews;
    Arc::new(move |news: &QueueNews| match news {
        QueueNews::Submitted { jobs, id } => report(&format!(
            "  slurm: {jobs} job(s) submitted (job {id}); their state every {} s while \
             they wait or run",
            hevo_runtime::slurm::QUEUE_NEWS_EVERY.as_secs()
        )),
        QueueNews::Waiting {
            pending,
            running,
            elapsed,
        } => report(&format!(
            "  slurm: {pending} job(s) pending, {running} running, {} elapsed",
            crate::run::clock(elapsed.as_secs_f64())
        )),
        QueueNews::Unreachable { elapsed, said } if elapsed.is_zero() => report(&format!(
            "  slurm: the controller cannot be reached ({said}); hevo waits for it and asks \
             again every {} s: the jobs run on, and no trial fails for it",
            hevo_runtime::slurm::OUTAGE_POLL.as_secs()
        )),
        QueueNews::Unreachable { elapsed, .. } => report(&format!(
            "  slurm: the controller still cannot be reached, {} since the first failure",
            crate::run::clock(elapsed.as_secs_f64())
        )),
        QueueNews::Reachable { after } => report(&format!(
            "  slurm: the controller answers again, after {}",
            crate::run::clock(after.as_secs_f64())
        )),
    })
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
    /// Failure classes already shown with their first trial.
    seen_failures: std::collections::HashSet<&'static str>,
}

impl LiveRunner {
    /// Loads the suite and opens the run's store.
    pub fn open(settings: RunnerSettings) -> Result<LiveRunner, EvalError> {
        let suite = Suite::load(&settings.suite_dir)?;
        let run_id = hevo_runtime::store::run_id(&settings.run_dir);
        let config = evaluator_config(&settings, suite, RunKind::Search, &settings.run_dir, run_id);
        let evaluator = Evaluator::open(config)?;
        Ok(LiveRunner {
            settings,
            evaluator,
            smoke: None,
            seen_failures: Default::default(),
        })
    }

    /// The evaluator of the run (its store, for reads and records between batches).
    pub fn evaluator(&mut self) -> &mut Evaluator {
        &mut self.evaluator
    }

    /// Whether the model provider is down behind `tasks` left without a scored trial: the
    /// models their trials' calls (ledger ids under `trial_prefix`) failed upstream at, each
    /// asked by hevo itself ([`crate::outage`]). `Some(what failed)` when one of them fails
    /// hevo's own request too; `None` when every one answers or no call failed upstream.
    fn provider_down(
        &self,
        trial_prefix: &str,
        tasks: &BTreeSet<String>,
    ) -> Result<Option<String>, EvalError> {
        let Some(access) = &self.settings.model_access else {
            return Ok(None);
        };
        if tasks.is_empty() {
            return Ok(None);
        }
        let models = self
            .evaluator
            .store()
            .failed_upstream_models(trial_prefix, tasks)?;
        let trace_dir = self.settings.run_dir.join("probes");
        // The ledger names upstream models; hevo asks again by the names harnesses use.
        for upstream in models {
            for model in access.routes_to(&upstream) {
                let found = probe(&**access, &model, &trace_dir, &self.settings.cancel)?;
                if let Probe::Down(why) = found {
                    return Ok(Some(format!(
                        "calls to model `{model}` failed upstream on {} task(s), and so did \
                         hevo's own request to it ({why})",
                        tasks.len()
                    )));
                }
            }
        }
        Ok(None)
    }

    /// After a batch: how many of its trials failed, by class, and the first trial of
    /// each class not seen earlier in this search (message, stderr tail, trace).
    fn report_failures(&mut self, name: &str, report: &EvalReport, progress: &dyn Fn(&str)) {
        let failures = report.failures(name);
        if failures.is_empty() {
            return;
        }
        let counts: Vec<String> = failures
            .classes
            .iter()
            .map(|c| format!("{} x{}", c.class, c.count))
            .collect();
        progress(&format!(
            "  {name}: {} of {} trial(s) failed ({})",
            failures.total(),
            report.trials,
            counts.join(", ")
        ));
        let new = Failures {
            classes: failures
                .classes
                .into_iter()
                .filter(|c| self.seen_failures.insert(c.class))
                .collect(),
        };
        for line in new.lines("    ") {
            progress(&line);
        }
    }
}

/// The configuration of an evaluator of the search: `kind` (`search`, `smoke`) with its
/// store in `run_dir`, its ledger ids beginning with `run_id`.
fn evaluator_config(
    s: &RunnerSettings,
    suite: Suite,
    kind: RunKind,
    run_dir: &Path,
    run_id: String,
) -> EvaluatorConfig {
    EvaluatorConfig {
        run_dir: run_dir.to_path_buf(),
        run_id,
        kind,
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
        keep_workdirs: false,
    }
}

/// Mean outcome per task and the effort, from an eval report.
fn results_of(report: &EvalReport) -> TaskResults {
    let mut out = TaskResults::default();
    for t in &report.tasks {
        out.outcomes
            .insert(t.id.clone(), t.outcome.unwrap_or(f64::NAN));
        let n = t.details.len().max(1) as f64;
        let usd: f64 = t.details.iter().map(|d| d.spend.cost_usd).sum();
        let tokens: f64 = t
            .details
            .iter()
            .map(|d| d.spend.total_tokens() as f64)
            .sum();
        out.costs.insert(t.id.clone(), (usd / n, tokens / n));
    }
    out.effort = Effort {
        trials: report.trials as u64,
        spend: report.spend,
    };
    out
}

impl CandidateRunner for LiveRunner {
    fn trials(&mut self, name: &str, code_dir: &Path) -> Result<Vec<TrialRow>, EvalError> {
        let candidate = self.evaluator.load_as(code_dir, name)?;
        let rows = self.evaluator.store().trials_of(candidate.candidate_id)?;
        Ok(current_rows(
            rows,
            self.evaluator.suite(),
            self.settings.trials,
        ))
    }

    fn core_runs(
        &mut self,
        name: &str,
        code_dir: &Path,
        task_ids: &[String],
        runs: u32,
    ) -> Result<Vec<TrialRow>, EvalError> {
        let candidate = self.evaluator.load_as(code_dir, name)?;
        let (tx, reporter) = match &self.settings.progress {
            Some(p) => {
                let (tx, handle) = progress_lines(format!("{name} (core set)"), p.clone());
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        let batch = Batch {
            split: Split::Train,
            tasks: Some(task_ids),
            trials: runs,
            draw_label: None,
        };
        let report = self.evaluator.evaluate(&candidate, &batch, tx);
        if let Some(handle) = reporter {
            let _ = handle.join();
        }
        report?;
        let rows = self.evaluator.store().trials_of(candidate.candidate_id)?;
        let mut rows = current_rows(rows, self.evaluator.suite(), runs);
        rows.retain(|r| task_ids.contains(&r.task_id));
        Ok(rows)
    }

    fn decision(&mut self, epoch: u32, kind: &str) -> Result<Option<String>, EvalError> {
        let run_id = self.evaluator.run_id().to_string();
        let all = self.evaluator.store().decisions_of(&run_id)?;
        Ok(all
            .into_iter()
            .find(|(e, k, _)| *e == epoch && k == kind)
            .map(|(_, _, body)| body))
    }

    fn record_decision(&mut self, epoch: u32, kind: &str, body: &str) -> Result<(), EvalError> {
        let run_id = self.evaluator.run_id().to_string();
        self.evaluator
            .store()
            .record_decision(&run_id, epoch, kind, body)?;
        Ok(())
    }

    fn record_estimate(
        &mut self,
        name: &str,
        code_dir: &Path,
        e: &FinalEstimate,
    ) -> Result<(), EvalError> {
        let candidate = self.evaluator.load_as(code_dir, name)?;
        let finite = |x: f64| x.is_finite().then_some(x);
        let row = EstimateRow {
            run_id: self.evaluator.run_id().to_string(),
            candidate_id: candidate.candidate_id,
            label: e.label.clone(),
            value: finite(e.estimate.value),
            se: finite(e.estimate.se),
            ci_low: e.estimate.ci_low,
            ci_high: e.estimate.ci_high,
            estimator: e.estimator.clone(),
            tasks_used: e.tasks_used,
        };
        self.evaluator.store().insert_estimate(&row)?;
        let run_id = self.evaluator.run_id().to_string();
        self.evaluator.store_mut().record_draws(
            &run_id,
            candidate.candidate_id,
            &e.label,
            &e.design,
        )?;
        Ok(())
    }

    fn evaluate(
        &mut self,
        name: &str,
        code_dir: &Path,
        split: Split,
        task_ids: &[String],
    ) -> Result<TaskResults, eval::EvalError> {
        let candidate = self.evaluator.load_as(code_dir, name)?;
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
        let report = report?;
        if let Some(p) = self.settings.progress.clone() {
            self.report_failures(name, &report, p.as_ref());
        }
        let unscored: BTreeSet<String> = report
            .tasks
            .iter()
            .filter(|t| t.outcome.is_none())
            .map(|t| t.id.clone())
            .collect();
        let prefix = TrialRef::prefix(self.evaluator.run_id(), candidate.candidate_id);
        if let Some(why) = self.provider_down(&prefix, &unscored)? {
            return Err(EvalError::Outage(why));
        }
        Ok(results_of(&report))
    }

    fn smoke(
        &mut self,
        name: &str,
        code_dir: &Path,
        task_id: &str,
    ) -> Result<Option<String>, EvalError> {
        if self.smoke.is_none() {
            let suite = self.evaluator.suite().clone();
            let dir = self.settings.run_dir.join("smoke");
            let run_id = hevo_runtime::store::nested_run_id(&self.settings.run_dir, "smoke");
            let mut config = evaluator_config(&self.settings, suite, RunKind::Smoke, &dir, run_id);
            config.retries = 1;
            self.smoke = Some(Evaluator::open(config)?);
        }
        let smoke = self.smoke.as_mut().expect("opened above");
        let candidate = match smoke.load_as(code_dir, name) {
            Ok(c) => c,
            Err(e) => return blamed(e),
        };
        let ids = [task_id.to_string()];
        let batch = Batch {
            split: Split::Train,
            tasks: Some(&ids),
            trials: 1,
            draw_label: None,
        };
        let report = smoke.evaluate(&candidate, &batch, None);
        // Its state served one trial; the real evaluation prepares its own.
        smoke.release_state(&candidate);
        let report = match report {
            Ok(r) => r,
            Err(e) => return blamed(e),
        };
        let ran = report.tasks.first().and_then(|t| t.details.last());
        let Some(trial) = ran else {
            return Ok(Some("the smoke trial did not run".into()));
        };
        if trial.status == TrialStatus::InfraError.as_str() {
            let prefix = TrialRef::prefix(smoke.run_id(), candidate.candidate_id);
            let task = BTreeSet::from([task_id.to_string()]);
            if let Some(why) = self.provider_down(&prefix, &task)? {
                return Err(EvalError::Outage(why));
            }
        }
        Ok(match TrialStatus::parse(&trial.status) {
            Some(TrialStatus::Pass | TrialStatus::Fail) => None,
            _ => Some(format!(
                "its smoke trial on train task `{task_id}` ended as `{}`{}",
                trial.status,
                trial
                    .error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            )),
        })
    }
}

/// A smoke check's error: the candidate's fault (its harness does not load, its `prepare`
/// fails) is the reason to reject it; anything else (a signal, the store, the run
/// directory) is not the candidate's doing and stops the run.
fn blamed(e: EvalError) -> Result<Option<String>, EvalError> {
    match e {
        EvalError::Harness(_) | EvalError::Prepare { .. } => Ok(Some(e.to_string())),
        e => Err(e),
    }
}
