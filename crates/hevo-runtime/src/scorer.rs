//! Scorers: turn a harness's answer into an outcome in `[0, 1]`.
//!
//! - `label`: the answer and `expected` compared as normalized text (case, surrounding
//!   whitespace and runs of whitespace ignored); an `expected` list accepts any of its items.
//! - `exact`: JSON equality (two integers compared exactly, other numbers by `f64` value,
//!   strings trimmed).
//! - `command`: a test command run in the trial's working directory after the harness exits;
//!   exit 0 passes. Or a `tests` folder of scripts, giving the fraction that pass.
//! - `program`: an external process reads `{"answer", "expected", "input"}` on stdin and
//!   prints a score in `[0, 1]`.
//!
//! Scorer processes start through the same [`Launcher`] seam as harnesses. A scorer that
//! breaks (cannot start, prints no score) is a fault of the suite, reported as an error the
//! trial turns into `infra_error`; a failing test is just a low score.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cancel::Cancel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::harness::resolve_argv;
use crate::launch::{base_env, with_suffix, Access, Exit, LaunchSpec, Launcher};
use crate::task::Task;

/// The `[scorer]` table of `suite.toml`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum ScorerConfig {
    /// Normalized text equality.
    Label {},
    /// JSON equality.
    Exact {},
    /// A test command or a folder of test scripts, run in the working directory.
    Command {
        /// The test command; `{suite}` in an argument is replaced by the suite directory, and
        /// arguments naming files in the suite are made absolute ([`command_argv`]).
        #[serde(default)]
        command: Option<Vec<String>>,
        /// A folder (relative to the suite) of test scripts: `tests/<task id>/` if it
        /// exists, else the scripts directly in `tests/`.
        #[serde(default)]
        tests: Option<String>,
        /// Time limit per test process in seconds (default 60).
        #[serde(default)]
        timeout_s: Option<f64>,
        /// A lock file (relative to the suite, usually `tests.lock.json`) freezing every file
        /// of `tests` by its SHA-256 ([`crate::tests_lock`]); checked when the suite loads.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lock: Option<String>,
    },
    /// An external scoring program.
    Program {
        /// The program; arguments naming files in the suite are made absolute.
        command: Vec<String>,
        /// Time limit in seconds (default 60).
        #[serde(default)]
        timeout_s: Option<f64>,
    },
}

impl ScorerConfig {
    /// Checks the configuration against the suite directory; returns one message per problem.
    pub fn validate(&self, suite_dir: &Path) -> Vec<String> {
        let mut problems = Vec::new();
        match self {
            ScorerConfig::Label {} | ScorerConfig::Exact {} => {}
            ScorerConfig::Command {
                command,
                tests,
                timeout_s,
                lock,
            } => {
                if lock.is_some() && tests.is_none() {
                    problems.push(
                        "[scorer] `lock` freezes a `tests` folder: add `tests = \"tests\"` or \
                         remove `lock`"
                            .into(),
                    );
                }
                match (command, tests) {
                    (None, None) => problems.push(
                        "[scorer] kind = \"command\" needs `command = [...]` or `tests = \"tests\"`"
                            .into(),
                    ),
                    (Some(c), _) if c.is_empty() => {
                        problems.push("[scorer] `command` must not be empty".into())
                    }
                    _ => {}
                }
                if let Some(c) = command.as_ref().filter(|c| !c.is_empty()) {
                    let argv = command_argv(c, suite_dir);
                    let env = base_env(suite_dir);
                    if !crate::launch::resolve_program(&argv[0], &env).is_file() {
                        problems.push(format!(
                            "[scorer] command program `{}` not found (neither on PATH nor in \
                             the suite directory); fix `command` or install it",
                            c[0]
                        ));
                    }
                }
                if let Some(t) = tests {
                    let folder = suite_dir.join(t);
                    if folder.exists() && !folder.is_dir() {
                        problems.push(format!(
                            "[scorer] `tests` = `{t}` is a file, not a folder: put the test \
                             scripts in a folder and name it"
                        ));
                    } else if !folder.is_dir() {
                        problems.push(format!(
                            "[scorer] `tests` folder `{t}` does not exist in the suite directory"
                        ));
                    } else {
                        problems.extend(unrunnable_tests(&folder));
                    }
                }
                check_timeout(*timeout_s, &mut problems);
            }
            ScorerConfig::Program { command, timeout_s } => {
                if command.is_empty() {
                    problems.push("[scorer] `command` must not be empty".into());
                } else {
                    let argv = resolve_argv(command, suite_dir);
                    let env = base_env(suite_dir);
                    if !crate::launch::resolve_program(&argv[0], &env).is_file() {
                        problems.push(format!(
                            "[scorer] program `{}` not found (neither on PATH nor in the suite \
                             directory); fix `command` or install it",
                            command[0]
                        ));
                    }
                }
                check_timeout(*timeout_s, &mut problems);
            }
        }
        problems
    }
}

