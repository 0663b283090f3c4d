//! A coding-agent CLI run once with a prompt, in a directory it reads and may write only in
//! named places: the `agent` proposer (the archive, writing `pending/`) and `hevo tests
//! synth` (a task's workspace, writing `tests/`).
//!
//! The agent (Claude Code, Codex, or any command) reads its directory with its own tools.
//! hevo starts it through the same
//! [`hevo_runtime::launch::Launcher`] seam as trials (so a sandbox can wrap it), with a
//! cleared environment, a time limit that kills its whole process group, and its transcript
//! (stdout and stderr) saved. Its model traffic can be pointed at hevo's gateway by passing
//! the gateway's variables in `model_env`, so its spend lands in the same ledger. Its `HOME`
//! is its own directory outside the archive (see [`super::agent_preset`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use hevo_runtime::cancel::{Cancel, CancelReason};

use hevo_runtime::launch::{base_env, Access, Exit, LaunchSpec, Launcher, ProcessOutcome};
use hevo_runtime::model_access::ModelEnv;

use super::agent_preset::{command_line, HOME_PLACEHOLDER};

/// The prompt given to the agent for one iteration.
pub fn render_prompt(iteration: u32, k: u32) -> String {
    format!(
        "You are improving an LLM harness. Read SKILL.md in the current directory first: it \
         explains the archive, the candidate format and the rules. This is iteration \
         {iteration}. Inspect summary.jsonl, frontier.json and the traces of failing tasks, \
         then write exactly {k} new candidates, each in its own directory pending/<name>/ with \
         its code, harness.toml and candidate.toml. Do not change anything outside pending/."
    )
}

/// One agent call.
#[derive(Clone, Debug)]
pub struct AgentCall {
    /// The command line template (a preset's or the user's).
    pub command: Vec<String>,
    /// The agent's working directory, read-only to it (the archive, a synth workspace).
    pub cwd: PathBuf,
    /// The only places it may write besides its home (created if needed).
    pub writable: Vec<PathBuf>,
    /// The prompt.
    pub prompt: String,
    /// Where the transcript is written (`stdout.txt`, `stderr.txt`, `prompt.txt`).
    pub transcript_dir: PathBuf,
    /// The agent's `HOME` (created if needed), outside `cwd`.
    pub home: PathBuf,
    /// Time limit of the call.
    pub timeout: Duration,
    /// Gateway variables for the agent's own model traffic.
    pub model_env: ModelEnv,
    /// Extra variables the agent needs (a preset's, then `[proposer] env`); `{agent_home}` in
    /// a value is replaced by `home`. Never provider keys of hevo's.
    pub extra_env: Vec<(String, String)>,
    /// The process's cancellation token: a signal stops the agent's process group.
    pub cancel: Cancel,
    /// Folders the agent must not see even where a path it is shown holds them (its program's
    /// install folder, a `HEVO_SANDBOX_READ_ONLY` path): the suite and the run directory
    /// (what it is given inside them, its `cwd` and `writable`, stays visible).
    pub hidden: Vec<PathBuf>,
}

/// Makes `dir` a folder: a file or link the agent left where one of its folders goes is
/// removed first (it made every later call fail with `File exists`, naming no path).
fn folder(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => std::fs::remove_file(dir).map_err(|e| named(dir, e))?,
        Err(_) => {}
    }
    std::fs::create_dir_all(dir).map_err(|e| named(dir, e))
}

/// `e` with the path it happened on.
fn named(path: &Path, e: std::io::Error) -> std::io::Error {
    std::io::Error::new(e.kind(), format!("`{}`: {e}", path.display()))
}

/// How an agent call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentOutcome {
    /// The agent exited with code 0.
    Finished,
    /// The agent exited with another code or a signal, or could not start (its candidates
    /// are still checked): why, with the tail of its transcript.
    Failed(String),
    /// The agent ran past its time limit and was killed.
    TimedOut,
    /// The run was cancelled and the agent's process group was stopped.
    Cancelled(CancelReason),
}

