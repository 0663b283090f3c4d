//! [`Evaluator`]: an evaluation context kept open across batches.
//!
//! One evaluator owns a run directory's store, the loaded suite, the launcher and the
//! trial settings. Candidates are loaded (manifest read, code hashed, programs checked) and
//! registered in the store once; `prepare` runs once per candidate. Each
//! [`Evaluator::evaluate`] call then runs only the units of one candidate that have no
//! finished row yet, on the process runtime ([`crate::rt`]), with a store writer thread
//! for that batch, and reports from the store. `hevo eval` is one evaluator with one
//! batch; the search keeps one evaluator for the whole run.
//!
//! ```text
//! open(run_dir) ─► store, run row, task rows
//! load(dir) ─► Harness (hashed, programs checked) ─► candidate row          (once each)
//! evaluate(candidate, split, tasks, trials)
//!     ├─ prepare (once per candidate, resumable by marker)
//!     ├─ units without a finished row, longest first ─► run_pool ─► run_trial
//!     │      ├─ each result ─► writer thread ─► trials table (batched)
//!     │      └─ a launch the scheduler refused as configured ─► no retry, no more units,
//!     │                                                         EvalError::Refused
//!     └─ report from the store
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use crate::cancel::{Cancel, CancelReason};
use crate::eval::{sanitize, EvalError};
use crate::executor::{order_longest_first, run_pool, ProgressEvent, Unit};
use crate::harness::Harness;
use crate::launch::Launcher;
use crate::model_access::{ModelAccess, ModelEnv};
use crate::report::{build_report, EvalReport, ReportHeader};
use crate::scorer::Scorer;
use crate::spend::Spend;
use crate::store::{Store, StoreError, TaskRow, TrialRow};
use crate::suite::Suite;
use crate::task::{Split, Task};
use crate::trial::{run_trial, TrialRequest, TrialSettings, TrialStatus};

/// What an evaluator is made from.
#[derive(Clone)]
pub struct EvaluatorConfig {
    /// The run directory (created if missing); holds `hevo.db`, `traces/`, `state/`.
    pub run_dir: PathBuf,
    /// The run id stored with every row.
    pub run_id: String,
    /// What kind of run this is, stored with it.
    pub kind: crate::store::RunKind,
    /// The run's configuration as JSON text (stored once in the `runs` table).
    pub config_json: String,
    /// The loaded suite.
    pub suite: Suite,
    /// Concurrent trials.
    pub jobs: usize,
    /// How many times an `infra_error` attempt is retried (not one the scheduler refused
    /// as configured: that stops the batch).
    pub retries: u32,
    /// Overrides every harness's per-trial time limit.
    pub timeout: Option<Duration>,
    /// SIGTERM-to-SIGKILL grace period.
    pub grace: Duration,
    /// Cap on each captured output stream (bytes).
    pub output_cap: u64,
    /// Model gateway variables given to harnesses (when `model_access` is `None`).
    pub model_env: ModelEnv,
    /// Per-trial gateway keys and spend (set when a gateway runs).
    pub model_access: Option<Arc<dyn ModelAccess>>,
    /// Where trial working directories are created.
    pub work_root: PathBuf,
    /// The launcher every trial-side process goes through.
    pub launcher: Arc<dyn Launcher>,
    /// The process's cancellation token.
    pub cancel: Cancel,
    /// Keep each trial's working directory in its trace (`<trace prefix>.workdir/`).
    pub keep_workdirs: bool,
}

/// A candidate registered with an evaluator.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The harness (manifest, hashed code, parameters).
    pub harness: Harness,
    /// Its id in the store.
    pub candidate_id: i64,
    /// Its `prepare` state directory, once prepared.
    state_dir: Option<PathBuf>,
}

/// What one [`Evaluator::evaluate`] call evaluates.
#[derive(Clone, Debug)]
pub struct Batch<'a> {
    /// The split the tasks come from.
    pub split: Split,
    /// The task ids; `None` is the whole split.
    pub tasks: Option<&'a [String]>,
    /// Trials per task.
    pub trials: u32,
    /// The label the draws are recorded under (e.g. `val`); `None` records none (the
    /// search records its strategy's own draws, with their probabilities).
    pub draw_label: Option<&'a str>,
}

