//! `finalize`: the one evaluation on the test split, after the search, outside the archive.
//!
//! The pick, every seed and the frontier are evaluated on the test split once, into
//! `runs/<run>/test/` (its own store and traces). Nothing here writes into `archive/`, so
//! no test outcome can reach a proposer. Running it again reuses the stored trials.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hevo_stats::estimate::Estimate;
use serde::{Deserialize, Serialize};

use crate::archive::Archive;
use crate::objective::{cost_summary, CostSummary, CostUnit};
use crate::run::{Ranked, SearchReport};
use hevo_runtime::cancel::Cancel;
use hevo_runtime::eval::EvalError;
use hevo_runtime::evaluator::{Batch, Evaluator, EvaluatorConfig};
use hevo_runtime::launch::Launcher;
use hevo_runtime::model_access::ModelEnv;
use hevo_runtime::suite::Suite;
use hevo_runtime::task::Split;

/// What `hevo run` leaves for `finalize`: where the config is and what the search found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchRecord {
    /// Absolute path of the `hevo.toml` the run used.
    pub config_file: PathBuf,
    /// The pick's name.
    pub pick: String,
    /// The iteration that proposed the pick (0 for a seed).
    #[serde(default)]
    pub pick_iteration: u32,
    /// The pick's selection-adjusted estimate (`Outcome::pick_interval`), as printed.
    #[serde(default)]
    pub pick_estimate: Option<Estimate>,
    /// The seeds' names.
    pub seeds: Vec<String>,
    /// The best few candidates' names (the frontier), best first.
    pub frontier: Vec<String>,
    /// The final validation estimate of every candidate, by name.
    pub estimates: BTreeMap<String, Estimate>,
    /// Under `[objective] kind = "pareto"`: `(tier, candidate name)` of each tier.
    #[serde(default)]
    pub tiers: Vec<(String, String)>,
    /// The unit the search counted cost in (`None` before pareto runs existed).
    #[serde(default)]
    pub cost_unit: Option<CostUnit>,
}

/// The file name of the search record inside the run directory.
pub const RECORD_FILE: &str = "search.json";

impl SearchRecord {
    /// Builds the record from a finished search.
    pub fn from_report(
        report: &SearchReport,
        config_file: &Path,
        seeds: &[String],
    ) -> SearchRecord {
        SearchRecord {
            config_file: config_file.to_path_buf(),
            pick: report.pick.name.clone(),
            pick_iteration: report.pick.iteration,
            pick_estimate: report
                .pick
                .estimate
                .se
                .is_finite()
                .then_some(report.pick.estimate),
            seeds: seeds.to_vec(),
            frontier: report
                .candidates
                .iter()
                .take(crate::archive::FRONTIER_SIZE)
                .map(|r| r.name.clone())
                .collect(),
            // JSON has no NaN: a candidate without an estimate is left out.
            estimates: report
                .candidates
                .iter()
                .filter(|r| r.estimate.value.is_finite() && r.estimate.se.is_finite())
                .map(|r| (r.name.clone(), r.estimate))
                .collect(),
            tiers: report
                .pareto
                .as_ref()
                .map(|p| p.tier_names())
                .unwrap_or_default(),
            cost_unit: report.pareto.as_ref().map(|p| p.unit),
        }
    }
}

/// One harness's test result.
#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    /// `pick`, `seed`, `frontier`, or `pick, seed` when the search kept a seed; a tier
    /// that has no other role is named by its tiers (`lite`, `medium, heavy`, ...).
    pub role: String,
    /// The pareto tiers this harness is (empty under the `pass_rate` objective).
    pub tiers: Vec<String>,
    /// Cost per task with its interval, time per task and successes, from its test trial
    /// rows in the test store; cost of pass is `cost.cost_of_pass()`.
    pub cost: CostSummary,
    /// Test pass rate with its 95% interval.
    pub pass_rate: f64,
    /// Lower end of the interval.
    pub ci_low: f64,
    /// Upper end of the interval.
    pub ci_high: f64,
    /// Its validation estimate from the search.
    pub val_estimate: f64,
    /// Test trials recorded.
    pub trials: usize,
    /// Dollars spent on its test trials.
    pub cost_usd: f64,
}

