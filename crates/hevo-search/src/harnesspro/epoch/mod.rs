//! One HarnessPro epoch: core set, core runs, diagnoses, survivors, children in `pending/`.
//!
//! Every decision goes to the store (`decisions`: `core_set`, `survivors`, `plans`) and to
//! `archive/harnesspro/epoch-NNN.json` with the budget the epoch's evaluations used against
//! full evaluation. The diagnoses are saved beside each candidate
//! (`archive/candidates/NNN-name/diagnosis/epoch-NNN.{builtin,agent}.json`), a child's diff
//! against its parent as `diff.patch` beside it once archived.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use hevo_runtime::task::{Split, Task};
use hevo_stats::estimate::Estimate;
use serde::{Deserialize, Serialize};

mod children;

use self::children::proposed_children;

use super::agent_diagnosis;
use super::core_set;
use crate::archive::{write_atomic, Archive, Candidate};
use crate::config::{HarnessProConfig, ObjectiveConfig};
use crate::diagnose::{self, Diagnosis};
use crate::objective::ParetoReport;
use crate::proposer::agent::{run_agent, AgentCall, AgentOutcome};
use crate::proposer::{AgentProposer, ProposeContext, ProposeError, Proposer};
use crate::run::SearchError;
use crate::runner::CandidateRunner;

/// What one child's plan became.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PlanRecord {
    /// The child's name.
    pub child: String,
    /// The survivor it was made from.
    pub parent: String,
    /// `I1`, `I2`, `I3`, or the proposer's kind when no agent made it.
    pub instruction: String,
    /// The plan's first line.
    pub summary: String,
    /// `committed` (then in `pending/`) or `rejected: <why>`.
    pub outcome: String,
}

/// Trials an epoch's evaluations used, against evaluating everything.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Budget {
    /// Core-set trials of the epoch's pool (`pool x core x G`).
    pub core_trials: usize,
    /// What every train task `G` times would have been (`pool x train x G`).
    pub core_trials_full: usize,
    /// Validation trials in the store so far (the strategy's budgeted evaluation).
    pub val_trials: usize,
    /// Every candidate so far on every val task (`candidates x val x trials`).
    pub val_trials_full: usize,
}

/// `archive/harnesspro/epoch-NNN.json`: everything an epoch decided.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EpochRecord {
    /// The epoch (1-based; epoch 0 is the seeds).
    pub epoch: u32,
    /// The core set, in the order the DPP chose it.
    pub core_set: Vec<String>,
    /// Runs of each core task per candidate (G).
    pub core_runs: u32,
    /// The candidates selection chose from.
    pub pool: Vec<String>,
    /// `(tier, candidate)` of the selection.
    pub tiers: Vec<(String, String)>,
    /// The distinct tier picks: at most three.
    pub survivors: Vec<String>,
    /// The children's plans.
    pub plans: Vec<PlanRecord>,
    /// What the epoch's evaluations used.
    pub budget: Budget,
}

/// One child's result: the plan's summary, or (summary, why the child is rejected).
type Made = Result<String, (String, String)>;

/// The epoch loop's settings, fixed for a run.
pub struct Epochs {
    config: HarnessProConfig,
    objective: ObjectiveConfig,
    /// `<run>/harnesspro`: the git repository, workspaces and diffs (never the agent's to
    /// read except the one workspace it is given).
    dir: PathBuf,
    train: Vec<Task>,
    val_ids: Vec<String>,
    trials_per_task: u32,
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> SearchError + 'a {
    move |source| SearchError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn eval_err(c: &Candidate) -> impl FnOnce(hevo_runtime::eval::EvalError) -> SearchError + '_ {
    move |source| SearchError::Evaluation {
        candidate: c.meta.name.clone(),
        source,
    }
}

impl Epochs {
    /// The loop for a run in `run_dir` over `train` and `val_ids`.
    pub fn new(
        config: &HarnessProConfig,
        objective: &ObjectiveConfig,
        run_dir: &Path,
        train: Vec<Task>,
        val_ids: &[String],
        trials_per_task: u32,
    ) -> Result<Epochs, SearchError> {
        if train.is_empty() {
            return Err(SearchError::User(
                "the suite has no `train` tasks: HarnessPro's core set is drawn from the train \
                 split; add train tasks or remove `[harnesspro]`"
                    .into(),
            ));
        }
        Ok(Epochs {
            config: config.clone(),
            objective: objective.clone(),
            dir: run_dir.join("harnesspro"),
            train,
            val_ids: val_ids.to_vec(),
            trials_per_task,
        })
    }