/// Runs the agent once as the proposer (in the archive, writing only `pending/`) and saves
/// its transcript.
pub async fn run_agent(launcher: &dyn Launcher, call: &AgentCall) -> std::io::Result<AgentOutcome> {
    std::fs::create_dir_all(&call.transcript_dir)?;
    let prompt = &call.prompt;
    std::fs::write(call.transcript_dir.join("prompt.txt"), prompt)?;
    for dir in &call.writable {
        folder(dir)?;
    }
    folder(&call.home)?;
    let home = call.home.to_string_lossy().into_owned();
    let mut env = base_env(&call.home);
    // Temporary files on disk, in its home, where its disk limit measures them (its private
    // /tmp in the sandbox is a small tmpfs: memory no limit counts).
    let tmp = call.home.join("tmp");
    folder(&tmp)?;
    env.retain(|(n, _)| n != "TMPDIR");
    env.push(("TMPDIR".into(), tmp.to_string_lossy().into_owned()));
    env.extend(call.model_env.vars());
    for (name, value) in &call.extra_env {
        let value = value.replace(HOME_PLACEHOLDER, &home);
        if value.starts_with(&home) && (name.ends_with("_HOME") || name.ends_with("_DIR")) {
            folder(Path::new(&value))?;
        }
        env.retain(|(n, _)| n != name);
        env.push((name.clone(), value));
    }
    let spec = LaunchSpec {
        argv: command_line(
            &call.command,
            prompt,
            &call.model_env.openai_base_url,
            &call.model_env.anthropic_base_url,
        ),
        cwd: call.cwd.clone(),
        env,
        stdin: Vec::new(),
        timeout: call.timeout,
        grace: Duration::from_secs(5),
        stdout_path: Some(call.transcript_dir.join("stdout.txt")),
        stderr_path: Some(call.transcript_dir.join("stderr.txt")),
        output_cap: 16 * 1024 * 1024,
        tail_bytes: 4096,
        cancel: call.cancel.clone(),
        // The agent reads its directory and writes only `writable` and its own home (its
        // config, logs and caches live there, outside its directory).
        access: Access {
            cwd_read_only: true,
            read_only: Vec::new(),
            writable: call
                .writable
                .iter()
                .cloned()
                .chain([call.home.clone()])
                .collect(),
            hidden: call.hidden.clone(),
            private_tmp: true,
        },
    };
    let outcome: ProcessOutcome = match launcher.launch(spec).await {
        Ok(o) => o,
        Err(e) => return Ok(AgentOutcome::Failed(format!("cannot start the agent: {e}"))),
    };
    // What its limits did (an OOM kill, its disk limit), then the transcript's tail.
    let why = || {
        let limits = outcome
            .limits_cause()
            .map(|c| format!("; {c}"))
            .unwrap_or_default();
        format!("{limits}{}", transcript_tail(&call.transcript_dir))
    };
    // Past its disk limit, the agent failed whatever it answered, and its home goes: what it
    // left there would otherwise hold the next call over the limit from its start, so every
    // later iteration failed until someone deleted it by hand (proposer audit).
    if outcome.disk.as_ref().is_some_and(|d| d.over()) {
        hevo_runtime::remove::remove_tree(&call.home)?;
        return Ok(AgentOutcome::Failed(format!(
            "the agent went over its disk limit{} (its home was emptied)",
            why()
        )));
    }
    Ok(match outcome.exit {
        Exit::Code(0) => AgentOutcome::Finished,
        Exit::Code(c) => AgentOutcome::Failed(format!("the agent exited with code {c}{}", why())),
        Exit::Signal(s) => {
            AgentOutcome::Failed(format!("the agent was killed by signal {s}{}", why()))
        }
        Exit::Cancelled => {
            AgentOutcome::Cancelled(call.cancel.reason().unwrap_or(CancelReason::Interrupt))
        }
        Exit::TimedOut => AgentOutcome::TimedOut,
    })
}

/// How much of each transcript file a failure quotes.
const TAIL_CHARS: usize = 1500;

/// The last lines of the agent's stdout and stderr, for a failure's message.
fn transcript_tail(dir: &Path) -> String {
    let mut out = String::new();
    for name in ["stdout.txt", "stderr.txt"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let start = text
            .char_indices()
            .rev()
            .nth(TAIL_CHARS)
            .map_or(0, |(i, _)| i);
        let tail = hevo_runtime::printable::printable(&text[start..]);
        out.push_str(&format!("; the end of its {name}: {tail}"));
    }
    out
}

#[cfg(test)]
mod tests {

