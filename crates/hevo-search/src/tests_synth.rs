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

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hevo_runtime::cancel::{Cancel, CancelReason};
use hevo_runtime::eval::{self, EvalError, EvalOptions};
use hevo_runtime::launch::{with_suffix, Exit, Launcher};
use hevo_runtime::model_access::{ModelAccess, ModelEnv};
use hevo_runtime::scorer::{run_test, test_argv, ScoreContext, ScoreError, ScorerConfig};
use hevo_runtime::store::Store;
use hevo_runtime::suite::{Suite, SuiteConfig, SuiteError};
use hevo_runtime::task::{sanitize, Split, Task};
use hevo_runtime::tests_lock::{TestsLock, LOCK_FILE};
use hevo_runtime::trial::copy_tree;
use serde::Serialize;
use serde_json::{json, Value};

use crate::proposer::agent::{run_agent, AgentCall, AgentOutcome};

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
        // A call that ended (not interrupted) is not repeated when the command runs again.
        let ended = calls.join("ended.txt");
        let agent = match std::fs::read_to_string(&ended) {
            Ok(how) => format!("{how} (in an earlier run)"),
            Err(_) => {
                write_workspace(&ws, task, &suite, trial, opts)?;
                let how = call_agent(opts, &ws, &calls)?;
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
    let _ = std::fs::remove_dir_all(out.join(TESTS_DIR));
    Ok(out)
}

/// One trial of the initial harness, as the agent and the checks need it.
#[derive(Clone, Debug)]
struct InitialTrial {
    task_id: String,
    status: String,
    error: Option<String>,
    wall_ms: u64,
    answer: Value,
    /// `<prefix>.stdout`, `.stderr`, `.workdir/`, `<prefix>/model_calls.jsonl`.
    trace_prefix: PathBuf,
}

/// Evaluates the initial harness once on every chosen split, keeping its working
/// directories; resumes like `hevo eval` when run again.
fn run_initial(
    opts: &SynthOptions,
    suite: &Suite,
    run_dir: &Path,
) -> Result<Vec<InitialTrial>, SynthError> {
    let mut out = Vec::new();
    for &split in &opts.splits {
        if suite.split(split).is_empty() {
            continue;
        }
        let mut o = EvalOptions::new(&opts.harness_dir, &suite.dir);
        o.split = split;
        o.run_dir = Some(run_dir.to_path_buf());
        o.jobs = opts.jobs;
        o.model_access = opts.model_access.clone();
        o.cancel = opts.cancel.clone();
        o.keep_workdirs = true;
        let plan = eval::plan(o)?;
        match eval::run_with(&plan, opts.launcher.clone(), None) {
            Ok(_) => {}
            Err(EvalError::Interrupted { reason, .. }) => {
                return Err(SynthError::Interrupted(reason))
            }
            Err(e) => return Err(e.into()),
        }
        let store = Store::open_read_only(&plan.run_dir.join("hevo.db"))
            .map_err(|e| SynthError::Internal(e.to_string()))?;
        let candidate = store
            .find_candidate(
                &plan.run_id,
                &plan.harness.code_hash,
                &plan.harness.params_json(),
            )
            .map_err(|e| SynthError::Internal(e.to_string()))?
            .ok_or_else(|| SynthError::Internal("the initial harness has no candidate".into()))?;
        let ids: std::collections::HashSet<&str> =
            suite.split(split).iter().map(|t| t.id.as_str()).collect();
        for r in store
            .trials_of(candidate)
            .map_err(|e| SynthError::Internal(e.to_string()))?
        {
            if r.trial_index != 0 || !ids.contains(r.task_id.as_str()) {
                continue;
            }
            out.push(InitialTrial {
                task_id: r.task_id,
                status: r.status,
                error: r.error,
                wall_ms: r.wall_ms,
                answer: r
                    .answer
                    .and_then(|a| serde_json::from_str(&a).ok())
                    .unwrap_or(Value::Null),
                trace_prefix: r.trace_path.map(PathBuf::from).unwrap_or_default(),
            });
        }
    }
    Ok(out)
}

/// Writes a task's workspace: README.md, task.json, trajectory/ and an empty tests/.
fn write_workspace(
    ws: &Path,
    task: &Task,
    suite: &Suite,
    trial: Option<&InitialTrial>,
    opts: &SynthOptions,
) -> Result<(), SynthError> {
    let _ = std::fs::remove_dir_all(ws);
    let traj = ws.join("trajectory");
    std::fs::create_dir_all(traj.join("workdir")).map_err(io("cannot create a workspace"))?;
    std::fs::create_dir_all(ws.join("tests")).map_err(io("cannot create a workspace"))?;
    let write = |name: &Path, text: String| {
        std::fs::write(name, text).map_err(io(format!("cannot write `{}`", name.display())))
    };
    write(
        &ws.join("README.md"),
        render_readme(opts.per_task, opts.test_timeout),
    )?;
    let task_json = json!({
        "id": task.id,
        "group": task.group,
        "input": task.input,
        "description": suite.config.description,
    });
    write(&ws.join("task.json"), pretty(&task_json))?;
    let Some(trial) = trial else {
        write(&traj.join("answer.json"), "null\n".into())?;
        write(
            &traj.join("status.json"),
            pretty(&json!({"answered": false, "error": "the initial harness did not run"})),
        )?;
        return Ok(());
    };
    let answered = matches!(trial.status.as_str(), "pass" | "fail");
    write(&traj.join("answer.json"), pretty(&trial.answer))?;
    // Whether it answered, never the scorer's verdict (that would tell `expected`).
    let error = if answered { None } else { trial.error.clone() };
    write(
        &traj.join("status.json"),
        pretty(&json!({"answered": answered, "error": error, "wall_ms": trial.wall_ms})),
    )?;
    for (from, to) in [
        (with_suffix(&trial.trace_prefix, "stdout"), "stdout.txt"),
        (with_suffix(&trial.trace_prefix, "stderr"), "stderr.txt"),
        (
            trial.trace_prefix.join("model_calls.jsonl"),
            "model_calls.jsonl",
        ),
    ] {
        if from.is_file() {
            std::fs::copy(&from, traj.join(to))
                .map_err(io(format!("cannot copy `{}`", from.display())))?;
        }
    }
    let kept = with_suffix(&trial.trace_prefix, "workdir");
    if kept.is_dir() {
        copy_tree(&kept, &traj.join("workdir"), &[])
            .map_err(io("cannot copy the initial harness's working directory"))?;
    }
    Ok(())
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Runs the agent in a workspace; returns how it ended, as text.
fn call_agent(opts: &SynthOptions, ws: &Path, calls: &Path) -> Result<String, SynthError> {
    let call = AgentCall {
        command: opts.agent.command.clone(),
        cwd: ws.to_path_buf(),
        writable: vec![ws.join("tests")],
        prompt: render_prompt(opts.per_task),
        transcript_dir: calls.join("transcript"),
        // One home per task: nothing the agent noted on one task reaches another.
        home: calls.join("home"),
        timeout: opts.agent.timeout,
        model_env: opts.agent.model_env.clone(),
        extra_env: opts.agent.env.clone(),
        cancel: opts.cancel.clone(),
    };
    let outcome = hevo_runtime::rt::block_on(run_agent(&*opts.launcher, &call))
        .map_err(io("cannot run the agent"))?;
    Ok(match outcome {
        AgentOutcome::Finished => "finished".into(),
        AgentOutcome::Cancelled(reason) => return Err(SynthError::Interrupted(reason)),
        // Its tests are still checked: an agent that wrote tests and then failed may have
        // written good ones.
        AgentOutcome::Failed(why) => format!("failed ({why})"),
        AgentOutcome::TimedOut => {
            format!("ran past its {} s limit", opts.agent.timeout.as_secs())
        }
    })
}

/// Whether `name` is `test_NN.sh` or `test_NN.py`.
fn is_test_name(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("test_") else {
        return false;
    };
    let Some((num, ext)) = rest.split_once('.') else {
        return false;
    };
    !num.is_empty() && num.len() <= 3 && num.bytes().all(|b| b.is_ascii_digit()) && {
        ext == "sh" || ext == "py"
    }
}

/// Copies the agent's tests into `out/tests/<task id>/`, checks each against the initial
/// harness's output and deletes the dropped ones.
fn check_tests(
    opts: &SynthOptions,
    task: &Task,
    trial: Option<&InitialTrial>,
    ws: &Path,
    out: &Path,
    work: &Path,
) -> Result<Vec<TestVerdict>, SynthError> {
    let mut names: Vec<String> = std::fs::read_dir(ws.join("tests"))
        .map_err(io("cannot read the agent's tests"))?
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| !t.is_dir()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let dest = out.join(TESTS_DIR).join(&task.id);
    let _ = std::fs::remove_dir_all(&dest);
    std::fs::create_dir_all(&dest).map_err(io("cannot create a task's tests folder"))?;
    let mut verdicts = Vec::new();
    let mut taken = 0;
    for name in names {
        let dropped = |why: String| TestVerdict {
            file: name.clone(),
            kept: false,
            initial_passes: None,
            why: Some(why),
        };
        let src = ws.join("tests").join(&name);
        if !is_test_name(&name) {
            verdicts.push(dropped("not named test_NN.sh or test_NN.py".into()));
            continue;
        }
        if std::fs::symlink_metadata(&src).is_ok_and(|m| !m.is_file()) {
            verdicts.push(dropped("not a regular file".into()));
            continue;
        }
        if taken == opts.per_task {
            verdicts.push(dropped(format!("more than --per-task {}", opts.per_task)));
            continue;
        }
        taken += 1;
        let path = dest.join(&name);
        std::fs::copy(&src, &path).map_err(io(format!("cannot copy `{}`", src.display())))?;
        let check = work.join("check").join(sanitize(&task.id)).join(&name);
        match check_one(opts, task, trial, &path, out, &check)? {
            Ok(passes) => verdicts.push(TestVerdict {
                file: name.clone(),
                kept: true,
                initial_passes: Some(passes),
                why: None,
            }),
            Err(why) => {
                std::fs::remove_file(&path).map_err(io("cannot remove a dropped test"))?;
                verdicts.push(dropped(why));
            }
        }
    }
    Ok(verdicts)
}

/// The keep rule for one test: it parses (`bash -n`, Python's `ast`), then two runs
/// against the initial harness's output (each in a fresh copy of its working directory)
/// both exit 0 or 1, the same, without a Python crash. `Ok(passes)` keeps it.
fn check_one(
    opts: &SynthOptions,
    task: &Task,
    trial: Option<&InitialTrial>,
    test: &Path,
    out: &Path,
    check: &Path,
) -> Result<Result<bool, String>, SynthError> {
    let _ = std::fs::remove_dir_all(check);
    std::fs::create_dir_all(check).map_err(io("cannot create a check directory"))?;
    let kept = trial.map(|t| with_suffix(&t.trace_prefix, "workdir"));
    let answer = trial.map(|t| t.answer.clone()).unwrap_or(Value::Null);
    let path = test.to_string_lossy().into_owned();
    let syntax: Vec<String> = match test.extension().and_then(|e| e.to_str()) {
        Some("py") => vec![
            "python3".into(),
            "-c".into(),
            "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])".into(),
            path,
        ],
        _ => vec!["bash".into(), "-n".into(), path],
    };
    let mut exits = Vec::new();
    for (i, argv) in [syntax, test_argv(test), test_argv(test)]
        .into_iter()
        .enumerate()
    {
        let wd = check.join(format!("run-{i}"));
        std::fs::create_dir_all(&wd).map_err(io("cannot create a check directory"))?;
        if let Some(kept) = kept.as_ref().filter(|k| k.is_dir()) {
            copy_tree(kept, &wd, &[]).map_err(io("cannot copy the initial working directory"))?;
        }
        let ctx = ScoreContext {
            answer: &answer,
            task,
            workdir: &wd,
            suite_dir: out,
            trace_prefix: &check.join("trace"),
            grace: Duration::from_secs(2),
            output_cap: 1024 * 1024,
            cancel: opts.cancel.clone(),
        };
        let outcome = match hevo_runtime::rt::block_on(run_test(
            &*opts.launcher,
            &ctx,
            argv,
            opts.test_timeout,
            i,
        )) {
            Ok(o) => o,
            Err(ScoreError::Cancelled) => {
                return Err(SynthError::Interrupted(
                    opts.cancel.reason().unwrap_or(CancelReason::Interrupt),
                ))
            }
            Err(e) => return Err(SynthError::Internal(format!("cannot run a test: {e}"))),
        };
        let stderr = std::fs::read_to_string(with_suffix(
            &check.join("trace"),
            &format!("scorer-{i}.stderr"),
        ))
        .unwrap_or_default();
        match outcome.exit {
            Exit::Cancelled => {
                return Err(SynthError::Interrupted(
                    opts.cancel.reason().unwrap_or(CancelReason::Interrupt),
                ))
            }
            Exit::Code(0) if i == 0 => continue,
            _ if i == 0 => return Ok(Err(format!("syntax error: {}", last_line(&stderr)))),
            Exit::TimedOut => {
                return Ok(Err(format!(
                    "ran past the {} s limit",
                    opts.test_timeout.as_secs_f64()
                )))
            }
            Exit::Signal(s) => return Ok(Err(format!("killed by signal {s}"))),
            Exit::Code(c) if c != 0 && c != 1 => {
                return Ok(Err(format!(
                    "exited with code {c} (a test exits 0 or 1): {}",
                    last_line(&stderr)
                )))
            }
            Exit::Code(c) => {
                if c == 1 && python_crash(&stderr) {
                    return Ok(Err(format!("crashed: {}", last_line(&stderr))));
                }
                exits.push(c);
            }
        }
    }
    if exits[0] != exits[1] {
        return Ok(Err(format!(
            "flaky: exited {} then {} on the same output",
            exits[0], exits[1]
        )));
    }
    let _ = std::fs::remove_dir_all(check.join("run-0"));
    let _ = std::fs::remove_dir_all(check.join("run-1"));
    let _ = std::fs::remove_dir_all(check.join("run-2"));
    Ok(Ok(exits[0] == 0))
}

fn last_line(text: &str) -> String {
    text.lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("no output on stderr")
        .chars()
        .take(300)
        .collect()
}

/// A Python traceback whose exception is not an `AssertionError` (a failed `assert` is a
/// clean failure; a `KeyError` is a broken test).
fn python_crash(stderr: &str) -> bool {
    stderr.contains("Traceback (most recent call last)")
        && !last_line(stderr).starts_with("AssertionError")
}

/// Writes the new suite (suite.toml, tasks.jsonl, files, the lock), loads it back and
/// reports.
fn freeze(
    opts: &SynthOptions,
    suite: &Suite,
    out: &Path,
    results: Vec<TaskSynth>,
) -> Result<SynthReport, SynthError> {
    let kept_ids: std::collections::HashSet<&str> = results
        .iter()
        .filter(|t| t.kept() > 0)
        .map(|t| t.id.as_str())
        .collect();
    let tasks_without_tests: Vec<String> = results
        .iter()
        .filter(|t| t.kept() == 0)
        .map(|t| t.id.clone())
        .collect();
    for id in &tasks_without_tests {
        let _ = std::fs::remove_dir_all(out.join(TESTS_DIR).join(id));
    }
    if kept_ids.is_empty() {
        return Err(SynthError::NothingKept(out.join(WORK_DIR).join("agent")));
    }
    let text = std::fs::read_to_string(suite.dir.join("tasks.jsonl"))
        .map_err(io("cannot read tasks.jsonl"))?;
    let lines: Vec<&str> = text.lines().collect();
    let mut jsonl = String::new();
    for t in suite
        .tasks
        .iter()
        .filter(|t| kept_ids.contains(t.id.as_str()))
    {
        jsonl.push_str(lines.get(t.line - 1).copied().unwrap_or_default());
        jsonl.push('\n');
        if let Some(files) = &t.files {
            let rel = files.strip_prefix(&suite.dir).unwrap_or(files);
            copy_tree(files, &out.join(rel), &[]).map_err(io("cannot copy task files"))?;
        }
    }
    std::fs::write(out.join("tasks.jsonl"), jsonl).map_err(io("cannot write tasks.jsonl"))?;
    let config = SuiteConfig {
        scorer: ScorerConfig::Command {
            command: None,
            tests: Some(TESTS_DIR.into()),
            timeout_s: Some(opts.test_timeout.as_secs_f64()),
            lock: Some(LOCK_FILE.into()),
        },
        ..suite.config.clone()
    };
    let toml = format!(
        "# Written by `hevo tests synth` from `{}`: the scorer runs the frozen generated\n\
         # tests in tests/<task id>/ (see tests.lock.json); editing one is an error until it\n\
         # is re-frozen with `hevo tests freeze`.\n{}",
        suite.dir.display(),
        toml::to_string(&config).map_err(|e| SynthError::Internal(e.to_string()))?
    );
    std::fs::write(out.join("suite.toml"), toml).map_err(io("cannot write suite.toml"))?;
    let kept: usize = results.iter().map(TaskSynth::kept).sum();
    let dropped: usize = results.iter().map(|t| t.tests.len() - t.kept()).sum();
    let provenance = json!({
        "source_suite": suite.dir,
        "harness": opts.harness_dir,
        "agent": opts.agent.command,
        "per_task": opts.per_task,
        "splits": opts.splits.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        "tasks": results,
        "tasks_without_tests": tasks_without_tests,
    });
    let lock = TestsLock::freeze(out, TESTS_DIR, provenance)
        .map_err(io("cannot hash the generated tests"))?;
    let lock_path = out.join(LOCK_FILE);
    lock.write(&lock_path)
        .map_err(io("cannot write the lock"))?;
    // The new suite must load (every check of a frozen suite) before it is reported.
    Suite::load(out)?;
    let rates: Vec<f64> = results
        .iter()
        .filter(|t| t.kept() > 0)
        .map(|t| {
            let passed = t
                .tests
                .iter()
                .filter(|v| v.initial_passes == Some(true))
                .count();
            passed as f64 / t.kept() as f64
        })
        .collect();
    Ok(SynthReport {
        out: out.to_path_buf(),
        lock: lock_path,
        kept,
        dropped,
        tasks_without_tests,
        initial_pass_rate: (!rates.is_empty())
            .then(|| rates.iter().sum::<f64>() / rates.len() as f64),
        tasks: results,
    })
}

/// `hevo tests freeze`: re-hashes a locked suite's tests folder after a reviewed edit and
/// rewrites its lock (provenance kept, the re-freeze noted). Trials scored under the old
/// tests are not reused afterwards (their task keys change).
pub fn refreeze(suite_dir: &Path) -> Result<(TestsLock, usize), SynthError> {
    let dir = suite_dir
        .canonicalize()
        .map_err(|e| SynthError::User(format!("cannot read `{}`: {e}", suite_dir.display())))?;
    let text = std::fs::read_to_string(dir.join("suite.toml"))
        .map_err(|e| SynthError::User(format!("cannot read suite.toml in the suite: {e}")))?;
    let config: SuiteConfig = toml::from_str(&text).map_err(|e| {
        SynthError::User(format!(
            "{}: {}",
            dir.join("suite.toml").display(),
            e.message()
        ))
    })?;
    let ScorerConfig::Command {
        tests: Some(tests),
        lock: Some(lock_name),
        ..
    } = &config.scorer
    else {
        return Err(SynthError::User(format!(
            "{}: the scorer freezes no tests; `hevo tests freeze` needs `[scorer] kind = \
             \"command\"` with `tests = \"tests\"` and `lock = \"{LOCK_FILE}\"`",
            dir.join("suite.toml").display()
        )));
    };
    let lock_path = dir.join(lock_name);
    let old = TestsLock::read(&lock_path).ok();
    let changed = old.as_ref().map_or(usize::MAX, |o| o.check(&dir, "").len());
    let mut provenance = old.map(|o| o.provenance).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut provenance {
        let n = map.get("refrozen").and_then(Value::as_u64).unwrap_or(0);
        map.insert("refrozen".into(), json!(n + 1));
    }
    let lock = TestsLock::freeze(&dir, tests, provenance)
        .map_err(|e| SynthError::User(format!("cannot hash `{tests}`: {e}")))?;
    lock.write(&lock_path)
        .map_err(io(format!("cannot write `{}`", lock_path.display())))?;
    Suite::load(&dir)?;
    Ok((lock, changed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_numbered_shell_and_python_files_are_tests() {
        for ok in ["test_01.sh", "test_10.py", "test_1.sh"] {
            assert!(is_test_name(ok), "{ok}");
        }
        for bad in [
            "test_.sh",
            "test_01.rb",
            "helper.py",
            "test_01.sh.bak",
            "test_a1.py",
        ] {
            assert!(!is_test_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_failed_assert_is_a_failure_and_other_tracebacks_are_crashes() {
        let tb = "Traceback (most recent call last):\n  File \"t.py\", line 3\n";
        assert!(!python_crash(&format!("{tb}AssertionError: no\n")));
        assert!(python_crash(&format!("{tb}KeyError: 'answer'\n")));
        assert!(!python_crash("wrong answer\n"));
    }
}