/// A `command` scorer's command as it runs: `{suite}` replaced by the suite directory, and
/// an argument naming a file or folder of the suite made absolute, as for `program`. The
/// command runs in the harness's working directory: a relative `check.py` meant as the
/// suite's was looked up there, so a harness that left its own `check.py` passed every task.
fn command_argv(command: &[String], suite_dir: &Path) -> Vec<String> {
    let suite = suite_dir.to_string_lossy();
    let substituted: Vec<String> = command
        .iter()
        .map(|a| a.replace("{suite}", &suite))
        .collect();
    resolve_argv(&substituted, suite_dir)
}

fn check_timeout(t: Option<f64>, problems: &mut Vec<String>) {
    if let Some(Err(problem)) = t.map(|t| crate::limits::time_limit("[scorer] `timeout_s`", t)) {
        problems.push(problem);
    }
}

/// Why a scorer could not produce a score.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScoreError {
    /// A scorer process could not be run.
    #[error(transparent)]
    Launch(#[from] crate::launch::LaunchError),
    /// The scoring program failed or printed no valid score.
    #[error("scoring program: {0}")]
    Program(String),
    /// The tests folder could not be read.
    #[error("cannot read tests folder `{}`: {source}", path.display())]
    Tests {
        /// The folder.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// Scoring was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// Why [`Scorer::score_answer`] gave no score.
#[derive(Debug)]
pub enum Unscored {
    /// The scorer failed on this answer (the cause) but scores the task's expected answer:
    /// the answer's doing, or that of the files the harness left.
    Answer(String),
    /// The scorer could not score at all (the expected answer neither, or it could not be
    /// run): the suite's fault.
    Scorer(ScoreError),
}

/// Everything a scorer may look at for one trial.
#[derive(Debug)]
pub struct ScoreContext<'a> {
    /// The harness's answer.
    pub answer: &'a Value,
    /// The task (with `expected`).
    pub task: &'a Task,
    /// The trial's working directory, as the harness left it.
    pub workdir: &'a Path,
    /// The suite directory.
    pub suite_dir: &'a Path,
    /// The trial's trace prefix (see [`crate::trial::TrialRequest::trace_prefix`]).
    pub trace_prefix: &'a Path,
    /// Time between SIGTERM and SIGKILL of a scorer process's group.
    pub grace: Duration,
    /// Maximum bytes of a scorer process's stdout and stderr kept.
    pub output_cap: u64,
    /// Cancellation of the run.
    pub cancel: Cancel,
}

impl ScoreContext<'_> {
    /// The same context once more, for another run of the scorer.
    fn again(&self) -> Self {
        ScoreContext {
            cancel: self.cancel.clone(),
            ..*self
        }
    }
}

/// A ready-to-use scorer.
#[derive(Clone, Debug)]
pub struct Scorer {
    config: ScorerConfig,
}

impl Scorer {
    /// Builds the scorer a suite configures.
    pub fn new(config: ScorerConfig) -> Scorer {
        Scorer { config }
    }

