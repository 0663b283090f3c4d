//! `finalize`: the one evaluation on the test split, after the search, outside the archive.
//!
//! The pick, every seed and the frontier are evaluated on the test split once, into
//! `runs/<run>/test/` (its own store and traces). Nothing here writes into `archive/`, so
//! no test outcome can reach a proposer. Running it again reuses the stored trials.
//! Besides each harness's own interval it reports the pick minus each seed paired by task
//! ([`PairedDifference`]), the interval that says whether the pick's gain is real.

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
    /// Why the search stopped before its last iteration (a budget), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_early: Option<String>,
    /// The iterations it completed, as `hevo run` printed (`None` in a record from before
    /// hevo wrote it).
    #[serde(default)]
    pub iterations_done: Option<u32>,
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
            pick_estimate: has_estimate(&report.pick).then_some(report.pick.estimate),
            seeds: seeds.to_vec(),
            frontier: report
                .candidates
                .iter()
                .filter(|r| has_estimate(r))
                .take(crate::archive::FRONTIER_SIZE)
                .map(|r| r.name.clone())
                .collect(),
            // JSON has no NaN: a candidate without an estimate is left out.
            estimates: report
                .candidates
                .iter()
                .filter(|r| has_estimate(r))
                .map(|r| (r.name.clone(), r.estimate))
                .collect(),
            tiers: report
                .pareto
                .as_ref()
                .map(|p| p.tier_names())
                .unwrap_or_default(),
            cost_unit: report.pareto.as_ref().map(|p| p.unit),
            stopped_early: report.stopped_early.clone(),
            iterations_done: Some(report.iterations_done),
        }
    }
}

