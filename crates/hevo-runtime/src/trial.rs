//! One trial: one harness process on one task, in a fresh working directory, scored.
//!
//! A trial makes a temporary working directory outside the suite, copies the task's
//! `files` into it, writes `params.json`, starts the harness through the [`Launcher`] seam
//! with a cleared environment (an allowlist plus the `HEVO_*` and model-gateway variables),
//! reads the answer from the last non-empty stdout line and hands it to the scorer. It
//! classifies the result into a [`TrialStatus`]; it never writes to the store (the executor
//! does, once, when the trial has finished).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::cancel::Cancel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::launch::{base_env, with_suffix, Access, Exit, LaunchSpec, Launcher};

use crate::harness::Harness;
use crate::model_access::{ModelAccess, ModelEnv};
use crate::scorer::{ScoreContext, Scorer, Unscored};
use crate::task::Task;
use hevo_llm::TrialUsage;
use sha2::{Digest, Sha256};

/// How a trial ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialStatus {
    /// Scored with outcome 1.
    Pass,
    /// Scored with an outcome below 1 (partial credit keeps its value).
    Fail,
    /// The harness crashed, exited non-zero or printed no parsable answer (outcome 0).
    HarnessError,
    /// The harness ran past its time limit (outcome 0).
    Timeout,
    /// A fault of ours (spawn failure, scorer failure, IO): retried, never scored.
    InfraError,
    /// A model call went over a per-trial or per-run cap (HTTP 429 from the gateway):
    /// scored as outcome 0, like a timeout.
    BudgetExceeded,
}

impl TrialStatus {
    /// All statuses, in report order.
    pub const ALL: [TrialStatus; 6] = [
        TrialStatus::Pass,
        TrialStatus::Fail,
        TrialStatus::HarnessError,
        TrialStatus::Timeout,
        TrialStatus::InfraError,
        TrialStatus::BudgetExceeded,
    ];

    /// The status's name as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Pass => "pass",
            TrialStatus::Fail => "fail",
            TrialStatus::HarnessError => "harness_error",
            TrialStatus::Timeout => "timeout",
            TrialStatus::InfraError => "infra_error",
            TrialStatus::BudgetExceeded => "budget_exceeded",
        }
    }

    /// Parses a stored status name.
    pub fn parse(s: &str) -> Option<TrialStatus> {
        TrialStatus::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether the trial counts in scores (everything but `infra_error`).
    pub fn is_scored(self) -> bool {
        self != TrialStatus::InfraError
    }
}

/// Limits and places shared by all trials of an evaluation.
#[derive(Clone, Debug)]
pub struct TrialSettings {
    /// Per-trial wall-clock limit.
    pub timeout: Duration,
    /// Time between SIGTERM and SIGKILL of a trial's process group.
    pub grace: Duration,
    /// Maximum bytes of stdout and of stderr kept in the trace directory.
    pub output_cap: u64,
    /// Where working directories are created (a fresh one per trial, removed afterwards).
    pub work_root: PathBuf,
    /// The model gateway variables (used when `model_access` is `None`).
    pub model_env: ModelEnv,
    /// Per-trial gateway keys and spend; `None` gives every trial `model_env` as it is.
    pub model_access: Option<Arc<dyn ModelAccess>>,
    /// The read-only state directory written by `prepare`, if the harness has one.
    pub state_dir: Option<PathBuf>,
    /// Paths trials must never see (the run directory, the suite), even inside the
    /// harness directory.
    pub hidden: Vec<PathBuf>,
    /// Keep a copy of the working directory as the harness left it, in
    /// `<trace prefix>.workdir/` (regular files and folders only; `hevo tests synth`
    /// shows it to its agent and runs generated tests against it).
    pub keep_workdir: bool,
}

