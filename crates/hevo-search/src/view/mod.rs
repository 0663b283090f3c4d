//! What a run directory shows: the data `hevo report`, `hevo status`, `hevo show` and
//! `hevo ls` render, read from `runs/<run>/` while a search runs or after it.
//!
//! ```text
//! hevo.db (read-only)          trials per candidate and task: spend, outcomes, traces
//! archive/candidates/*/        candidate.toml (lineage, hypothesis, axis), scores.json
//! archive/summary.jsonl        rejected candidates and their reasons
//! search.json                  the pick, once the search has finished
//! test/hevo.db                 the test split, once `finalize` has run
//! ```
//!
//! [`RunView::open`] reads everything into plain data; [`series`] derives what the charts
//! draw (best per iteration, spend against full evaluation, the task pool, the Pareto
//! front); [`diff`] compares a candidate's code with its parent's; [`html`] renders the
//! self-contained report. Nothing here writes into the run directory except
//! [`html::write_report`].

pub mod diff;
pub mod html;
mod read;
pub mod series;
mod svg;

use std::path::{Path, PathBuf};

use hevo_runtime::spend::Spend;
use hevo_stats::estimate::Estimate;
use serde::Serialize;

pub use read::{list_runs, require_run};

/// Everything a report or a status view shows about one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunView {
    /// The run directory.
    pub dir: PathBuf,
    /// The run's name (the directory's name).
    pub name: String,
    /// Whether the search has finished (it wrote `search.json`).
    pub finished: bool,
    /// Why the finished search stopped before its last iteration (a budget), if it did.
    pub stopped_early: Option<String>,
    /// The strategy (estimator) named in the candidates' `scores.json`, once one exists.
    pub strategy: Option<String>,
    /// The pick named in `search.json`, once the search has finished.
    pub pick: Option<String>,
    /// HarnessPro's `(tier, candidate)` picks of a finished `pareto` search, lite first.
    pub tiers: Vec<(String, String)>,
    /// The iterations the finished search completed, as `search.json` records them (`None`
    /// while it runs, and for a run from before hevo recorded them).
    pub recorded_iterations: Option<u32>,
    /// Validation tasks in the store.
    pub val_tasks: usize,
    /// Trials per (candidate, task) seen in the store (the largest trial index plus one).
    pub trials_per_task: u32,
    /// Every archived candidate, in arrival order.
    pub candidates: Vec<CandidateView>,
    /// Candidates rejected before evaluation (from `summary.jsonl`).
    pub rejected: Vec<Rejected>,
    /// The trials on the train split (HarnessPro's core-set runs, every status) and their
    /// spend: in no candidate's validation total.
    pub train: crate::runner::Effort,
    /// The test split's results, when `finalize` ran.
    pub test: Vec<TestView>,
    /// The validation trials that did not pass or fail, by class, with the first of each.
    pub failures: hevo_runtime::failures::Failures,
    /// The same for the test split (`finalize`).
    pub test_failures: hevo_runtime::failures::Failures,
}

/// One archived candidate.
#[derive(Clone, Debug, Serialize)]
pub struct CandidateView {
    /// Arrival index (the archive's `NNN`).
    pub seq: usize,
    /// Its name.
    pub name: String,
    /// The candidate it was derived from.
    pub parent: Option<String>,
    /// The iteration that proposed it (0 = seed).
    pub iteration: u32,
    /// What it changes and why.
    pub hypothesis: String,
    /// The proposer's axis: `seed`, `exploitation`, `exploration`, or what it wrote.
    pub axis: String,
    /// Its archive directory.
    pub dir: PathBuf,
    /// Its id in the run's store, once it has trials.
    pub store_id: Option<i64>,
    /// Its latest estimate (`scores.json`), once the strategy made one.
    pub estimate: Option<Estimate>,
    /// `evaluated`, `not sampled`, or `evaluating` (trials but no estimate yet).
    pub status: String,
    /// Validation trials recorded in the store.
    pub trials: u64,
    /// What those trials' model calls cost.
    pub spend: Spend,
    /// Per-task results from the store, by task id.
    pub tasks: Vec<TaskOutcome>,
    /// Where its trial traces are (`traces/c<id>/` in the run directory).
    pub trace_dir: Option<PathBuf>,
}

impl CandidateView {
    /// Whether the strategy has made its estimate: `evaluated`, or `not sampled` (the prior).
    pub fn estimated(&self) -> bool {
        matches!(self.status.as_str(), "evaluated" | "not sampled")
    }

