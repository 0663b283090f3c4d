//! Reading a run directory into a [`RunView`]: the store read-only, the archive's files as
//! they are (a search may be writing them; a torn or missing file is what it is so far).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use hevo_runtime::failures::{Failures, TrialRef};
use hevo_runtime::spend::Spend;
use hevo_runtime::store::{spend_at, Store};
use hevo_runtime::task::Split;
use hevo_stats::estimate::task_mean;
use rusqlite::params;

use super::{CandidateView, Rejected, RunView, TaskOutcome, TestView, ViewError};
use crate::archive::{Archive, CandidateMeta, CandidateScores};
use crate::finalize::{SearchRecord, RECORD_FILE};
use crate::runner::{Effort, VAL_LABEL};

/// One trial as the views need it.
struct Trial {
    candidate: i64,
    task: String,
    index: u32,
    outcome: f64,
    status: String,
    spend: Spend,
    error: Option<String>,
    trace: Option<String>,
}

fn read_err(path: &Path) -> impl FnOnce(String) -> ViewError + '_ {
    move |message| ViewError::Read {
        path: path.to_path_buf(),
        message,
    }
}

/// Whether `dir` looks like a run directory.
fn is_run(dir: &Path) -> bool {
    dir.join("hevo.db").is_file() && dir.join("archive").is_dir()
}

/// The run directories directly under `dir`, sorted by name.
pub fn list_runs(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| is_run(p))
        .collect();
    out.sort();
    out
}

/// `Ok` when `dir` is a run directory, else the error naming the run directories in its
/// `runs/` (`dir` is then the folder of a `hevo.toml`) or, without any, next to it.
pub fn require_run(dir: &Path) -> Result<(), ViewError> {
    if is_run(dir) {
        return Ok(());
    }
    if dir.join("hevo.db").is_file() && !dir.join("archive").exists() {
        return Err(ViewError::EvalRun {
            path: dir.to_path_buf(),
        });
    }
    let parent = dir
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let inside = list_runs(&dir.join("runs"));
    let known = if inside.is_empty() {
        list_runs(parent)
    } else {
        inside
    };
    Err(ViewError::NotARun {
        path: dir.to_path_buf(),
        known: known.iter().map(|p| p.display().to_string()).collect(),
    })
}