/// The result of `finalize`.
#[derive(Clone, Debug, Serialize)]
pub struct FinalizeReport {
    /// The pick.
    pub pick: Ranked,
    /// Per harness name, its test result.
    pub test: BTreeMap<String, TestResult>,
    /// Test trials recorded.
    pub evaluations: usize,
    /// Dollars of the test trials.
    pub cost_usd: f64,
}

/// How `finalize` runs trials.
pub struct FinalizeOptions {
    /// Trials per task.
    pub trials: u32,
    /// Concurrent trials.
    pub jobs: usize,
    /// Gateway variables for trials (used when `model_access` is `None`).
    pub model_env: ModelEnv,
    /// Per-trial gateway keys (set when a gateway runs).
    pub model_access: Option<Arc<dyn hevo_runtime::model_access::ModelAccess>>,
    /// The launcher.
    pub launcher: Arc<dyn Launcher>,
    /// The process's cancellation token.
    pub cancel: Cancel,
    /// Also test the frontier (the best few candidates), not only the pick and the seeds
    /// (and the tiers in pareto mode) the comparison needs.
    pub frontier: bool,
    /// Receives progress lines while test trials run (as a search's batches do);
    /// `None` for quiet runs.
    pub progress: Option<crate::runner::ProgressFn>,
}