/// An evaluation context kept open across batches (see the module documentation).
pub struct Evaluator {
    pub(crate) config: EvaluatorConfig,
    run_dir: PathBuf,
    store: Option<Store>,
    loaded: HashMap<PathBuf, Loaded>,
    /// Each task's content key ([`crate::suite::task_key`]).
    task_keys: Arc<HashMap<String, String>>,
    /// The run directory's lock, held while the evaluator lives.
    _lock: crate::run_lock::RunLock,
}

impl Evaluator {
    /// Opens the run directory's store and records the run and the suite's tasks.
    pub fn open(config: EvaluatorConfig) -> Result<Evaluator, EvalError> {
        let run_dir_err = |source| EvalError::RunDir {
            path: config.run_dir.clone(),
            source,
        };
        std::fs::create_dir_all(&config.run_dir).map_err(run_dir_err)?;
        let run_dir = config.run_dir.canonicalize().map_err(run_dir_err)?;
        let lock = crate::run_lock::RunLock::acquire(&run_dir)?;
        if let Some(problem) = crate::store::run_kind_problem(&run_dir, config.kind) {
            return Err(EvalError::Option(problem));
        }
        let keep = config.launcher.reserved_workdirs();
        crate::trial::clean_leftover_workdirs(&config.work_root, &keep);
        if config.work_root != std::env::temp_dir() {
            crate::trial::clean_leftover_workdirs(&std::env::temp_dir(), &keep);
        }
        let mut store = Store::open(&run_dir.join("hevo.db"))?;
        store.ensure_run(&config.run_id, config.kind.as_str(), &config.config_json)?;
        let rows: Vec<TaskRow> = config
            .suite
            .tasks
            .iter()
            .map(|t| TaskRow {
                id: t.id.clone(),
                split: t.split.as_str().into(),
                group: t.group.clone(),
                line: t.line,
            })
            .collect();
        store.upsert_tasks(&rows)?;
        let task_keys = config
            .suite
            .tasks
            .iter()
            .map(|t| {
                let key = crate::suite::task_key(t, &config.suite);
                (t.id.clone(), key)
            })
            .collect();
        Ok(Evaluator {
            config,
            run_dir,
            store: Some(store),
            loaded: HashMap::new(),
            task_keys: Arc::new(task_keys),
            _lock: lock,
        })
    }

    /// The run id stored with every row.
    pub fn run_id(&self) -> &str {
        &self.config.run_id
    }

    /// The canonical run directory.
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The loaded suite.
    pub fn suite(&self) -> &Suite {
        &self.config.suite
    }

    /// The store (for reads between batches).
    pub fn store(&self) -> &Store {
        self.store
            .as_ref()
            .expect("the store is back after every batch")
    }

    /// The store, mutably (for records the caller makes between batches).
    pub fn store_mut(&mut self) -> &mut Store {
        self.store
            .as_mut()
            .expect("the store is back after every batch")
    }

    /// The per-trial time limit of `harness` in force.
    pub fn timeout_of(&self, harness: &Harness) -> Duration {
        self.config
            .timeout
            .unwrap_or_else(|| harness.manifest.time_limit())
    }

    /// Loads the harness in `dir` (once: later calls return the same candidate), checks
    /// that its programs exist, and registers it in the store under its manifest's `name`.
    pub fn load(&mut self, dir: &Path) -> Result<Loaded, EvalError> {
        self.load_named(dir, None)
    }

    /// [`Evaluator::load`], registered in the store under `name` instead of the manifest's:
    /// a search's candidate is known by its archive name, and its manifest says whatever its
    /// proposer left there (a copy of its parent's, or another candidate's on purpose), so
    /// the store's name, which every view reads, must not come from it.
    pub fn load_as(&mut self, dir: &Path, name: &str) -> Result<Loaded, EvalError> {
        self.load_named(dir, Some(name))
    }