pub(super) fn open(dir: &Path) -> Result<RunView, ViewError> {
    require_run(dir)?;
    // Traces are stored with absolute paths; an absolute run directory makes them
    // relative to it.
    let dir = &std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let store = Store::open_read_only(&dir.join("hevo.db"))?;
    let names = store_candidates(&store)?;
    let trials = read_trials(&store, true)?;
    let by_candidate = group(&trials);
    let val_tasks = count_val_tasks(&store)?;
    let trials_per_task = trials.iter().map(|t| t.index + 1).max().unwrap_or(1);
    let run_id = hevo_runtime::store::run_id(dir);

    let archive = Archive::existing(&dir.join("archive"));
    let cand_root = archive.root().join("candidates");
    let dirs = archive
        .candidate_dirs()
        .map_err(|e| read_err(&cand_root)(e.to_string()))?;
    let mut strategy = None;
    let mut candidates = Vec::new();
    for (seq, dir_name, cdir) in dirs {
        let meta_path = cdir.join("candidate.toml");
        let meta: CandidateMeta = match std::fs::read_to_string(&meta_path) {
            Ok(text) => toml::from_str(&text).map_err(|e| ViewError::Unparsable {
                path: meta_path.clone(),
                message: e.message().to_string(),
                fix: "restore it from a copy of the run, or start a new run directory",
            })?,
            // Being renamed into place right now: skip it this time.
            Err(_) => continue,
        };
        let scores: Option<CandidateScores> = std::fs::read(cdir.join("scores.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(s) = &scores {
            strategy.get_or_insert_with(|| s.estimator.clone());
        }
        let name = if meta.name.is_empty() {
            dir_name
        } else {
            meta.name
        };
        let store_id = names.get(&name).copied();
        let mine: &[&Trial] = store_id
            .and_then(|id| by_candidate.get(&id))
            .map_or(&[], Vec::as_slice);
        let mut spend = Spend::default();
        for t in mine {
            spend.add(&t.spend);
        }
        let status = match &scores {
            Some(s) if s.tasks_used > 0 => "evaluated".to_string(),
            Some(_) => "not sampled".to_string(),
            None if !mine.is_empty() => "evaluating".to_string(),
            None => "waiting".to_string(),
        };
        let trace_dir = mine
            .iter()
            .find_map(|t| t.trace.as_deref())
            .and_then(|p| Path::new(p).parent()?.parent().map(|d| where_now(dir, d)));
        candidates.push(CandidateView {
            seq,
            name,
            parent: meta.parent,
            iteration: meta.iteration,
            hypothesis: meta.hypothesis,
            axis: if meta.axis.is_empty() {
                "unspecified".into()
            } else {
                meta.axis
            },
            dir: cdir,
            store_id,
            estimate: scores.map(|s| s.estimate),
            status,
            trials: mine.len() as u64,
            spend,
            tasks: with_inclusion(&store, &run_id, store_id, per_task(mine))?,
            trace_dir,
        });
    }

    let rejected = archive
        .read_summary()
        .map_err(|e| read_err(&archive.root().join("summary.jsonl"))(e.to_string()))?
        .into_iter()
        .filter_map(|l| {
            let reason = l.outcome.strip_prefix("rejected: ")?.to_string();
            Some(Rejected {
                iteration: l.iteration,
                name: l.name,
                hypothesis: l.hypothesis,
                reason,
            })
        })
        .collect();

    let record_path = dir.join(RECORD_FILE);
    let record: Option<SearchRecord> = match std::fs::read(&record_path) {
        Ok(b) => Some(
            serde_json::from_slice(&b).map_err(|e| ViewError::Unparsable {
                path: record_path.clone(),
                message: e.to_string(),
                fix: "run the same `hevo run` command again, which writes it anew from the \
                      store and the archive",
            })?,
        ),
        Err(_) => None,
    };
    let test = read_test(&dir.join("test"), record.as_ref())?;
    let (trials, spend) = store.split_spend(Split::Train)?;
    let train = Effort { trials, spend };
    let failures = read_failures(&store, dir, true)?;
    let test_db = dir.join("test").join("hevo.db");
    let test_failures = if test_db.is_file() {
        read_failures(&Store::open_read_only(&test_db)?, &dir.join("test"), false)?
    } else {
        Failures::default()
    };
    // A finished search's candidate without an estimate was left out by its budget.
    if record.is_some() {
        for c in candidates.iter_mut().filter(|c| !c.estimated()) {
            c.status = "left out".into();
        }
    }
    // The pick is shown with its selection-adjusted interval, as `hevo run` printed it.
    if let Some(r) = &record {
        if let (Some(est), Some(c)) = (
            r.pick_estimate,
            candidates.iter_mut().find(|c| c.name == r.pick),
        ) {
            c.estimate = Some(est);
        }
    }
    Ok(RunView {
        dir: dir.to_path_buf(),
        name: dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| dir.display().to_string()),
        finished: record.is_some(),
        stopped_early: record.as_ref().and_then(|r| r.stopped_early.clone()),
        strategy,
        recorded_iterations: record.as_ref().and_then(|r| r.iterations_done),
        tiers: record.as_ref().map(|r| r.tiers.clone()).unwrap_or_default(),
        pick: record.map(|r| r.pick),
        val_tasks,
        trials_per_task,
        candidates,
        rejected,
        train,
        test,
        failures,
        test_failures,
    })
}

