//! Proposers: what writes new candidates into the archive's `pending/`.
//!
//! Every proposer implements [`Proposer`]; the search loop knows nothing else about it.
//! - [`params_proposer`]: the built-in, offline evolutionary search over a seed's `[params]`
//!   (algorithm in [`params`], candidate directories written by [`params_writer`]);
//! - [`agent_proposer`]: a coding-agent CLI (Claude Code, Codex, ...) run by [`agent`] with
//!   the command line and environment of its [`agent_preset`];
//! - [`llm`]: one gateway call per candidate that rewrites a harness file.
//!
//! A new proposer is a new file here implementing [`Proposer`], plus its `[proposer] kind`
//! in `config/proposer.rs` (checked in `config/validate.rs`) and its construction in the CLI.

use hevo_stats::estimate::Estimate;

use hevo_runtime::cancel::CancelReason;

use crate::archive::{Archive, Candidate};

pub mod agent;
pub mod agent_preset;
pub mod agent_proposer;
pub mod llm;
pub mod params;
pub mod params_proposer;
pub mod params_writer;

pub use agent_proposer::AgentProposer;
pub use params_proposer::ParamsProposer;

/// What a proposer is told.
pub struct ProposeContext<'a> {
    /// The iteration being proposed (1-based).
    pub iteration: u32,
    /// How many candidates to write.
    pub k: u32,
    /// The run's seed.
    pub seed: u64,
    /// The archive (its `pending/` is where candidates go).
    pub archive: &'a Archive,
    /// Every candidate so far with its current validation estimate.
    pub history: Vec<(Candidate, Estimate)>,
}

/// Writes new candidates into `pending/`.
pub trait Proposer {
    /// Whether asking again for the same iteration gives the same candidates (then an
    /// interrupted proposal is simply redone).
    fn deterministic(&self) -> bool;
    /// Writes up to `ctx.k` candidates into `ctx.archive.pending_dir()`.
    fn propose(&mut self, ctx: &ProposeContext<'_>) -> Result<(), ProposeError>;
    /// The coding agent behind this proposer, if it is one: HarnessPro's epoch loop asks it
    /// to diagnose trajectories and to implement plans in git worktrees.
    fn agent(&self) -> Option<&AgentProposer> {
        None
    }
}

/// Why a proposer wrote nothing (or not everything).
#[derive(Debug, thiserror::Error)]
pub enum ProposeError {
    /// The run was cancelled while the proposer worked; the iteration is asked again on
    /// resume.
    #[error("cancelled by {0}")]
    Cancelled(CancelReason),
    /// The proposer failed; its candidates (if any) are still checked.
    #[error("{0}")]
    Failed(String),
}

impl From<String> for ProposeError {
    fn from(s: String) -> Self {
        ProposeError::Failed(s)
    }
}

impl From<&str> for ProposeError {
    fn from(s: &str) -> Self {
        ProposeError::Failed(s.to_string())
    }
}
