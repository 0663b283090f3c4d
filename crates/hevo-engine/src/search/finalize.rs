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

use super::run::{Ranked, SearchReport};
use crate::eval::{self, EvalOptions};
use crate::suite::Split;
use crate::trial::{Launcher, ModelEnv};

/// What `hevo run` leaves for `finalize`: where the config is and what the search found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SearchRecord {
    /// Absolute path of the `hevo.toml` the run used.
    pub config_file: PathBuf,
    /// The pick's name.
    pub pick: String,
    /// The seeds' names.
    pub seeds: Vec<String>,
    /// The best few candidates' names (the frontier), best first.
    pub frontier: Vec<String>,
    /// The final validation estimate of every candidate, by name.
    pub estimates: BTreeMap<String, Estimate>,
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
            seeds: seeds.to_vec(),
            frontier: report
                .candidates
                .iter()
                .take(super::archive::FRONTIER_SIZE)
                .map(|r| r.name.clone())
                .collect(),
            // JSON has no NaN: a candidate without an estimate is left out.
            estimates: report
                .candidates
                .iter()
                .filter(|r| r.estimate.value.is_finite() && r.estimate.se.is_finite())
                .map(|r| (r.name.clone(), r.estimate))
                .collect(),
        }
    }
}

/// One harness's test result.
#[derive(Clone, Debug, Serialize)]
pub struct TestResult {
    /// `pick`, `seed`, `frontier`, or `pick, seed` when the search kept a seed.
    pub role: String,
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
    pub model_access: Option<Arc<dyn crate::model_access::ModelAccess>>,
    /// The launcher.
    pub launcher: Arc<dyn Launcher>,
}

/// Evaluates the pick, the seeds and the frontier on the test split.
pub fn finalize(
    run_dir: &Path,
    suite_dir: &Path,
    record: &SearchRecord,
    opts: &FinalizeOptions,
    log: &mut dyn FnMut(&str),
) -> Result<FinalizeReport, String> {
    let archive = run_dir.join("archive").join("candidates");
    let dirs: BTreeMap<String, PathBuf> = std::fs::read_dir(&archive)
        .map_err(|e| {
            format!(
                "cannot read `{}`: {e}; is this a run directory?",
                archive.display()
            )
        })?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let (_, name) = n.split_once('-')?;
            Some((name.to_string(), e.path().join("code")))
        })
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
    for f in &record.frontier {
        roles.push((f.clone(), "frontier".into()));
    }
    let test_dir = run_dir.join("test");
    let mut test = BTreeMap::new();
    let mut evaluations = 0;
    let mut cost = 0.0;
    for (name, role) in roles {
        if test.contains_key(&name) {
            continue;
        }
        let code = dirs
            .get(&name)
            .ok_or_else(|| format!("candidate `{name}` is not in `{}`", archive.display()))?;
        log(&format!("test: {name} ({role})"));
        let mut o = EvalOptions::new(code, suite_dir);
        o.split = Split::Test;
        o.trials = opts.trials;
        o.jobs = opts.jobs;
        o.run_dir = Some(test_dir.clone());
        o.model_env = opts.model_env.clone();
        o.model_access = opts.model_access.clone();
        let plan = eval::plan(o).map_err(|e| e.to_string())?;
        let report =
            eval::run_with(&plan, opts.launcher.clone(), None).map_err(|e| e.to_string())?;
        evaluations += report.trials;
        cost += report.cost_usd;
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
                cost_usd: report.cost_usd,
            },
        );
    }
    let pick_est = record
        .estimates
        .get(&record.pick)
        .copied()
        .unwrap_or(Estimate::exact(f64::NAN));
    Ok(FinalizeReport {
        pick: Ranked {
            name: record.pick.clone(),
            iteration: 0,
            estimate: pick_est,
        },
        test,
        evaluations,
        cost_usd: cost,
    })
}
