//! The `agent` proposer: a coding-agent CLI run inside the archive.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::agent::{render_prompt, run_agent, AgentCall, AgentOutcome};
use super::{ProposeContext, ProposeError, Proposer};
use hevo_runtime::cancel::Cancel;
use hevo_runtime::launch::Launcher;
use hevo_runtime::model_access::ModelEnv;

/// The `agent` proposer: a coding-agent CLI run inside the archive.
pub struct AgentProposer {
    /// Command line template (`{prompt}` is substituted).
    pub command: Vec<String>,
    /// Time limit of one call.
    pub timeout: Duration,
    /// Where transcripts go (`<dir>/iter-NNN/`), outside the archive.
    pub transcripts: PathBuf,
    /// The agent's `HOME`, outside the archive (kept across iterations).
    pub home: PathBuf,
    /// Variables the agent gets besides hevo's (its preset's, then `[proposer] env`).
    pub env: Vec<(String, String)>,
    /// Gateway variables for the agent's own model traffic.
    pub model_env: ModelEnv,
    /// The launcher (the sandbox seam).
    pub launcher: Arc<dyn Launcher>,
    /// The process's cancellation token.
    pub cancel: Cancel,
    /// What the agent must not see ([`AgentCall::hidden`]): the suite and the run directory.
    pub hidden: Vec<PathBuf>,
}

impl Proposer for AgentProposer {
    fn deterministic(&self) -> bool {
        false
    }

    fn agent(&self) -> Option<&AgentProposer> {
        Some(self)
    }

    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<(), ProposeError> {
        let call = AgentCall {
            command: self.command.clone(),
            cwd: ctx.archive.root().to_path_buf(),
            writable: vec![ctx.archive.root().join("pending")],
            prompt: render_prompt(ctx.iteration, ctx.k),
            transcript_dir: self.transcripts.join(format!("iter-{:03}", ctx.iteration)),
            timeout: self.timeout,
            model_env: self.model_env.clone(),
            home: self.home.clone(),
            extra_env: self.env.clone(),
            cancel: self.cancel.clone(),
            hidden: self.hidden.clone(),
        };
        match hevo_runtime::rt::block_on(run_agent(&*self.launcher, &call))
            .map_err(|e| e.to_string())?
        {
            AgentOutcome::Finished => Ok(()),
            AgentOutcome::Cancelled(reason) => Err(ProposeError::Cancelled(reason)),
            AgentOutcome::Failed(why) => Err(why.into()),
            AgentOutcome::TimedOut => {
                Err(format!("the agent ran past its {} s limit", self.timeout.as_secs()).into())
            }
        }
    }
}