/// The failed trials of a store by class (see [`hevo_runtime::failures`]), `infra_error`
/// included, in candidate, task and trial order; `val_only` keeps validation tasks. Trace
/// paths are found below `dir`, the store's directory as it is now.
fn read_failures(store: &Store, dir: &Path, val_only: bool) -> Result<Failures, ViewError> {
    let q = |source| hevo_runtime::store::StoreError::Query {
        what: "read failed trials",
        source,
    };
    let mut st = store
        .connection()
        .prepare(
            "SELECT c.name, t.task_id, t.trial_index, t.status, t.error, t.trace_path
             FROM trials t JOIN candidates c ON c.id = t.candidate_id
             LEFT JOIN tasks k ON k.id = t.task_id
             WHERE t.status NOT IN ('pass', 'fail') AND (?1 = 0 OR k.split = 'val')
             ORDER BY t.candidate_id, t.task_id, t.trial_index",
        )
        .map_err(q)?;
    let rows = st
        .query_map(params![val_only as i64], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, u32>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })
        .map_err(q)?;
    let mut failures = Failures::default();
    for row in rows {
        let (candidate, task, trial, status, error, trace) = row.map_err(q)?;
        let trace = trace.map(|t| where_now(dir, Path::new(&t)).to_string_lossy().into_owned());
        failures.add(TrialRef {
            candidate: &candidate,
            task: &task,
            trial,
            status: &status,
            error: error.as_deref(),
            trace: trace.as_deref(),
        });
    }
    Ok(failures)
}

/// Store candidate ids by name (the first id of a name wins).
fn store_candidates(store: &Store) -> Result<BTreeMap<String, i64>, ViewError> {
    let q = |source| hevo_runtime::store::StoreError::Query {
        what: "read candidates",
        source,
    };
    let mut st = store
        .connection()
        .prepare("SELECT name, id FROM candidates ORDER BY id DESC")
        .map_err(q)?;
    let rows = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(q)?;
    Ok(rows.collect::<Result<_, _>>().map_err(q)?)
}

fn count_val_tasks(store: &Store) -> Result<usize, ViewError> {
    store
        .connection()
        .query_row("SELECT COUNT(*) FROM tasks WHERE split = 'val'", [], |r| {
            r.get::<_, i64>(0)
        })
        .map(|n| n as usize)
        .map_err(|source| {
            hevo_runtime::store::StoreError::Query {
                what: "count tasks",
                source,
            }
            .into()
        })
}

/// Every finished trial (not `infra_error`, which is retried); `val_only` keeps trials on
/// validation tasks.
fn read_trials(store: &Store, val_only: bool) -> Result<Vec<Trial>, ViewError> {
    let q = |source| hevo_runtime::store::StoreError::Query {
        what: "read trials",
        source,
    };
    let mut st = store
        .connection()
        .prepare(
            "SELECT t.candidate_id, t.task_id, t.trial_index, t.outcome, t.status,
                    t.input_tokens, t.cached_tokens, t.output_tokens, t.cost_usd, t.model_calls,
                    t.error, t.trace_path
             FROM trials t LEFT JOIN tasks k ON k.id = t.task_id
             WHERE t.status != 'infra_error' AND (?1 = 0 OR k.split = 'val')
             ORDER BY t.candidate_id, t.task_id, t.trial_index",
        )
        .map_err(q)?;
    let rows = st
        .query_map(params![val_only as i64], |r| {
            Ok(Trial {
                candidate: r.get(0)?,
                task: r.get(1)?,
                index: r.get(2)?,
                outcome: r.get(3)?,
                status: r.get(4)?,
                spend: spend_at(r, 5)?,
                error: r.get(10)?,
                trace: r.get(11)?,
            })
        })
        .map_err(q)?;
    Ok(rows.collect::<Result<_, _>>().map_err(q)?)
}

/// Trials by candidate id, each in the store's order (task, trial index).
fn group(trials: &[Trial]) -> BTreeMap<i64, Vec<&Trial>> {
    let mut out: BTreeMap<i64, Vec<&Trial>> = BTreeMap::new();
    for t in trials {
        out.entry(t.candidate).or_default().push(t);
    }
    out
}