    /// Whether its recorded estimate rests on a sample of tasks (some task it ran had an
    /// inclusion probability below 1), so that each task's [`TaskOutcome::weight`] matters.
    pub fn sampled(&self) -> bool {
        self.tasks
            .iter()
            .any(|t| t.inclusion.is_some_and(|p| p < 1.0))
    }

    /// The plain mean of its per-task outcomes so far (`None` before its first trial): what
    /// to look at while the strategy has not made an estimate yet. Not an estimate of the
    /// full validation score: the tasks run first are not a random sample.
    pub fn raw_mean(&self) -> Option<f64> {
        if self.tasks.is_empty() {
            return None;
        }
        Some(self.tasks.iter().map(|t| t.outcome).sum::<f64>() / self.tasks.len() as f64)
    }
}

/// One candidate's trials on one task.
#[derive(Clone, Debug, Serialize)]
pub struct TaskOutcome {
    /// Task id.
    pub task: String,
    /// Mean outcome over its trials.
    pub outcome: f64,
    /// Trials recorded.
    pub trials: u32,
    /// The status shared by all its trials, or `mixed`.
    pub status: String,
    /// The first error message among its trials.
    pub error: Option<String>,
    /// Dollars of its trials.
    pub cost_usd: f64,
    /// The task's inclusion probability in the design the candidate's estimate rests on
    /// (the store's `draws`): 1 for every task of an exactly known candidate; below 1, the
    /// estimate weighs the task's outcome by its inverse. `None` when no estimate was
    /// recorded (a running search, or a test-split result).
    pub inclusion: Option<f64>,
}

impl TaskOutcome {
    /// The task's weight in a sampled estimate: 1 / its inclusion probability (`None`
    /// without one).
    pub fn weight(&self) -> Option<f64> {
        self.inclusion.filter(|&p| p > 0.0).map(|p| 1.0 / p)
    }
}

/// A candidate rejected before evaluation.
#[derive(Clone, Debug, Serialize)]
pub struct Rejected {
    /// The iteration that proposed it.
    pub iteration: u32,
    /// Its name.
    pub name: String,
    /// Its hypothesis.
    pub hypothesis: String,
    /// Why it was rejected.
    pub reason: String,
}

/// One harness's result on the test split.
#[derive(Clone, Debug, Serialize)]
pub struct TestView {
    /// The candidate's name.
    pub name: String,
    /// `pick`, `seed`, `frontier`, tiers (from `search.json`), `no longer pick or frontier`
    /// for a result of an earlier finalize, or empty without a search record.
    pub role: String,
    /// Mean over test tasks with its 95% interval.
    pub pass_rate: Estimate,
    /// Test tasks scored.
    pub tasks: usize,
    /// Test trials recorded.
    pub trials: u64,
    /// Dollars of the test trials.
    pub cost_usd: f64,
}

/// Why a run could not be shown.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The directory is not a run directory.
    #[error("`{}` is not a run directory (no hevo.db and archive/ in it); {}", path.display(), known_runs(known))]
    NotARun {
        /// The directory given.
        path: PathBuf,
        /// Run directories next to it.
        known: Vec<String>,
    },
    /// The directory is a `hevo eval` run: a store and no archive, no search to show.
    #[error(
        "`{}` is a `hevo eval` run (hevo.db and no archive/): status, show and report read \
         searches (`hevo run`); the same `hevo eval` command prints its report again from \
         the store, and `hevo ls {}` lists it",
        path.display(),
        path.parent().unwrap_or(Path::new(".")).display()
    )]
    EvalRun {
        /// The directory given.
        path: PathBuf,
    },
    /// The run has no candidate of that name.
    #[error("run `{}` has no candidate `{name}`; {}", run.display(), known_candidates(known))]
    UnknownCandidate {
        /// The run directory.
        run: PathBuf,
        /// The name asked for.
        name: String,
        /// The candidates it has.
        known: Vec<String>,
    },
    /// A file of the run could not be read or parsed.
    #[error("cannot read `{}`: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// A file of the run that hevo writes whole (atomically) does not parse: it was edited
    /// or damaged after hevo wrote it.
    #[error(
        "`{}` is not as hevo wrote it ({message}); was it edited? {fix}",
        path.display()
    )]
    Unparsable {
        /// The file.
        path: PathBuf,
        /// What the parser found.
        message: String,
        /// How to get it back.
        fix: &'static str,
    },
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] hevo_runtime::store::StoreError),
}

