//! `hevo tests synth`: an agent writes executable tests per task, hevo keeps those that run
//! and freezes them into a new suite whose scorer is a locked `command` scorer.
//!
//! ```text
//! initial harness ─► eval of every chosen split, working directories kept  (.synth/initial/)
//! per task: workspace (.synth/tasks/<id>/: README.md, task.json, trajectory/, tests/)
//!     └─ agent (sandboxed, through the launch seam, like the agent proposer) writes tests/
//! per test: syntax check, then two runs against the initial harness's output
//!     └─ kept iff both exit 0 or 1, the same; dropped otherwise, with the reason
//! out/: suite.toml ([scorer] kind = "command", tests, lock), tasks.jsonl, files/, tests/,
//!       tests.lock.json (every test's SHA-256), loaded back to check it
//! ```
//!
//! The agent of one task sees that task's `input`, the suite's description and the initial
//! harness's trajectory on it (answer, whether it answered, stdout, stderr, model calls,
//! the files it left): never `expected`, the scorer's verdict, nor any other task.

mod check;
mod freeze;
mod workspace;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hevo_runtime::cancel::{Cancel, CancelReason};
use hevo_runtime::eval::EvalError;
use hevo_runtime::launch::Launcher;
use hevo_runtime::model_access::{ModelAccess, ModelEnv};
use hevo_runtime::suite::{Suite, SuiteError};
use hevo_runtime::task::{sanitize, Split, Task};
use hevo_runtime::tests_lock::LOCK_FILE;
use serde::Serialize;

use self::check::check_tests;
use self::freeze::freeze;
pub use self::freeze::refreeze;
use self::workspace::{call_agent, run_initial, write_workspace};

/// The folder of a frozen suite that holds the tests (`tests/<task id>/test_NN.sh|py`).
pub const TESTS_DIR: &str = "tests";

/// Where synthesis keeps its working state inside the output suite (a dot-folder, so it is
/// not part of the suite's content hash or the lock).
pub const WORK_DIR: &str = ".synth";

/// The agent that writes the tests.
#[derive(Clone, Debug)]
pub struct SynthAgent {
    /// Its command line template (`{prompt}` is substituted).
    pub command: Vec<String>,
    /// Variables it needs (a preset's); `{agent_home}` is its home.
    pub env: Vec<(String, String)>,
    /// Time limit of one call (one task).
    pub timeout: Duration,
    /// Gateway variables for its model traffic.
    pub model_env: ModelEnv,
}

/// Everything `hevo tests synth` is told.
#[derive(Clone)]
pub struct SynthOptions {
    /// The suite the tests are written for (left unchanged).
    pub suite_dir: PathBuf,
    /// The initial harness, whose trajectories the agent reads and tests are checked on.
    pub harness_dir: PathBuf,
    /// The new suite (must not exist, or be empty).
    pub out: PathBuf,
    /// The splits whose tasks get tests (the new suite holds only tasks with a kept test).
    pub splits: Vec<Split>,
    /// Tests asked for per task.
    pub per_task: usize,
    /// The agent.
    pub agent: SynthAgent,
    /// Time limit of one test process (also the frozen scorer's `timeout_s`).
    pub test_timeout: Duration,
    /// Concurrent trials of the initial harness.
    pub jobs: usize,
    /// Per-trial gateway keys for the initial harness.
    pub model_access: Option<Arc<dyn ModelAccess>>,
    /// The launcher every process goes through (the sandbox seam).
    pub launcher: Arc<dyn Launcher>,
    /// The process's cancellation token.
    pub cancel: Cancel,
}

/// What happened to one generated test.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TestVerdict {
    /// Its file name (`test_01.sh`).
    pub file: String,
    /// Kept (frozen) or dropped.
    pub kept: bool,
    /// For a kept test, whether the initial harness passes it.
    pub initial_passes: Option<bool>,
    /// For a dropped test, why.
    pub why: Option<String>,
}

/// One task's synthesis.
#[derive(Clone, Debug, Serialize)]
pub struct TaskSynth {
    /// Task id.
    pub id: String,
    /// Its split.
    pub split: String,
    /// How the agent call ended (`finished`, or why not).
    pub agent: String,
    /// Every file the agent left in `tests/`, kept or dropped.
    pub tests: Vec<TestVerdict>,
}

impl TaskSynth {
    /// How many of its tests were kept.
    pub fn kept(&self) -> usize {
        self.tests.iter().filter(|t| t.kept).count()
    }
}