    /// A file or a link the agent left where one of its folders goes is replaced by a
    /// folder (before: every later call failed with `File exists`); a link's target stays.
    #[test]
    fn a_file_or_link_where_a_folder_goes_is_replaced() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("tmp");
        std::fs::write(&file, "x").unwrap();
        folder(&file).unwrap();
        assert!(file.is_dir());
        let target = d.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "y").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        folder(&link).unwrap();
        assert!(link.is_dir() && !link.is_symlink());
        assert!(target.join("keep").exists());
    }
    use super::*;
    use hevo_runtime::launch::LocalLauncher;

    #[tokio::test]
    async fn agent_runs_in_the_archive_and_its_transcript_is_saved() {
        let tmp = tempfile::tempdir().unwrap();
        let archive = tmp.path().join("archive");
        std::fs::create_dir_all(archive.join("pending")).unwrap();
        let script = "mkdir -p pending/c1 && echo \"$1\" > pending/c1/prompt && \
                      env > pending/c1/env && echo wrote one";
        let call = AgentCall {
            command: vec![
                "bash".into(),
                "-c".into(),
                script.into(),
                "agent".into(),
                "{prompt}".into(),
            ],
            cwd: archive.clone(),
            writable: vec![archive.join("pending")],
            prompt: render_prompt(1, 2),
            transcript_dir: tmp.path().join("proposer/iter-001"),
            home: tmp.path().join("proposer/home"),
            timeout: Duration::from_secs(30),
            model_env: ModelEnv::offline(),
            extra_env: vec![
                ("CODEX_HOME".into(), "{agent_home}/.codex".into()),
                ("MY_SETTING".into(), "on".into()),
            ],
            cancel: Cancel::new(),
            hidden: Vec::new(),
        };
        std::env::set_var("HEVO_TEST_SECRET_PROVIDER_KEY", "sk-secret");
        let out = run_agent(&LocalLauncher::default(), &call).await.unwrap();
        assert_eq!(out, AgentOutcome::Finished);
        let prompt = std::fs::read_to_string(archive.join("pending/c1/prompt")).unwrap();
        assert!(prompt.contains("exactly 2 new candidates"), "{prompt}");
        let env = std::fs::read_to_string(archive.join("pending/c1/env")).unwrap();
        assert!(env.contains("OPENAI_BASE_URL="), "{env}");
        assert!(
            !env.contains("sk-secret"),
            "hevo's own environment leaked to the agent"
        );
        // the agent's home and state live outside the archive
        let home = tmp.path().join("proposer/home");
        assert!(
            env.contains(&format!("\nHOME={}\n", home.display())),
            "{env}"
        );
        assert!(env.contains(&format!("CODEX_HOME={}/.codex", home.display())));
        // Temporary files go to disk, in its home, under its disk limit.
        assert!(
            env.contains(&format!("\nTMPDIR={}/tmp\n", home.display())),
            "{env}"
        );
        assert!(home.join("tmp").is_dir());
        assert!(home.join(".codex").is_dir());
        assert!(env.contains("MY_SETTING=on"));
        let stdout =
            std::fs::read_to_string(tmp.path().join("proposer/iter-001/stdout.txt")).unwrap();
        assert_eq!(stdout.trim(), "wrote one");
    }

    #[tokio::test]
    async fn a_failing_agent_reports_the_end_of_its_transcript() {
        let tmp = tempfile::tempdir().unwrap();
        let call = AgentCall {
            command: vec![
                "bash".into(),
                "-c".into(),
                "echo working; echo 'API Error: 400 tools' >&2; exit 3".into(),
            ],
            cwd: tmp.path().to_path_buf(),
            writable: Vec::new(),
            prompt: render_prompt(1, 1),
            transcript_dir: tmp.path().join("t"),
            home: tmp.path().join("home"),
            timeout: Duration::from_secs(30),
            model_env: ModelEnv::offline(),
            extra_env: vec![],
            cancel: Cancel::new(),
            hidden: Vec::new(),
        };
        let AgentOutcome::Failed(why) = run_agent(&LocalLauncher::default(), &call).await.unwrap()
        else {
            panic!("the agent failed")
        };
        assert!(why.contains("exited with code 3"), "{why}");
        assert!(why.contains("stderr.txt: API Error: 400 tools"), "{why}");
        assert!(why.contains("stdout.txt: working"), "{why}");
    }

    #[tokio::test]
    async fn a_hanging_agent_is_killed_at_its_time_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let call = AgentCall {
            command: vec!["sleep".into(), "30".into()],
            cwd: tmp.path().to_path_buf(),
            writable: Vec::new(),
            prompt: render_prompt(1, 1),
            transcript_dir: tmp.path().join("t"),
            home: tmp.path().join("home"),
            timeout: Duration::from_millis(300),
            model_env: ModelEnv::offline(),
            extra_env: vec![],
            cancel: Cancel::new(),
            hidden: Vec::new(),
        };
        // `sleep 30 <prompt>` fails fast on the extra argument on some systems; use a shell.
        let call = AgentCall {
            command: vec!["bash".into(), "-c".into(), "sleep 30".into()],
            ..call
        };
        assert_eq!(
            run_agent(&LocalLauncher::default(), &call).await.unwrap(),
            AgentOutcome::TimedOut
        );
    }
}