/// Which trial to run.
#[derive(Clone, Debug)]
pub struct TrialRequest<'a> {
    /// The harness.
    pub harness: &'a Harness,
    /// The task.
    pub task: &'a Task,
    /// The suite directory (for scorers).
    pub suite_dir: &'a Path,
    /// The 0-based repetition index.
    pub trial_index: u32,
    /// The id given to the harness in `HEVO_TRIAL_ID`.
    pub trial_id: String,
    /// Trace files are `<trace_prefix>.stdout`, `.stderr` and `.scorer-<i>.stdout/.stderr`
    /// (its parent directory is created if needed).
    pub trace_prefix: PathBuf,
    /// Cancels the trial (its process group is killed) when it turns `true`.
    pub cancel: Cancel,
    /// What the trial's earlier attempts spent (this attempt's caps are what is left).
    pub spent: hevo_llm::TrialUsage,
}

/// What one trial produced.
#[derive(Clone, Debug)]
pub struct TrialResult {
    /// The score in `[0, 1]` (0 for harness errors and timeouts).
    pub outcome: f64,
    /// How it ended.
    pub status: TrialStatus,
    /// Wall time of the harness process in milliseconds.
    pub wall_ms: u64,
    /// The cause, for everything but a clean pass or fail.
    pub error: Option<String>,
    /// The parsed answer, when there was one.
    pub answer: Option<Value>,
    /// Whether the run was cancelled while this trial ran (it is then not recorded).
    pub cancelled: bool,
    /// What its model calls spent (zero without a gateway).
    pub usage: TrialUsage,
    /// Whether it is an infrastructure fault no retry cures (the scheduler refused the job
    /// as configured): the batch stops instead of retrying it.
    pub permanent: bool,
}

impl TrialResult {
    fn infra(error: String) -> TrialResult {
        TrialResult {
            outcome: 0.0,
            status: TrialStatus::InfraError,
            wall_ms: 0,
            error: Some(error),
            answer: None,
            cancelled: false,
            usage: TrialUsage::default(),
            permanent: false,
        }
    }
}

/// The id a trial-side process sees as `HEVO_TRIAL_ID`: a hash of the ledger's trial id,
/// unique per trial but telling nothing (no task id, no candidate, no run).
pub fn opaque_id(trial_id: &str) -> String {
    hex::encode(&Sha256::digest(trial_id.as_bytes())[..8])
}

/// The name prefix of trial working directories: `hevo-trial-<pid>-<random>`.
pub const TRIAL_DIR_PREFIX: &str = "hevo-trial-";

/// The name prefixes of per-process temporary directories: trial working directories and
/// the sandbox's gateway sockets (`hevo-sock-<pid>-<random>`).
const LEFTOVER_PREFIXES: [&str; 2] = [TRIAL_DIR_PREFIX, "hevo-sock-"];