/// The result of `hevo tests synth`.
#[derive(Clone, Debug, Serialize)]
pub struct SynthReport {
    /// The new suite.
    pub out: PathBuf,
    /// Its lock file.
    pub lock: PathBuf,
    /// Every task asked for, in suite order.
    pub tasks: Vec<TaskSynth>,
    /// Tests kept in all.
    pub kept: usize,
    /// Tests dropped in all.
    pub dropped: usize,
    /// Tasks left out of the new suite because none of their tests was kept.
    pub tasks_without_tests: Vec<String>,
    /// The initial harness's mean, over the new suite's tasks, of the fraction of the
    /// task's kept tests it passes (what `hevo eval` on the new suite reports, if the
    /// harness behaves the same).
    pub initial_pass_rate: Option<f64>,
}

/// Why synthesis stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SynthError {
    /// A mistake in the input (bad suite, harness, option or output directory).
    #[error("{0}")]
    User(String),
    /// The suite is invalid.
    #[error(transparent)]
    Suite(#[from] SuiteError),
    /// Evaluating the initial harness failed.
    #[error("running the initial harness: {0}")]
    Eval(#[from] EvalError),
    /// Stopped by a signal.
    #[error("stopped by {0}")]
    Interrupted(CancelReason),
    /// No task kept a test.
    #[error("no generated test was kept for any task (see the reasons above and the agent \
             transcripts in {}); nothing was frozen", .0.display())]
    NothingKept(PathBuf),
    /// A fault of ours (IO, store).
    #[error("{0}")]
    Internal(String),
}

impl SynthError {
    /// Whether the error is the user's to fix (exit code 2).
    pub fn is_user_error(&self) -> bool {
        match self {
            SynthError::User(_) | SynthError::Suite(_) => true,
            SynthError::Eval(e) => e.is_user_error(),
            _ => false,
        }
    }
}