    fn load_named(&mut self, dir: &Path, name: Option<&str>) -> Result<Loaded, EvalError> {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if let Some(l) = self.loaded.get(&key) {
            return Ok(l.clone());
        }
        let mut harness = Harness::load(dir)?;
        if let Some(name) = name {
            harness.name = name.to_string();
        }
        harness.check_programs()?;
        self.register(key, harness)
    }

    /// Registers an already loaded harness (its programs checked by the caller).
    pub fn register_loaded(&mut self, harness: Harness) -> Result<Loaded, EvalError> {
        let key = harness
            .dir
            .canonicalize()
            .unwrap_or_else(|_| harness.dir.clone());
        if let Some(l) = self.loaded.get(&key) {
            return Ok(l.clone());
        }
        self.register(key, harness)
    }

    fn register(&mut self, key: PathBuf, harness: Harness) -> Result<Loaded, EvalError> {
        let run_id = self.config.run_id.clone();
        let candidate_id = self.store().ensure_candidate(
            &run_id,
            &harness.name,
            &harness.code_hash,
            &harness.params_json(),
            Some(&harness.dir.to_string_lossy()),
        )?;
        let l = Loaded {
            harness,
            candidate_id,
            state_dir: None,
        };
        self.loaded.insert(key, l.clone());
        Ok(l)
    }

    /// The tasks of a batch, in suite order (unknown ids are an error naming them).
    fn batch_tasks(&self, batch: &Batch<'_>) -> Result<Vec<Task>, EvalError> {
        let split = self.config.suite.split(batch.split);
        let Some(only) = batch.tasks else {
            return Ok(split.into_iter().cloned().collect());
        };
        let by_id: HashMap<&str, &Task> = split.iter().map(|t| (t.id.as_str(), *t)).collect();
        let unknown: Vec<&str> = only
            .iter()
            .map(String::as_str)
            .filter(|id| !by_id.contains_key(id))
            .collect();
        if !unknown.is_empty() {
            return Err(EvalError::Option(format!(
                "task id(s) {} are not in the `{}` split of suite `{}`",
                unknown.join(", "),
                batch.split,
                self.config.suite.dir.display()
            )));
        }
        let keep: std::collections::HashSet<&str> = only.iter().map(String::as_str).collect();
        Ok(split
            .into_iter()
            .filter(|t| keep.contains(t.id.as_str()))
            .cloned()
            .collect())
    }