impl SearchRecord {
    /// The harnesses finalize tests, each once, in this order: the pick, the seeds, the
    /// frontier (with `frontier`), the tiers.
    pub fn tested(&self, frontier: bool) -> Vec<String> {
        let mut names: Vec<String> = vec![self.pick.clone()];
        let frontier = self.frontier.iter().filter(|_| frontier);
        let tiers = self.tiers.iter().map(|(_, n)| n);
        for name in self.seeds.iter().chain(frontier).chain(tiers) {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
    }

    /// The tiers `name` was picked for (`lite`, `medium`, `heavy`), in that order.
    pub fn tiers_of(&self, name: &str) -> Vec<String> {
        self.tiers
            .iter()
            .filter(|(_, n)| n == name)
            .map(|(t, _)| t.clone())
            .collect()
    }

    /// `name`'s role, as finalize and every view show it: `pick` (and `seed` when it is
    /// one), `seed`, its tiers (`lite, medium`), or `frontier`; empty for none.
    pub fn role_of(&self, name: &str) -> String {
        let seed = self.seeds.iter().any(|s| s == name);
        if self.pick == name {
            return if seed { "pick, seed" } else { "pick" }.into();
        }
        if seed {
            return "seed".into();
        }
        let tiers = self.tiers_of(name);
        if !tiers.is_empty() {
            return tiers.join(", ");
        }
        if self.frontier.iter().any(|f| f == name) {
            return "frontier".into();
        }
        String::new()
    }
}

/// Whether the search made `r` an estimate JSON can hold (no NaN): a candidate of an
/// iteration the evaluation budget stopped has none.
fn has_estimate(r: &crate::run::Ranked) -> bool {
    r.estimate.value.is_finite() && r.estimate.se.is_finite()
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

/// The pick minus one seed on the test split, paired by task.
///
/// Per task `d = pick's mean outcome - seed's mean outcome` (over its trials), on the tasks
/// both have outcomes for; the difference is `mean(d)` with `se = sd(d) / sqrt(n)` (sample
/// sd) and the normal 95% interval `mean ± 1.96 se` (unclipped). Pairing removes the
/// tasks' own difficulty from the noise, so this interval is far narrower than the two
/// harnesses' intervals side by side suggest.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairedDifference {
    /// The seed the pick is compared with.
    pub seed: String,
    /// Tasks with outcomes for both.
    pub tasks: usize,
    /// Pick minus seed, in score units, with its interval.
    pub difference: Estimate,
    /// Tasks where the pick scored higher.
    pub pick_better: usize,
    /// Tasks where the seed scored higher.
    pub seed_better: usize,
    /// Tasks where both scored the same.
    pub ties: usize,
}

impl PairedDifference {
    /// Pairs two harnesses' per-task mean outcomes (task id to outcome) by task.
    pub fn of(
        seed: &str,
        pick: &BTreeMap<String, f64>,
        other: &BTreeMap<String, f64>,
    ) -> PairedDifference {
        let d: Vec<f64> = pick
            .iter()
            .filter_map(|(task, a)| other.get(task).map(|b| a - b))
            .collect();
        let n = d.len();
        let mean = d.iter().sum::<f64>() / n as f64;
        let se = if n > 1 {
            let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
            (var / n as f64).sqrt()
        } else {
            f64::INFINITY
        };
        PairedDifference {
            seed: seed.to_string(),
            tasks: n,
            difference: Estimate::normal(mean, se, f64::NEG_INFINITY, f64::INFINITY),
            pick_better: d.iter().filter(|x| **x > 0.0).count(),
            seed_better: d.iter().filter(|x| **x < 0.0).count(),
            ties: d.iter().filter(|x| **x == 0.0).count(),
        }
    }
}

/// Per task id, the mean outcome of its trials.
fn per_task(rows: &[hevo_runtime::store::TrialRow]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    for r in rows {
        let e = sums.entry(r.task_id.clone()).or_default();
        e.0 += r.outcome;
        e.1 += 1;
    }
    sums.into_iter()
        .map(|(task, (sum, n))| (task, sum / n as f64))
        .collect()
}

/// The result of `finalize`.
#[derive(Clone, Debug, Serialize)]
pub struct FinalizeReport {
    /// The pick.
    pub pick: Ranked,
    /// Per harness name, its test result.
    pub test: BTreeMap<String, TestResult>,
    /// The pick minus each seed, paired by task, best seed (on test) first; empty when the
    /// pick is a seed.
    pub paired: Vec<PairedDifference>,
    /// Test trials recorded.
    pub evaluations: usize,
    /// Tokens and dollars of those trials (this invocation's and any a resumed finalize
    /// reused from the test store).
    pub spend: hevo_runtime::spend::Spend,
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
    /// The archived code of a candidate is not what the search evaluated (a user error: it
    /// was edited after the search).
    #[error(
        "the code of `{name}` in `{}` is not what the search evaluated (its hash or \
         parameters changed since): finalize tests only what was searched; put the archived \
         code back, or evaluate the edited harness with `hevo eval`",
        code.display()
    )]
    Changed {
        /// The candidate's name.
        name: String,
        /// Its archived code.
        code: PathBuf,
    },
    /// The suite is invalid (a user error).
    #[error(transparent)]
    Suite(#[from] hevo_runtime::suite::SuiteError),
    /// The suite has no `test` tasks to measure on (a user error).
    #[error(
        "suite `{}` has no `test` tasks: finalize measures the pick on the test split; add \
         tasks with \"split\": \"test\" to {}",
        dir.display(),
        dir.join("tasks.jsonl").display()
    )]
    NoTestTasks {
        /// The suite directory.
        dir: PathBuf,
    },
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
    /// The signal that stopped the test trials, if one did (the test trials finished are
    /// kept; the same command resumes).
    pub fn cancel_reason(&self) -> Option<hevo_runtime::cancel::CancelReason> {
        match self {
            FinalizeError::Eval {
                source: EvalError::Interrupted { reason, .. },
                ..
            } => Some(*reason),
            _ => None,
        }
    }

    /// Whether the user must fix something (exit code 2).
    pub fn is_user_error(&self) -> bool {
        match self {
            FinalizeError::NotARunDir { .. }
            | FinalizeError::MissingCandidate { .. }
            | FinalizeError::Changed { .. }
            | FinalizeError::Suite(_)
            | FinalizeError::NoTestTasks { .. } => true,
            FinalizeError::Eval { source, .. } => source.is_user_error(),
        }
    }
}