/// `tasks` with the inclusion probability each has in the design of candidate `id`'s
/// recorded estimate.
fn with_inclusion(
    store: &Store,
    run_id: &str,
    id: Option<i64>,
    mut tasks: Vec<TaskOutcome>,
) -> Result<Vec<TaskOutcome>, ViewError> {
    let Some(id) = id else { return Ok(tasks) };
    let pi: HashMap<String, f64> = store.draws_of(run_id, id, VAL_LABEL)?.into_iter().collect();
    for t in &mut tasks {
        t.inclusion = pi.get(&t.task).copied();
    }
    Ok(tasks)
}

/// Groups one candidate's trials (sorted by task) into per-task outcomes.
fn per_task(trials: &[&Trial]) -> Vec<TaskOutcome> {
    let mut out: Vec<TaskOutcome> = Vec::new();
    for t in trials {
        match out.last_mut() {
            Some(o) if o.task == t.task => {
                let n = o.trials as f64;
                o.outcome = (o.outcome * n + t.outcome) / (n + 1.0);
                o.trials += 1;
                o.cost_usd += t.spend.cost_usd;
                if o.status != t.status {
                    o.status = "mixed".into();
                }
                if o.error.is_none() {
                    o.error = t.error.clone();
                }
            }
            _ => out.push(TaskOutcome {
                task: t.task.clone(),
                outcome: t.outcome,
                trials: 1,
                status: t.status.clone(),
                error: t.error.clone(),
                cost_usd: t.spend.cost_usd,
                inclusion: None,
            }),
        }
    }
    out
}

/// The role of a test result whose candidate has none any more (see [`read_test`]).
const FORMER: &str = "no longer pick or frontier";

/// The test split's results from `test/hevo.db`, with roles from the search record.
fn read_test(dir: &Path, record: Option<&SearchRecord>) -> Result<Vec<TestView>, ViewError> {
    let db = dir.join("hevo.db");
    if !db.is_file() {
        return Ok(Vec::new());
    }
    let store = Store::open_read_only(&db)?;
    let names = store_candidates(&store)?;
    let trials = read_trials(&store, false)?;
    let by_candidate = group(&trials);
    let mut out = Vec::new();
    for (name, id) in names {
        let Some(mine) = by_candidate.get(&id) else {
            continue;
        };
        let tasks = per_task(mine);
        let means: Vec<f64> = tasks.iter().map(|t| t.outcome).collect();
        let most = tasks.iter().map(|t| t.trials).max().unwrap_or(1);
        // A test result without a role now was made by an earlier finalize, when the
        // candidate was the pick or on the frontier; the search went on since.
        let role = match record.map(|r| r.role_of(&name)) {
            Some(role) if role.is_empty() => FORMER.to_string(),
            role => role.unwrap_or_default(),
        };
        out.push(TestView {
            name,
            role,
            pass_rate: task_mean(&means, most),
            tasks: tasks.len(),
            trials: mine.len() as u64,
            cost_usd: mine.iter().map(|t| t.spend.cost_usd).sum(),
        });
    }
    Ok(out)
}

/// Where a trace (a candidate's `traces/c<id>` or a trial's `traces/c<id>/<task>/<trial>`)
/// is now: the store keeps the absolute path of the run directory the trials ran in, so
/// after the run directory was moved or copied its traces are found below `run_dir` as it
/// is now (a path without `traces/c<id>` in it stays as stored).
fn where_now(run_dir: &Path, stored: &Path) -> PathBuf {
    let parts: Vec<_> = stored.components().collect();
    let is_candidate = |c: &std::path::Component| {
        let c = c.as_os_str().to_string_lossy();
        c.strip_prefix('c')
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
    };
    let at = (0..parts.len().saturating_sub(1))
        .rev()
        .find(|&i| parts[i].as_os_str() == "traces" && is_candidate(&parts[i + 1]));
    match at {
        Some(i) => parts[i..]
            .iter()
            .fold(run_dir.to_path_buf(), |p, c| p.join(c)),
        None => stored.to_path_buf(),
    }
}