fn known_runs(known: &[String]) -> String {
    if known.is_empty() {
        "there is no run directory next to it either; pass the directory `hevo run` printed".into()
    } else {
        format!(
            "pass one of the run directories found: {}",
            known.join(", ")
        )
    }
}

fn known_candidates(known: &[String]) -> String {
    if known.is_empty() {
        "it has no archived candidate yet".into()
    } else {
        format!("it has: {}", known.join(", "))
    }
}

impl ViewError {
    /// Whether the user named something that does not exist (exit code 2).
    pub fn is_user_error(&self) -> bool {
        match self {
            ViewError::NotARun { .. }
            | ViewError::EvalRun { .. }
            | ViewError::UnknownCandidate { .. }
            | ViewError::Unparsable { .. } => true,
            ViewError::Store(e) => e.is_user_error(),
            _ => false,
        }
    }
}

impl RunView {
    /// Reads the run directory `dir` (a search may be writing it meanwhile).
    pub fn open(dir: &Path) -> Result<RunView, ViewError> {
        read::open(dir)
    }

    /// The candidate named `name`, or an error listing the names there are.
    pub fn candidate(&self, name: &str) -> Result<&CandidateView, ViewError> {
        self.candidates
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| ViewError::UnknownCandidate {
                run: self.dir.clone(),
                name: name.to_string(),
                known: self.candidates.iter().map(|c| c.name.clone()).collect(),
            })
    }

    /// The best candidate so far: the highest estimate, earliest on ties (the search's
    /// own rule); the pick of `search.json` once the search has finished.
    /// None when that pick's directory is missing from the archive ([`RunView::missing_pick`]):
    /// another candidate shown in its place would be a pick the search never made.
    pub fn best(&self) -> Option<&CandidateView> {
        match &self.pick {
            Some(p) => self.candidates.iter().find(|c| &c.name == p),
            None => best_of(self.candidates.iter()),
        }
    }

    /// The pick `search.json` names when its directory is missing from the archive.
    pub fn missing_pick(&self) -> Option<&str> {
        self.pick
            .as_deref()
            .filter(|p| !self.candidates.iter().any(|c| c.name == *p))
    }

    /// The search's state in words: finished (early, and why), or in progress.
    pub fn state(&self) -> String {
        match (self.finished, &self.stopped_early) {
            (true, Some(why)) => format!("finished early: {why}"),
            (true, None) => "finished".into(),
            (false, _) => "in progress (or stopped before the end)".into(),
        }
    }

    /// The iterations completed, as `hevo run` counts them: what a finished search recorded;
    /// while it runs, the last iteration whose candidates all have an estimate, or that
    /// ended with every proposal rejected.
    pub fn iterations_done(&self) -> u32 {
        if let Some(n) = self.recorded_iterations {
            return n;
        }
        let pending: Vec<u32> = self
            .candidates
            .iter()
            .filter(|c| !c.estimated())
            .map(|c| c.iteration)
            .collect();
        let ended = |it: u32| !pending.iter().any(|&p| p <= it);
        self.candidates
            .iter()
            .map(|c| c.iteration)
            .chain(self.rejected.iter().map(|r| r.iteration))
            .filter(|&it| ended(it))
            .max()
            .unwrap_or(0)
    }

    /// The last iteration with an archived candidate: the charts' last column.
    pub fn last_iteration(&self) -> u32 {
        self.candidates
            .iter()
            .map(|c| c.iteration)
            .max()
            .unwrap_or(0)
    }

    /// Validation trials and their spend, over all candidates.
    pub fn total(&self) -> (u64, Spend) {
        let mut spend = Spend::default();
        let mut trials = 0;
        for c in &self.candidates {
            trials += c.trials;
            spend.add(&c.spend);
        }
        (trials, spend)
    }
}

/// The candidate with the highest finite estimate, earliest on ties.
pub fn best_of<'a>(cands: impl Iterator<Item = &'a CandidateView>) -> Option<&'a CandidateView> {
    let mut best: Option<&CandidateView> = None;
    for c in cands {
        let Some(v) = c.estimate.map(|e| e.value).filter(|v| v.is_finite()) else {
            continue;
        };
        let better = match best.and_then(|b| b.estimate) {
            Some(b) => v > b.value,
            None => true,
        };
        if better {
            best = Some(c);
        }
    }
    best
}