/// Loads the suite finalize measures on, refusing one without `test` tasks. Called before
/// any work: by `hevo run --finalize` before its search, by `hevo finalize` before its model
/// layer starts, and by [`finalize`] itself.
pub fn test_suite(suite_dir: &Path) -> Result<Suite, FinalizeError> {
    let suite = Suite::load(suite_dir)?;
    if suite.split(Split::Test).is_empty() {
        return Err(FinalizeError::NoTestTasks { dir: suite.dir });
    }
    Ok(suite)
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
    let roles: Vec<(String, String)> = record
        .tested(opts.frontier)
        .into_iter()
        .map(|name| {
            let role = record.role_of(&name);
            (name, role)
        })
        .collect();
    let test_dir = run_dir.join("test");
    let suite = test_suite(suite_dir)?;
    let suite_tasks: Vec<String> = suite
        .split(Split::Test)
        .iter()
        .map(|t| t.id.clone())
        .collect();
    let mut evaluator = Evaluator::open(EvaluatorConfig {
        run_dir: test_dir.clone(),
        run_id: hevo_runtime::store::nested_run_id(run_dir, "test"),
        kind: hevo_runtime::store::RunKind::Finalize,
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
    // The search's store, read-only: what each candidate's code was when it was evaluated.
    let searched =
        hevo_runtime::store::Store::open_read_only(&run_dir.join("hevo.db")).map_err(|e| {
            FinalizeError::Eval {
                candidate: record.pick.clone(),
                source: e.into(),
            }
        })?;
    let test_ids: std::collections::HashSet<&str> =
        suite_tasks.iter().map(|s| s.as_str()).collect();
    // Every harness to test is loaded (hashed once) before any trial runs, and must be what
    // the search evaluated under its name (none recorded for a run from before the store
    // kept names: nothing to compare).
    let mut loaded = BTreeMap::new();
    for (name, _) in &roles {
        if loaded.contains_key(name) {
            continue;
        }
        let (_, code) = dirs
            .get(name)
            .ok_or_else(|| FinalizeError::MissingCandidate {
                name: name.clone(),
                archive: candidates_dir.clone(),
            })?;
        let failed = |source: EvalError| FinalizeError::Eval {
            candidate: name.clone(),
            source,
        };
        let candidate = evaluator.load_as(code, name).map_err(failed)?;
        let versions = searched.versions_of(name).map_err(|e| failed(e.into()))?;
        let now = (
            candidate.harness.code_hash.clone(),
            candidate.harness.params_json(),
        );
        if !versions.is_empty() && !versions.contains(&now) {
            return Err(FinalizeError::Changed {
                name: name.clone(),
                code: code.clone(),
            });
        }
        loaded.insert(name.clone(), candidate);
    }
    let mut test = BTreeMap::new();
    let mut outcomes: BTreeMap<String, BTreeMap<String, f64>> = BTreeMap::new();
    let mut evaluations = 0;
    let mut spend = hevo_runtime::spend::Spend::default();
    for (name, role) in roles {
        if test.contains_key(&name) {
            continue;
        }
        log(&format!("test: {name} ({role})"));
        let eval_err = |source| FinalizeError::Eval {
            candidate: name.clone(),
            source,
        };
        let candidate = loaded.remove(&name).expect("loaded above");
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
        spend.add(&report.spend);
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
        outcomes.insert(name.clone(), per_task(&rows));
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
                tiers: record.tiers_of(&name),
                cost: cost_summary(&rows, unit),
            },
        );
    }
    let mut paired: Vec<PairedDifference> = if record.seeds.contains(&record.pick) {
        Vec::new()
    } else {
        record
            .seeds
            .iter()
            .map(|seed| PairedDifference::of(seed, &outcomes[&record.pick], &outcomes[seed]))
            .collect()
    };
    // Best seed first: the smallest difference (the seed with the highest test score).
    paired.sort_by(|a, b| a.difference.value.total_cmp(&b.difference.value));
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
        paired,
        evaluations,
        spend,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// finalize and the views read one rule: a tier candidate that is also on the frontier
    /// is named by its tiers (status called it `frontier` while finalize said `lite, ...`).
    #[test]
    fn roles_are_one_rule_and_each_harness_is_tested_once() {
        let names = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let record = SearchRecord {
            config_file: PathBuf::new(),
            pick: "p".into(),
            pick_iteration: 1,
            pick_estimate: None,
            seeds: names(&["s", "p0"]),
            frontier: names(&["p", "f", "t"]),
            estimates: BTreeMap::new(),
            tiers: vec![
                ("lite".into(), "t".into()),
                ("medium".into(), "t".into()),
                ("heavy".into(), "p".into()),
            ],
            cost_unit: None,
            stopped_early: None,
            iterations_done: Some(2),
        };
        assert_eq!(record.tested(false), names(&["p", "s", "p0", "t"]));
        assert_eq!(record.tested(true), names(&["p", "s", "p0", "f", "t"]));
        let roles: Vec<String> = ["p", "s", "f", "t", "x"]
            .iter()
            .map(|n| record.role_of(n))
            .collect();
        assert_eq!(
            roles,
            names(&["pick", "seed", "frontier", "lite, medium", ""])
        );
        let seeded = SearchRecord {
            pick: "s".into(),
            ..record
        };
        assert_eq!(seeded.role_of("s"), "pick, seed");
    }

    fn scores(xs: &[f64]) -> BTreeMap<String, f64> {
        xs.iter()
            .enumerate()
            .map(|(i, x)| (format!("t{i:03}"), *x))
            .collect()
    }

    #[test]
    fn the_paired_difference_counts_wins_losses_and_ties_on_shared_tasks() {
        let pick = scores(&[1.0, 1.0, 0.0, 1.0, 0.0]);
        let mut seed = scores(&[0.0, 1.0, 1.0, 0.0]);
        seed.insert("other".into(), 1.0); // not in the pick's tasks: left out
        let p = PairedDifference::of("s", &pick, &seed);
        assert_eq!(
            (p.tasks, p.pick_better, p.seed_better, p.ties),
            (4, 2, 1, 1)
        );
        assert!((p.difference.value - 0.25).abs() < 1e-12);
        // d = 1, 0, -1, 1: sample sd sqrt(11/12), se sqrt(11/48).
        assert!((p.difference.se - (11.0f64 / 48.0).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn the_paired_interval_covers_the_true_difference_about_95_percent_of_the_time() {
        // 2,000 simulated test splits of 100 tasks: a task's difficulty u is shared by both
        // harnesses (pick passes when u < 0.6, seed when u < 0.45, plus 15% independent
        // flips each), so the outcomes are correlated as real paired runs are. The true
        // difference is computed from the model; coverage must be 0.95 within 0.02 (the
        // binomial sd of the coverage is 0.005; the normal interval on 100 tasks is a bit
        // short of t's).
        let mut rng = ChaCha8Rng::seed_from_u64(20261201);
        let pass = |p: f64, flip: f64| -> f64 { p * (1.0 - flip) + (1.0 - p) * flip };
        let truth = pass(0.6, 0.15) - pass(0.45, 0.15);
        let runs = 2000;
        let mut covered = 0;
        for _ in 0..runs {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..100 {
                let u: f64 = rng.gen();
                let flip = |x: bool, rng: &mut ChaCha8Rng| x ^ rng.gen_bool(0.15);
                a.push(flip(u < 0.6, &mut rng) as u8 as f64);
                b.push(flip(u < 0.45, &mut rng) as u8 as f64);
            }
            let d = PairedDifference::of("s", &scores(&a), &scores(&b)).difference;
            if d.ci_low <= truth && truth <= d.ci_high {
                covered += 1;
            }
        }
        let coverage = covered as f64 / runs as f64;
        assert!((coverage - 0.95).abs() < 0.02, "coverage {coverage}");
    }
}