/// Removes trial working directories and socket directories under `root` left by hevo
/// processes that are gone (killed runs); those of live processes, and those in `keep`
/// (jobs that outlived their hevo), are kept. Returns how many were removed.
pub fn clean_leftover_workdirs(root: &Path, keep: &[PathBuf]) -> usize {
    let Ok(entries) = std::fs::read_dir(root) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = LEFTOVER_PREFIXES
            .iter()
            .find_map(|p| name.strip_prefix(p))
            // `<pid>-<random>`: an older `hevo-trial-<random>` has no pid and is kept.
            .and_then(|rest| rest.split_once('-'))
            .map(|(pid, _)| pid)
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
            || pid as u32 == std::process::id()
            || keep.contains(&e.path());
        if !alive && crate::remove::remove_tree(&e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// How many bytes at the end of stdout are searched for the answer line.
pub const ANSWER_TAIL_BYTES: usize = 256 * 1024;

/// Runs one trial to completion and classifies it. Never panics on harness misbehaviour.
///
/// A harness that failed while the model backend was failing (an upstream error after the
/// gateway's retries) is not blamed: the trial becomes `infra_error` and is retried.
pub async fn run_trial(
    launcher: &dyn Launcher,
    scorer: &Scorer,
    settings: &TrialSettings,
    req: TrialRequest<'_>,
) -> TrialResult {
    let mut result = run_trial_inner(launcher, scorer, settings, req).await;
    if result.usage.backend_errors > 0
        && matches!(
            result.status,
            TrialStatus::HarnessError | TrialStatus::Timeout
        )
    {
        result.status = TrialStatus::InfraError;
        let cause = result.error.take().unwrap_or_default();
        result.error = Some(format!(
            "{} model call(s) failed upstream (refused, unreachable or timed out, after any retries); the harness then failed: {cause}",
            result.usage.backend_errors
        ));
    }
    result
}

async fn run_trial_inner(
    launcher: &dyn Launcher,
    scorer: &Scorer,
    settings: &TrialSettings,
    req: TrialRequest<'_>,
) -> TrialResult {
    let workdir = match tempfile::Builder::new()
        .prefix(&format!("{TRIAL_DIR_PREFIX}{}-", std::process::id()))
        .tempdir_in(&settings.work_root)
    {
        // Removed however the trial ends, whatever permissions the harness left on it.
        Ok(d) => crate::remove::RemovedOnDrop::new(d),
        Err(e) => return TrialResult::infra(format!("cannot create a working directory: {e}")),
    };
    let wd = workdir.path().to_path_buf();
    if let Some(files) = &req.task.files {
        if let Err(e) = copy_tree(files, &wd, &[]) {
            return TrialResult::infra(format!(
                "cannot copy task files from `{}`: {e}",
                files.display()
            ));
        }
    }
    let params = req.harness.params_json();
    if let Err(e) = std::fs::write(wd.join("params.json"), &params) {
        return TrialResult::infra(format!("cannot write params.json: {e}"));
    }
    if let Some(parent) = req.trace_prefix.parent() {
        if !parent.is_dir() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                return TrialResult::infra(format!(
                    "cannot create trace directory `{}`: {e}",
                    parent.display()
                ));
            }
        }
    }
    let mut env = base_env(&wd);
    env.push(("HEVO_PARAMS".into(), params));
    env.push(("HEVO_TRIAL_ID".into(), opaque_id(&req.trial_id)));
    if let Some(state) = &settings.state_dir {
        env.push((
            "HEVO_STATE_DIR".into(),
            state.to_string_lossy().into_owned(),
        ));
    }
    let ticket = match &settings.model_access {
        Some(access) => match access.open(&req.trial_id, &req.trace_prefix, &req.spent) {
            Ok((model_env, ticket)) => {
                env.extend(model_env.vars());
                Some(ticket)
            }
            Err(e) => return TrialResult::infra(format!("cannot open a gateway key: {e}")),
        },
        None => {
            env.extend(settings.model_env.vars());
            None
        }
    };
    let mut stdin = serde_json::to_vec(&req.task.input).unwrap_or_default();
    stdin.push(b'\n');
    let spec = LaunchSpec {
        argv: req.harness.entry_argv(),
        cwd: wd.clone(),
        env,
        stdin,
        timeout: settings.timeout,
        grace: settings.grace,
        stdout_path: Some(with_suffix(&req.trace_prefix, "stdout")),
        stderr_path: Some(with_suffix(&req.trace_prefix, "stderr")),
        output_cap: settings.output_cap,
        tail_bytes: ANSWER_TAIL_BYTES,
        cancel: req.cancel.clone(),
        access: Access {
            read_only: std::iter::once(req.harness.dir.clone())
                .chain(settings.state_dir.clone())
                .collect(),
            hidden: settings.hidden.clone(),
            ..Access::default()
        },
    };
    let launched = launcher.launch(spec).await;
    // The key expires as soon as the harness is gone: nothing else can spend on its behalf.
    let usage = match (&settings.model_access, ticket) {
        (Some(access), Some(ticket)) => access.close(ticket).await,
        _ => TrialUsage::default(),
    };
    let out = match launched {
        Ok(out) => out,
        Err(e) => {
            // The process may have run and called the model before the launcher lost it (a
            // job cancelled from outside): those calls were made and are the trial's.
            return TrialResult {
                permanent: e.is_permanent(),
                usage,
                ..TrialResult::infra(e.to_string())
            };
        }
    };
    // A working directory past its disk limit is not copied: the copy would hold as much
    // again, and the trial is a `harness_error` whose cause says what it held.
    if settings.keep_workdir && !out.disk.is_some_and(|d| d.over()) {
        let kept = with_suffix(&req.trace_prefix, "workdir");
        let limit = out
            .disk
            .map_or(crate::cgroup::TrialLimits::DEFAULT_DISK_MB, |d| d.limit_mb);
        if let Err(why) = keep_workdir(&wd, &kept, crate::cgroup::mb_bytes(limit)) {
            // Not the trial's failure, nor hevo's: the trial is scored, and its stderr
            // trace says why no copy is kept.
            let note = format!("\nhevo: the working directory was not kept: {why}\n");
            let stderr = with_suffix(&req.trace_prefix, "stderr");
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(stderr)
                .and_then(|mut f| std::io::Write::write_all(&mut f, note.as_bytes()));
        }
    }
    let wall_ms = out.wall.as_millis() as u64;
    let mut result = TrialResult {
        outcome: 0.0,
        status: TrialStatus::HarnessError,
        wall_ms,
        error: None,
        answer: None,
        cancelled: false,
        usage,
        permanent: false,
    };
    if usage.budget_exceeded {
        result.status = TrialStatus::BudgetExceeded;
        result.error =
            Some("a model call went over a budget cap (HTTP 429 from the gateway)".into());
        return result;
    }
    match out.exit {
        Exit::Cancelled => {
            result.cancelled = true;
            result.status = TrialStatus::InfraError;
            result.error = Some("cancelled".into());
            return result;
        }
        Exit::TimedOut => {
            result.status = TrialStatus::Timeout;
            result.error = Some(with_limits(
                format!(
                    "timed out after {:.1} s; the process group was killed",
                    settings.timeout.as_secs_f64()
                ),
                &out,
            ));
            return result;
        }
        exit @ (Exit::Signal(_) | Exit::Code(1..) | Exit::Code(..=-1)) => {
            result.error = Some(with_limits(exit.to_string(), &out));
            return result;
        }
        Exit::Code(_) => {}
    }
    if out.disk.is_some_and(|d| d.over()) {
        result.error = Some(with_limits(out.exit.to_string(), &out));
        return result;
    }
    // Its answer is scored in its working directory: a harness that removed or replaced it
    // (it can, unsandboxed) would make the scorer fail to start there, which reads as the
    // suite's fault (retried, left out of the pass rate).
    if workdir_gone(&wd) {
        result.error = Some(WORKDIR_GONE.into());
        return result;
    }
    let (answer, _meta) = match parse_answer(&out.stdout_tail) {
        Ok(a) => a,
        Err(e) => {
            result.error = Some(with_limits(e, &out));
            return result;
        }
    };
    let ctx = ScoreContext {
        answer: &answer,
        task: req.task,
        workdir: &wd,
        suite_dir: req.suite_dir,
        trace_prefix: &req.trace_prefix,
        grace: settings.grace,
        output_cap: settings.output_cap,
        cancel: req.cancel.clone(),
    };
    match scorer.score_answer(launcher, ctx).await {
        Ok(outcome) => {
            result.outcome = outcome;
            result.status = if outcome >= 1.0 {
                TrialStatus::Pass
            } else {
                TrialStatus::Fail
            };
        }
        Err(Unscored::Answer(why)) => {
            // Outcome 0, not retried: the harness's answer is what the scorer cannot read.
            result.status = TrialStatus::HarnessError;
            result.error = Some(format!(
                "its answer could not be scored (scoring program: {why}); it scores the task's \
                 expected answer, so this answer counts as a failure"
            ));
        }
        // A process the harness left behind (unsandboxed without cgroups it outlives the
        // harness) can remove the directory while the scorer starts: still the harness's.
        Err(Unscored::Scorer(_)) if workdir_gone(&wd) => {
            result.error = Some(WORKDIR_GONE.into());
        }
        Err(Unscored::Scorer(e)) => {
            result.status = TrialStatus::InfraError;
            result.error = Some(format!("scorer: {e}"));
        }
    }
    result.answer = Some(answer);
    drop(workdir);
    result
}

