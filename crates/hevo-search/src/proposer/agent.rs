//! The `agent` proposer: a coding-agent CLI run inside the archive with a rendered prompt.
//!
//! The agent (Claude Code, Codex, or any command) reads the archive with its own tools and
//! writes new candidates into `pending/`. hevo starts it through the same
//! [`Launcher`](hevo_runtime::launch::Launcher) seam as trials (so a sandbox can wrap it), with a
//! cleared environment, a time limit that kills its whole process group, and its transcript
//! (stdout and stderr) saved. Its model traffic can be pointed at hevo's gateway by passing
//! the gateway's variables in `model_env`, so its spend lands in the same ledger.

use hevo_runtime::cancel::{Cancel, CancelReason};
use std::path::PathBuf;
use std::time::Duration;

use hevo_runtime::launch::{base_env, Exit, LaunchSpec, Launcher, ProcessOutcome};
use hevo_runtime::model_access::ModelEnv;

/// The placeholder in a command line that is replaced by the prompt.
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";

/// The command line of a named preset.
///
/// - `claude`: Claude Code in print mode, allowed to read, search and edit files.
/// - `codex`: Codex's non-interactive `exec` mode with automatic edits.
pub fn preset_command(preset: &str) -> Option<Vec<String>> {
    let argv: &[&str] = match preset {
        "claude" => &[
            "claude",
            "-p",
            PROMPT_PLACEHOLDER,
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash,Read,Write,Edit,Glob,Grep",
        ],
        "codex" => &[
            "codex",
            "exec",
            "--full-auto",
            "--skip-git-repo-check",
            PROMPT_PLACEHOLDER,
        ],
        _ => return None,
    };
    Some(argv.iter().map(|s| s.to_string()).collect())
}

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

/// The command line with the prompt substituted (appended if there is no placeholder).
pub fn command_line(template: &[String], prompt: &str) -> Vec<String> {
    let mut argv: Vec<String> = template
        .iter()
        .map(|a| a.replace(PROMPT_PLACEHOLDER, prompt))
        .collect();
    if !template.iter().any(|a| a.contains(PROMPT_PLACEHOLDER)) {
        argv.push(prompt.to_string());
    }
    argv
}

/// One agent call.
#[derive(Clone, Debug)]
pub struct AgentCall {
    /// The command line template (a preset's or the user's).
    pub command: Vec<String>,
    /// The archive directory (the agent's working directory).
    pub archive: PathBuf,
    /// Where the transcript is written (`stdout.txt`, `stderr.txt`, `prompt.txt`).
    pub transcript_dir: PathBuf,
    /// The iteration being proposed.
    pub iteration: u32,
    /// How many candidates to ask for.
    pub k: u32,
    /// Time limit of the call.
    pub timeout: Duration,
    /// Gateway variables for the agent's own model traffic.
    pub model_env: ModelEnv,
    /// Extra variables the agent needs (e.g. `PATH` additions); never provider keys of hevo's.
    pub extra_env: Vec<(String, String)>,
    /// The process's cancellation token: a signal stops the agent's process group.
    pub cancel: Cancel,
}

/// How an agent call ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentOutcome {
    /// The agent exited with code 0.
    Finished,
    /// The agent exited with another code or a signal (its candidates are still checked).
    Failed(String),
    /// The agent ran past its time limit and was killed.
    TimedOut,
    /// The run was cancelled and the agent's process group was stopped.
    Cancelled(CancelReason),
}