    /// Evaluates `candidate` on a batch: runs the units that have no finished row yet (a
    /// trial timed out under a shorter limit than today's is not finished, see
    /// [`Store::finished_units`]) and reports every unit of the batch from the store.
    pub fn evaluate(
        &mut self,
        candidate: &Loaded,
        batch: &Batch<'_>,
        progress: Option<mpsc::Sender<ProgressEvent>>,
    ) -> Result<EvalReport, EvalError> {
        if let Some(problem) = crate::limits::trials_problem(batch.trials) {
            return Err(EvalError::Option(format!("trials per task {problem}")));
        }
        if let Some(reason) = self.config.cancel.reason() {
            return Err(EvalError::Interrupted { done: 0, reason });
        }
        let tasks = self.batch_tasks(batch)?;
        let candidate_id = candidate.candidate_id;
        if let Some(label) = batch.draw_label {
            let run_id = self.config.run_id.clone();
            let draws: Vec<(String, f64)> = tasks.iter().map(|t| (t.id.clone(), 1.0)).collect();
            self.store_mut()
                .record_draws(&run_id, candidate_id, label, &draws)?;
        }
        let time_limit = self.timeout_of(&candidate.harness);
        let finished = self
            .store()
            .finished_units(candidate_id, &self.task_keys, time_limit)?;
        let past = self.store().mean_wall_ms_by_task()?;
        let mut units = Vec::new();
        let mut reused = 0;
        for (i, t) in tasks.iter().enumerate() {
            for r in 0..batch.trials {
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
        let trace_root = self.run_dir.join("traces").join(format!("c{candidate_id}"));
        let state_dir = self.ensure_prepared(candidate, total > 0, &trace_root)?;
        if let Some(p) = &progress {
            let _ = p.send(ProgressEvent::RunStarted {
                total,
                already_done: reused,
                jobs: self.config.jobs,
            });
        }
        let done = if total > 0 {
            self.run_units(candidate, &tasks, units, state_dir, trace_root, progress)?
        } else {
            0
        };
        let header = ReportHeader {
            run_dir: &self.run_dir,
            run_id: &self.config.run_id,
            candidate_id,
            harness: &candidate.harness.name,
            suite: &self.config.suite.config.name,
            split: batch.split,
            trials_per_task: batch.trials,
            ran_now: done,
            reused,
            sandbox: self.config.launcher.isolation(),
            task_keys: &self.task_keys,
        };
        let task_refs: Vec<&Task> = tasks.iter().collect();
        Ok(build_report(header, self.store(), &task_refs)?)
    }

    /// Removes the state `prepare` wrote for `candidate` in this run directory, and its
    /// done-marker: the smoke check's evaluator keeps no candidate's state once it has
    /// judged it (each state can hold up to the disk limit). A later evaluation prepares
    /// it again.
    pub fn release_state(&mut self, candidate: &Loaded) {
        let key = candidate
            .harness
            .dir
            .canonicalize()
            .unwrap_or_else(|_| candidate.harness.dir.clone());
        let Some(dir) = self.loaded.get_mut(&key).and_then(|l| l.state_dir.take()) else {
            return;
        };
        let _ = std::fs::remove_file(crate::launch::with_suffix(&dir, "done"));
        let _ = crate::remove::remove_tree(&dir);
    }

    /// Runs `prepare` for the candidate if it declares one and has trials to run, once.
    fn ensure_prepared(
        &mut self,
        candidate: &Loaded,
        needed: bool,
        trace_root: &Path,
    ) -> Result<Option<PathBuf>, EvalError> {
        let key = candidate
            .harness
            .dir
            .canonicalize()
            .unwrap_or_else(|_| candidate.harness.dir.clone());
        if let Some(dir) = self.loaded.get(&key).and_then(|l| l.state_dir.clone()) {
            return Ok(Some(dir));
        }
        let Some(argv) = candidate.harness.prepare_argv() else {
            return Ok(None);
        };
        if !needed {
            return Ok(None);
        }
        let dir = crate::rt::block_on(crate::prepare::prepare(
            self,
            &candidate.harness,
            candidate.candidate_id,
            argv,
            trace_root,
        ))?;
        if let Some(l) = self.loaded.get_mut(&key) {
            l.state_dir = Some(dir.clone());
        }
        Ok(Some(dir))
    }

    /// Runs `units` with a writer thread; returns how many finished.
    fn run_units(
        &mut self,
        candidate: &Loaded,
        tasks: &[Task],
        units: Vec<Unit<(usize, u32)>>,
        state_dir: Option<PathBuf>,
        trace_root: PathBuf,
        progress: Option<mpsc::Sender<ProgressEvent>>,
    ) -> Result<usize, EvalError> {
        let cfg = &self.config;
        let total = units.len();
        let store = self
            .store
            .take()
            .expect("the store is back after every batch");
        let (writer_tx, writer_rx) = mpsc::channel::<TrialRow>();
        let writer_cancel = cfg.cancel.clone();
        let writer = std::thread::spawn(move || -> (Store, Result<usize, StoreError>) {
            let mut store = store;
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
                    writer_cancel.cancel(CancelReason::Failure);
                    return (store, Err(e));
                }
                written += batch.len();
            }
            (store, Ok(written))
        });
        let ctx = Arc::new(Workers {
            tasks: tasks.to_vec(),
            harness: candidate.harness.clone(),
            suite_dir: cfg.suite.dir.clone(),
            scorer: Scorer::new(cfg.suite.config.scorer.clone()),
            settings: TrialSettings {
                timeout: self.timeout_of(&candidate.harness),
                grace: cfg.grace,
                output_cap: cfg.output_cap,
                work_root: cfg.work_root.clone(),
                model_env: cfg.model_env.clone(),
                model_access: cfg.model_access.clone(),
                state_dir,
                hidden: vec![self.run_dir.clone(), cfg.suite.dir.clone()],
                keep_workdir: cfg.keep_workdirs,
            },
            launcher: cfg.launcher.clone(),
            run_id: cfg.run_id.clone(),
            candidate_id: candidate.candidate_id,
            trace_root,
            retries: cfg.retries,
            progress,
            writer: writer_tx,
            cancel: cfg.cancel.clone(),
            done: AtomicUsize::new(0),
            total,
            running: Mutex::new((0.0, 0)),
            task_keys: self.task_keys.clone(),
            refused: Mutex::new(None),
        });
        let pool_ctx = ctx.clone();
        crate::rt::block_on(run_pool(
            units,
            cfg.jobs,
            cfg.cancel.clone(),
            move |(i, r)| {
                let ctx = pool_ctx.clone();
                async move { ctx.run_unit(i, r).await }
            },
        ));
        let done = ctx.done.load(Ordering::SeqCst);
        let refused = ctx.refused.lock().unwrap_or_else(|e| e.into_inner()).take();
        drop(ctx);
        let (store, written) = writer
            .join()
            .unwrap_or_else(|_| panic!("the store writer thread panicked"));
        self.store = Some(store);
        written?;
        if let Some(reason) = self.config.cancel.reason() {
            return Err(EvalError::Interrupted { done, reason });
        }
        if let Some(cause) = refused {
            return Err(EvalError::Refused(cause));
        }
        Ok(done)
    }
}