/// The cause of a trial whose working directory was removed or replaced before its answer
/// was scored there.
const WORKDIR_GONE: &str = "it removed or replaced its working directory, where its answer is \
                            scored; a harness must leave the directory it is started in";

/// Whether the working directory `wd` is no longer the directory hevo made (removed, or
/// replaced by a link or a file).
fn workdir_gone(wd: &Path) -> bool {
    !std::fs::symlink_metadata(wd).is_ok_and(|m| m.is_dir())
}

/// `cause`, followed by what the trial's limits did, if anything (an OOM kill, a refused
/// fork, its disk limit): the real reason behind a `killed by signal 9`.
fn with_limits(cause: String, out: &crate::launch::ProcessOutcome) -> String {
    match out.limits_cause() {
        Some(limits) => format!("{cause}; {limits}"),
        None => cause,
    }
}

/// Finds the answer in the tail of stdout: the last non-empty line, parsed as JSON; an
/// object with an `answer` key gives that value (the whole object is returned as metadata).
pub fn parse_answer(tail: &[u8]) -> Result<(Value, Option<Value>), String> {
    let text = String::from_utf8_lossy(tail);
    let Some(line) = text.lines().rev().map(str::trim).find(|l| !l.is_empty()) else {
        return Err(
            "no answer: stdout was empty (print the answer as JSON on the last line)".into(),
        );
    };
    match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(obj)) if obj.contains_key("answer") => {
            let answer = obj.get("answer").cloned().unwrap_or(Value::Null);
            Ok((answer, Some(Value::Object(obj))))
        }
        Ok(v) => Ok((v, None)),
        Err(_) if tail.len() >= ANSWER_TAIL_BYTES && starts_the_tail(&text, line) => Err(format!(
            "the last stdout line is longer than {} KiB, the most of stdout hevo reads for \
             the answer, so it was not read whole: print a shorter answer (write a large \
             output to a file in the working directory)",
            ANSWER_TAIL_BYTES / 1024
        )),
        Err(e) => {
            let shown: String = line.chars().take(200).collect();
            let shown = crate::printable::printable(&shown);
            Err(format!(
                "the last stdout line is not JSON ({e}): `{shown}` (print e.g. \"positive\" \
                 with quotes, or {{\"answer\": ...}})"
            ))
        }
    }
}