/// Runs the agent once and saves its transcript.
pub async fn run_agent(launcher: &dyn Launcher, call: &AgentCall) -> std::io::Result<AgentOutcome> {
    std::fs::create_dir_all(&call.transcript_dir)?;
    let prompt = render_prompt(call.iteration, call.k);
    std::fs::write(call.transcript_dir.join("prompt.txt"), &prompt)?;
    let mut env = base_env(&call.archive);
    env.extend(call.model_env.vars());
    env.extend(call.extra_env.iter().cloned());
    let spec = LaunchSpec {
        argv: command_line(&call.command, &prompt),
        cwd: call.archive.clone(),
        env,
        stdin: Vec::new(),
        timeout: call.timeout,
        grace: Duration::from_secs(5),
        stdout_path: Some(call.transcript_dir.join("stdout.txt")),
        stderr_path: Some(call.transcript_dir.join("stderr.txt")),
        output_cap: 16 * 1024 * 1024,
        tail_bytes: 4096,
        cancel: call.cancel.clone(),
    };
    let outcome: ProcessOutcome = match launcher.launch(spec).await {
        Ok(o) => o,
        Err(e) => return Ok(AgentOutcome::Failed(format!("cannot start the agent: {e}"))),
    };
    Ok(match outcome.exit {
        Exit::Code(0) => AgentOutcome::Finished,
        Exit::Code(c) => AgentOutcome::Failed(format!("the agent exited with code {c}")),
        Exit::Signal(s) => AgentOutcome::Failed(format!("the agent was killed by signal {s}")),
        Exit::Cancelled => {
            AgentOutcome::Cancelled(call.cancel.reason().unwrap_or(CancelReason::Interrupt))
        }
        Exit::TimedOut => AgentOutcome::TimedOut,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hevo_runtime::launch::LocalLauncher;

    #[test]
    fn presets_put_the_prompt_in_place() {
        let argv = command_line(&preset_command("claude").unwrap(), "do it");
        assert_eq!(&argv[..3], &["claude", "-p", "do it"]);
        let argv = command_line(&preset_command("codex").unwrap(), "do it");
        assert_eq!(argv.last().unwrap(), "do it");
        assert!(preset_command("gemini").is_none());
    }

    #[test]
    fn a_template_without_placeholder_gets_the_prompt_appended() {
        let argv = command_line(&["my-agent".into(), "--fast".into()], "p");
        assert_eq!(argv, vec!["my-agent", "--fast", "p"]);
    }

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
            archive: archive.clone(),
            transcript_dir: tmp.path().join("proposer/iter-001"),
            iteration: 1,
            k: 2,
            timeout: Duration::from_secs(30),
            model_env: ModelEnv::offline(),
            extra_env: vec![],
            cancel: Cancel::new(),
        };
        std::env::set_var("HEVO_TEST_SECRET_PROVIDER_KEY", "sk-secret");
        let out = run_agent(&LocalLauncher, &call).await.unwrap();
        assert_eq!(out, AgentOutcome::Finished);
        let prompt = std::fs::read_to_string(archive.join("pending/c1/prompt")).unwrap();
        assert!(prompt.contains("exactly 2 new candidates"), "{prompt}");
        let env = std::fs::read_to_string(archive.join("pending/c1/env")).unwrap();
        assert!(env.contains("OPENAI_BASE_URL="), "{env}");
        assert!(
            !env.contains("sk-secret"),
            "hevo's own environment leaked to the agent"
        );
        let stdout =
            std::fs::read_to_string(tmp.path().join("proposer/iter-001/stdout.txt")).unwrap();
        assert_eq!(stdout.trim(), "wrote one");
    }

    #[tokio::test]
    async fn a_hanging_agent_is_killed_at_its_time_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let call = AgentCall {
            command: vec!["sleep".into(), "30".into()],
            archive: tmp.path().to_path_buf(),
            transcript_dir: tmp.path().join("t"),
            iteration: 1,
            k: 1,
            timeout: Duration::from_millis(300),
            model_env: ModelEnv::offline(),
            extra_env: vec![],
            cancel: Cancel::new(),
        };
        // `sleep 30 <prompt>` fails fast on the extra argument on some systems; use a shell.
        let call = AgentCall {
            command: vec!["bash".into(), "-c".into(), "sleep 30".into()],
            ..call
        };
        assert_eq!(
            run_agent(&LocalLauncher, &call).await.unwrap(),
            AgentOutcome::TimedOut
        );
    }
}