/// Shared state of one batch's workers.
struct Workers {
    tasks: Vec<Task>,
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
    cancel: Cancel,
    done: AtomicUsize,
    total: usize,
    running: Mutex<(f64, usize)>,
    task_keys: Arc<HashMap<String, String>>,
    /// The cause of the first launch the scheduler refused as configured: from then on no
    /// unit starts, and none of the refused ones is recorded.
    refused: Mutex<Option<String>>,
}

impl Workers {
    fn emit(&self, ev: ProgressEvent) {
        if let Some(p) = &self.progress {
            let _ = p.send(ev);
        }
    }

    async fn run_unit(&self, task_idx: usize, trial_index: u32) {
        if self
            .refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return;
        }
        let task = &self.tasks[task_idx];
        self.emit(ProgressEvent::TrialStarted {
            task_id: task.id.clone(),
            trial_index,
        });
        let trace_prefix = self
            .trace_root
            .join(sanitize(&task.id))
            .join(trial_index.to_string());
        let mut attempt = 0;
        // What every attempt's model calls cost: a retried attempt's calls were made and
        // billed too, and they are in the ledger (the row's totals are the ledger's sums).
        let mut spent = hevo_llm::TrialUsage::default();
        let result = loop {
            attempt += 1;
            let req = TrialRequest {
                harness: &self.harness,
                task,
                suite_dir: &self.suite_dir,
                trial_index,
                // The ledger's id: task last, so ids with `/` still parse.
                trial_id: format!(
                    "{}{trial_index}/{}",
                    crate::model_access::TrialRef::prefix(&self.run_id, self.candidate_id),
                    task.id
                ),
                trace_prefix: trace_prefix.clone(),
                cancel: self.cancel.clone(),
                spent,
            };
            let r = run_trial(&*self.launcher, &self.scorer, &self.settings, req).await;
            spent.absorb(&r.usage);
            if r.cancelled || self.cancel.is_cancelled() {
                return;
            }
            if r.permanent {
                let mut refused = self.refused.lock().unwrap_or_else(|e| e.into_inner());
                refused.get_or_insert_with(|| r.error.clone().unwrap_or_default());
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
            spend: Spend::from_usage(&spent),
            wall_ms: result.wall_ms,
            attempts: attempt,
            trace_path: Some(trace_prefix.to_string_lossy().into_owned()),
            answer: result.answer.as_ref().map(|a| a.to_string()),
            error: result.error.clone(),
            task_key: self.task_keys.get(&task.id).cloned().unwrap_or_default(),
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
            error: result.error.clone(),
            trace: Some(trace_prefix.to_string_lossy().into_owned()),
        });
    }
}