/// Why finalize could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FinalizeError {
    /// The directory holds no archive (a user error).
    #[error("`{}` is not a run directory (no `archive/candidates/` in it): {source}; pass the directory `hevo run` printed", path.display())]
    NotARunDir {
        /// The directory given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The search record names a candidate the archive does not hold (a user error: the
    /// archive was changed by hand).
    #[error("candidate `{name}` is not in `{}`; was the archive edited?", archive.display())]
    MissingCandidate {
        /// The candidate's name.
        name: String,
        /// The archive's candidates directory.
        archive: PathBuf,
    },
    /// The suite is invalid (a user error).
    #[error(transparent)]
    Suite(#[from] hevo_runtime::suite::SuiteError),
    /// Evaluating a candidate on the test split failed.
    #[error("testing `{candidate}`: {source}")]
    Eval {
        /// The candidate's name.
        candidate: String,
        /// The cause.
        #[source]
        source: EvalError,
    },
}

impl FinalizeError {
    /// Whether the user must fix something (exit code 2).
    pub fn is_user_error(&self) -> bool {
        match self {
            FinalizeError::NotARunDir { .. }
            | FinalizeError::MissingCandidate { .. }
            | FinalizeError::Suite(_) => true,
            FinalizeError::Eval { source, .. } => source.is_user_error(),
        }
    }
}

/// Evaluates the pick, the seeds and the frontier on the test split, with one evaluator
/// (one store under `runs/<run>/test/`, never inside the archive).
pub fn finalize(
    run_dir: &Path,
    suite_dir: &Path,
    record: &SearchRecord,
    opts: &FinalizeOptions,
    log: &mut dyn FnMut(&str),
) -> Result<FinalizeReport, FinalizeError> {
    let archive = Archive::existing(&run_dir.join("archive"));
    let candidates_dir = archive.root().join("candidates");
    let dirs: BTreeMap<String, (usize, PathBuf)> = archive
        .candidate_dirs()
        .map_err(|source| FinalizeError::NotARunDir {
            path: run_dir.to_path_buf(),
            source,
        })?
        .into_iter()
        .map(|(seq, name, dir)| (name, (seq, dir.join("code"))))
        .collect();
    let pick_role = if record.seeds.contains(&record.pick) {
        "pick, seed"
    } else {
        "pick"
    };
    let mut roles: Vec<(String, String)> = vec![(record.pick.clone(), pick_role.into())];
    for s in &record.seeds {
        roles.push((s.clone(), "seed".into()));
    }
    if opts.frontier {
        for f in &record.frontier {
            roles.push((f.clone(), "frontier".into()));
        }
    }
    let tiers_of = |name: &str| -> Vec<String> {
        record
            .tiers
            .iter()
            .filter(|(_, n)| n == name)
            .map(|(t, _)| t.clone())
            .collect()
    };
    for (_, name) in &record.tiers {
        if !roles.iter().any(|(n, _)| n == name) {
            roles.push((name.clone(), tiers_of(name).join(", ")));
        }
    }
    let test_dir = run_dir.join("test");
    let suite = Suite::load(suite_dir)?;
    let suite_tasks: Vec<String> = suite
        .split(Split::Test)
        .iter()
        .map(|t| t.id.clone())
        .collect();
    let mut evaluator = Evaluator::open(EvaluatorConfig {
        run_dir: test_dir.clone(),
        run_id: "test".into(),
        kind: "finalize".into(),
        config_json: serde_json::json!({"command": "finalize", "suite": suite_dir}).to_string(),
        suite,
        jobs: opts.jobs,
        retries: 2,
        timeout: None,
        grace: hevo_runtime::eval::DEFAULT_GRACE,
        output_cap: hevo_runtime::eval::DEFAULT_OUTPUT_CAP,
        model_env: opts.model_env.clone(),
        model_access: opts.model_access.clone(),
        work_root: std::env::temp_dir(),
        launcher: opts.launcher.clone(),
        cancel: opts.cancel.clone(),
        keep_workdirs: false,
    })
    .map_err(|source| FinalizeError::Eval {
        candidate: record.pick.clone(),
        source,
    })?;
    let test_ids: std::collections::HashSet<&str> =
        suite_tasks.iter().map(|s| s.as_str()).collect();
    let mut test = BTreeMap::new();
    let mut evaluations = 0;
    let mut cost = 0.0;
    for (name, role) in roles {
        if test.contains_key(&name) {
            continue;
        }
        let (_, code) = dirs
            .get(&name)
            .ok_or_else(|| FinalizeError::MissingCandidate {
                name: name.clone(),
                archive: candidates_dir.clone(),
            })?;
        log(&format!("test: {name} ({role})"));
        let eval_err = |source| FinalizeError::Eval {
            candidate: name.clone(),
            source,
        };
        let candidate = evaluator.load(code).map_err(eval_err)?;
        let batch = Batch {
            split: Split::Test,
            tasks: None,
            trials: opts.trials,
            draw_label: Some("test"),
        };
        let (tx, reporter) = match &opts.progress {
            Some(p) => {
                let (tx, handle) = crate::runner::progress_lines(name.clone(), p.clone());
                (Some(tx), Some(handle))
            }
            None => (None, None),
        };
        let report = evaluator.evaluate(&candidate, &batch, tx);
        if let Some(handle) = reporter {
            let _ = handle.join();
        }
        let report = report.map_err(eval_err)?;
        evaluations += report.trials;
        cost += report.spend.cost_usd;
        let rows = evaluator
            .store()
            .trials_of(candidate.candidate_id)
            .map_err(|e| FinalizeError::Eval {
                candidate: name.clone(),
                source: e.into(),
            })?;
        let rows = crate::runner::current_rows(rows, evaluator.suite(), opts.trials)
            .into_iter()
            .filter(|r| test_ids.contains(r.task_id.as_str()))
            .collect::<Vec<_>>();
        let unit = record.cost_unit.unwrap_or_else(|| CostUnit::of(&rows));
        test.insert(
            name.clone(),
            TestResult {
                role,
                pass_rate: report.pass_rate.value,
                ci_low: report.pass_rate.ci_low,
                ci_high: report.pass_rate.ci_high,
                val_estimate: record
                    .estimates
                    .get(&name)
                    .map(|e| e.value)
                    .unwrap_or(f64::NAN),
                trials: report.trials,
                cost_usd: report.spend.cost_usd,
                tiers: tiers_of(&name),
                cost: cost_summary(&rows, unit),
            },
        );
    }
    let pick_est = record
        .pick_estimate
        .or_else(|| record.estimates.get(&record.pick).copied())
        .unwrap_or(Estimate::exact(f64::NAN));
    Ok(FinalizeReport {
        pick: Ranked {
            name: record.pick.clone(),
            iteration: record.pick_iteration,
            estimate: pick_est,
        },
        test,
        evaluations,
        cost_usd: cost,
    })
}