    /// Scores one answer; the outcome is in `[0, 1]`.
    pub async fn score(
        &self,
        launcher: &dyn Launcher,
        ctx: ScoreContext<'_>,
    ) -> Result<f64, ScoreError> {
        match &self.config {
            ScorerConfig::Label {} => Ok(bool_score(label_match(ctx.answer, &ctx.task.expected))),
            ScorerConfig::Exact {} => Ok(bool_score(json_eq(ctx.answer, &ctx.task.expected))),
            ScorerConfig::Command {
                command,
                tests,
                timeout_s,
                ..
            } => {
                let timeout = secs(*timeout_s);
                let mut runs: Vec<Vec<String>> = Vec::new();
                if let Some(cmd) = command {
                    runs.push(command_argv(cmd, ctx.suite_dir));
                }
                if let Some(t) = tests {
                    runs.extend(test_scripts(&ctx.suite_dir.join(t), &ctx.task.id)?);
                }
                let mut passed = 0usize;
                for (i, argv) in runs.iter().enumerate() {
                    match run_test(launcher, &ctx, argv.clone(), timeout, i)
                        .await?
                        .exit
                    {
                        Exit::Code(0) => passed += 1,
                        Exit::Cancelled => return Err(ScoreError::Cancelled),
                        _ => {}
                    }
                }
                Ok(passed as f64 / runs.len().max(1) as f64)
            }
            ScorerConfig::Program { command, timeout_s } => {
                let argv = resolve_argv(command, ctx.suite_dir);
                let home = scorer_home()?;
                let spec = scorer_spec(&ctx, argv, ctx.suite_dir, home.path(), secs(*timeout_s), 0);
                let out = launcher.launch(spec).await?;
                match out.exit {
                    Exit::Code(0) => {}
                    Exit::Cancelled => return Err(ScoreError::Cancelled),
                    Exit::TimedOut => return Err(ScoreError::Program("timed out".into())),
                    other => {
                        // The cause is in the scorer's own stderr, not the harness's trace.
                        let trace = with_suffix(ctx.trace_prefix, "scorer-0");
                        let tail = crate::failures::stderr_tail(&trace.to_string_lossy());
                        let file = format!("`{}.stderr`", trace.display());
                        let why = match tail.last() {
                            Some(l) => format!(", its stderr ending `{l}` (all of it: {file})"),
                            None => format!(" (its stderr: {file})"),
                        };
                        return Err(ScoreError::Program(format!("{other}{why}")));
                    }
                }
                parse_score(&out.stdout_tail).map_err(ScoreError::Program)
            }
        }
    }
}

impl Scorer {
    /// Scores one answer like [`Scorer::score`], telling an answer the scorer cannot score
    /// from a scorer that cannot score.
    ///
    /// A `program` scorer that fails on the answer (exits non-zero, times out, prints no
    /// score) is run on the task's expected answer, in an empty working directory, its output
    /// discarded. If it fails there too, the scorer is broken for this task:
    /// [`Unscored::Scorer`]. If it scores that, it is run on the answer once more (so one
    /// passing failure, a judge's API timing out, is not blamed on the harness): a score is
    /// the outcome, a second failure is the answer's (or the files the harness left):
    /// [`Unscored::Answer`]. Without this, a harness that answered what crashes the scorer
    /// (`"?"` to a scorer calling `float`) whenever it did not know had those tasks left
    /// unscored, out of its pass rate and its search estimate.
    pub async fn score_answer(
        &self,
        launcher: &dyn Launcher,
        ctx: ScoreContext<'_>,
    ) -> Result<f64, Unscored> {
        let first = match self.score(launcher, ctx.again()).await {
            Ok(score) => return Ok(score),
            Err(ScoreError::Program(why))
                if matches!(self.config, ScorerConfig::Program { .. }) =>
            {
                why
            }
            Err(e) => return Err(Unscored::Scorer(e)),
        };
        let broken = || Unscored::Scorer(ScoreError::Program(first.clone()));
        let Ok(scratch) = tempfile::Builder::new()
            .prefix("hevo-scorer-probe-")
            .tempdir()
        else {
            return Err(broken());
        };
        let workdir = scratch.path().join("work");
        if std::fs::create_dir(&workdir).is_err() {
            return Err(broken());
        }
        let probe = ScoreContext {
            answer: &ctx.task.expected,
            workdir: &workdir,
            trace_prefix: &scratch.path().join("probe"),
            ..ctx.again()
        };
        match self.score(launcher, probe).await {
            Ok(_) => {}
            Err(ScoreError::Cancelled) => return Err(Unscored::Scorer(ScoreError::Cancelled)),
            Err(_) => return Err(broken()),
        }
        match self.score(launcher, ctx).await {
            Ok(score) => Ok(score),
            Err(ScoreError::Program(why)) => Err(Unscored::Answer(why)),
            Err(e) => Err(Unscored::Scorer(e)),
        }
    }
}

