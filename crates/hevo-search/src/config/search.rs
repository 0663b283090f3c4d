//! `[search]` and `[budget]`: how long the outer loop runs, and the hard limits that stop
//! the whole run.

use serde::Deserialize;

/// `[search]`: how long the outer loop runs.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    /// Number of proposal iterations after Phase 0.
    #[serde(default = "default_iterations")]
    pub iterations: u32,
    /// Candidates the proposer writes per iteration (k).
    #[serde(default = "default_k")]
    pub candidates_per_iteration: u32,
    /// Trials per (candidate, task) (r).
    #[serde(default = "default_trials")]
    pub trials: u32,
    /// Concurrent trials (default: number of cores).
    #[serde(default)]
    pub jobs: Option<usize>,
}

fn default_iterations() -> u32 {
    10
}

fn default_k() -> u32 {
    3
}

fn default_trials() -> u32 {
    1
}

impl Default for SearchConfig {
    fn default() -> Self {
        SearchConfig {
            iterations: default_iterations(),
            candidates_per_iteration: default_k(),
            trials: default_trials(),
            jobs: None,
        }
    }
}

/// `[budget]`: hard limits; the run stops cleanly (resumable) when one is reached.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct BudgetConfig {
    /// Maximum number of trials (evaluations) in the whole run.
    #[serde(default)]
    pub max_evaluations: Option<u64>,
    /// Maximum dollars spent on model calls (harnesses and proposer).
    #[serde(default)]
    pub max_usd: Option<f64>,
    /// Maximum wall time of the run, in seconds.
    #[serde(default)]
    pub max_wall_s: Option<u64>,
}