    /// The record of `epoch`, if it was made.
    pub fn record(archive: &Archive, epoch: u32) -> Option<EpochRecord> {
        let path = record_path(archive, epoch);
        serde_json::from_slice(&std::fs::read(path).ok()?).ok()
    }

    /// After the search archived `cand`: its diff against its parent beside it.
    pub fn archived(&self, cand: &Candidate) -> Result<(), SearchError> {
        let diff = self
            .dir
            .join("diffs")
            .join(format!("{}.patch", cand.meta.name));
        if diff.is_file() {
            let to = cand.dir.join("diff.patch");
            std::fs::copy(&diff, &to).map_err(io("cannot write", &to))?;
        }
        Ok(())
    }

    /// The core set epoch `epoch` recorded before the run was stopped, when it is still one
    /// this configuration would use (its tasks in the train split, `core_runs` runs each).
    fn recorded_core(
        &self,
        runner: &mut dyn CandidateRunner,
        epoch: u32,
    ) -> Result<Option<Vec<String>>, SearchError> {
        let body =
            runner
                .decision(epoch, "core_set")
                .map_err(|source| SearchError::Evaluation {
                    candidate: format!("(epoch {epoch} core_set)"),
                    source,
                })?;
        let Some(v) = body.and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok()) else {
            return Ok(None);
        };
        let tasks: Option<Vec<String>> = v["tasks"].as_array().map(|ts| {
            ts.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect()
        });
        let known = |t: &String| self.train.iter().any(|task| &task.id == t);
        Ok(tasks.filter(|ts| {
            v["runs"].as_u64() == Some(u64::from(self.config.core_runs))
                && ts.len() <= self.config.core_size as usize
                && ts.iter().all(known)
        }))
    }

    /// Chooses a core set from every candidate's train trials so far (greedy DPP).
    fn choose_core(
        &self,
        runner: &mut dyn CandidateRunner,
        candidates: &[Candidate],
    ) -> Result<Vec<String>, SearchError> {
        let train_ids: Vec<String> = self.train.iter().map(|t| t.id.clone()).collect();
        let mut history = Vec::with_capacity(candidates.len());
        for c in candidates {
            let mut rows = runner
                .trials(&c.meta.name, &c.code())
                .map_err(eval_err(c))?;
            rows.retain(|r| train_ids.contains(&r.task_id));
            history.push(rows);
        }
        let tasks: Vec<&Task> = self.train.iter().collect();
        Ok(core_set::choose(
            &tasks,
            &history,
            self.config.core_size as usize,
        ))
    }

    /// Runs epoch `epoch` up to its children in `pending/`. `estimates[seq]` are the
    /// strategy's current val estimates. Returns why no child was made, if none was.
    #[allow(clippy::too_many_arguments)]
    pub fn propose(
        &self,
        epoch: u32,
        seed: u64,
        archive: &Archive,
        candidates: &[Candidate],
        estimates: &[Estimate],
        runner: &mut dyn CandidateRunner,
        proposer: &mut dyn Proposer,
        log: &mut dyn FnMut(&str),
    ) -> Result<Option<String>, SearchError> {
        let pending = archive.pending_dir();
        let marker = pending.join(".proposed");
        if crate::archive::read_marker(&marker).and_then(|s| s.trim().parse::<u32>().ok())
            == Some(epoch)
        {
            log(&format!(
                "epoch {epoch}: using the children already in pending/"
            ));
            return Ok(None);
        }
        hevo_runtime::remove::remove_tree(&pending).map_err(io("cannot clear", &pending))?;
        std::fs::create_dir_all(&pending).map_err(io("cannot create", &pending))?;

        let pool = self.pool(epoch, archive, candidates);
        let g = self.config.core_runs;
        let core = match self.recorded_core(runner, epoch)? {
            // A run stopped in this epoch: its core runs so far are in the store, and a
            // core set chosen again from them would differ (and run both).
            Some(core) => core,
            None => {
                let core = self.choose_core(runner, candidates)?;
                decide(
                    runner,
                    epoch,
                    "core_set",
                    &serde_json::json!({"tasks": core, "runs": g}),
                )?;
                core
            }
        };
        log(&format!(
            "epoch {epoch}: core set of {} train task(s) x {g} run(s) for {} candidate(s): {}",
            core.len(),
            pool.len(),
            core.join(", ")
        ));

        // Core runs and diagnoses.
        let agent = proposer.agent();
        let epoch_dir = self.dir.join(format!("epoch-{epoch:03}"));
        let mut core_trials = 0;
        for &i in &pool {
            let c = &candidates[i];
            let rows = runner
                .core_runs(&c.meta.name, &c.code(), &core, g)
                .map_err(eval_err(c))?;
            core_trials += rows.len();
            let builtin = diagnose::diagnose(&c.meta.name, &rows);
            save_diagnosis(c, epoch, "builtin", &builtin)?;
            let ws_dir = epoch_dir.join("diagnose").join(&c.meta.name);
            let ws = agent_diagnosis::write_workspace(&ws_dir, &rows)
                .map_err(io("cannot write the diagnosis workspace", &ws_dir))?;
            if let Some(agent) = agent {
                let prompt = agent_diagnosis::prompt(&c.meta.name, g);
                let transcript = agent
                    .transcripts
                    .join(format!("epoch-{epoch:03}/diagnose-{}", c.meta.name));
                let outcome =
                    call_agent(agent, &ws.dir, transcript, &prompt, &[ws.dir.join("out")])?;
                let checked = outcome
                    .and_then(|()| agent_diagnosis::read_output(&ws, &c.meta.name, rows.len()));
                match checked {
                    Ok(d) => {
                        log(&format!(
                            "  {}: agent diagnosis with {} finding(s)",
                            c.meta.name,
                            d.findings.len()
                        ));
                        save_diagnosis(c, epoch, "agent", &d)?;
                    }
                    Err(why) => {
                        log(&format!(
                            "  {}: the agent's diagnosis is rejected: {why}",
                            c.meta.name
                        ));
                        let path =
                            diagnosis_dir(c).join(format!("epoch-{epoch:03}.agent.rejected.txt"));
                        write_atomic(&path, why.as_bytes()).map_err(io("cannot write", &path))?;
                    }
                }
            }
        }

        // Selection on the strategy's val estimates and val cost.
        let mut points = Vec::with_capacity(pool.len());
        let mut rows = Vec::with_capacity(pool.len());
        let mut val_trials = 0;
        for c in candidates {
            let mut r = runner
                .trials(&c.meta.name, &c.code())
                .map_err(eval_err(c))?;
            r.retain(|row| self.val_ids.contains(&row.task_id));
            val_trials += r.len();
            if pool.contains(&c.seq) {
                let e = estimates
                    .get(c.seq)
                    .copied()
                    .unwrap_or(Estimate::exact(f64::NAN));
                points.push((c.meta.name.clone(), c.meta.iteration, e.clipped(0.0, 1.0)));
                rows.push(r);
            }
        }
        let report = ParetoReport::build(&points, &rows, &self.objective);
        let tiers = report.tier_names();
        let mut survivors: Vec<String> = Vec::new();
        for (_, name) in &tiers {
            if !survivors.contains(name) {
                survivors.push(name.clone());
            }
        }
        if survivors.is_empty() {
            // No finite estimate: the initial harness carries on alone.
            survivors.push(candidates[0].meta.name.clone());
        }
        decide(
            runner,
            epoch,
            "survivors",
            &serde_json::json!({"pool": report.candidates, "tiers": tiers, "survivors": survivors}),
        )?;
        log(&format!(
            "epoch {epoch}: {} survivor(s) of {}: {}",
            survivors.len(),
            pool.len(),
            tiers
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        let surv: Vec<&Candidate> = survivors
            .iter()
            .filter_map(|n| candidates.iter().find(|c| &c.meta.name == n))
            .collect();

        // Children.
        let plans = match agent {
            Some(agent) => {
                self.edit_children(epoch, archive, candidates, &pool, &surv, agent, log)?
            }
            None => {
                let history = surv
                    .iter()
                    .map(|c| {
                        let e = estimates
                            .get(c.seq)
                            .copied()
                            .unwrap_or(Estimate::exact(f64::NAN));
                        ((*c).clone(), e)
                    })
                    .collect();
                let ctx = ProposeContext {
                    iteration: epoch,
                    k: 3 * surv.len() as u32,
                    seed,
                    archive,
                    history,
                };
                match proposer.propose(&ctx) {
                    Ok(()) | Err(ProposeError::Failed(_)) => {}
                    Err(ProposeError::Cancelled(r)) => return Err(SearchError::Interrupted(r)),
                }
                proposed_children(&pending)
            }
        };
        decide(
            runner,
            epoch,
            "plans",
            &serde_json::to_value(&plans).unwrap_or_default(),
        )?;
        let n_candidates = candidates.len();
        let record = EpochRecord {
            epoch,
            core_set: core.clone(),
            core_runs: g,
            pool: pool
                .iter()
                .map(|&i| candidates[i].meta.name.clone())
                .collect(),
            tiers,
            survivors,
            plans: plans.clone(),
            budget: Budget {
                core_trials,
                core_trials_full: pool.len() * self.train.len() * g as usize,
                val_trials,
                val_trials_full: n_candidates * self.val_ids.len() * self.trials_per_task as usize,
            },
        };
        log(&format!(
            "epoch {epoch}: core runs used {} of {} trials (every train task); val so far {} of {} trials (every candidate on every val task)",
            record.budget.core_trials,
            record.budget.core_trials_full,
            record.budget.val_trials,
            record.budget.val_trials_full
        ));
        let path = record_path(archive, epoch);
        let bytes = serde_json::to_vec_pretty(&record).unwrap_or_default();
        std::fs::create_dir_all(path.parent().expect("has a parent"))
            .map_err(io("cannot create", &path))?;
        write_atomic(&path, &bytes).map_err(io("cannot write", &path))?;
        crate::archive::write_new(&marker, epoch.to_string().as_bytes())
            .map_err(io("cannot write", &marker))?;
        let made = plans.iter().filter(|p| p.outcome == "committed").count();
        Ok((made == 0).then(|| {
            let why: Vec<String> = plans
                .iter()
                .map(|p| format!("{}: {}", p.child, p.outcome))
                .collect();
            format!("epoch {epoch} made no child ({})", why.join("; "))
        }))
    }

    /// The candidates selection chooses from: the initial harness, last epoch's survivors
    /// and last epoch's children (epoch 1: the seeds), in sequence order.
    fn pool(&self, epoch: u32, archive: &Archive, candidates: &[Candidate]) -> Vec<usize> {
        let survivors: HashSet<String> = Epochs::record(archive, epoch.saturating_sub(1))
            .map(|r| r.survivors.into_iter().collect())
            .unwrap_or_default();
        candidates
            .iter()
            .filter(|c| {
                c.seq == 0 || c.meta.iteration + 1 == epoch || survivors.contains(&c.meta.name)
            })
            .map(|c| c.seq)
            .collect()
    }
}

/// Where an epoch's record lives.
fn record_path(archive: &Archive, epoch: u32) -> PathBuf {
    archive
        .root()
        .join(format!("harnesspro/epoch-{epoch:03}.json"))
}

/// `archive/candidates/NNN-name/diagnosis/`.
fn diagnosis_dir(c: &Candidate) -> PathBuf {
    c.dir.join("diagnosis")
}

fn save_diagnosis(
    c: &Candidate,
    epoch: u32,
    producer: &str,
    d: &Diagnosis,
) -> Result<(), SearchError> {
    let path = diagnosis_dir(c).join(format!("epoch-{epoch:03}.{producer}.json"));
    std::fs::create_dir_all(diagnosis_dir(c)).map_err(io("cannot create", &path))?;
    let bytes = serde_json::to_vec_pretty(d).unwrap_or_default();
    write_atomic(&path, &bytes).map_err(io("cannot write", &path))
}

fn decide(
    runner: &mut dyn CandidateRunner,
    epoch: u32,
    kind: &str,
    body: &serde_json::Value,
) -> Result<(), SearchError> {
    runner
        .record_decision(epoch, kind, &body.to_string())
        .map_err(|source| SearchError::Evaluation {
            candidate: format!("(epoch {epoch} {kind})"),
            source,
        })
}

/// One agent call in `cwd`; the inner error is why it failed (the child or diagnosis is
/// then rejected), the outer one a cancellation.
fn call_agent(
    agent: &AgentProposer,
    cwd: &Path,
    transcript_dir: PathBuf,
    prompt: &str,
    writable: &[PathBuf],
) -> Result<Result<(), String>, SearchError> {
    let call = AgentCall {
        command: agent.command.clone(),
        cwd: cwd.to_path_buf(),
        writable: writable.to_vec(),
        prompt: prompt.to_string(),
        transcript_dir,
        home: agent.home.clone(),
        timeout: agent.timeout,
        model_env: agent.model_env.clone(),
        extra_env: agent.env.clone(),
        cancel: agent.cancel.clone(),
        hidden: agent.hidden.clone(),
    };
    let outcome = hevo_runtime::rt::block_on(run_agent(&*agent.launcher, &call));
    Ok(match outcome {
        Err(e) => Err(format!("cannot run the agent: {e}")),
        Ok(AgentOutcome::Finished) => Ok(()),
        Ok(AgentOutcome::Failed(why)) => Err(why),
        Ok(AgentOutcome::TimedOut) => Err(format!(
            "the agent ran past its {} s limit",
            agent.timeout.as_secs()
        )),
        Ok(AgentOutcome::Cancelled(r)) => return Err(SearchError::Interrupted(r)),
    })
}

/// The train tasks of a suite, sorted by id.
pub fn train_tasks(suite: &hevo_runtime::suite::Suite) -> Vec<Task> {
    let mut t: Vec<Task> = suite.split(Split::Train).into_iter().cloned().collect();
    t.sort_by(|a, b| a.id.cmp(&b.id));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::TaskResults;
    use hevo_runtime::eval::EvalError;
    use hevo_runtime::store::TrialRow;

    /// The store's side of a runner: only decisions (recorded, read back).
    #[derive(Default)]
    struct Decisions(Vec<(u32, String, String)>);

    impl CandidateRunner for Decisions {
        fn evaluate(
            &mut self,
            _: &str,
            _: &Path,
            _: Split,
            _: &[String],
        ) -> Result<TaskResults, EvalError> {
            unreachable!("no trial runs here")
        }
        fn smoke(&mut self, _: &str, _: &Path, _: &str) -> Result<Option<String>, EvalError> {
            unreachable!("no trial runs here")
        }
        fn record_estimate(
            &mut self,
            _: &str,
            _: &Path,
            _: &crate::runner::FinalEstimate,
        ) -> Result<(), EvalError> {
            unreachable!("no estimate here")
        }
        fn trials(&mut self, _: &str, _: &Path) -> Result<Vec<TrialRow>, EvalError> {
            Ok(vec![])
        }
        fn core_runs(
            &mut self,
            _: &str,
            _: &Path,
            _: &[String],
            _: u32,
        ) -> Result<Vec<TrialRow>, EvalError> {
            unreachable!("no trial runs here")
        }
        fn record_decision(&mut self, epoch: u32, kind: &str, body: &str) -> Result<(), EvalError> {
            self.0.retain(|(e, k, _)| !(*e == epoch && k == kind));
            self.0.push((epoch, kind.into(), body.into()));
            Ok(())
        }
        fn decision(&mut self, epoch: u32, kind: &str) -> Result<Option<String>, EvalError> {
            Ok(self
                .0
                .iter()
                .find(|(e, k, _)| *e == epoch && k == kind)
                .map(|(_, _, b)| b.clone()))
        }
    }

    fn epochs(dir: &Path) -> Epochs {
        let train = (0..6)
            .map(|i| Task {
                id: format!("t{i}"),
                split: Split::Train,
                group: None,
                input: serde_json::json!({ "x": i }),
                expected: serde_json::json!("A"),
                files: None,
                line: 1,
            })
            .collect();
        let config = HarnessProConfig {
            epochs: 2,
            core_size: 3,
            core_runs: 2,
        };
        Epochs::new(&config, &ObjectiveConfig::default(), dir, train, &[], 1).unwrap()
    }

    /// A run killed during an epoch's core runs chose its core set again on resume, from a
    /// history that now held the partial core runs: another set (2 of 20 random kills), both
    /// sets' trials in the store. The epoch's recorded core set is taken again, when this
    /// configuration would still use it.
    #[test]
    fn a_resumed_epoch_keeps_the_core_set_it_recorded() {
        let d = tempfile::tempdir().unwrap();
        let e = epochs(d.path());
        let mut runner = Decisions::default();
        assert_eq!(e.recorded_core(&mut runner, 2).unwrap(), None);
        let set = |tasks: &[&str], runs: u32| {
            serde_json::json!({"tasks": tasks, "runs": runs}).to_string()
        };
        runner
            .record_decision(2, "core_set", &set(&["t4", "t1"], 2))
            .unwrap();
        assert_eq!(
            e.recorded_core(&mut runner, 2).unwrap(),
            Some(vec!["t4".to_string(), "t1".to_string()])
        );
        assert_eq!(e.recorded_core(&mut runner, 1).unwrap(), None);
        // Recorded under another configuration: chosen afresh.
        for other in [
            set(&["t4", "t1"], 3),
            set(&["t4", "gone"], 2),
            set(&["t0", "t1", "t2", "t3"], 2),
            "not json".to_string(),
        ] {
            runner.record_decision(2, "core_set", &other).unwrap();
            assert_eq!(e.recorded_core(&mut runner, 2).unwrap(), None, "{other}");
        }
    }
}