/// Runs one test process of a `command` scorer in the trial's working directory (the
/// `i`-th, for its trace files `scorer-<i>.stdout/.stderr`); exit 0 passes. `hevo tests
/// synth` checks generated tests with the same call the scorer makes.
pub async fn run_test(
    launcher: &dyn Launcher,
    ctx: &ScoreContext<'_>,
    argv: Vec<String>,
    timeout: Duration,
    i: usize,
) -> Result<crate::launch::ProcessOutcome, ScoreError> {
    let home = scorer_home()?;
    Ok(launcher
        .launch(scorer_spec(ctx, argv, ctx.workdir, home.path(), timeout, i))
        .await?)
}

/// A scorer process's own empty home directory, removed when dropped. The trial's working
/// directory holds what the harness wrote: as `HOME` it would let the harness plant
/// `~/.local/lib/python3.X/site-packages/usercustomize.py` (run by every Python scorer, which
/// then printed a perfect score), `~/.gitconfig` and the like.
fn scorer_home() -> Result<tempfile::TempDir, ScoreError> {
    tempfile::Builder::new()
        .prefix("hevo-scorer-home-")
        .tempdir()
        .map_err(|source| {
            ScoreError::Launch(crate::launch::LaunchError::Io {
                what: "making a scorer's home directory",
                source,
            })
        })
}

/// How a test script is run: `.sh` with bash, `.py` with python3, anything else directly.
pub fn test_argv(path: &Path) -> Vec<String> {
    let s = path.to_string_lossy().into_owned();
    match path.extension().and_then(|e| e.to_str()) {
        Some("sh") => vec!["bash".into(), s],
        Some("py") => vec!["python3".into(), s],
        _ => vec![s],
    }
}

fn secs(t: Option<f64>) -> Duration {
    // Validated when the suite was loaded; the fallback is the default.
    t.and_then(crate::limits::seconds)
        .unwrap_or(Duration::from_secs(60))
}

fn bool_score(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

fn scorer_spec(
    ctx: &ScoreContext<'_>,
    argv: Vec<String>,
    cwd: &Path,
    home: &Path,
    timeout: Duration,
    i: usize,
) -> LaunchSpec {
    let mut env = base_env(home);
    // No user site-packages either, wherever HOME points.
    env.push(("PYTHONNOUSERSITE".into(), "1".into()));
    env.push((
        "HEVO_SUITE_DIR".into(),
        ctx.suite_dir.to_string_lossy().into(),
    ));
    env.push(("HEVO_WORKDIR".into(), ctx.workdir.to_string_lossy().into()));
    env.push(("HEVO_TASK_ID".into(), ctx.task.id.clone()));
    let payload = serde_json::json!({
        "answer": ctx.answer,
        "expected": ctx.task.expected,
        "input": ctx.task.input,
    });
    let mut stdin = serde_json::to_vec(&payload).unwrap_or_default();
    stdin.push(b'\n');
    LaunchSpec {
        argv,
        cwd: cwd.to_path_buf(),
        env,
        stdin,
        timeout,
        grace: ctx.grace,
        stdout_path: Some(with_suffix(ctx.trace_prefix, &format!("scorer-{i}.stdout"))),
        stderr_path: Some(with_suffix(ctx.trace_prefix, &format!("scorer-{i}.stderr"))),
        output_cap: ctx.output_cap,
        tail_bytes: 4096,
        cancel: ctx.cancel.clone(),
        // The suite's scorer sees the suite and the trial's directory (read-only when it
        // is not where it runs), and writes its own empty home; the harness is gone by
        // then, with its whole sandbox.
        access: Access {
            cwd_read_only: cwd != ctx.workdir,
            read_only: vec![ctx.suite_dir.to_path_buf(), ctx.workdir.to_path_buf()],
            writable: vec![home.to_path_buf()],
            hidden: Vec::new(),
            private_tmp: false,
        },
    }
}

/// The test scripts for one task: `dir/<task id>/*` if that folder exists, else `dir/*`.
fn test_scripts(dir: &Path, task_id: &str) -> Result<Vec<Vec<String>>, ScoreError> {
    let per_task = dir.join(task_id);
    let dir = if per_task.is_dir() {
        per_task
    } else {
        dir.to_path_buf()
    };
    let read = std::fs::read_dir(&dir).map_err(|source| ScoreError::Tests {
        path: dir.clone(),
        source,
    })?;
    let mut files: Vec<PathBuf> = read
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    Ok(files.iter().map(|p| test_argv(p)).collect())
}

/// Why test scripts under `folder` (directly, or in a task's subfolder) cannot run: one
/// run directly (neither `.sh` nor `.py`) that is not executable, or executable without a
/// `#!` line or a binary's header. Run, such a test could not start, and counted as a
/// failed test on every task (sandboxed, its start failure looked like its exit).
fn unrunnable_tests(folder: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    // As the lock: dot-files and byte-code caches are neither tests nor checked.
    let visible = |p: &Path| {
        !p.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            n.starts_with('.') || n == "__pycache__"
        })
    };
    let entries = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| visible(p))
            .collect();
        v.sort();
        v
    };
    let mut scripts = Vec::new();
    for p in entries(folder) {
        if p.is_dir() {
            scripts.extend(entries(&p).into_iter().filter(|q| q.is_file()));
        } else if p.is_file() {
            scripts.push(p);
        }
    }
    let mut problems = Vec::new();
    for script in scripts.iter().filter(|p| test_argv(p).len() == 1) {
        let mode = std::fs::metadata(script).map_or(0, |m| m.permissions().mode());
        let mut head = [0u8; 4];
        let read = std::fs::File::open(script)
            .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
            .unwrap_or(0);
        let starts = read >= 2 && (head.starts_with(b"#!") || head == *b"\x7fELF");
        let why = if mode & 0o111 == 0 {
            "is not executable (neither `.sh` nor `.py`, so it is run directly): `chmod +x` it \
             or name it `.sh` or `.py`"
        } else if !starts {
            "has no `#!` line, so it cannot be run directly: add one (`#!/bin/sh`) or name it \
             `.sh` or `.py`"
        } else {
            continue;
        };
        problems.push(format!("[scorer] test `{}` {why}", script.display()));
    }
    problems
}