fn io(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> SynthError {
    move |e| SynthError::Internal(format!("{what}: {e}"))
}

/// The prompt of one agent call (the details are in the workspace's README.md).
pub fn render_prompt(per_task: usize) -> String {
    format!(
        "You write the fixed tests that will score LLM harnesses on one task. Read README.md in \
         the current directory first: it explains task.json, the initial harness's trajectory \
         in trajectory/ and the test format. Write up to {per_task} executable tests as \
         tests/test_01.sh (bash) or tests/test_01.py (python3), numbered from 01; each exits 0 \
         when a harness's output passes and 1 when it fails. Do not change anything outside \
         tests/."
    )
}

/// The workspace README: the contract between hevo and the agent.
fn render_readme(per_task: usize, test_timeout: Duration) -> String {
    format!(
        "# Write the tests for one task\n\n\
         hevo is searching for a better harness (the code around an LLM) for a suite of tasks. \
         The tests you write here become the fixed ruler for this task: every candidate \
         harness is scored by the fraction of them it passes, and they are frozen (hashed) \
         once written.\n\n\
         ## What you get (read-only)\n\n\
         - `task.json`: the task's `id`, its `input` (exactly what a harness reads on stdin), \
           its `group` and the suite's `description`. The correct answer is not given: judge \
           from the task itself.\n\
         - `trajectory/`: what the initial harness did on this task. `answer.json` (its final \
           answer, `null` if it gave none), `status.json` (whether it answered, its wall time), \
           `stdout.txt`, `stderr.txt`, `model_calls.jsonl` (its model requests and responses, \
           if it made any) and `workdir/` (the files it left in its working directory). The \
           initial harness may well be wrong; do not copy its answer into a test.\n\n\
         ## What to write\n\n\
         Up to {per_task} files in `tests/`, named `test_01.sh` (run with bash) or \
         `test_01.py` (run with python3), numbered from 01. Other names are ignored. Each \
         test:\n\n\
         - runs after a harness finished, in that harness's working directory (so it can read \
           the files the harness wrote), with one JSON line on stdin: \
           `{{\"answer\": ..., \"expected\": ..., \"input\": ...}}` (`answer` is the harness's \
           final answer; `expected` is the suite's reference value, which may be null and is \
           not shown to you), and `HEVO_TASK_ID`, `HEVO_WORKDIR` in its environment;\n\
         - exits 0 when the output passes, 1 when it fails;\n\
         - checks one property a correct answer must have, so that the fraction passed means \
           something; prefer checks any correct harness passes and a wrong one fails.\n\n\
         hevo drops a test that has a syntax error, exits with another code, crashes (a \
         Python traceback other than AssertionError), runs longer than {} s, or gives \
         different results on two runs against the initial harness's output.\n\n\
         Try a test: `python3 -c 'import json; print(json.dumps({{\"answer\": \
         json.load(open(\"trajectory/answer.json\")), \"expected\": None, \"input\": \
         json.load(open(\"task.json\"))[\"input\"]}}))' | (cd trajectory/workdir && bash \
         ../../tests/test_01.sh); echo $?`\n",
        test_timeout.as_secs_f64()
    )
}

/// Runs the whole synthesis (see the module documentation).
pub fn synth(opts: &SynthOptions, log: &mut dyn FnMut(&str)) -> Result<SynthReport, SynthError> {
    let suite = Suite::load(&opts.suite_dir)?;
    if opts.per_task == 0 || opts.per_task > 99 {
        return Err(SynthError::User(format!(
            "`--per-task` = {} must be between 1 and 99",
            opts.per_task
        )));
    }
    let out = prepare_out(&opts.out, &suite.dir)?;
    let work = out.join(WORK_DIR);
    let tasks: Vec<&Task> = suite
        .tasks
        .iter()
        .filter(|t| opts.splits.contains(&t.split))
        .collect();
    if tasks.is_empty() {
        return Err(SynthError::User(format!(
            "suite `{}` has no tasks in the chosen split(s); pick others with `--split`",
            suite.dir.display()
        )));
    }
    log(&format!(
        "running the initial harness `{}` on {} task(s)",
        opts.harness_dir.display(),
        tasks.len()
    ));
    let initial = run_initial(opts, &suite, &work.join("initial"))?;
    std::fs::create_dir_all(out.join(TESTS_DIR)).map_err(io("cannot create the tests folder"))?;
    let mut results = Vec::new();
    for task in &tasks {
        if let Some(reason) = opts.cancel.reason() {
            return Err(SynthError::Interrupted(reason));
        }
        let trial = initial.iter().find(|t| t.task_id == task.id);
        let ws = work.join("tasks").join(sanitize(&task.id));
        let calls = work.join("agent").join(sanitize(&task.id));
        // A call that ended (not interrupted) is not repeated when the same agent command
        // runs again; another command (a mended path, another preset) is asked anew.
        let ended = calls.join("ended.txt");
        let asked = calls.join("command.txt");
        let command = opts.agent.command.join("\0");
        let earlier = match std::fs::read_to_string(&asked) {
            Ok(c) if c == command => std::fs::read_to_string(&ended).ok(),
            _ => None,
        };
        let agent = match earlier {
            Some(how) => format!("{how} (in an earlier run)"),
            None => {
                write_workspace(&ws, task, &suite, trial, opts)?;
                let how = call_agent(opts, &ws, &calls)?;
                std::fs::write(&asked, &command).map_err(io("cannot record the agent call"))?;
                std::fs::write(&ended, &how).map_err(io("cannot record the agent call"))?;
                how
            }
        };
        log(&format!("task {}: agent {agent}", task.id));
        let tests = check_tests(opts, task, trial, &ws, &out, &work)?;
        let kept = tests.iter().filter(|t| t.kept).count();
        log(&format!(
            "task {}: kept {kept} of {} test(s){}",
            task.id,
            tests.len(),
            tests
                .iter()
                .filter_map(|t| t.why.as_ref().map(|w| format!("; dropped {}: {w}", t.file)))
                .collect::<String>()
        ));
        results.push(TaskSynth {
            id: task.id.clone(),
            split: task.split.as_str().into(),
            agent,
            tests,
        });
    }
    freeze(opts, &suite, &out, results)
}

/// Checks the output directory (absent or empty but for [`WORK_DIR`], not the suite) and
/// creates it; returns it canonical. Call it before anything is written there.
pub fn prepare_out(out: &Path, suite_dir: &Path) -> Result<PathBuf, SynthError> {
    let suite_dir = &suite_dir
        .canonicalize()
        .map_err(|e| SynthError::User(format!("cannot read `{}`: {e}", suite_dir.display())))?;
    // A directory with WORK_DIR is an earlier synthesis's: it is resumed and rewritten.
    if out.exists() && !out.join(WORK_DIR).is_dir() {
        let entries = std::fs::read_dir(out)
            .map_err(|e| SynthError::User(format!("cannot read `{}`: {e}", out.display())))?
            .count();
        if entries > 0 {
            return Err(SynthError::User(format!(
                "the output directory `{}` is not empty; pass a new `--out` directory (the \
                 generated suite is written there, the original suite stays unchanged)",
                out.display()
            )));
        }
    }
    std::fs::create_dir_all(out).map_err(io(format!("cannot create `{}`", out.display())))?;
    let out = out
        .canonicalize()
        .map_err(io(format!("cannot resolve `{}`", out.display())))?;
    if out == *suite_dir || suite_dir.starts_with(&out) {
        return Err(SynthError::User(format!(
            "`--out` `{}` would overwrite the suite; pass a new directory",
            out.display()
        )));
    }
    for name in ["suite.toml", "tasks.jsonl", LOCK_FILE] {
        let _ = std::fs::remove_file(out.join(name));
    }
    let _ = hevo_runtime::remove::remove_tree(&out.join(TESTS_DIR));
    Ok(out)
}