/// Whether `line` (a slice of `text`) has no line break before it in `text`: in a tail cut
/// from longer output, it began before the tail.
fn starts_the_tail(text: &str, line: &str) -> bool {
    let at = (line.as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    !text.get(..at).is_some_and(|before| before.contains('\n'))
}

/// Copies the contents of `from` into `to` (recursively; symlinks are followed), leaving
/// out directories whose name is in `skip`. The one tree copy of the engine: task files
/// into a working directory (nothing skipped) and harness code into the archive.
pub fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        if src.is_dir() {
            if skip.iter().any(|d| entry.file_name() == *d) {
                continue;
            }
            copy_tree(&src, &dst, skip)?;
        } else {
            std::fs::copy(&src, &dst)?;
        }
    }
    Ok(())
}

/// The most files and folders a kept working directory may hold.
const KEEP_MAX_ENTRIES: u64 = 100_000;

/// Copies what a harness left in its working directory to `to` (for `hevo tests synth`):
/// regular files and folders only, never through a link (a harness's symlink to a file of
/// this user must not become a readable copy), and at most `max_bytes` of file contents
/// (its disk limit): the disk walk counts a hard-linked file once and a sparse file by the
/// blocks it holds, a copy would write each link and each hole in full. Past a bound, or on
/// a file it cannot read, nothing is kept and the error says why.
fn keep_workdir(from: &Path, to: &Path, max_bytes: u64) -> Result<(), String> {
    let _ = crate::remove::remove_tree(to);
    let limits = crate::untrusted::Limits {
        max_entries: KEEP_MAX_ENTRIES,
        max_bytes,
    };
    // A thread of its own with a large stack: the copy recurses once per folder, and a
    // harness may nest up to the disk walk's 1,000.
    let copied = std::thread::scope(|scope| {
        std::thread::Builder::new()
            .stack_size(256 << 20)
            .spawn_scoped(scope, || {
                crate::untrusted::copy_tree(from, to, &[], limits, crate::untrusted::Unsafe::Skip)
            })
            .map_err(|e| e.to_string())?
            .join()
            .map_err(|_| "the copy panicked".to_string())?
            .map_err(|refused| match refused {
                // Refused's own words are about a proposer's candidate.
                crate::untrusted::Refused::TooLarge { path, .. } => format!(
                    "its files pass the trial's disk limit of {} MB at `{path}` (hard links and \
                     sparse files are copied in full)",
                    max_bytes >> 20
                ),
                crate::untrusted::Refused::TooManyEntries { limit } => {
                    format!("it holds more than {limit} files and folders")
                }
                other => other.to_string(),
            })
    });
    if copied.is_err() {
        let _ = crate::remove::remove_tree(to);
    }
    copied.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answer_is_last_nonempty_line() {
        let (a, m) = parse_answer(b"log line\n{\"answer\": 3, \"why\": \"x\"}\n\n").unwrap();
        assert_eq!(a, serde_json::json!(3));
        assert!(m.is_some());
        let (a, _) = parse_answer(b"\"positive\"\n").unwrap();
        assert_eq!(a, serde_json::json!("positive"));
        assert!(parse_answer(b"positive\n").is_err());
        assert!(parse_answer(b"  \n").is_err());
    }

    #[test]
    fn an_answer_line_longer_than_the_tail_is_named_as_such() {
        // The last ANSWER_TAIL_BYTES of a 400 KB JSON string: its start was cut off.
        let mut tail = vec![b'h'; ANSWER_TAIL_BYTES - 2];
        tail.extend_from_slice(b"\"\n");
        let e = parse_answer(&tail).unwrap_err();
        assert!(e.contains("longer than 256 KiB"), "{e}");
        // A short bad line after other output in a full tail is only not JSON.
        let mut tail = vec![b'x'; ANSWER_TAIL_BYTES - 10];
        tail.extend_from_slice(b"\nnot json\n");
        let e = parse_answer(&tail).unwrap_err();
        assert!(e.contains("is not JSON"), "{e}");
        // So is a whole line in a tail that is not full.
        assert!(parse_answer(b"hhhh\n").unwrap_err().contains("is not JSON"));
    }

    #[test]
    fn only_working_directories_of_dead_processes_are_cleaned() {
        let root = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead_pid = gone.id();
        gone.wait().unwrap();
        let dead = root
            .path()
            .join(format!("{TRIAL_DIR_PREFIX}{dead_pid}-abc"));
        let live = root
            .path()
            .join(format!("{TRIAL_DIR_PREFIX}{}-def", std::process::id()));
        let other = root.path().join("hevo-trial-notapid");
        let socket = root.path().join(format!("hevo-sock-{dead_pid}-xyz"));
        let kept = root
            .path()
            .join(format!("{TRIAL_DIR_PREFIX}{dead_pid}-job"));
        for d in [&dead, &live, &other, &socket, &kept] {
            std::fs::create_dir_all(d.join("sub")).unwrap();
        }
        assert_eq!(
            clean_leftover_workdirs(root.path(), std::slice::from_ref(&kept)),
            2
        );
        assert!(!socket.exists() && kept.exists());
        assert!(!dead.exists() && live.exists() && other.exists());
    }

    #[test]
    fn base_env_drops_provider_keys() {
        let env = base_env(Path::new("/tmp/x"));
        assert!(env.iter().all(|(k, _)| !k.contains("API_KEY")));
        assert!(env.iter().any(|(k, v)| k == "HOME" && v == "/tmp/x"));
    }
}