/// Reads a score from a program's output: the last non-empty line, a number or
/// `{"score": x}`, which must lie in `[0, 1]`.
pub fn parse_score(tail: &[u8]) -> Result<f64, String> {
    let text = String::from_utf8_lossy(tail);
    let line = text
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or("printed nothing; print a score in [0, 1] as the last line")?;
    let v: Value = serde_json::from_str(line)
        .map_err(|_| format!("last line `{line}` is not a number in [0, 1]"))?;
    let x = match &v {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(bool_score(*b)),
        Value::Object(o) => o.get("score").and_then(Value::as_f64),
        _ => None,
    }
    .ok_or_else(|| format!("last line `{line}` is not a number in [0, 1]"))?;
    if !(0.0..=1.0).contains(&x) {
        return Err(format!("score {x} is outside [0, 1]"));
    }
    Ok(x)
}

fn label_text(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// `label` equality: normalized text; an `expected` list accepts any of its items.
pub fn label_match(answer: &Value, expected: &Value) -> bool {
    let a = label_text(answer);
    match expected {
        Value::Array(items) => items.iter().any(|e| label_text(e) == a),
        e => label_text(e) == a,
    }
}

/// `exact` equality: JSON values equal, numbers by [`number_eq`], strings with whitespace
/// trimmed.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number_eq(x, y),
        (Value::String(x), Value::String(y)) => x.trim() == y.trim(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// `exact` equality of two numbers: two integers exactly (`2^53 + 1` is not `2^53`), any
/// other pair by `f64` value (`1`, `1.0` and `1e0` are equal). serde_json reads an integer
/// outside `-2^63 ..= 2^64 - 1` as a float, so such integers compare as floats.
fn number_eq(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    match (x.as_i128(), y.as_i128()) {
        (Some(a), Some(b)) => a == b,
        _ => x.as_f64() == y.as_f64(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_normalizes() {
        assert!(label_match(&json!(" Positive "), &json!("positive")));
        assert!(label_match(&json!("a  b"), &json!(["x", "A B"])));
        assert!(!label_match(&json!("neg"), &json!("negative")));
    }

    #[test]
    fn exact_compares_json() {
        assert!(json_eq(&json!({"a": [1, 2.0]}), &json!({"a": [1.0, 2]})));
        assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!json_eq(&json!("1"), &json!(1)));
    }

    #[test]
    fn exact_compares_integers_exactly() {
        let eq = |a: &str, b: &str| {
            json_eq(
                &serde_json::from_str(a).unwrap(),
                &serde_json::from_str(b).unwrap(),
            )
        };
        // Equal as f64, different as integers.
        assert!(!eq("9007199254740993", "9007199254740992"));
        assert!(!eq("9223372036854775807", "9223372036854775806"));
        assert!(!eq("18446744073709551615", "18446744073709551614"));
        assert!(!eq("-9223372036854775808", "-9223372036854775807"));
        assert!(!eq(
            "[{\"n\": 9007199254740993}]",
            "[{\"n\": 9007199254740992}]"
        ));
        assert!(eq("9007199254740993", "9007199254740993"));
        assert!(eq("-0", "0"));
        // Any float in the pair: by value.
        assert!(eq("1", "1.0") && eq("1", "1e0") && eq("1.0", "1e0"));
        assert!(eq("-0.0", "0"));
        // The documented limit: integers past 64 bits are read as floats.
        assert!(eq("18446744073709551616", "18446744073709551617"));
    }

    #[test]
    fn scores_parse() {
        assert_eq!(parse_score(b"0.5\n"), Ok(0.5));
        assert_eq!(parse_score(b"x\n{\"score\": 1}\n"), Ok(1.0));
        assert!(parse_score(b"1.5").is_err());
        assert!(parse_score(b"").is_err());
    }

    #[test]
    fn config_parses_and_validates() {
        let c: ScorerConfig = toml::from_str("kind = \"command\"\ncommand = [\"true\"]").unwrap();
        assert!(c.validate(Path::new("/")).is_empty());
        let c: ScorerConfig = toml::from_str("kind = \"command\"").unwrap();
        assert_eq!(c.validate(Path::new("/")).len(), 1);
        assert!(toml::from_str::<ScorerConfig>("kind = \"label\"\nfoo = 1").is_err());
        // A command whose program does not exist scored every trial 0 in the sandbox (its
        // init could not start it); it is refused when the suite loads.
        let c: ScorerConfig =
            toml::from_str("kind = \"command\"\ncommand = [\"no-such-binary-xyz\"]").unwrap();
        let problems = c.validate(Path::new("/"));
        assert!(
            problems.len() == 1 && problems[0].contains("`no-such-binary-xyz` not found"),
            "{problems:?}"
        );
    }

    #[test]
    fn tests_that_cannot_start_are_refused_at_load() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let t1 = d.path().join("tests/t1");
        std::fs::create_dir_all(&t1).unwrap();
        let write = |name: &str, text: &str, mode: u32| {
            let p = t1.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        write("test_ok.sh", "exit 0\n", 0o644);
        write("test_ok.py", "pass\n", 0o644);
        write("test_run", "#!/bin/sh\nexit 0\n", 0o755);
        write("test_noexec", "#!/bin/sh\nexit 0\n", 0o644);
        write("test_noshebang", "exit 0\n", 0o755);
        write(".hidden", "", 0o644);
        let c: ScorerConfig = toml::from_str("kind = \"command\"\ntests = \"tests\"").unwrap();
        let problems = c.validate(d.path());
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems[0].contains("test_noexec` is not executable"),
            "{problems:?}"
        );
        assert!(
            problems[1].contains("test_noshebang` has no `#!` line"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_tests_file_is_named_as_a_file_not_as_missing() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("tests"), "").unwrap();
        let c: ScorerConfig = toml::from_str("kind = \"command\"\ntests = \"tests\"").unwrap();
        let problems = c.validate(d.path());
        assert!(
            problems.len() == 1 && problems[0].contains("is a file, not a folder"),
            "{problems:?}"
        );
    }

    #[test]
    fn a_command_names_the_suites_files_by_absolute_path() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("check.py"), "").unwrap();
        let argv = command_argv(
            &[
                "python3".into(),
                "check.py".into(),
                "out.txt".into(),
                "{suite}/x".into(),
            ],
            d.path(),
        );
        let suite = d.path().to_string_lossy();
        assert_eq!(
            argv,
            [
                "python3".to_string(),
                format!("{suite}/check.py"),
                "out.txt".into(),
                format!("{suite}/x")
            ]
        );
    }
}
